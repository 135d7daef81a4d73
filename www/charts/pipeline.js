// The pipeline over micro-batches: one row per pipeline stage, one column per time step;
// a cell shows which micro-batch the stage works on, shaded ramp-up / steady / ramp-down.
//
//   drawPipeline(svgElement, { stages: [{ id, ipu, pass }], steps, cells: [{ step, stage, microBatch, pass }],
//                              rampUp, steady, rampDown, width })
// Returns { width, height }.
import { svg, clear, colour, tip } from "./svg.js";

const LABEL_W = 138;
const TOP = 34;

export function drawPipeline(root, data) {
  clear(root);
  const steps = Math.max(1, data.steps);
  const cw = Math.max(14, Math.min(48, Math.floor(((data.width ?? 900) - LABEL_W - 10) / steps)));
  const rh = 24;
  const width = LABEL_W + steps * cw + 10;
  const height = TOP + data.stages.length * rh + 8;
  root.setAttribute("viewBox", `0 0 ${width} ${height}`);
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  const phases = [
    ["ramp-up", 0, data.rampUp],
    ["steady", data.rampUp, data.steady],
    ["ramp-down", data.rampUp + data.steady, data.rampDown],
  ];
  for (const [name, start, n] of phases) {
    if (n <= 0) continue;
    const x = LABEL_W + start * cw;
    root.append(svg("rect", { x, y: 4, width: n * cw, height: height - 8, class: `phase-band ${name}` }));
    // The full name where it fits, else just the step count (the caption names the parts).
    const label = `${name} (${n})`.length * 6.5 < n * cw - 4 ? `${name} (${n})` : String(n);
    root.append(svg("text", { x: x + (n * cw) / 2, y: 20, "text-anchor": "middle", class: "phase-name" }, [label]));
  }
  data.stages.forEach((s, r) => {
    const y = TOP + r * rh;
    root.append(svg("text", { x: 8, y: y + 16, class: "stage-label" }, [`stage ${s.id} · IPU ${s.ipu}${s.pass === "backward" ? " · bwd" : ""}`]));
  });
  for (const c of data.cells) {
    const r = data.stages.findIndex((s) => s.id === c.stage);
    if (r < 0) continue;
    const x = LABEL_W + c.step * cw;
    const y = TOP + r * rh;
    const ipu = data.stages[r].ipu;
    const cell = svg("rect", { x: x + 1, y: y + 2, width: cw - 2, height: rh - 4, rx: 3, fill: colour(ipu), "fill-opacity": c.pass === "backward" ? 0.45 : 0.85, class: "mb" });
    tip(cell, `step ${c.step}: stage ${c.stage} (${c.pass}) on IPU ${ipu}, micro-batch ${c.microBatch}`);
    root.append(cell);
    if (cw >= 18) root.append(svg("text", { x: x + cw / 2, y: y + 16, "text-anchor": "middle", class: "mb-label" }, [String(c.microBatch)]));
  }
  return { width, height };
}
