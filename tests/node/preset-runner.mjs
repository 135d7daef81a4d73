// Runs a preset's code (www/presets) in Node as the page's worker runs the editor's code: its
// "ipu-playground" imports pointed at the package the caller loaded (`pkgFile`, so both share
// one module instance), its default export called with the page's context (`options` a
// poptorch.Options made from the preset's options, `ipus`, `half`, `dataset`, `dataUrl`: in
// Node the Planetoid files' bytes). Shared by tests/node/export.test.mjs,
// tests/node/export-roundtrip.test.mjs and scripts/check-export.mjs, with the presets as the
// export checks run them (`presetCases`).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { PRESETS } from "../../www/presets/index.js";
import { bertCode } from "../../www/presets/bert.js";

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

/** `code` with each [pattern, replacement] applied; a pattern that no longer matches (the
 * preset changed) is an error, not a silently full-size "reduced" case. */
function shrink(code, edits) {
  for (const [pattern, replacement] of edits) {
    const next = code.replace(pattern, replacement);
    if (next === code) throw new Error(`reduced case: ${pattern} no longer matches the preset's code`);
    code = next;
  }
  return code;
}

/**
 * The page's presets as the export checks run them (tests/node/export-roundtrip.test.mjs and
 * scripts/check-export.mjs): `{ id, preset, code, note }`, BERT-Large, BERT-Base and
 * ResNet-50 at a reduced size (their code is parameterised; at full size the exported
 * file's `Model()` would make hundreds of millions of initial values before the weights
 * replace them). `full`: also each large preset at full size, `codeOnly` (its export is
 * checked for code only, without weights).
 */
export function presetCases({ full = false } = {}) {
  const cases = [];
  for (const p of PRESETS) {
    if (p.id === "bert-large" || p.id === "bert-base") {
      if (full) cases.push({ id: `${p.id}-full`, preset: p, code: p.code, codeOnly: true });
      const small = shrink(bertCode({ title: `${p.title} (reduced)`, source: "reduced", hidden: 32, layers: 4, heads: 4, perIpu: [1, 1, 1, 1], micro: 2, serialization: p.id === "bert-large" ? 2 : 1, optimizer: "{ lr: 0.006, weightDecay: 0.01, biasCorrection: false }" }),
        [["const VOCAB = 30522, SEQ = 128, MASK_TOKENS = 20;", "const VOCAB = 64, SEQ = 8, MASK_TOKENS = 3;"]]);
      cases.push({ id: `${p.id}-reduced`, preset: p, code: small, note: "reduced: hidden 32, 4 layers, 4 heads, vocabulary 64, sequence 8, micro-batch 2" });
    } else if (p.id === "resnet50") {
      if (full) cases.push({ id: `${p.id}-full`, preset: p, code: p.code, codeOnly: true });
      // One bottleneck per stage (batch norm's backward over few samples per channel amplifies
      // float32 rounding layer after layer), 48 x 48 images, 8 per micro-batch. Some sizes
      // (64 x 64, 16 images) leave a channel whose batch-norm input is constant over the batch:
      // it normalises to rounding noise, and whether the next ReLU passes it is rounding's
      // choice, different in any two float32 implementations (PyTorch's float32 run matches
      // its float64 run there only by chance).
      const small = shrink(p.code, [
        [/const MICRO_BATCH = \d+, CLASSES = \d+;/, "const MICRO_BATCH = 8, CLASSES = 10;"],
        [/224/g, "48"],
        [/stage\((\d+), \d+, (\d)(, true)?\)/g, "stage($1, 1, $2$3)"],
      ]);
      cases.push({ id: `${p.id}-reduced`, preset: p, code: small, note: "reduced: one bottleneck per stage, 48 x 48 images, 10 classes, micro-batch 8" });
    } else {
      cases.push({ id: p.id, preset: p, code: p.code });
    }
  }
  return cases;
}
