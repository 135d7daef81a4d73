// Small helpers shared by the hand-drawn charts: SVG elements, colours, number formats.

const NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes and children (strings become text nodes). */
export function svg(tag, attrs = {}, children = []) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of [].concat(children)) e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  return e;
}

/** An SVG <title> (a tooltip) for `e`. */
export function tip(e, text) {
  e.append(svg("title", {}, [text]));
  return e;
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
}

/** One colour per IPU / stage / phase index (colour-blind friendly order, then cycling). */
export const PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac"];

export function colour(i) {
  if (i === null || i === undefined || i < 0) return "#9aa3b5";
  return PALETTE[i % PALETTE.length];
}

/** Colours of memory classes and timeline kinds. */
export const CLASS_COLOURS = {
  code: "#8c8c8c",
  exchange: "#b8b8b8",
  weights: "#4c78a8",
  optimizer: "#72b7b2",
  accumulators: "#9ecae9",
  buffers: "#b279a2",
  activations: "#f58518",
  stash: "#e45756",
  gradients: "#54a24b",
  temporaries: "#eeca3b",
  loaded: "#9d755d",
};

export const KIND_COLOURS = {
  compute: "#4c78a8",
  exchange: "#f58518",
  sync: "#bab0ac",
  copy: "#e45756",
  stream: "#9d755d",
  idle: "transparent",
};

export function bytes(n) {
  if (!Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function seconds(s) {
  if (!Number.isFinite(s)) return "–";
  if (s >= 1) return `${s.toFixed(2)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toFixed(2)} ms`;
  return `${(s * 1e6).toFixed(1)} µs`;
}

/** A canvas sized for the device's pixel ratio; returns its 2D context in CSS pixels. */
export function sizeCanvas(canvas, width, height) {
  const dpr = globalThis.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

/** Round tick values from 0 to at least `max` (about `n` steps of 1, 2, 2.5 or 5 × a power of
 *  ten of a binary unit, so that `bytes()` prints them short). */
export function byteTicks(max, n = 4) {
  if (!(max > 0)) return [0, 1];
  let unit = 1;
  while (max / unit >= 1024) unit *= 1024;
  const raw = max / unit / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) * unit);
  const ticks = [];
  for (let v = 0; v < max + step * 0.999; v += step) ticks.push(v);
  return ticks;
}
