// The execution timeline: one lane per IPU, intervals coloured by kind (compute, exchange,
// sync, copy, stream) over one iteration (PopVision's execution trace, coarsely).
//
//   drawGantt(svgElement, { rows: [{ ipu, intervals: [{ start, end, kind, label }] }], end, width,
//                           gap: null | { start, end, count, unit, label } })
// Returns { width, height, rects }: `rects` counts the rectangles drawn. A plan may list tens
// of thousands of intervals; those narrower than a pixel are pooled per pixel column (drawn in
// the kind that fills most of it), so the drawing stays within a few rectangles per pixel.
// `gap` is a steady state the planner elided (intervals of kind "elided"): it is drawn as a
// narrow "…" column, as the pipeline chart draws its shortened steady state, and the time
// axis on either side keeps its scale.
import { svg, clear, colour, tip, KIND_COLOURS, seconds } from "./svg.js";

const LABEL_W = 70;
const ROW_H = 30;
const TOP = 8;
const AXIS = 26;
const GAP_W = 28;

/** "micro-batch" → "micro-batches", "pipeline step" → "pipeline steps" (unless `count` is 1). */
export function units(unit, count) {
  return count === 1 ? unit : /(ch|sh|s|x)$/.test(unit) ? `${unit}es` : `${unit}s`;
}

/**
 * The time axis of a lane `w` pixels wide from `x0`, over [0, end], with `gap` (if any)
 * squeezed into GAP_W pixels: { X: seconds → pixels, T: pixels → seconds }.
 */
export function timeAxis(x0, w, end, gap) {
  if (!gap || !(gap.end > gap.start) || gap.start < 0 || gap.end > end || w <= GAP_W * 2) {
    return { X: (t) => x0 + (t / end) * w, T: (x) => ((x - x0) / w) * end };
  }
  const len = gap.end - gap.start;
  const k = (w - GAP_W) / Math.max(end - len, 1e-300);
  const g0 = x0 + gap.start * k;
  const X = (t) => (t <= gap.start ? x0 + t * k : t >= gap.end ? g0 + GAP_W + (t - gap.end) * k : g0 + ((t - gap.start) / len) * GAP_W);
  const T = (x) => (x <= g0 ? (x - x0) / k : x >= g0 + GAP_W ? gap.end + (x - g0 - GAP_W) / k : gap.start + ((x - g0) / GAP_W) * len);
  return { X, T, gap: [g0, g0 + GAP_W] };
}

/** The rectangles of one lane, in pixels: [{ x0, x1, kind, label, count }]. */
export function laneRects(intervals, X) {
  const out = [];
  let pool = null; // sub-pixel intervals of one pixel column: { px, time: {kind: s}, count }
  const push = (r) => {
    const prev = out[out.length - 1];
    if (prev && prev.kind === r.kind && r.x0 - prev.x1 < 0.5) {
      prev.x1 = Math.max(prev.x1, r.x1);
      prev.count += r.count;
      if (prev.label !== r.label) prev.label = "";
    } else out.push(r);
  };
  const flush = () => {
    if (!pool) return;
    let kind = null;
    let best = -1;
    for (const [k, t] of Object.entries(pool.time)) if (t > best) [kind, best] = [k, t];
    push({ x0: pool.px, x1: pool.px + 1, kind, label: "", count: pool.count });
    pool = null;
  };
  for (const iv of intervals) {
    if (iv.kind === "idle" || iv.kind === "elided" || !(iv.end > iv.start)) continue;
    const x0 = X(iv.start);
    const x1 = X(iv.end);
    if (x1 - x0 >= 1) {
      flush();
      push({ x0, x1, kind: iv.kind, label: iv.label ?? "", count: 1 });
      continue;
    }
    const px = Math.floor(x0);
    if (pool && pool.px !== px) flush();
    pool ??= { px, time: {}, count: 0 };
    pool.time[iv.kind] = (pool.time[iv.kind] ?? 0) + (iv.end - iv.start);
    pool.count++;
  }
  flush();
  return out;
}

export function drawGantt(root, data) {
  clear(root);
  const width = Math.max(data.width ?? 800, LABEL_W + 200);
  const height = TOP + data.rows.length * ROW_H + AXIS;
  const end = data.end > 0 ? data.end : Math.max(1e-9, ...data.rows.flatMap((r) => r.intervals.map((i) => i.end)));
  const w = width - LABEL_W - 12;
  const axis = timeAxis(LABEL_W, w, end, data.gap);
  const { X, T } = axis;
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  let rects = 0;
  data.rows.forEach((row, r) => {
    const y = TOP + r * ROW_H;
    const lane = svg("g", { class: "lane", "data-ipu": row.ipu });
    lane.append(svg("rect", { x: LABEL_W, y: y + 3, width: w, height: ROW_H - 6, rx: 4, class: "lane-bg" }));
    lane.append(svg("circle", { cx: 12, cy: y + ROW_H / 2, r: 5, fill: colour(row.ipu) }));
    lane.append(svg("text", { x: 22, y: y + ROW_H / 2 + 4, class: "ipu-label" }, [`IPU ${row.ipu}`]));
    for (const b of laneRects(row.intervals, X)) {
      const rect = svg("rect", { x: b.x0, y: y + 5, width: Math.max(1, b.x1 - b.x0), height: ROW_H - 10, fill: KIND_COLOURS[b.kind] ?? "#999", class: `iv ${b.kind}` });
      const t0 = T(b.x0);
      const t1 = T(b.x1);
      tip(rect, `${b.kind}${b.label ? `: ${b.label}` : ""}${b.count > 1 ? ` (${b.count} intervals)` : ""} · ${seconds(t0)} – ${seconds(t1)}`);
      lane.append(rect);
      rects++;
    }
    root.append(lane);
  });
  if (axis.gap) {
    // The elided steady state: a narrow column with "…", its count and time in the tip.
    const [g0, g1] = axis.gap;
    const { count, unit } = data.gap;
    const band = svg("rect", { x: g0, y: TOP, width: g1 - g0, height: data.rows.length * ROW_H, class: "gantt-gap" });
    const dots = svg("text", { x: (g0 + g1) / 2, y: TOP + (data.rows.length * ROW_H) / 2 + 5, "text-anchor": "middle", class: "pipe-gap" }, ["…"]);
    const text = `${count.toLocaleString("en")} more ${units(unit, count)} like the one before (${seconds(data.gap.end - data.gap.start)}): drawn shortened`;
    tip(band, text);
    tip(dots, text);
    root.append(band, dots);
  }
  const y = TOP + data.rows.length * ROW_H + 4;
  for (let k = 0; k <= 5; k++) {
    const x = LABEL_W + (w / 5) * k;
    if (axis.gap && x > axis.gap[0] - 20 && x < axis.gap[1] + 20 && k > 0 && k < 5) continue;
    const t = k === 5 ? end : T(x);
    root.append(svg("line", { x1: x, x2: x, y1: y, y2: y + 5, class: "tick" }));
    root.append(svg("text", { x, y: y + 17, "text-anchor": k === 0 ? "start" : k === 5 ? "end" : "middle", class: "axis" }, [seconds(t)]));
  }
  return { width, height, rects };
}
