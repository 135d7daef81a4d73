// The memory timeline of one IPU: bytes by class, stacked, over program steps, with the
// IPU's capacity as a line, the peak step marked and a selected step highlighted.
//
//   drawMemory(canvas, { width, height, classes: [names, bottom first], x: [step of each point],
//                        series: { class: [bytes per point] }, programSteps, capacity,
//                        capacityLabel = "capacity", peakIndex, selected })
// `x` may list a sample of the program's steps (in order); points are placed by their step.
// Returns { indexAt(px) }: the index of the point nearest a CSS-pixel x (for clicks).
import { CLASS_COLOURS, bytes, byteTicks, sizeCanvas } from "./svg.js";

const PAD = { left: 64, right: 12, top: 14, bottom: 26 };

export function drawMemory(canvas, data) {
  const width = data.width ?? 640;
  const height = data.height ?? 220;
  const ctx = sizeCanvas(canvas, width, height);
  const xs = data.x;
  const n = xs.length;
  const totals = new Float64Array(n);
  for (const c of data.classes) {
    const s = data.series[c];
    if (s) for (let i = 0; i < n; i++) totals[i] += s[i] ?? 0;
  }
  // The capacity line is drawn when it is within reach; far above the peak, the chart is
  // scaled to the data and the capacity is written at the top instead.
  let peak = 1;
  for (let i = 0; i < n; i++) peak = Math.max(peak, totals[i]);
  const capacityShown = Boolean(data.capacity) && peak > data.capacity * 0.25;
  const ticks = byteTicks((capacityShown ? Math.max(data.capacity, peak) : peak) * 1.08);
  const top = ticks[ticks.length - 1];
  const w = width - PAD.left - PAD.right;
  const h = height - PAD.top - PAD.bottom;
  const last = Math.max(1, (data.programSteps ?? (n ? xs[n - 1] + 1 : 1)) - 1);
  const X = (i) => PAD.left + (n <= 1 ? w / 2 : (xs[i] / last) * w);
  const Y = (v) => PAD.top + h - (v / top) * h;

  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#6b7385";
  ctx.strokeStyle = "#e3e6ee";
  ctx.lineWidth = 1;
  for (const v of ticks) {
    const y = Math.round(Y(v)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(PAD.left, y);
    ctx.lineTo(width - PAD.right, y);
    ctx.stroke();
    ctx.fillText(bytes(v), 4, y + 4);
  }
  // Stacked areas, bottom class first (a one-step program is a bar).
  const base = new Float64Array(n);
  const upper = new Float64Array(n);
  for (const c of data.classes) {
    const s = data.series[c];
    if (!s) continue;
    let any = false;
    for (let i = 0; i < n; i++) {
      upper[i] = base[i] + (s[i] ?? 0);
      if (upper[i] !== base[i]) any = true;
    }
    if (!any) continue;
    ctx.fillStyle = CLASS_COLOURS[c] ?? "#999";
    ctx.globalAlpha = 0.85;
    if (n === 1) {
      ctx.fillRect(PAD.left + w / 4, Y(upper[0]), w / 2, Y(base[0]) - Y(upper[0]));
    } else {
      ctx.beginPath();
      for (let i = 0; i < n; i++) (i ? ctx.lineTo : ctx.moveTo).call(ctx, X(i), Y(upper[i]));
      for (let i = n - 1; i >= 0; i--) ctx.lineTo(X(i), Y(base[i]));
      ctx.closePath();
      ctx.fill();
    }
    ctx.globalAlpha = 1;
    base.set(upper);
  }
  if (data.capacity && !capacityShown) {
    ctx.fillStyle = "#d62728";
    ctx.fillText(`${data.capacityLabel ?? "capacity"} ${bytes(data.capacity)} (far above the chart)`, PAD.left + 6, PAD.top + 2);
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
    ctx.fillText(`${data.capacityLabel ?? "capacity"} ${bytes(data.capacity)}`, PAD.left + 6, y - 4);
  }
  if (Number.isInteger(data.peakIndex) && data.peakIndex < n) {
    const px = X(data.peakIndex);
    const py = Y(totals[data.peakIndex]);
    ctx.fillStyle = "#1f2430";
    ctx.beginPath();
    ctx.arc(px, py, 3.5, 0, 2 * Math.PI);
    ctx.fill();
    const label = `peak ${bytes(totals[data.peakIndex])}`;
    ctx.fillText(label, Math.min(px + 6, width - PAD.right - ctx.measureText(label).width), Math.max(py - 6, 11));
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
  ctx.fillText("0", PAD.left, height - 8);
  const end = String(last);
  ctx.fillText(end, width - PAD.right - ctx.measureText(end).width, height - 8);
  ctx.fillText("program step →", PAD.left + w / 2 - 40, height - 8);
  return {
    indexAt(px) {
      if (n === 0) return null;
      const step = ((px - PAD.left) / Math.max(w, 1)) * last;
      // The listed steps are in order: binary search for the nearest.
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (xs[mid] < step) lo = mid + 1;
        else hi = mid;
      }
      if (lo > 0 && Math.abs(xs[lo - 1] - step) <= Math.abs(xs[lo] - step)) lo--;
      return lo;
    },
  };
}
