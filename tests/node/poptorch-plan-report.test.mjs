// model.plan(...inputs, { throwOnInvalid: false }): the wrapper's own plan even when PopTorch
// would refuse the configuration (the page draws it), with PopTorch's reasons as structured
// errors, counting what the wrapper compiles: its optimizer's state per parameter group.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { models, poptorch, f32, uniform, classifierData } from "./poptorch-helpers.mjs";

const { ThreeIpus, Classifier, seeded } = models;
const x = f32([2, 3], uniform(6, 5));
const sharded = () => new poptorch.Options().setExecutionStrategy(new poptorch.ShardedExecution());
/** Optimizer state bytes over every IPU of a plan. */
const optimizerBytes = (plan) => plan.memory.ipus.reduce((s, i) => s + i.alwaysLive.optimizer, 0);
/** ThreeIpus' parameters: fc1 and fc2 3×3 + 3, fc3 3 + 1. */
const ELEMENTS = 12 + 12 + 4;

describe("model.plan with throwOnInvalid: false", () => {
  test("an IPU count that is not a power of two: valid false, PopTorch's error with its code and option", () => {
    const net = new ThreeIpus();
    const model = poptorch.trainingModel(net, sharded(), new poptorch.optim.LAMB(net.parameters(), { lr: 0.01 }));
    // The default still throws PopTorch's error, as compiling would …
    assert.throws(() => model.plan(x), { code: "ipu_count_not_power_of_two", option: "autoRoundNumIPUs" });
    // … and the report is the plan anyway.
    const plan = model.plan(x, { throwOnInvalid: false });
    assert.equal(plan.valid, false);
    assert.equal(plan.training, true);
    const e = plan.errors.find((d) => d.code === "ipu_count_not_power_of_two");
    assert.ok(e, JSON.stringify(plan.errors));
    assert.equal(e.option, "autoRoundNumIPUs");
    assert.match(e.message, /The model uses 3 IPUs, but PopTorch must reserve at least 4/);
    assert.match(e.fix, /autoRoundNumIPUs\(True\)/);
    assert.equal(model.isCompiled(), false, "a report does not compile");
    // The model was traced for it: the page draws this trace.
    const traced = model.tracedModel;
    assert.deepEqual(traced.parameters.map(([n]) => n).sort(), ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"]);
    assert.equal(traced.graph.nodes.length > 0, true);
    assert.equal(model.optimizerType, "LAMB");
  });

  test("the optimizer state counted is what the wrapper compiles: LAMB, RMSprop, SGD per parameter group", () => {
    const cases = [
      // LAMB: two moments per weight (float32).
      ["LAMB", (p) => new poptorch.optim.LAMB(p, { lr: 0.01 }), 8 * ELEMENTS],
      // RMSprop centred with momentum: the square average, the gradient average, the momentum buffer.
      ["RMSprop", (p) => new poptorch.optim.RMSprop(p, { lr: 0.01, momentum: 0.9, centered: true }), 12 * ELEMENTS],
      // RMSprop alone: the square average.
      ["RMSprop", (p) => new poptorch.optim.RMSprop(p, { lr: 0.01 }), 4 * ELEMENTS],
    ];
    for (const [cls, make, bytes] of cases) {
      const refused = new ThreeIpus();
      const invalid = poptorch.trainingModel(refused, sharded(), make(refused.parameters())).plan(x, { throwOnInvalid: false });
      assert.equal(invalid.valid, false);
      assert.equal(optimizerBytes(invalid), bytes, `${cls}: the refused configuration's plan`);
      // The same model where PopTorch accepts it (rounded to 4 IPUs), which compiles and runs.
      const net = new ThreeIpus();
      const model = poptorch.trainingModel(net, sharded().autoRoundNumIPUs(true), make(net.parameters()));
      const valid = model.plan(x, { throwOnInvalid: false });
      assert.equal(valid.valid, true, JSON.stringify(valid.errors));
      assert.equal(optimizerBytes(valid), bytes, `${cls}: the valid plan`);
      model.compile(x);
      assert.equal(optimizerBytes(model.plan(x)), bytes, `${cls}: the compiled plan`);
    }
    // Per parameter group: momentum (one velocity per weight) on fc1 only.
    const net = new ThreeIpus();
    const sgd = new poptorch.optim.SGD([{ params: net.fc1.parameters(), momentum: 0.9 }, { params: [...net.fc2.parameters(), ...net.fc3.parameters()] }], { lr: 0.1 });
    const plan = poptorch.trainingModel(net, sharded(), sgd).plan(x, { throwOnInvalid: false });
    assert.equal(plan.valid, false);
    assert.equal(optimizerBytes(plan), 4 * 12);
  });

  test("what cannot be planned still throws; a compiled model's report is its compiled plan with what it logged", () => {
    const net = seeded(Classifier);
    const model = poptorch.trainingModel(net, new poptorch.Options().deviceIterations(2));
    assert.equal(model.combinedBatchFactor, 2);
    assert.equal(model.optimizerType, "SGD", "PopTorch's default optimizer");
    assert.equal(model.tracedModel, null, "not traced before its first call or plan");
    // A batch that does not divide into micro-batches is PopTorch's error, not a plan.
    assert.throws(() => model.plan(f32([3, 3], uniform(9, 1)), { shape: [3], dtype: "int32" }, { throwOnInvalid: false }), { kind: "poptorch" });
    const batch = classifierData(4);
    model.compile(...batch);
    model.compile(...batch);
    const plan = model.plan(...batch, { throwOnInvalid: false });
    assert.equal(plan.valid, true);
    const logged = plan.warnings.filter((w) => w.code === "compile_ignored");
    assert.equal(logged.length, 1);
    assert.ok(model.warnings.includes(logged[0].message), "model.warnings still says it");
    assert.equal(model.plan(...batch).warnings.some((w) => w.code === "compile_ignored"), false, "the compiled plan itself is unchanged");
    assert.throws(() => model.plan(...batch, { throwOnInvalid: false, other: 1 }), /plan: settings has no key the string "other"/);
  });
});
