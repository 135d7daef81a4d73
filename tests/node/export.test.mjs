// The PopTorch export (`exportPoptorch(model)`) of the page's presets, parsed by python3's
// `ast` (PopTorch itself cannot be installed here) and compared with what the wrapper planned:
// the Blocks (ids and IPUs) with the trace's, the options the file sets with the wrapper's
// options, the execution strategy's stages and phases with the options' strategy, the
// optimizer class and the wrapper. Numerical equivalence of the PyTorch export is
// `make check-export`'s (real PyTorch); here the PyTorch export must parse too, and a bad
// call is an error of kind "export" or "arg".
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";
import { runPreset, combinedBatch } from "./preset-runner.mjs";
import { PRESETS } from "../../www/presets/index.js";

const CONSUMER = path.join(REPO, "tests", "consumer");
const req = createRequire(path.join(CONSUMER, "package.json"));
const PKG = req.resolve("ipu-playground");
const api = req(PKG);

// The structure of a PopTorch export, as JSON: Blocks, `opts.*` calls, the optimizer and the
// wrapper, every argument a literal or a call tree.
const PARSE = String.raw`
import ast, json, sys

def dotted(n):
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute):
        base = dotted(n.value)
        return None if base is None else base + "." + n.attr
    return None

def val(n):
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, (ast.Tuple, ast.List)):
        return [val(e) for e in n.elts]
    if isinstance(n, ast.Dict):
        return {str(val(k)): val(v) for k, v in zip(n.keys, n.values)}
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant):
        return -n.operand.value
    if isinstance(n, ast.Lambda):
        return {"lambda": val(n.body)}
    if isinstance(n, ast.Call):
        out = {"args": [val(a) for a in n.args], "kwargs": {k.arg: val(k.value) for k in n.keywords}}
        f = n.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call):
            out["call"], out["on"] = f.attr, val(f.value)
        else:
            out["call"] = dotted(f)
        return out
    return dotted(n) or ast.unparse(n)

tree = ast.parse(open(sys.argv[1]).read())
found = {"blocks": [], "options": [], "optimizer": None, "wrapper": None}
for node in ast.walk(tree):
    if isinstance(node, ast.With):
        for item in node.items:
            c = val(item.context_expr)
            if isinstance(c, dict) and c.get("call") == "poptorch.Block":
                found["blocks"].append([c["args"][0], c["kwargs"].get("ipu_id")])
    if isinstance(node, ast.Call):
        c = val(node)
        name = c.get("call") or ""
        if name == "poptorch.Block.start":
            found["blocks"].append([c["args"][0], c["kwargs"].get("ipu_id")])
        elif name.startswith("opts."):
            found["options"].append(c)
        elif name.startswith("poptorch.optim."):
            found["optimizer"] = name.split(".")[-1]
        elif name in ("poptorch.trainingModel", "poptorch.inferenceModel"):
            found["wrapper"] = name.split(".")[-1]
print(json.dumps(found))
`;

function parsePython(code) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "export-test-"));
  try {
    const file = path.join(dir, "model.py");
    fs.writeFileSync(file, code);
    return JSON.parse(execFileSync("python3", ["-c", PARSE, file], { encoding: "utf8" }));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The setter calls of `opts` in the file, by method path (`Training.gradientAccumulation`). */
const optionCalls = (found) => new Map(found.options.map((c) => [c.call.slice("opts.".length), c.args]));

/** The block ids of a parsed strategy's stages (`Stage(...)`, `Stage(...).ipu(n)`). */
function stageOf(c) {
  const stage = c.call === "ipu" ? c.on : c;
  return { blocks: stage.args, ipu: c.call === "ipu" ? c.args[0] : null };
}
function phasesOf(strategy) {
  let s = strategy;
  while (s.call === "_with") s = s.args[0];
  return { name: s.call, items: s.args };
}

const STRATEGY_CLASS = {
  pipelined: "poptorch.PipelinedExecution",
  sharded: "poptorch.ShardedExecution",
  serialPhased: "poptorch.SerialPhasedExecution",
  parallelPhased: "poptorch.ParallelPhasedExecution",
};

for (const preset of PRESETS.filter((p) => p.id !== "revgnn")) {
  test(`exportPoptorch(${preset.id}): the Blocks, options, strategy, optimizer and wrapper of the plan`, async () => {
    const { model, inputs } = await runPreset(api, PKG, preset);
    model.plan(...combinedBatch(inputs, model.combinedBatchFactor), { throwOnInvalid: false });
    const code = api.exportPoptorch(model, { name: preset.id });
    assert.match(code, new RegExp(`${preset.id}\\.safetensors`));
    const found = parsePython(code);

    // Blocks: every (id, IPU) of a traced op, and no other.
    const traced = new Set();
    for (const n of model.tracedModel.graph.nodes) {
      const m = n.meta;
      if (n.op !== "placeholder" && m.block != null && (m.block_kind === "scoped" || m.block_kind === "begin")) traced.add(JSON.stringify([m.block, m.ipu ?? null]));
    }
    assert.deepEqual(new Set(found.blocks.map((b) => JSON.stringify(b))), traced);

    // Options: the wrapper's, each one that differs from PopTorch's default, by its setter.
    const o = model.options;
    const calls = optionCalls(found);
    const expectCall = (key, value, dflt) => {
      if (value === dflt) assert.equal(calls.has(key), false, `${key} is the default, not set`);
      else assert.deepEqual(calls.get(key), [value], key);
    };
    expectCall("deviceIterations", o.deviceIterations, 1);
    expectCall("replicationFactor", o.replicationFactor, 1);
    expectCall("Training.gradientAccumulation", o.Training.gradientAccumulation, 1);
    expectCall("autoRoundNumIPUs", o.autoRoundNumIPUs, false);
    expectCall("Precision.enableStochasticRounding", o.Precision.enableStochasticRounding, false);
    if (o.Precision.partialsType === "half") assert.deepEqual(calls.get("Precision.setPartialsType"), ["torch.half"]);
    // PopART's recomputation, as PopTorch passes it: opts._Popart.set("autoRecomputation",
    // int(popart.RecomputationType.X)), None 0, Pipeline 3 (the default), RecomputeAll 4.
    const RECOMPUTATION = { none: 0, pipeline: 3, recomputeAll: 4 };
    if (o.autoRecomputation === "pipeline") assert.equal(calls.has("_Popart.set"), false, "autoRecomputation is the default, not set");
    else assert.deepEqual(calls.get("_Popart.set"), ["autoRecomputation", RECOMPUTATION[o.autoRecomputation]], "autoRecomputation");
    for (const [ipu, p] of Object.entries(o.availableMemoryProportion ?? {})) {
      assert.equal(calls.get("setAvailableMemoryProportion")[0][ipu], p, `available memory of ${ipu}`);
    }
    for (const [cls, setter] of [["activation", "Activation"], ["weight", "Weight"], ["optimizer", "Optimizer"], ["accumulator", "Accumulator"]]) {
      const loc = o.TensorLocations[cls];
      const call = calls.get(`TensorLocations.set${setter}Location`);
      if (loc == null) {
        assert.equal(call, undefined, `${cls} location`);
        continue;
      }
      // poptorch.TensorLocationSettings() and its builder calls, each a field of the JSON.
      const set = {};
      let c = call[0];
      for (; c.on; c = c.on) set[c.call] = c.args[0];
      assert.equal(c.call, "poptorch.TensorLocationSettings");
      const want = Object.fromEntries(
        Object.entries(loc).filter(([k, v]) => v !== null && v !== false && v !== 0).map(([k, v]) => [k, v]),
      );
      if (loc.useOnChipStorage === false) want.useOnChipStorage = false;
      assert.deepEqual(set, want, `${cls} location`);
    }

    // The strategy with its stages or phases.
    const s = o.executionStrategy;
    const set = calls.get("setExecutionStrategy");
    if (s.type === "pipelined" && !s.stages && !s.autoStage) assert.equal(set, undefined);
    else {
      const { name, items } = phasesOf(set[0]);
      assert.equal(name, STRATEGY_CLASS[s.type]);
      if (s.phases) {
        assert.equal(items.length, s.phases.length);
        s.phases.forEach((ph, i) => {
          const stages = items[i].call === "ipus" ? items[i].on.args : items[i].args;
          assert.deepEqual(stages.map((st) => stageOf(st).blocks), ph.stages.map((st) => st.blocks), `phase ${i}`);
          assert.deepEqual(stages.map((st) => stageOf(st).ipu), ph.stages.map((st) => st.ipu ?? null), `phase ${i} IPUs`);
        });
      } else if (s.stages) {
        assert.deepEqual(items.map((st) => stageOf(st).blocks), s.stages.map((st) => st.blocks));
      }
    }

    // Optimizer and wrapper.
    if (model.training) {
      assert.equal(found.wrapper, "trainingModel");
      assert.equal(found.optimizer, model.optimizerType);
    } else {
      assert.equal(found.wrapper, "inferenceModel");
      assert.equal(found.optimizer, null);
    }
    // The PyTorch form parses too, and has no PopTorch in it.
    const torchCode = api.exportPytorch(model);
    assert.doesNotMatch(torchCode, /poptorch/);
    parsePython(torchCode);
    model.destroy();
  });
}

test("export errors: an untraced model, a bad target, a bad name", () => {
  const net = new api.nn.Linear(3, 2);
  const model = api.poptorch.inferenceModel(net);
  assert.throws(() => model.toPython(), (err) => err.kind === "export" && /not been traced/.test(err.message));
  model.call({ shape: [1, 3], data: new Float32Array(3) });
  assert.match(model.toPython({ target: "pytorch" }), /F\.linear\(input0, self\.weight, self\.bias\)/);
  assert.throws(() => model.toPython({ target: "tensorflow" }), (err) => err.kind === "export" && /unknown export target/.test(err.message));
  assert.throws(() => model.toPython({ name: "../x" }), (err) => err.kind === "arg" && /file name stem/.test(err.message));
  assert.throws(() => model.toPython({ format: "py" }), /unknown setting 'format'/);
  assert.throws(() => api.exportPytorch({}));
});
