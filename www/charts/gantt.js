// The execution timeline: one lane per IPU, intervals coloured by kind (compute, exchange,
// sync, copy, stream) over one iteration (PopVision's execution trace, coarsely).
//
//   drawGantt(svgElement, { rows: [{ ipu, intervals: [{ start, end, kind, label }] }], end, width })
// Returns { width, height, rects }: `rects` counts the rectangles drawn. A plan may list tens
// of thousands of intervals; those narrower than a pixel are pooled per pixel column (drawn in
// the kind that fills most of it), so the drawing stays within a few rectangles per pixel.
import { svg, clear, colour, tip, KIND_COLOURS, seconds } from "./svg.js";

const LABEL_W = 70;
const ROW_H = 30;
const TOP = 8;
const AXIS = 26;

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
    if (iv.kind === "idle" || !(iv.end > iv.start)) continue;
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
  const X = (t) => LABEL_W + (t / end) * w;
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
      const t0 = ((b.x0 - LABEL_W) / w) * end;
      const t1 = ((b.x1 - LABEL_W) / w) * end;
      tip(rect, `${b.kind}${b.label ? `: ${b.label}` : ""}${b.count > 1 ? ` (${b.count} intervals)` : ""} · ${seconds(t0)} – ${seconds(t1)}`);
      lane.append(rect);
      rects++;
    }
    root.append(lane);
  });
  const y = TOP + data.rows.length * ROW_H + 4;
  for (let k = 0; k <= 5; k++) {
    const t = (end / 5) * k;
    root.append(svg("line", { x1: X(t), x2: X(t), y1: y, y2: y + 5, class: "tick" }));
    root.append(svg("text", { x: X(t), y: y + 17, "text-anchor": k === 0 ? "start" : k === 5 ? "end" : "middle", class: "axis" }, [seconds(t)]));
  }
  return { width, height, rects };
}
