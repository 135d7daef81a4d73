// The execution timeline: one lane per IPU, intervals coloured by kind (compute, exchange,
// sync, copy, stream), over one step of the model (PopVision's execution trace, coarsely).
//
//   drawGantt(svgElement, { rows: [{ ipu, intervals: [{ start, end, kind, label }] }], end, width })
// Returns { width, height }.
import { svg, clear, colour, tip, KIND_COLOURS, seconds } from "./svg.js";

const LABEL_W = 70;
const ROW_H = 30;
const TOP = 8;
const AXIS = 26;

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
  data.rows.forEach((row, r) => {
    const y = TOP + r * ROW_H;
    const lane = svg("g", { class: "lane", "data-ipu": row.ipu });
    lane.append(svg("rect", { x: LABEL_W, y: y + 3, width: w, height: ROW_H - 6, rx: 4, class: "lane-bg" }));
    lane.append(svg("circle", { cx: 12, cy: y + ROW_H / 2, r: 5, fill: colour(row.ipu) }));
    lane.append(svg("text", { x: 22, y: y + ROW_H / 2 + 4, class: "ipu-label" }, [`IPU ${row.ipu}`]));
    for (const iv of row.intervals) {
      if (iv.kind === "idle" || !(iv.end > iv.start)) continue;
      const x0 = X(iv.start);
      const rect = svg("rect", { x: x0, y: y + 5, width: Math.max(1, X(iv.end) - x0), height: ROW_H - 10, rx: 2, fill: KIND_COLOURS[iv.kind] ?? "#999", class: `iv ${iv.kind}` });
      tip(rect, `${iv.kind}${iv.label ? `: ${iv.label}` : ""} · ${seconds(iv.start)} – ${seconds(iv.end)}`);
      lane.append(rect);
    }
    root.append(lane);
  });
  const y = TOP + data.rows.length * ROW_H + 4;
  for (let k = 0; k <= 5; k++) {
    const t = (end / 5) * k;
    root.append(svg("line", { x1: X(t), x2: X(t), y1: y, y2: y + 5, class: "tick" }));
    root.append(svg("text", { x: X(t), y: y + 17, "text-anchor": k === 0 ? "start" : k === 5 ? "end" : "middle", class: "axis" }, [seconds(t)]));
  }
  return { width, height };
}
