// Blocks → Stages → Phases per IPU: one row per IPU, one column per stage (pipelined and
// sharded) or per phase (phased), each cell listing the Blocks that run there.
//
//   drawStages(svgElement, { ipus: [0, 1, …], columns: [{ id, label, sub, pass }],
//                            cells: [{ ipu, column, blocks: [ids], label, pass }], width })
// Returns { width, height }.
import { svg, clear, colour, tip } from "./svg.js";

const LABEL_W = 70;
const ROW_H = 64;
const TOP = 38;

export function drawStages(root, data) {
  clear(root);
  const cols = data.columns.length;
  // Columns share the width given, between 84 and 150 px each.
  const COL_W = Math.max(84, Math.min(150, Math.floor(((data.width ?? 900) - LABEL_W - 10) / Math.max(1, cols))));
  const width = LABEL_W + Math.max(1, cols) * COL_W + 10;
  const height = TOP + data.ipus.length * ROW_H + 10;
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  data.columns.forEach((c, i) => {
    const x = LABEL_W + i * COL_W + COL_W / 2;
    root.append(svg("text", { x, y: 15, "text-anchor": "middle", class: `col-head ${c.pass === "backward" ? "bwd" : ""}` }, [c.label]));
    if (c.sub) root.append(svg("text", { x, y: 29, "text-anchor": "middle", class: `col-sub ${c.pass}` }, [c.sub]));
  });
  data.ipus.forEach((ipu, r) => {
    const y = TOP + r * ROW_H;
    const row = svg("g", { class: "ipu-row", "data-ipu": ipu });
    row.append(svg("rect", { x: 0, y: y + 2, width, height: ROW_H - 4, rx: 8, class: r % 2 ? "band odd" : "band" }));
    row.append(svg("circle", { cx: 14, cy: y + ROW_H / 2, r: 6, fill: colour(ipu) }));
    row.append(svg("text", { x: 26, y: y + ROW_H / 2 + 4, class: "ipu-label" }, [`IPU ${ipu}`]));
    root.append(row);
  });
  for (const cell of data.cells) {
    const r = data.ipus.indexOf(cell.ipu);
    if (r < 0) continue;
    const x = LABEL_W + cell.column * COL_W + 6;
    const y = TOP + r * ROW_H + 8;
    const g = svg("g", { class: "cell", "data-ipu": cell.ipu, "data-blocks": cell.blocks.join(" ") });
    g.append(svg("rect", { x, y, width: COL_W - 12, height: ROW_H - 16, rx: 7, fill: colour(cell.ipu), "fill-opacity": cell.pass === "backward" ? 0.1 : 0.2, stroke: colour(cell.ipu), "stroke-dasharray": cell.pass === "backward" ? "4 3" : null }));
    g.append(svg("text", { x: x + 8, y: y + 15, class: "cell-label" }, [cell.label]));
    const names = cell.blocks.join(", ");
    g.append(svg("text", { x: x + 8, y: y + 33, class: "cell-blocks" }, [names.length > COL_W / 7.5 ? names.slice(0, Math.floor(COL_W / 7.5) - 1) + "…" : names]));
    tip(g, `${cell.label} on IPU ${cell.ipu}: ${names}`);
    root.append(g);
  }
  return { width, height };
}
