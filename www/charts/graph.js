// The graph chart: ops grouped by module scope, in execution order, left to right in
// columns; each op a row with its name, output shape and source line, coloured by the key
// the caller chose (IPU, stage or phase).
//
//   drawGraph(svgElement, { groups: [{ scope, nodes: [{ index, op, shape, source, line, key, keyLabel }] }],
//                           legend: [{ key, label }], width })
// Returns { height }.
import { svg, clear, colour, tip } from "./svg.js";

const COL_W = 270;
const ROW_H = 22;
const HEAD_H = 26;
const GAP = 14;
const MAX_ROWS = 28;

export function drawGraph(root, data) {
  clear(root);
  const width = Math.max(data.width ?? 900, COL_W + 2 * GAP);
  const cols = Math.max(1, Math.floor((width - GAP) / (COL_W + GAP)));
  // Split long groups into chunks so no column is taller than MAX_ROWS rows.
  const boxes = [];
  for (const g of data.groups) {
    for (let i = 0; i < g.nodes.length; i += MAX_ROWS) {
      boxes.push({ scope: g.scope + (i ? " (cont.)" : ""), nodes: g.nodes.slice(i, i + MAX_ROWS) });
    }
  }
  const heights = new Array(cols).fill(GAP + 24);
  const placed = [];
  // Fill columns left to right in order, moving on when a column would grow past the tallest box.
  const tallest = Math.max(...boxes.map((b) => HEAD_H + b.nodes.length * ROW_H + 8), 120);
  const target = Math.max(tallest, Math.ceil(boxes.reduce((a, b) => a + HEAD_H + b.nodes.length * ROW_H + 8 + GAP, 0) / cols));
  let col = 0;
  for (const b of boxes) {
    const h = HEAD_H + b.nodes.length * ROW_H + 8;
    if (heights[col] + h > target + GAP + 24 && heights[col] > GAP + 24 && col < cols - 1) col++;
    placed.push({ ...b, x: GAP + col * (COL_W + GAP), y: heights[col], h });
    heights[col] += h + GAP;
  }
  const height = Math.max(...heights) + GAP;
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);

  // Legend.
  let lx = GAP;
  for (const item of data.legend ?? []) {
    root.append(svg("rect", { x: lx, y: 8, width: 12, height: 12, rx: 3, fill: colour(item.key) }));
    const t = svg("text", { x: lx + 17, y: 18, class: "legend" }, [item.label]);
    root.append(t);
    lx += 30 + item.label.length * 7;
  }

  for (const b of placed) {
    const g = svg("g", { class: "scope", transform: `translate(${b.x},${b.y})` });
    g.append(svg("rect", { width: COL_W, height: b.h, rx: 8, class: "scope-box" }));
    g.append(svg("text", { x: 10, y: 17, class: "scope-name" }, [b.scope || "(top level)"]));
    b.nodes.forEach((n, i) => {
      const y = HEAD_H + i * ROW_H;
      const row = svg("g", { class: "op", transform: `translate(6,${y})`, "data-index": n.index });
      row.append(svg("rect", { width: COL_W - 12, height: ROW_H - 3, rx: 5, fill: colour(n.key), "fill-opacity": 0.16, stroke: colour(n.key), "stroke-opacity": 0.55 }));
      row.append(svg("rect", { width: 4, height: ROW_H - 3, rx: 2, fill: colour(n.key) }));
      const name = n.op.length > 18 ? `${n.op.slice(0, 17)}…` : n.op;
      row.append(svg("text", { x: 10, y: 14, class: "op-name" }, [name]));
      row.append(svg("text", { x: COL_W - 48, y: 14, class: "op-shape", "text-anchor": "end" }, [n.shape.length > 22 ? `${n.shape.slice(0, 21)}…` : n.shape]));
      if (n.line) row.append(svg("text", { x: COL_W - 18, y: 14, class: "op-src", "text-anchor": "end" }, [`L${n.line}`]));
      tip(row, `%${n.index} ${n.op} → ${n.shape}${n.keyLabel ? ` · ${n.keyLabel}` : ""}${n.source ? ` · ${n.source}` : ""}`);
      g.append(row);
    });
    root.append(g);
  }
  return { height };
}
