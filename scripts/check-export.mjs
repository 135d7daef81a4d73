#!/usr/bin/env node
// `make check-export`, the engine's half (scripts/check_export.py is PyTorch's): for every
// preset of the page and for random models from the fuzz layer's generator
// (tests/node/random-model.mjs), the wrapped model is traced as the page traces it
// (`model.plan` on the combined batch), exported as PyTorch and PopTorch Python
// (`model.toPython`) with its weights (`model.safetensors()`), and run one step on one
// random micro-batch by the engine (`model.referenceStep`): its outputs, loss, every
// parameter gradient and the dropout masks it drew. Each case is a folder under --out:
//
//   model.py, model_poptorch.py, model.safetensors   the export
//   reference.safetensors                              inputs, outputs, gradients, masks
//   case.json                                          what the checker needs to read them
//
// Usage: node scripts/check-export.mjs --out DIR [--models 50] [--seed 1] [--only presets|fuzz]
// Needs the Node package (scripts/build-wasm.sh nodejs → pkg-node/) and, for RevGNN, the
// Planetoid files in data/ (scripts/stage-data.sh).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { rng } from "../tests/node/helpers.mjs";
import { forEachRandomModel, microBatch } from "../tests/node/random-model.mjs";
import { safetensors } from "../www/engine/safetensors.js";
import { runPreset, planetoidFiles, combinedBatch, presetCases } from "../tests/node/preset-runner.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const PKG = path.join(REPO, "pkg-node", "ipu_playground.js");
const api = createRequire(import.meta.url)(PKG);

const argv = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : dflt;
};
const OUT = path.resolve(flag("out", path.join(REPO, "target", "check-export")));
const MODELS = Number(flag("models", 50));
const SEED = Number(flag("seed", 1));
const ONLY = flag("only", "all");

// ---- one case ----

/** Exports `model` (wrapped, traced) and its reference step on `inputs` into OUT/<id>/. */
function emit(id, model, inputs, note) {
  const dir = path.join(OUT, id);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "model.py"), model.toPython({ target: "pytorch", name: "model" }));
  fs.writeFileSync(path.join(dir, "model_poptorch.py"), api.exportPoptorch(model, { name: "model" }));
  fs.writeFileSync(path.join(dir, "model.safetensors"), model.safetensors());
  const ref = model.referenceStep(...inputs);
  const entries = [];
  const args = inputs.map((x, i) => {
    if (x.layout === "csr") {
      entries.push([`input.${i}.indptr`, { shape: [x.indptr.length], dtype: "int32", data: x.indptr }]);
      entries.push([`input.${i}.indices`, { shape: [x.indices.length], dtype: "int32", data: x.indices }]);
      entries.push([`input.${i}.values`, { shape: [x.values.length], dtype: "float32", data: x.values }]);
      return { kind: "sparse", shape: x.shape };
    }
    entries.push([`input.${i}`, { shape: x.shape, dtype: x.dtype ?? "float32", data: x.data }]);
    return { kind: "dense" };
  });
  ref.outputs.forEach((t, i) => entries.push([`output.${i}`, t]));
  ref.masks.forEach((t, i) => entries.push([`mask.${i}`, t]));
  ref.gradients.forEach(([name, t]) => entries.push([`grad.${name}`, t]));
  fs.writeFileSync(path.join(dir, "reference.safetensors"), safetensors(entries));
  const meta = {
    id, note, training: model.training, args, outputs: ref.outputs.length, lossOutput: ref.lossOutput,
    masks: ref.masks.length, gradients: ref.gradients.map(([n]) => n),
  };
  fs.writeFileSync(path.join(dir, "case.json"), JSON.stringify(meta, null, 1));
  return meta;
}

// ---- presets ----

const CORA = planetoidFiles(path.join(REPO, "data"), "cora");

async function presets(rand, log) {
  for (const c of presetCases({ full: true })) {
    try {
      const { model, inputs } = await runPreset(api, PKG, c.preset, { code: c.code, dataUrl: CORA });
      model.plan(...combinedBatch(inputs, model.combinedBatchFactor), { throwOnInvalid: false });
      if (c.codeOnly) {
        // The full-size model: its code without its weights (never made).
        const dir = path.join(OUT, c.id);
        fs.mkdirSync(dir, { recursive: true });
        fs.writeFileSync(path.join(dir, "model.py"), model.toPython({ target: "pytorch", name: "model" }));
        fs.writeFileSync(path.join(dir, "model_poptorch.py"), api.exportPoptorch(model, { name: "model" }));
        fs.writeFileSync(path.join(dir, "case.json"), JSON.stringify({ id: c.id, codeOnly: true, note: "full size: code only" }));
        log({ id: c.id, ok: true, codeOnly: true });
        continue;
      }
      const micro = microBatch(inputs, model.tracedModel.graph, rand);
      emit(c.id, model, micro, c.note);
      log({ id: c.id, ok: true });
      model.destroy();
    } catch (e) {
      log({ id: c.id, ok: false, error: `${e.message}\n${e.stack}` });
    }
  }
}

// ---- random models ----

async function fuzz(rand, log) {
  const skipped = {};
  const skip = (why) => (skipped[why] = (skipped[why] ?? 0) + 1);
  const made = await forEachRandomModel(api, { seed: SEED, count: MODELS, rand, skip }, ({ i, made, model, specs, graph }) => {
    const id = `fuzz-${String(made).padStart(3, "0")}`;
    emit(id, model, microBatch(specs, graph, rand), `random model ${i} (seed ${SEED})`);
    log({ id, ok: true });
  });
  return { made, skipped };
}

// ---- main ----

fs.rmSync(OUT, { recursive: true, force: true });
fs.mkdirSync(OUT, { recursive: true });
const results = [];
const log = (r) => {
  results.push(r);
  console.log(`${r.ok ? "exported" : "FAILED  "} ${r.id}${r.codeOnly ? " (code only)" : ""}${r.ok ? "" : `: ${r.error}`}`);
};
const rand = rng(SEED);
if (ONLY !== "fuzz") await presets(rand, log);
let fuzzed = { made: 0, skipped: {} };
if (ONLY !== "presets") {
  fuzzed = await fuzz(rand, log);
  console.log(`random models: ${fuzzed.made} exported; skipped (the engine cannot run them): ${JSON.stringify(fuzzed.skipped)}`);
}
fs.writeFileSync(path.join(OUT, "engine.json"), JSON.stringify({ results, fuzz: fuzzed }, null, 1));
const failed = results.filter((r) => !r.ok).length + (ONLY !== "presets" && fuzzed.made < MODELS ? 1 : 0);
if (failed) {
  console.error(`check-export (engine): ${failed} failure(s)`);
  process.exit(1);
}
