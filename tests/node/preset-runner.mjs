// Runs a preset's code (www/presets) in Node as the page's worker runs the editor's code: its
// "ipu-playground" imports pointed at the package the caller loaded (`pkgFile`, so both share
// one module instance), its default export called with the page's context (`options` a
// poptorch.Options made from the preset's options, `ipus`, `half`, `dataset`, `dataUrl`: in
// Node the Planetoid files' bytes). Shared by tests/node/export.test.mjs and
// scripts/check-export.mjs.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** Planetoid `name`'s raw files from `dataDir` as `{ "ind.cora.x": Uint8Array, … }`. */
export function planetoidFiles(dataDir, name = "cora") {
  const files = {};
  for (const f of fs.readdirSync(dataDir).filter((f) => f.startsWith(`ind.${name}.`))) {
    files[f] = new Uint8Array(fs.readFileSync(path.join(dataDir, f)));
  }
  return files;
}

/** `{ model, inputs, … }` of the preset's code (or `code`, a variant of it). */
export async function runPreset(api, pkgFile, preset, { code = preset.code, half = false, dataset = "Cora", dataUrl = {}, epochs = 1 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "preset-"));
  try {
    const file = path.join(dir, `${preset.id}.mjs`);
    fs.writeFileSync(file, code.replaceAll('"ipu-playground"', JSON.stringify(pathToFileURL(pkgFile).href)));
    const mod = await import(pathToFileURL(file).href);
    const options = api.poptorch.Options.fromJSON(preset.options ?? {});
    const context = { options, ipus: preset.ipus, half, dataset, dataUrl, epochs };
    return typeof mod.default === "function" ? await mod.default(context) : mod.default;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The combined batch the page plans with: each shape-only input's dim 0 × `factor`. */
export const combinedBatch = (inputs, factor) =>
  inputs.map((s) => (s.data !== undefined || s.layout === "csr" ? s : { name: s.name, dtype: s.dtype, shape: s.shape.length ? [s.shape[0] * factor, ...s.shape.slice(1)] : [] }));
