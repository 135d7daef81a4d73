// The memory timeline of one IPU: bytes by class, stacked, over program steps, with the
// IPU's capacity as a line, the peak step marked and a selected step highlighted.
//
//   drawMemory(canvas, { width, height, classes: [names, bottom first],
//                        steps: [{ label, values: { class: bytes } }], capacity, peakStep, selected })
// Returns { stepAt(x) }: the step index under a CSS-pixel x (for click handling by the caller).
import { CLASS_COLOURS, bytes, sizeCanvas } from "./svg.js";

const PAD = { left: 64, right: 12, top: 12, bottom: 26 };

export function drawMemory(canvas, data) {
  const width = data.width ?? 640;
  const height = data.height ?? 220;
  const ctx = sizeCanvas(canvas, width, height);
  const n = data.steps.length;
  const totals = data.steps.map((s) => data.classes.reduce((a, c) => a + (s.values[c] ?? 0), 0));
  // The capacity line is drawn when it is within reach; far above the peak, the chart is
  // scaled to the data and the capacity is written at the top instead.
  const peak = Math.max(...totals, 1);
  const capacityShown = Boolean(data.capacity) && peak > data.capacity * 0.25;
  const top = (capacityShown ? Math.max(data.capacity, peak) : peak) * 1.12;
  const w = width - PAD.left - PAD.right;
  const h = height - PAD.top - PAD.bottom;
  const X = (i) => PAD.left + (n <= 1 ? w / 2 : (i / (n - 1)) * w);
  const Y = (v) => PAD.top + h - (v / top) * h;

  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#6b7385";
  ctx.strokeStyle = "#e3e6ee";
  ctx.lineWidth = 1;
  for (let k = 0; k <= 4; k++) {
    const v = (top / 4) * k;
    const y = Math.round(Y(v)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(PAD.left, y);
    ctx.lineTo(width - PAD.right, y);
    ctx.stroke();
    ctx.fillText(bytes(v), 4, y + 4);
  }
  // Stacked areas, bottom class first.
  const base = new Array(n).fill(0);
  for (const c of data.classes) {
    const upper = data.steps.map((s, i) => base[i] + (s.values[c] ?? 0));
    if (upper.every((v, i) => v === base[i])) continue;
    ctx.beginPath();
    data.steps.forEach((_, i) => (i ? ctx.lineTo(X(i), Y(upper[i])) : ctx.moveTo(X(i), Y(upper[i]))));
    for (let i = n - 1; i >= 0; i--) ctx.lineTo(X(i), Y(base[i]));
    ctx.closePath();
    ctx.fillStyle = CLASS_COLOURS[c] ?? "#999";
    ctx.globalAlpha = 0.85;
    ctx.fill();
    ctx.globalAlpha = 1;
    upper.forEach((v, i) => (base[i] = v));
  }
  if (data.capacity && !capacityShown) {
    ctx.fillStyle = "#d62728";
    ctx.fillText(`capacity ${bytes(data.capacity)} (far above the chart)`, PAD.left + 6, PAD.top + 10);
  }
  if (capacityShown) {
    const y = Math.round(Y(data.capacity)) + 0.5;
    ctx.strokeStyle = "#d62728";
    ctx.setLineDash([6, 4]);
    ctx.beginPath();
    ctx.moveTo(PAD.left, y);
    ctx.lineTo(width - PAD.right, y);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = "#d62728";
    ctx.fillText(`capacity ${bytes(data.capacity)}`, PAD.left + 6, y - 4);
  }
  if (Number.isInteger(data.peakStep) && data.peakStep < n) {
    ctx.fillStyle = "#1f2430";
    ctx.beginPath();
    ctx.arc(X(data.peakStep), Y(totals[data.peakStep]), 3.5, 0, 2 * Math.PI);
    ctx.fill();
    ctx.fillText(`peak ${bytes(totals[data.peakStep])}`, Math.min(X(data.peakStep) + 6, width - 110), Math.max(Y(totals[data.peakStep]) - 6, 12));
  }
  if (Number.isInteger(data.selected) && data.selected < n) {
    const x = Math.round(X(data.selected)) + 0.5;
    ctx.strokeStyle = "#3b5bdb";
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x, PAD.top);
    ctx.lineTo(x, PAD.top + h);
    ctx.stroke();
  }
  ctx.fillStyle = "#6b7385";
  ctx.fillText("program step →", width - PAD.right - 90, height - 8);
  ctx.fillText(data.steps[0]?.label ?? "", PAD.left, height - 8);
  return {
    stepAt(x) {
      if (n === 0) return null;
      const i = Math.round(((x - PAD.left) / Math.max(w, 1)) * (n - 1));
      return Math.min(n - 1, Math.max(0, i));
    },
  };
}
