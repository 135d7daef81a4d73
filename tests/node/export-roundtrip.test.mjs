// The round trip of issue #17: a model out as PopTorch Python (`exportPoptorch`, with its
// weights from `model.safetensors()`) and back in through the page's Python (www/python on
// Pyodide, as the worker runs it) is the same model. For every preset of the page and for
// random models of the fuzz layer's generator (tests/node/random-model.mjs), the exported
// file is imported in Pyodide as a module beside its weights file, as a user would import
// it (`wrap(load_model())`: the file's own options, strategy, optimizer and wrapper, its
// weights loaded strictly by `safetensors.torch.load_file`), planned with the original's
// inputs, and compared with the original field by field:
//
//   - the traced graph: every node's op, attributes, inputs and outputs in the same order,
//     its Block, IPU, Block kind, pass, checkpoint and available-memory marks; every value's
//     shape and dtype; the outputs (not the module scopes nor the call sites: the exported
//     forward is one flat function, as torch.fx's GraphModule is, so a functional op's scope
//     is the root and its site the exported file's line);
//   - the parameters (names and traced shapes) and the wrapper's options, optimizer type,
//     combined batch factor;
//   - the plan (the wrapper's plan JSON, call sites left out);
//   - one step of the engine on the same random micro-batch (`referenceStep`): the outputs,
//     the loss, the dropout masks and every parameter's gradient, bit for bit.
//
// BERT-Large, BERT-Base and ResNet-50 are run at the reduced sizes scripts/check-export.mjs
// uses (`presetCases` of preset-runner.mjs, the one list of both): at full size the exported
// file's `Model()` makes every parameter's initial values in Python before the weights
// replace them (hundreds of millions of numbers in Pyodide), which is no test's business.
// RevGNN runs on the staged Cora files.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { REPO, rng } from "./helpers.mjs";
import { loadTestPython } from "./python-runner.mjs";
import { runPreset, combinedBatch, planetoidFiles, presetCases } from "./preset-runner.mjs";
import { forEachRandomModel, microBatch } from "./random-model.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const req = createRequire(path.join(CONSUMER, "package.json"));
const PKG = req.resolve("ipu-playground");
const api = req(PKG);
const { poptorch, nn } = api;

/** How many random models, from which seed (ROUNDTRIP_MODELS, ROUNDTRIP_SEED to change). */
const MODELS = Number(process.env.ROUNDTRIP_MODELS ?? 12);
const SEED = Number(process.env.ROUNDTRIP_SEED ?? 1);

let python;
before(async () => {
  python = await loadTestPython(api);
});

// ---------------------------------------------------------------- comparing

/** Differences between `a` (the original) and `b` (the round trip), as `path: a ≠ b` lines. */
function differences(a, b, at = "", out = []) {
  if (out.length >= 12) return out;
  if (Object.is(a, b)) return out;
  const isObj = (x) => x !== null && typeof x === "object";
  if (isObj(a) && isObj(b) && Array.isArray(a) === Array.isArray(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) differences(a[k], b[k], at ? `${at}.${k}` : k, out);
    return out;
  }
  out.push(`${at || "(value)"}: ${JSON.stringify(a)} in the original, ${JSON.stringify(b)} after the round trip`);
  return out;
}

function same(a, b, what) {
  const d = differences(a, b);
  if (d.length) assert.fail(`${what} differs:\n  ${d.join("\n  ")}`);
}

/** A node as compared: everything but its module scope and call site (inside a region, a
 * GroupAddRev's, every node keeps its scope, which the exported block module has too, and
 * loses its call site only). */
function nodeKey(n) {
  const { meta, ...rest } = n;
  const { scope, source, ...kept } = meta;
  return { ...JSON.parse(JSON.stringify(rest, (k, v) => (k === "source" ? undefined : v))), meta: kept };
}

/** The graphs must be the same, node by node (the first differing node shown whole). */
function sameGraph(a, b) {
  const na = a.nodes.map(nodeKey);
  const nb = b.nodes.map(nodeKey);
  const n = Math.min(na.length, nb.length);
  for (let i = 0; i < n; i++) {
    const d = differences(na[i], nb[i]);
    if (d.length) {
      assert.fail(
        `graph node ${i} differs:\n  ${d.join("\n  ")}\n  original:   ${JSON.stringify(na[i])}\n  round trip: ${JSON.stringify(nb[i])}` +
          `\n  (original ops around it: ${na.slice(Math.max(0, i - 2), i + 3).map((x) => x.op).join(", ")}; round trip: ${nb.slice(Math.max(0, i - 2), i + 3).map((x) => x.op).join(", ")})`,
      );
    }
  }
  if (na.length !== nb.length) {
    const extra = (na.length > nb.length ? na : nb).slice(n, n + 5).map((x) => JSON.stringify(x));
    assert.fail(`the original has ${na.length} nodes and the round trip ${nb.length}; the first extra ones:\n  ${extra.join("\n  ")}`);
  }
  same(a.values.map(({ shape, dtype, node }) => ({ shape, dtype, node })), b.values.map(({ shape, dtype, node }) => ({ shape, dtype, node })), "the graph's values");
  same(a.outputs, b.outputs, "the graph's outputs");
}

/**
 * A plan as JSON without what the flat exported forward cannot keep: every `file:line` (the
 * exported file's lines), and the module scopes (`program.scope`, `program.scopes`, and the
 * scope and pass after an op's name, `%12 = add inner`, `%503 = index_add embeddings.position_embeddings (backward)`): a functional op of the export runs at the root.
 */
const digest = (plan) =>
  JSON.parse(
    JSON.stringify(plan, (k, v) => {
      if (k === "scope" || k === "scopes") return undefined;
      if (typeof v !== "string") return v;
      return v.replace(/[\w.-]+\.(py|mjs|js):\d+/g, "<site>").replace(/^(%\d+ = [\w.]+) .*$/, "$1");
    }),
  );

/** Host tensors must be equal bit for bit (float values compared as numbers, NaN equal to NaN). */
function sameValues(a, b, what) {
  assert.deepEqual(b.shape, a.shape, `${what}: shape`);
  assert.equal(b.dtype, a.dtype, `${what}: dtype`);
  let worst = -1;
  for (let i = 0; i < a.data.length; i++) {
    if (!Object.is(a.data[i], b.data[i]) && !(Number.isNaN(a.data[i]) && Number.isNaN(b.data[i]))) {
      if (worst < 0 || Math.abs(a.data[i] - b.data[i]) > Math.abs(a.data[worst] - b.data[worst])) worst = i;
    }
  }
  if (worst >= 0) assert.fail(`${what}: element ${worst} is ${a.data[worst]} in the original, ${b.data[worst]} after the round trip`);
}

// ---------------------------------------------------------------- inputs

// ---------------------------------------------------------------- the round trip

let runs = 0;

/**
 * The PopTorch export of `model` (wrapped, planned on `call`) imported back by the page's
 * Python: the wrapped model its `wrap(load_model())` makes, planned on `call` too.
 */
async function roundTrip(model, call) {
  const code = api.exportPoptorch(model, { name: "model" });
  const weights = model.safetensors();
  const n = ++runs;
  const dir = `/home/pyodide/roundtrip/${n}`;
  const pyfs = python.pyodide.FS;
  pyfs.mkdirTree(dir);
  pyfs.writeFile(`${dir}/exported_${n}.py`, code);
  pyfs.writeFile(`${dir}/model.safetensors`, weights);
  const user = [
    "import sys",
    `sys.path.insert(0, ${JSON.stringify(dir)})`,
    `import exported_${n} as exported`,
    "sys.path.pop(0)",
    "model = exported.wrap(exported.load_model())",
    "inputs = []",
  ].join("\n");
  let exports;
  try {
    exports = await python.run(user, { options: new poptorch.Options(), ipus: 4, half: false, dataset: "Cora" });
  } catch (e) {
    const where = e.line ? ` (line ${e.line} of the importing file)` : "";
    assert.fail(`the exported file does not run in the page's Python${where}: ${e.message ?? JSON.stringify(e)}\n${e.traceback ?? ""}`);
  } finally {
    pyfs.unlink(`${dir}/model.safetensors`);
  }
  const back = exports.default.model;
  const plan = back.plan(...call, { throwOnInvalid: false });
  return { back, plan, code };
}

/** `model` (wrapped, traced by `model.plan(...call)` → `plan`) against its round trip;
 * `micro`: a micro-batch with data for one step of each (none: the step is not compared). */
async function check(model, call, plan, micro) {
  const graph = structuredClone(model.tracedModel.graph);
  const params = model.tracedModel.parameters;
  const { back, plan: backPlan } = await roundTrip(model, call);
  try {
    sameGraph(graph, back.tracedModel.graph);
    same(params, back.tracedModel.parameters, "the parameters (name, traced shape)");
    same(model.options, back.options, "the wrapper's options");
    assert.equal(back.training, model.training, "training or inference wrapper");
    assert.equal(back.optimizerType, model.optimizerType, "the optimizer");
    assert.equal(back.combinedBatchFactor, model.combinedBatchFactor, "the combined batch factor");
    same(digest(plan), digest(backPlan), "the plan");
    if (micro) {
      const a = model.referenceStep(...micro);
      const b = back.referenceStep(...micro);
      assert.equal(b.outputs.length, a.outputs.length, "the number of outputs");
      a.outputs.forEach((t, i) => sameValues(t, b.outputs[i], `output ${i}`));
      assert.equal(b.lossOutput, a.lossOutput, "which output is the loss");
      assert.equal(b.masks.length, a.masks.length, "the dropout masks drawn");
      a.masks.forEach((t, i) => sameValues(t, b.masks[i], `dropout mask ${i}`));
      same(a.gradients.map(([n]) => n), b.gradients.map(([n]) => n), "the parameters with a gradient");
      a.gradients.forEach(([name, t], i) => sameValues(t, b.gradients[i][1], `the gradient of ${name}`));
    }
  } finally {
    back.destroy();
  }
}

// ---------------------------------------------------------------- presets

// The staged raw files (scripts/stage-data.sh; make test stages them first).
const CORA = fs.existsSync(path.join(REPO, "data")) ? planetoidFiles(path.join(REPO, "data"), "cora") : {};

const rand = rng(SEED);
for (const c of presetCases()) {
  test(`round trip of preset ${c.id}: the PopTorch export traced back by the page's Python is the same graph, plan and step`, async () => {
    const { model, inputs } = await runPreset(api, PKG, c.preset, { code: c.code, dataUrl: CORA });
    try {
      const call = combinedBatch(inputs, model.combinedBatchFactor);
      const plan = model.plan(...call, { throwOnInvalid: false });
      await check(model, call, plan, microBatch(inputs, model.tracedModel.graph, rand));
    } finally {
      model.destroy();
    }
  });
}

// ---------------------------------------------------------------- BeginBlock on modules

test("round trip of poptorch.BeginBlock(module) on submodules, sharded: written as BeginBlock again, the same graph (each op's block_module), plan and step", async () => {
  class Net extends nn.Module {
    constructor() {
      super();
      this.l1 = new nn.Linear(8, 8);
      this.l2 = poptorch.BeginBlock(new nn.Linear(8, 8), "second", 1);
      this.norm = poptorch.BeginBlock(new nn.LayerNorm(8), "third", 2);
    }
    forward(x, y) {
      const h = this.norm.forward(this.l2.forward(this.l1.forward(x).relu()).relu());
      return [h, h.crossEntropy(y)];
    }
  }
  const options = new poptorch.Options();
  options.setExecutionStrategy(new poptorch.ShardedExecution());
  const net = new Net();
  // PopTorch's errors (§A.2).
  assert.throws(() => poptorch.BeginBlock(net.l2, "again"), /BeginBlock: module has already been assigned to a block\./);
  assert.throws(() => poptorch.BeginBlock(3, "x"), /BeginBlock: module is not an instance of torch\.nn\.Module or function\./);
  const model = poptorch.trainingModel(net, options, new poptorch.optim.SGD(net.parameters(), { lr: 0.01 }));
  try {
    const call = [{ name: "x", shape: [4, 8], dtype: "float32" }, { name: "y", shape: [4], dtype: "int32" }];
    const plan = model.plan(...call, { throwOnInvalid: false });
    const nodes = model.tracedModel.graph.nodes.filter((n) => n.op !== "placeholder");
    assert.deepEqual([...new Set(nodes.map((n) => `${n.meta.block}@${n.meta.ipu}:${n.meta.block_module}`))], ["null@null:undefined", "second@1:l2", "third@2:norm"]);
    const code = api.exportPoptorch(model, { name: "model" });
    assert.match(code, /^ {8}poptorch\.BeginBlock\(self\.l2, "second", ipu_id=1\)$/m);
    assert.match(code, /^ {8}poptorch\.BeginBlock\(self\.norm, "third", ipu_id=2\)$/m);
    assert.doesNotMatch(code, /Block\.start/);
    await check(model, call, plan, microBatch(call, model.tracedModel.graph, rng(5)));
  } finally {
    model.destroy();
  }
});

// ---------------------------------------------------------------- random models

test(`round trip of ${MODELS} random models (seed ${SEED}): each the same graph, plan and step`, async (t) => {
  const made = await forEachRandomModel(api, { seed: SEED, count: MODELS, rand: rng(SEED * 7919) }, async ({ i, model, specs, plan, graph }) => {
    // One the engine cannot run is skipped (it throws here, before its subtest).
    model.referenceStep(...microBatch(specs, graph, rng(i)));
    await t.test(`random model ${i}`, () => check(model, specs, plan, microBatch(specs, graph, rng(i))));
  });
  assert.equal(made, MODELS, `only ${made} of ${MODELS} random models traced and ran`);
});
