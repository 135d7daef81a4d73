// poptorch.trainingModel / inferenceModel over JS modules, from the npm package imported by
// name: training end to end, the weights' way back to the module, PopTorch's errors,
// optimizers and setOptimizer, and equivalence with one big batch.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import {
  api, models, nn, poptorch, f32, i32, rows, classifierData, values, assertClose, twin, uniform,
} from "./poptorch-helpers.mjs";

const { Classifier, NoLoss, TwoLosses, Throws, ReassignsBuffer, ReplacesLayer, DeletesLayer, ReregistersParameter, ThreeIpus, CounterModel, seeded } = models;

const options = (d, r, a) => {
  const o = new poptorch.Options().deviceIterations(d).replicationFactor(r);
  o.Training.gradientAccumulation(a);
  return o;
};

describe("trainingModel and inferenceModel", () => {
  test("the issue's example trains: options, a strategy, Adam, call and plan", () => {
    const net = seeded(Classifier);
    const opts = new poptorch.Options().deviceIterations(2).replicationFactor(2);
    opts.Training.gradientAccumulation(4);
    opts.setExecutionStrategy(new poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement));
    const model = poptorch.trainingModel(net, opts, new poptorch.optim.Adam(net.parameters(), { lr: 0.05 }));
    assert.equal(model.isCompiled(), false);
    const batch = classifierData(2 * 2 * 4 * 4);
    const plan = model.plan(...batch);
    assert.equal(plan.valid, true, JSON.stringify(plan.errors));
    assert.equal(plan.training, true);
    assert.equal(model.isCompiled(), false, "planning does not compile");
    const losses = [];
    for (let i = 0; i < 30; i++) {
      const [logits, loss] = model.call(...batch);
      assert.deepEqual(logits.shape, [8, 2], "Final: the last micro-batch of each replica");
      assert.deepEqual(loss.shape, [2]);
      assert.equal(loss.dtype, "float32");
      assert.ok(loss.data instanceof Float32Array);
      losses.push((loss.data[0] + loss.data[1]) / 2);
    }
    assert.equal(model.isCompiled(), true);
    assert.ok(losses.at(-1) < 0.7 * losses[0], `loss falls: ${losses[0]} → ${losses.at(-1)}`);
    assert.equal(model.run, model.call);
    assert.equal(model.training, true);
    assert.equal(model.model, net);
  });

  test("trained weights reach the JS module when it is next read, and a new trace uses them", () => {
    const net = seeded(Classifier);
    const untrained = values(net);
    const model = poptorch.trainingModel(net, options(1, 1, 1), new poptorch.optim.SGD(net.parameters(), { lr: 0.5 }));
    const [x, y] = classifierData(4);
    model.call(x, y);
    const trained = values(net);
    assert.notDeepEqual(trained, untrained);
    assert.deepEqual(Array.from(model.getParameter("fc1.weight").data), trained["fc1.weight"]);
    const p = net.namedParameters().find(([n]) => n === "fc2.bias")[1];
    assert.deepEqual(Array.from(p.data), trained["fc2.bias"], "Parameters are live views");
    assert.deepEqual(Array.from(p.shape), [2]);
    // An inference model of the same module runs the trained weights …
    const inf = poptorch.inferenceModel(net);
    const [out] = inf.call(x, y);
    // … as a fresh module loaded with them does, and not as the untrained one.
    const copy = twin(Classifier, net);
    assert.deepEqual(Array.from(poptorch.inferenceModel(copy).call(x, y)[0].data), Array.from(out.data));
    const fresh = seeded(Classifier);
    assert.notDeepEqual(Array.from(poptorch.inferenceModel(fresh).call(x, y)[0].data), Array.from(out.data));
    // Training again: the inference model follows (the host copy is shared).
    model.call(x, y);
    assert.notDeepEqual(Array.from(inf.call(x, y)[0].data), Array.from(out.data));
    // Tracing the module reads the trained values too.
    const t = api.trace(net, [{ name: "x", shape: [4, 3] }, { name: "y", shape: [4], dtype: "int32" }]);
    assert.deepEqual(t.parameters.map((q) => q[0]), ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    assert.deepEqual(values(net)["fc1.weight"], Array.from(model.getParameter("fc1.weight").data));
  });

  test("module state keeps its dtype and shape: values of another float dtype are cast, half() casts", () => {
    const net = seeded(Classifier);
    const sd = net.stateDict();
    const half = twin(Classifier, net).half();
    half.loadStateDict(sd);
    assert.equal(half.stateDict()["fc1.weight"].dtype, "float16", "float32 values cast to the module's float16");
    assert.throws(() => net.loadStateDict({ ...sd, "fc1.bias": f32([4], [0, 0, 0, 0]) }), /fc1\.bias' is float32\[5\]; a float32\[4\] cannot replace it/);
    assert.throws(() => net.loadStateDict({ "fc1.bias": sd["fc1.bias"] }), /Missing key\(s\) in state_dict: "fc1\.weight", "fc2\.weight", "fc2\.bias"\./);
    assert.throws(() => net.loadStateDict({ ...sd, extra: sd["fc1.bias"] }), /Unexpected key\(s\) in state_dict: "extra"\./);
    net.loadStateDict({ "fc1.bias": f32([5], [1, 2, 3, 4, 5]) }, false);
    assert.deepEqual(values(net)["fc1.bias"], [1, 2, 3, 4, 5]);
    // Cast after wrapping, before the first call: the model compiles in float16.
    const late = seeded(Classifier);
    const model = poptorch.trainingModel(late);
    late.half();
    const [x, y] = classifierData(4);
    const [logits] = model.call({ ...x, dtype: "float16" }, y);
    assert.equal(logits.dtype, "float16");
    assert.equal(late.stateDict()["fc2.weight"].dtype, "float16", "trained float16 values reach the module");
    // A float32 input into the float16 module is PyTorch's error (F.linear's operands must
    // share a dtype), raised in the forward at the Linear, not a cast.
    const mixed = twin(Classifier, net).half();
    assert.throws(() => poptorch.trainingModel(mixed).call(x, y), /'linear' in scope fc1 .*the input f32\[4,3\] and the weight f16\[5,3\] have different dtypes/);
  });

  test("without an optimizer a training model uses SGD with lr 0.01", () => {
    class Dot extends nn.Module {
      constructor() { super(); this.registerParameter("w", [1, 2, 3, 4], [1, 4]); }
      forward(x) { return poptorch.identity_loss(x.mul(this.param("w")), "sum"); }
    }
    const net = new Dot();
    const x = [0.5, -1, 2, 4];
    poptorch.trainingModel(net).call(f32([1, 4], x));
    // d(sum(x·w))/dw = x: w − 0.01·x, in float32.
    const want = [1, 2, 3, 4].map((w, i) => Math.fround(w - Math.fround(0.01 * x[i])));
    assert.deepEqual(values(net).w, want);
  });

  test("identity_loss reductions: sum and none seed 1 per element, mean 1/n", () => {
    const step = (reduction) => {
      class Dot extends nn.Module {
        constructor() { super(); this.registerParameter("w", [0, 0, 0, 0], [1, 4]); }
        forward(x) { return poptorch.identityLoss(x.mul(this.param("w")), reduction); }
      }
      const net = new Dot();
      poptorch.trainingModel(net, undefined, new poptorch.optim.SGD(net.parameters(), { lr: 1 })).call(f32([1, 4], [4, 8, 12, 16]));
      return values(net).w;
    };
    assert.deepEqual(step("sum"), [-4, -8, -12, -16]);
    assert.deepEqual(step("none"), [-4, -8, -12, -16]);
    assert.deepEqual(step("mean"), [-1, -2, -3, -4]);
    assert.throws(() => step("max"), /reduction must be "sum", "mean" or "none"/);
  });

  test("gradients with respect to inputs come after the outputs, as finite differences say", () => {
    const net = seeded(Classifier);
    const o = options(1, 2, 2).outputMode(poptorch.OutputMode.All);
    const model = poptorch.trainingModel(net, o, new poptorch.optim.SGD(net.parameters(), { lr: 0, lossScaling: 8 }));
    model.returnInputGradients(0);
    const [x, y] = classifierData(8, 3);
    const [logits, loss, dx] = model.call(x, y);
    assert.deepEqual([logits.shape, loss.shape, dx.shape], [[8, 2], [4], [8, 3]]);
    // Micro-batch k's loss is the mean over rows 2k, 2k+1: d loss_k / d x[row] by central differences.
    const ref = poptorch.inferenceModel(twin(Classifier, net), new poptorch.Options().deviceIterations(4));
    const lossesAt = (data) => ref.call({ shape: [8, 3], data }, y)[1].data;
    const eps = 1e-2;
    for (const i of [0, 4, 11, 23]) {
      const up = Float32Array.from(x.data);
      const down = Float32Array.from(x.data);
      up[i] += eps;
      down[i] -= eps;
      const k = Math.floor(i / 3 / 2);
      const fd = (lossesAt(up)[k] - lossesAt(down)[k]) / (2 * eps);
      assert.ok(Math.abs(dx.data[i] - fd) < 2e-3, `d loss / d x[${i}]: ${dx.data[i]} vs ${fd} (unscaled by the loss scaling)`);
    }
    const inf = poptorch.inferenceModel(seeded(Classifier));
    assert.throws(() => inf.returnInputGradients(0), /inferenceModel has no backward pass/);
  });
});

describe("PopTorch's errors", () => {
  test("wrapping a module for training twice, until destroy()", () => {
    const net = seeded(Classifier);
    const a = poptorch.trainingModel(net);
    assert.throws(() => poptorch.trainingModel(net), {
      message: "Model has already been wrapped in 'poptorch.trainingModel'. Call model.destroy() on the model to unwrap before wrapping again.",
    });
    poptorch.inferenceModel(net); // train, then validate: allowed
    a.call(...classifierData(2));
    a.destroy();
    assert.equal(a.isCompiled(), false);
    assert.throws(() => a.copyWeightsToHost(), /Model has not been compiled or has been destroyed\./);
    poptorch.trainingModel(net).call(...classifierData(2));
  });

  test("an inference model with accumulation (the pipelining hint), or with an optimizer", () => {
    const base = "You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default value (1) when running a poptorch.inferenceModel().";
    assert.throws(() => poptorch.inferenceModel(seeded(Classifier), options(1, 1, 2)), {
      message: `${base} Use poptorch.Options().deviceIterations to process a sufficient number of batches each run for pipelined execution instead.`,
    });
    const sharded = options(1, 1, 2).setExecutionStrategy(new poptorch.ShardedExecution());
    assert.throws(() => poptorch.inferenceModel(seeded(Classifier), sharded), { message: base });
    const net = seeded(Classifier);
    const opt = new poptorch.optim.SGD(net.parameters(), { lr: 0.1 });
    assert.throws(() => poptorch.inferenceModel(net, undefined, opt), { message: "Optimizer should be None for inference" });
    assert.throws(() => poptorch.inferenceModel(net).setOptimizer(opt), { message: "Optimizer should be None for inference" });
  });

  test("no loss, and several independent losses", () => {
    const x = f32([2, 3], uniform(6, 1));
    assert.throws(() => poptorch.trainingModel(seeded(NoLoss)).call(x), { message: "Couldn't find a loss in graph!" });
    assert.throws(() => poptorch.trainingModel(seeded(TwoLosses)).call(x), {
      message: "Multiple independent losses found in graph. Graph must have one final loss. Wrap final graph loss in poptorch.identity_loss.",
    });
  });

  test("shapes and dtypes are static after the first call; the batch dimension must divide", () => {
    const model = poptorch.trainingModel(seeded(Classifier), options(2, 1, 1));
    const [x, y] = classifierData(4);
    model.call(x, y);
    assert.throws(() => model.call(...classifierData(8)), {
      message: /^Shape mismatch for input0: expected torch\.Size\(\[4, 3\]\) but got torch\.Size\(\[8, 3\]\)\.\nThis error occurred because the inputs passed at runtime don't match/,
    });
    assert.throws(() => model.call({ ...x, dtype: "float16" }, y), { message: /^Data type mismatch for input0: expected torch\.float32 but got torch\.float16\./ });
    assert.throws(() => model.call(x), /Number of positional arguments mismatch: expected 2 arguments but got 1/);
    const fresh = poptorch.trainingModel(seeded(Classifier), options(2, 2, 2));
    assert.throws(() => fresh.call(...classifierData(12)), {
      message: "Invalid batch dimension: In the input torch.Size([12, 3]), the batch dimension (12) must be a multiple of Options.deviceIterations(2) * (Options.replicationFactor(2) / Options.inputReplicaGrouping.input_group_size(1)) * Options.Training.gradientAccumulation(2) = 8 because it is used to calculate the batch size which will be executed on the device in any given iteration. For a full explanation see the batching semantics page of the documentation.",
    });
    fresh.call(...classifierData(16)); // the failed call left nothing behind
  });

  test("buffers reassigned in forward, and written with replicas while broadcast", () => {
    // PopTorch's buffers_test.py test_error_on_redefine_buffer: `self.y = x` in forward.
    assert.throws(() => poptorch.trainingModel(new ReassignsBuffer()).call(f32([1, 1], [1])), {
      message: 'Buffer b is reassigned within the model when calling the forward method. This is not supported. Consider using this.updateBuffer("b", src) to copy data from a source tensor, where src is the name of the source tensor.',
      kind: "poptorch",
    });
    assert.throws(() => poptorch.inferenceModel(new CounterModel(), new poptorch.Options().replicationFactor(2)).call(), {
      message: "PopTorch does not support broadcasting buffers. If your model is able to tolerate buffers becoming out of sync between replicas, you can disable buffer broadcasting using poptorch.Options.broadcastBuffers(False).",
    });
  });

  test("parameters reassigned or removed in forward are PopTorch's errors, with the fix", () => {
    const x = f32([2, 3], uniform(6, 4));
    // The cases: `this.fc1 = new nn.Linear(3, 3)` and `delete this.fc2` inside forward.
    for (const wrap of [(m) => poptorch.trainingModel(m), (m) => poptorch.inferenceModel(m)]) {
      assert.throws(() => wrap(new ReplacesLayer()).call(x), (e) => {
        assert.match(e.message, /^Parameter fc1\.weight is reassigned within the model when calling the forward method\. This is not supported\. /);
        assert.equal(e.kind, "poptorch");
        assert.match(e.fix, /in the constructor/);
        assert.doesNotMatch(e.message, /updateBuffer/, "a parameter has no updateBuffer");
        assert.ok(e.message.endsWith(e.fix), "the message ends with the fix");
        return true;
      });
      assert.throws(() => wrap(new DeletesLayer()).call(x), (e) => {
        assert.match(e.message, /^Parameter fc2\.weight is removed from the model when calling the forward method\./);
        assert.equal(e.kind, "poptorch");
        assert.match(e.fix, /don't delete them/);
        return true;
      });
    }
    // registerParameter again inside forward: a reassigned parameter, whose fix is not updateBuffer.
    assert.throws(() => poptorch.trainingModel(new ReregistersParameter()).call(x), (e) => {
      assert.match(e.message, /^Parameter w is reassigned within the model when calling the forward method\. This is not supported\./);
      assert.doesNotMatch(e.message, /updateBuffer/);
      assert.match(e.fix, /loadStateDict/);
      return true;
    });
    // A model that keeps its modules passes the check.
    assert.deepEqual(poptorch.inferenceModel(seeded(Classifier)).call(...classifierData(2))[0].shape, [2, 2]);
  });

  test("an IPU count that is not a power of two: the thrown error names the cause and the fix", () => {
    const x = f32([2, 3], uniform(6, 5));
    // Sharded: three IPUs without the pipeline's rule on gradient accumulation.
    const sharded = () => new poptorch.Options().setExecutionStrategy(new poptorch.ShardedExecution());
    for (const run of [(m) => m.call(x), (m) => m.plan(x)]) {
      assert.throws(() => run(poptorch.trainingModel(new ThreeIpus(), sharded())), (e) => {
        assert.match(e.message, /The model uses 3 IPUs, but PopTorch must reserve at least 4/);
        assert.match(e.message, /autoRoundNumIPUs\(True\)\.$/, "the message ends with the fix");
        assert.equal(e.kind, "plan");
        assert.equal(e.code, "ipu_count_not_power_of_two");
        assert.equal(e.option, "autoRoundNumIPUs");
        assert.match(e.fix, /poptorch\.Options\(\)\.autoRoundNumIPUs\(True\)/);
        return true;
      });
    }
    const rounded = poptorch.trainingModel(new ThreeIpus(), sharded().autoRoundNumIPUs(true));
    const plan = rounded.plan(x);
    assert.equal(plan.valid, true, JSON.stringify(plan.errors));
    assert.deepEqual(plan.warnings.filter((w) => w.code === "ipu_count_rounded").map((w) => w.option), ["autoRoundNumIPUs"]);
  });

  test("a forward that throws: the user's error, and the model and package keep working", () => {
    const model = poptorch.inferenceModel(new Throws());
    for (let i = 0; i < 3; i++) assert.throws(() => model.call(), { name: "RangeError", message: "user error from forward" });
    assert.equal(model.isCompiled(), false);
    const ok = poptorch.inferenceModel(seeded(Classifier));
    assert.deepEqual(ok.call(...classifierData(2))[0].shape, [2, 2]);
  });

  test("a model used from inside its own forward is busy, not broken", () => {
    let inner;
    class Reentrant extends nn.Module {
      forward(x) {
        try { inner.call(f32([1, 2], [1, 1])); } catch (e) { this.seen = e.message; }
        return x.relu();
      }
    }
    const net = new Reentrant();
    inner = poptorch.inferenceModel(net);
    inner.call(f32([1, 2], [1, -1]));
    assert.match(net.seen, /this model is busy/);
    assert.deepEqual(Array.from(inner.call(f32([1, 2], [3, -3])).data), [3, 0]);
  });

  test("bad inputs are TypeErrors and RangeErrors naming the input", () => {
    const model = poptorch.inferenceModel(seeded(Classifier));
    assert.throws(() => model.call([1, 2, 3]), { name: "TypeError", message: /call: inputs\[0\] must be a host tensor/ });
    assert.throws(() => model.call({ shape: [2, 3], data: [1, 2] }, i32([2], [0, 1])), { name: "RangeError", message: /call: inputs\[0\]\.data must hold 6 values/ });
    assert.throws(() => model.call({ shape: [2, 3.5], data: [] }), { name: "TypeError", message: /inputs\[0\]\.shape\[1\]/ });
    assert.throws(() => model.call(f32([2, 3], uniform(6, 1)), { shape: [2], data: [0, 1.5], dtype: "int32" }), TypeError);
    assert.throws(() => model.call(f32([2, 3], uniform(6, 1)), { shape: [2], data: new Uint8Array([0, 2]) }), { name: "RangeError", message: /must be 0 or 1/ });
  });
});

describe("poptorch.optim and setOptimizer", () => {
  test("PopTorch's attributes in camelCase or snake_case; unknown ones are PopTorch's errors", () => {
    const net = seeded(Classifier);
    const ps = net.parameters();
    const a = new poptorch.optim.Adam(ps, { lr: 0.003, weightDecay: 0.01, betas: [0.8, 0.9], maxGradNorm: 1, accumType: "float32" });
    assert.equal(a.lr, Math.fround(0.003));
    assert.equal(a.variableAttrs.isConstant("weightDecay"), false, "given explicitly: variable");
    assert.equal(a.variableAttrs.isConstant("eps"), true);
    new poptorch.optim.AdamW(ps, { weight_decay: 0.01, bias_correction: false });
    new poptorch.optim.RMSprop(ps, { alpha: 0.9, centered: true });
    new poptorch.optim.LAMB(ps, { maxWeightNorm: 10, biasCorrection: false });
    new poptorch.optim.SGD(ps, { lr: 0.1, momentum: 0.9, nesterov: true, useCombinedAccum: true, velocityScaling: 2, lossScaling: 64 });
    assert.throws(() => new poptorch.optim.Adam(ps, { momentum: 0.9 }), { message: "Adam.__init__() got an unexpected keyword argument 'momentum'" });
    assert.throws(() => new poptorch.optim.SGD(ps, {}), { message: "SGD.__init__() missing 1 required positional argument: 'lr'" });
    assert.throws(() => new poptorch.optim.SGD(ps, { lr: -1 }), { message: "Invalid learning rate: -1" });
    assert.throws(() => new poptorch.optim.Adam(ps, { amsgrad: true }), { message: "Only non-amsgrad Adam/AdamW optimizers are supported." });
    assert.throws(() => new poptorch.optim.Adam(ps, { accumType: "int32" }), /Accumulation types must be either torch\.float32 or torch\.float16/);
    assert.throws(() => a.variableAttrs.markAsConstant("momentum"), {
      message: "Unknown attribute momentum, allowed values: ['lr', 'betas', 'eps', 'weight_decay', 'amsgrad', 'loss_scaling']",
    });
    assert.throws(() => new poptorch.optim.SGD([], { lr: 0.1 }), /empty parameter list/);
    assert.throws(() => new poptorch.optim.SGD([1, 2], { lr: 0.1 }), { name: "TypeError", message: /must be a Parameter/ });
    assert.throws(() => new poptorch.optim.SGD(net, { lr: 0.1 }), TypeError);
    assert.throws(() => poptorch.trainingModel(net, undefined, { lr: 0.1 }), { name: "TypeError", message: /poptorch\.optim optimizer/ });
  });

  test("parameter groups set their own values; a group of another model's parameters is an error", () => {
    const net = seeded(Classifier);
    const before = values(net);
    const opt = new poptorch.optim.SGD([{ params: net.fc1.parameters(), lr: 0 }, { params: net.fc2.parameters() }], { lr: 0.5 });
    poptorch.trainingModel(net, undefined, opt).call(...classifierData(4));
    const after = values(net);
    assert.deepEqual(after["fc1.weight"], before["fc1.weight"], "group 0 has lr 0");
    assert.notDeepEqual(after["fc2.weight"], before["fc2.weight"]);
    const other = seeded(Classifier);
    const foreign = new poptorch.optim.SGD([{ params: other.parameters(), lr: 0.1 }], { lr: 0.1 });
    assert.throws(() => poptorch.trainingModel(seeded(Classifier), undefined, foreign), /not one of this model's parameters/);
    assert.throws(() => new poptorch.optim.SGD([{ params: net.parameters(), loss_scaling: 2 }], { lr: 0.1 }), /global attribute/);
  });

  test("setOptimizer: a variable attribute's change takes effect, a constant's fails with PopART's message and changes nothing", () => {
    const net = seeded(Classifier);
    const data = classifierData(4);
    const opt = new poptorch.optim.SGD(net.parameters(), { lr: 0.1 }); // momentum not given: constant 0
    const model = poptorch.trainingModel(net, undefined, opt);
    model.call(...data);
    // lr is always variable: 0 stops training.
    opt.update({ lr: 0 });
    model.setOptimizer(opt);
    const frozen = values(net);
    model.call(...data);
    assert.deepEqual(values(net), frozen, "lr 0 took effect");
    // Changing the constant momentum cannot replace the compiled optimizer …
    const withMomentum = new poptorch.optim.SGD(net.parameters(), { lr: 0.1, momentum: 0.9 });
    assert.throws(() => model.setOptimizer(withMomentum), {
      message: "New optimizer is not a valid replacement. Problem with momentums. Default value is not a valid replacement. Can not replace a constant value with a non constant value.",
    });
    const constant = new poptorch.optim.SGD(net.parameters(), { lr: 0.1, momentum: 0.5 });
    constant.variableAttrs.markAsConstant("momentum");
    assert.throws(() => model.setOptimizer(constant), /Values are constant but do not match\./);
    assert.throws(() => model.setOptimizer(new poptorch.optim.Adam(net.parameters())), /Can not replace optimizer of type SGD with new optimizer of type Adam/);
    // … and the old one keeps working (lr 0: nothing moves).
    model.call(...data);
    assert.deepEqual(values(net), frozen, "nothing half-applied");
    // Before compilation any optimizer may replace it.
    const fresh = poptorch.trainingModel(seeded(Classifier));
    fresh.setOptimizer(new poptorch.optim.Adam(fresh.model.parameters(), { lr: 0.01 }));
    fresh.call(...data);
    // A failed update changes nothing either.
    assert.throws(() => opt.update({ momentum: -1 }), /Invalid momentum value: -1/);
    assert.throws(() => opt.update({ betas: [0.9, 0.99] }), /unexpected keyword argument 'betas'/);
    assert.equal(opt.lr, 0);
  });
});

describe("equivalence", () => {
  test("replicas × accumulation × device iterations on a batch equal one big batch with Mean reduction, to 1e-6", () => {
    const cases = [
      [() => ({ SGD: { lr: 0.5, momentum: 0.9 } }), 1, 2, 2],
      [() => ({ Adam: { lr: 0.05 } }), 1, 2, 2],
      [() => ({ Adam: { lr: 0.05 } }), 1, 4, 1],
      [() => ({ Adam: { lr: 0.05 } }), 1, 1, 4],
      [() => ({ SGD: { lr: 0.5, momentum: 0.9 } }), 3, 2, 2],
      [() => ({ Adam: { lr: 0.05 } }), 3, 2, 2],
    ];
    for (const [make, d, r, a] of cases) {
      const [[name, args]] = Object.entries(make());
      const micro = 2;
      const big = micro * r * a;
      const [x, y] = classifierData(big * d, 11);
      const net = seeded(Classifier);
      const ref = twin(Classifier, net);
      poptorch.trainingModel(net, options(d, r, a), new poptorch.optim[name](net.parameters(), args)).call(x, y);
      // The same model stepping on one big batch per device iteration.
      const plain = poptorch.trainingModel(ref, undefined, new poptorch.optim[name](ref.parameters(), args));
      for (let s = 0; s < d; s++) plain.call(rows(x, s * big, (s + 1) * big), rows(y, s * big, (s + 1) * big));
      assertClose(net.stateDict(), ref.stateDict(), 1e-6, 1e-6, `${name} D=${d} R=${r} A=${a}`);
    }
  });

  test("Sum reduction with lr/n and the Running mean strategy equal the Post mean", () => {
    const [x, y] = classifierData(8, 5);
    const train = (o, lr) => {
      const net = seeded(Classifier);
      poptorch.trainingModel(net, o, new poptorch.optim.SGD(net.parameters(), { lr })).call(x, y);
      return net.stateDict();
    };
    const post = train(options(1, 2, 2), 0.4);
    const running = options(1, 2, 2);
    running.Training.setMeanAccumulationAndReplicationReductionStrategy(poptorch.MeanReductionStrategy.Running);
    assertClose(train(running, 0.4), post, 1e-7, 1e-6, "Running vs Post");
    const sum = options(1, 2, 2);
    sum.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum);
    assertClose(train(sum, 0.1), post, 1e-7, 1e-6, "Sum vs Mean");
  });
});
