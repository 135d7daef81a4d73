// Every preset of the page in both languages (www/presets: `code` in JavaScript, `python` in
// Python): run as the page runs them (the panel's options as a poptorch.Options, the JS module's
// default export called with them; the Python file run in Pyodide by www/engine/python.js),
// each gives the same plan and prints the same lines. RevGNN, whose data the page fetches, is
// run from the staged Cora files and trained for an epoch from Python.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { loadTestPython } from "./python-runner.mjs";
import { REPO } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const api = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
const { PRESETS } = await import(path.join(REPO, "www", "presets", "index.js"));
const { defaultOptions, mergeOptions, toPlannerOptions } = await import(path.join(REPO, "www", "options.js"));

let python;
const tmp = fs.mkdtempSync(path.join(CONSUMER, ".presets-"));
before(async () => {
  python = await loadTestPython(api);
});
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

const context = (p) => ({ options: api.poptorch.Options.fromJSON(toPlannerOptions(mergeOptions(defaultOptions(), p.options))), ipus: p.ipus, half: Boolean(p.half), dataset: "Cora" });

/**
 * What `fn` prints with console.log while it runs, and its value; numbers as JavaScript
 * and Python print them alike ([2, 16] and [2,16], 1.0 and 1, 2.68e-04 and 2.68e-4).
 */
async function printed(fn) {
  const lines = [];
  const log = console.log;
  console.log = (...a) => lines.push(a.join(" "));
  try {
    const same = (l) => l.replace(/,\s+(?=\d)/g, ",").replace(/(\d)\.0\b/g, "$1").replace(/e([+-])0(\d)/g, "e$1$2");
    return { value: await fn(), lines: lines.join("\n").trim().split("\n").filter(Boolean).map(same) };
  } finally {
    console.log = log;
  }
}

function planOf({ model, inputs }) {
  const factor = model.combinedBatchFactor;
  const call = inputs.map((s) => (s.data || s.indptr ? s : { name: s.name, dtype: s.dtype ?? "float32", shape: [s.shape[0] * factor, ...s.shape.slice(1)] }));
  return model.plan(...call, { throwOnInvalid: false });
}

const digest = (plan) => JSON.stringify(plan, (_, v) => (typeof v === "string" ? v.replace(/[\w.-]+\.(py|mjs|js):\d+/g, "<site>") : v));

/** Plans as JSON must be equal; a failure shows where they first differ. */
function sameJson(a, b) {
  if (a === b) return;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  assert.fail(`the plans differ at character ${i}:\n  python:     …${a.slice(Math.max(0, i - 200), i + 200)}\n  javascript: …${b.slice(Math.max(0, i - 200), i + 200)}`);
}

for (const p of PRESETS.filter((p) => p.id !== "revgnn")) {
  test(`preset ${p.id}: the Python plans and prints as the JavaScript`, async () => {
    const file = path.join(tmp, `${p.id}.mjs`);
    fs.writeFileSync(file, p.code);
    // The same seed for both: each module draws its parameters' seed when it is made.
    const js = await printed(async () => {
      api.manualSeed(0);
      const mod = await import(pathToFileURL(file).href);
      const v = typeof mod.default === "function" ? await mod.default(context(p)) : mod.default;
      return planOf(v);
    });
    const py = await printed(async () => {
      api.manualSeed(0);
      return planOf((await python.run(p.python, context(p))).default);
    });
    assert.deepEqual(py.lines, js.lines);
    assert.equal(py.value.valid, js.value.valid);
    assert.deepEqual(py.value.errors.map((e) => e.message), js.value.errors.map((e) => e.message));
    sameJson(digest(py.value), digest(js.value));
  });
}

test("preset revgnn in Python: plans one part of Cora, trains an epoch through its `train`, evaluates", async () => {
  const p = PRESETS.find((x) => x.id === "revgnn");
  // The staged raw files (scripts/stage-data.sh; make test stages them first).
  const raw = [path.join(REPO, "data"), path.join(REPO, "../shared/data/planetoid/raw")].find((d) => fs.existsSync(path.join(d, "ind.cora.graph")));
  assert.ok(raw, "Planetoid raw files for cora not found: run scripts/stage-data.sh");
  const files = (name) => Object.fromEntries(api._planetoidFiles(name).map((f) => [f, new Uint8Array(fs.readFileSync(path.join(raw, f)))]));
  const exports = await python.run(p.python, { ...context(p), epochs: 1 }, files);
  assert.deepEqual(exports.revgnn, { layers: 7, hidden: 160, groups: 2, dropout: 0.5, lr: 0.003, parts: 10, seed: 0 });
  const plan = planOf(exports.default);
  assert.equal(plan.valid, true);
  const text = exports.default.model.tracedModel.text;
  assert.match(text, /convs\.0\.convs\.1\.conv/, "GroupAddRev's second group, a copy of the Python GNNBlock, traced under its own path");
  assert.match(text, new RegExp(`sage_conv|spmm|matmul.*model\\.py:${p.python.split("\n").findIndex((l) => l.includes("return self.conv(x, adj)")) + 1}`));
  const { parts, step, evaluate } = exports.default.train;
  const losses = [];
  for (const part of parts) {
    const l = step(part);
    if (l !== null && l !== undefined) losses.push(l);
  }
  assert.ok(losses.length >= 5 && losses.every(Number.isFinite), JSON.stringify(losses));
  const acc = evaluate();
  for (const k of ["train", "val", "test"]) assert.ok(acc[k] >= 0 && acc[k] <= 1, JSON.stringify(acc));
});

test("preset revgnn in Python with 2 replicas: each call takes a part per replica, an epoch trains", async () => {
  const p = PRESETS.find((x) => x.id === "revgnn");
  const raw = [path.join(REPO, "data"), path.join(REPO, "../shared/data/planetoid/raw")].find((d) => fs.existsSync(path.join(d, "ind.cora.graph")));
  assert.ok(raw, "Planetoid raw files for cora not found: run scripts/stage-data.sh");
  const files = (name) => Object.fromEntries(api._planetoidFiles(name).map((f) => [f, new Uint8Array(fs.readFileSync(path.join(raw, f)))]));
  const replicated = { ...p, options: { replicationFactor: 2 } };
  const exports = await python.run(p.python, { ...context(replicated), epochs: 1 }, files);
  const { model } = exports.default;
  assert.equal(model.combinedBatchFactor, 2);
  const { parts, step } = exports.default.train;
  // 10 parts per epoch in calls of 2: 5 calls, each a part per replica (a group is used as the
  // Training view uses it, before the next is drawn).
  const sizes = [];
  const losses = [];
  for (const group of parts) {
    sizes.push(group.length);
    const l = step(group);
    if (l !== null && l !== undefined) losses.push(l);
  }
  assert.deepEqual(sizes, [2, 2, 2, 2, 2]);
  assert.ok(losses.length >= 3 && losses.every(Number.isFinite), JSON.stringify(losses));
});
