// The tile map of one IPU at its peak: one square per tile, coloured by the bytes it holds
// as a share of its SRAM (PopVision's tile map).
//
//   drawTiles(canvas, { tiles: [bytes per tile], bytesPerTile, width })
// Returns { columns, rows, over } (over: tiles holding more than they have).
import { sizeCanvas } from "./svg.js";

/** White → blue → orange → red as the share goes 0 → 1; dark red above 1. */
export function heat(share) {
  if (!(share > 0)) return "#f1f3f8";
  if (share > 1) return "#7f0000";
  const stops = [
    [0, [222, 235, 247]],
    [0.5, [49, 130, 189]],
    [0.8, [253, 141, 60]],
    [1, [214, 39, 40]],
  ];
  let k = 1;
  while (k < stops.length - 1 && share > stops[k][0]) k++;
  const [a, ca] = stops[k - 1];
  const [b, cb] = stops[k];
  const t = Math.min(1, Math.max(0, (share - a) / (b - a)));
  const c = ca.map((v, i) => Math.round(v + (cb[i] - v) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

export function drawTiles(canvas, data) {
  const n = data.tiles.length;
  const width = data.width ?? 640;
  const columns = Math.max(1, Math.ceil(Math.sqrt(n * 2.4)));
  const size = Math.max(2, Math.floor(width / columns));
  const rows = Math.ceil(n / columns);
  const ctx = sizeCanvas(canvas, columns * size, rows * size);
  let over = 0;
  data.tiles.forEach((b, i) => {
    const share = b / data.bytesPerTile;
    if (share > 1) over++;
    ctx.fillStyle = heat(share);
    ctx.fillRect((i % columns) * size, Math.floor(i / columns) * size, size - (size > 3 ? 1 : 0), size - (size > 3 ? 1 : 0));
  });
  return { columns, rows, over };
}

/** The colour scale of the tile map, 0 to a full tile, as a `width` × `height` bar. */
export function drawTileScale(canvas, width, height) {
  const ctx = sizeCanvas(canvas, width, height);
  for (let x = 0; x < width; x++) {
    ctx.fillStyle = heat((x + 0.5) / width);
    ctx.fillRect(x, 0, 1, height);
  }
}
