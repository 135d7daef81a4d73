// poptorch.Options, the execution strategies and the enums from the npm package, imported by
// name: PopTorch's builder methods, the core's checks (one home: compile::Options), the
// Options JSON the page uses, and freezing by a model wrapper.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";

const api = createRequire(path.join(REPO, "tests", "consumer", "package.json"))("ipu-playground");
const { poptorch, nn } = api;

describe("poptorch.Options", () => {
  test("builder methods set what toJSON reports, and Training / TensorLocations change the same options", () => {
    const opts = new poptorch.Options().deviceIterations(2).replicationFactor(4);
    opts.Training.gradientAccumulation(8).accumulationAndReplicationReductionType(poptorch.ReductionType.Sum);
    opts.Training.setMeanAccumulationAndReplicationReductionStrategy(poptorch.MeanReductionStrategy.Running);
    opts.inputReplicaGrouping(2, poptorch.CommGroupType.Orthogonal).broadcastBuffers(false).autoRoundNumIPUs(true);
    opts.outputMode(poptorch.OutputMode.EveryN, 2).randomSeed(42).ipuGeneration("bow");
    opts.setAvailableMemoryProportion({ IPU0: 0.5, IPU1: 0.3 });
    opts.TensorLocations.setWeightLocation(new poptorch.TensorLocationSettings().useOnChipStorage(false).minElementsForOffChip(128));
    opts.TensorLocations.numIOTiles(32);
    const j = opts.toJSON();
    assert.equal(j.deviceIterations, 2);
    assert.equal(j.replicationFactor, 4);
    assert.deepEqual(j.inputReplicaGrouping, { size: 2, type: "orthogonal" });
    assert.equal(j.broadcastBuffers, false);
    assert.equal(j.autoRoundNumIPUs, true);
    assert.equal(j.outputMode, "everyN");
    assert.equal(j.outputReturnPeriod, 2);
    assert.equal(j.randomSeed, 42);
    assert.equal(j.ipuGeneration, "bow");
    assert.deepEqual(j.availableMemoryProportion, { IPU0: 0.5, IPU1: 0.3 });
    assert.deepEqual(j.Training, {
      gradientAccumulation: 8,
      accumulationAndReplicationReductionType: "sum",
      meanAccumulationAndReplicationReductionStrategy: "running",
      automaticLossScaling: false,
    });
    assert.equal(j.TensorLocations.weight.useOnChipStorage, false);
    assert.equal(j.TensorLocations.weight.minElementsForOffChip, 128);
    assert.equal(j.TensorLocations.numIOTiles, 32);
    // The JSON parses back to the same options.
    assert.deepEqual(poptorch.Options.fromJSON(j).toJSON(), j);
    assert.deepEqual(poptorch.Options.fromJSON(JSON.stringify(j)).toJSON(), j);
    // Defaults are PopTorch's.
    const d = new poptorch.Options().toJSON();
    assert.deepEqual([d.deviceIterations, d.replicationFactor, d.Training.gradientAccumulation, d.broadcastBuffers, d.outputMode],
      [1, 1, 1, true, "default"]);
  });

  test("bad values are the core's errors, of the JS class the argument's type or range decides", () => {
    const o = new poptorch.Options();
    assert.throws(() => o.deviceIterations(0), { name: "Error", message: /deviceIterations must be a positive whole number, got 0/ });
    assert.throws(() => o.deviceIterations(1.5), TypeError);
    assert.throws(() => o.deviceIterations("2"), TypeError);
    assert.throws(() => o.replicationFactor(-1), RangeError);
    o.replicationFactor(4);
    assert.throws(() => o.inputReplicaGrouping(2, poptorch.CommGroupType.All), /cannot be All/);
    assert.throws(() => o.inputReplicaGrouping(8), /cannot be larger than replicationFactor \(4\)/);
    assert.throws(() => o.inputReplicaGrouping(3), /must divide replicationFactor \(4\)/);
    assert.throws(() => o.inputReplicaGrouping(2, "diagonal"), { name: "Error", message: /poptorch\.CommGroupType/ });
    assert.throws(() => o.inputReplicaGrouping(2, 1), TypeError);
    assert.throws(() => o.outputMode(poptorch.OutputMode.EveryN), /EveryN needs an output return period/);
    assert.throws(() => o.setAvailableMemoryProportion({ GPU0: 0.5 }), /'GPU0' is not such a key/);
    assert.throws(() => o.setAvailableMemoryProportion({ IPU0: 1.5 }), /must be in \(0, 1\]/);
    assert.throws(() => o.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.NoReduction), /must be Mean or Sum/);
    assert.throws(() => o.TensorLocations.numIOTiles(31), /numIOTiles must be an even number from 32 to 192/);
    assert.throws(() => o.TensorLocations.setActivationLocation({ useOnChipStorage: false }), TypeError);
    assert.throws(() => o.ipuGeneration("mk9"), /"mk1", "mk2" or "bow"/);
    assert.throws(() => poptorch.Options.fromJSON({ deviceIteration: 2 }), /unknown field `deviceIteration`/);
    assert.throws(() => poptorch.Options.fromJSON({ deviceIterations: 0 }), /deviceIterations must be a positive whole number/);
    // Each error says what it is in fields, not only in its message: its kind, and a plan
    // diagnostic's code, fix and the option it is about (by its JSON key).
    assert.throws(() => o.deviceIterations(0), {
      kind: "plan", code: "options_not_positive", option: "deviceIterations", fix: "Set deviceIterations to 1 or more.",
      message: "deviceIterations must be a positive whole number, got 0. Set deviceIterations to 1 or more.",
    });
    assert.throws(() => o.Training.gradientAccumulation(0), { code: "options_not_positive", option: "Training.gradientAccumulation" });
    assert.throws(() => o.deviceIterations(1.5), { name: "TypeError", kind: "arg" });
    assert.throws(() => o.replicationFactor(-1), { name: "RangeError", kind: "arg" });
    assert.throws(() => o.inputReplicaGrouping(3), { kind: "plan", option: "inputReplicaGrouping" });
    assert.throws(() => poptorch.Options.fromJSON({ deviceIteration: 2 }), { kind: "plan", code: "options_json", option: "deviceIteration" });
    assert.throws(() => poptorch.Options.fromJSON({ replicationFactor: 2, Training: { gradientAccumulation: "4" } }), {
      code: "options_json", option: "Training.gradientAccumulation",
    });
    assert.throws(() => poptorch.Options.fromJSON({ Training: [4] }), { code: "options_json", option: "Training" });
    // Nothing of a failed call was applied.
    assert.equal(o.toJSON().deviceIterations, 1);
    assert.equal(o.toJSON().inputReplicaGrouping.size, 1);
  });

  test("options given to a model wrapper are frozen; the wrapper keeps a copy", () => {
    class Id extends nn.Module { forward(x) { return x.relu(); } }
    const opts = new poptorch.Options().deviceIterations(2);
    const model = poptorch.inferenceModel(new Id(), opts);
    assert.equal(opts.frozen, true);
    assert.throws(() => opts.deviceIterations(4), /frozen/);
    assert.throws(() => opts.Training.gradientAccumulation(2), /frozen/);
    assert.equal(model.options.deviceIterations, 2);
    const copy = opts.clone().deviceIterations(4);
    assert.equal(copy.frozen, false);
    assert.equal(copy.toJSON().deviceIterations, 4);
    assert.equal(model.options.deviceIterations, 2, "the wrapper's copy is unchanged");
  });

  test("a model wrapper takes only poptorch.Options: PopTorch's type error otherwise", () => {
    class Id extends nn.Module { forward(x) { return x.relu(); } }
    for (const [bad, type] of [[{ deviceIterations: 2 }, "Object"], [3, "number"], ["opts", "string"], [new poptorch.TensorLocationSettings(), "PoptorchTensorLocationSettings"]]) {
      assert.throws(() => poptorch.inferenceModel(new Id(), bad), {
        name: "TypeError",
        message: `Invalid type: 'options' is of type ${type} (Expected poptorch.Options)`,
      });
    }
  });
});

describe("execution strategies and enums", () => {
  test("strategies build the Options JSON of each documented form", () => {
    const o = new poptorch.Options();
    const st = (s) => o.setExecutionStrategy(s).toJSON().executionStrategy;
    assert.deepEqual(st(new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)), { type: "pipelined", autoStage: "autoIncrement", stages: null });
    assert.deepEqual(st(new poptorch.PipelinedExecution()), { type: "pipelined", autoStage: null, stages: null });
    assert.deepEqual(st(new poptorch.ShardedExecution("a", ["b", "c"], new poptorch.Stage("d").ipu(3))).stages,
      [{ blocks: ["a"], ipu: null }, { blocks: ["b", "c"], ipu: null }, { blocks: ["d"], ipu: 3 }]);
    const serial = new poptorch.SerialPhasedExecution(new poptorch.Phase("a"), new poptorch.Phase(new poptorch.Stage("b"), new poptorch.Stage("c")).ipus(0, 1))
      .setTensorsLiveness(poptorch.Liveness.OffChipAfterFwd);
    assert.deepEqual(st(serial), {
      type: "serialPhased",
      phases: [{ stages: [{ blocks: ["a"], ipu: null }], ipus: null }, { stages: [{ blocks: ["b"], ipu: null }, { blocks: ["c"], ipu: null }], ipus: [0, 1] }],
      autoStage: null,
      tensorsLiveness: "offChipAfterFwd",
      sendTensorsOffChipAfterFwd: false,
      separateBackwardPhase: false,
    });
    const parallel = new poptorch.ParallelPhasedExecution(["a"], ["b"]).sendTensorsOffChipAfterFwd(true).useSeparateBackwardPhase(true);
    const pj = st(parallel);
    assert.equal(pj.type, "parallelPhased");
    assert.equal(pj.sendTensorsOffChipAfterFwd, true);
    assert.equal(pj.separateBackwardPhase, true);
    assert.ok(new poptorch.Stage("x") instanceof poptorch.Stage);
  });

  test("wrong strategy arguments are TypeErrors naming the argument", () => {
    assert.throws(() => new poptorch.Stage("a", 3), { name: "TypeError", message: /block ids must be strings/ });
    assert.throws(() => new poptorch.PipelinedExecution({ blocks: ["a"] }), { name: "TypeError", message: /stage 0 must be a block id/ });
    assert.throws(() => new poptorch.Phase(new poptorch.Stage("a"), 7), TypeError);
    assert.throws(() => new poptorch.Options().setExecutionStrategy({ type: "pipelined" }), { name: "TypeError", message: /execution strategy/ });
    assert.throws(() => new poptorch.Stage("a").ipu(-1), RangeError);
  });

  test("enums are frozen, and their values are the Options JSON's", () => {
    assert.deepEqual(poptorch.OutputMode, { Final: "final", EveryN: "everyN", All: "all", Sum: "sum", Default: "default" });
    assert.deepEqual(poptorch.CommGroupType, { All: "all", Consecutive: "consecutive", Orthogonal: "orthogonal", NoGrouping: "noGrouping" });
    assert.deepEqual(poptorch.VariableRetrievalMode, { OnePerGroup: "onePerGroup", AllReplicas: "allReplicas" });
    assert.deepEqual(Object.keys(poptorch.Liveness), ["AlwaysLive", "OffChipAfterFwd", "OffChipAfterFwdNoOverlap", "OffChipAfterEachPhase"]);
    assert.deepEqual(poptorch.AutoStage, { SameAsIpu: "sameAsIpu", AutoIncrement: "autoIncrement" });
    assert.deepEqual(Object.keys(poptorch.ReductionType), ["Sum", "Mean", "NoReduction"]);
    assert.deepEqual(Object.keys(poptorch.MeanReductionStrategy), ["Running", "Post", "PostAndLoss"]);
    for (const k of ["OutputMode", "ReductionType", "MeanReductionStrategy", "CommGroupType", "VariableRetrievalMode", "Liveness", "AutoStage", "optim"]) {
      assert.ok(Object.isFrozen(poptorch[k]), k);
    }
    assert.ok(Object.isFrozen(poptorch));
    // A member name is accepted where its value is.
    assert.equal(new poptorch.Options().outputMode("All").toJSON().outputMode, "all");
  });
});
