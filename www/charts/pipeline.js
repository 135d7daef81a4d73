// The pipeline over micro-batches: one row per pipeline stage, one column per time step;
// a cell shows which micro-batch the stage works on, shaded ramp-up / steady / ramp-down.
// A long steady state is drawn as its first and last steps with a gap between.
//
//   drawPipeline(svgElement, { stages: [{ id, ipu, pass }], columns: [step drawn in each column],
//                              gaps: [{ after: column, steps }], cells: [{ step, column, stage, microBatch, pass }],
//                              rampUp, steady, rampDown, width })
// Returns { width, height }.
import { svg, clear, colour, tip } from "./svg.js";

const LABEL_W = 150;
const TOP = 34;
const PASS = { forward: "", forward_backward: " · fwd+bwd", backward: " · bwd" };

export function drawPipeline(root, data) {
  clear(root);
  const ncol = Math.max(1, data.columns.length);
  const gapAfter = new Map((data.gaps ?? []).map((g) => [g.after, g.steps]));
  const slots = ncol + gapAfter.size;
  const cw = Math.max(14, Math.min(48, Math.floor(((data.width ?? 900) - LABEL_W - 10) / slots)));
  const rh = 24;
  // x of each column, a gap slot after the columns that skip steps.
  const xs = [];
  let x = LABEL_W;
  for (let c = 0; c < ncol; c++) {
    xs.push(x);
    x += cw + (gapAfter.has(c) ? cw : 0);
  }
  const width = x + 10;
  const height = TOP + data.stages.length * rh + 8;
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  const part = (step) => (step < data.rampUp ? "ramp-up" : step < data.rampUp + data.steady ? "steady" : "ramp-down");
  const counts = { "ramp-up": data.rampUp, steady: data.steady, "ramp-down": data.rampDown };
  // One band per part, over the columns of its steps.
  let start = 0;
  for (let c = 1; c <= data.columns.length; c++) {
    if (c < data.columns.length && part(data.columns[c]) === part(data.columns[start])) continue;
    const name = part(data.columns[start]);
    const x0 = xs[start];
    const x1 = xs[c - 1] + cw;
    const n = counts[name];
    root.append(svg("rect", { x: x0, y: 4, width: x1 - x0, height: height - 8, class: `phase-band ${name}` }));
    const label = `${name} (${n})`.length * 6.5 < x1 - x0 - 4 ? `${name} (${n})` : String(n);
    root.append(svg("text", { x: (x0 + x1) / 2, y: 20, "text-anchor": "middle", class: "phase-name" }, [label]));
    start = c;
  }
  for (const [c, steps] of gapAfter) {
    const gx = xs[c] + cw + cw / 2;
    const t = svg("text", { x: gx, y: TOP + (data.stages.length * rh) / 2 + 4, "text-anchor": "middle", class: "pipe-gap" }, ["…"]);
    tip(t, `${steps} more steady step${steps === 1 ? "" : "s"}, every stage busy`);
    root.append(t);
  }
  data.stages.forEach((s, r) => {
    const y = TOP + r * rh;
    root.append(svg("text", { x: 8, y: y + 16, class: "stage-label" }, [`stage ${s.id} · IPU ${s.ipu}${PASS[s.pass] ?? ""}`]));
  });
  const row = new Map(data.stages.map((s, r) => [s.id, r]));
  for (const c of data.cells) {
    const r = row.get(c.stage);
    if (r === undefined) continue;
    const cx = xs[c.column];
    const y = TOP + r * rh;
    const ipu = data.stages[r].ipu;
    const cell = svg("rect", { x: cx + 1, y: y + 2, width: cw - 2, height: rh - 4, rx: 3, fill: colour(ipu), "fill-opacity": c.pass === "backward" ? 0.45 : 0.85, class: "mb" });
    tip(cell, `step ${c.step}: stage ${c.stage} (${c.pass}) on IPU ${ipu}, micro-batch ${c.microBatch}`);
    root.append(cell);
    if (cw >= 18) root.append(svg("text", { x: cx + cw / 2, y: y + 16, "text-anchor": "middle", class: "mb-label" }, [String(c.microBatch)]));
  }
  return { width, height };
}
