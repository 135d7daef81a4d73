// IPU semantics through the JS API, each with PopTorch's documented example where there is
// one: batching (docs/user_guide/device_iterations.py), output modes, replica-grouped
// weights (replica_grouped_weights.py: 8 replicas in orthogonal groups of 2), buffers
// (buffers.py's counter), slicing with wrap-round, loss scaling and float16.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { api, models, nn, poptorch, f32, i32, uniform, values, assertClose, twin, classifierData } from "./poptorch-helpers.mjs";

const { constant } = api;

const { ExampleModelWithLoss, CounterModel, ConstantCounter, GroupedMatmul, ScaledDot, Window, Classifier, seeded } = models;

/** device_iterations.py's dataset: label 0 or 1, data `rand + label` with its first entry negated. */
function exampleDataset(n, seed = 0) {
  const r = uniform(n * 7, seed, 0, 1);
  const x = new Float32Array(n * 6);
  const y = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    y[i] = r[i * 7] > 0.5 ? 1 : 0;
    for (let j = 0; j < 6; j++) x[i * 6 + j] = r[i * 7 + 1 + j] + y[i];
    x[i * 6] = -x[i * 6];
  }
  return [{ shape: [n, 3, 2], data: x }, { shape: [n], data: y }];
}

const sgd = (m, lr = 0.01) => new poptorch.optim.SGD(m.parameters(), { lr });

describe("batching (docs/user_guide/device_iterations.py)", () => {
  test("deviceIterations(100): 200 samples a call, the final batch's output and loss, as 100 steps would", () => {
    const [x, y] = exampleDataset(200);
    const net = seeded(ExampleModelWithLoss);
    const ref = twin(ExampleModelWithLoss, net);
    const model = poptorch.trainingModel(net, new poptorch.Options().deviceIterations(100), sgd(net));
    const [out, loss] = model.call(x, y);
    assert.deepEqual([out.shape, loss.shape], [[2, 2], []]);
    // The same model called 100 times on consecutive batches of 2.
    const plain = poptorch.trainingModel(ref, undefined, sgd(ref));
    let last;
    for (let s = 0; s < 100; s++) {
      last = plain.call({ shape: [2, 3, 2], data: x.data.slice(s * 12, s * 12 + 12) }, { shape: [2], data: y.data.slice(s * 2, s * 2 + 2) });
    }
    assertClose({ out, loss }, { out: last[0], loss: last[1] }, 1e-5, 1e-5, "the final batch");
    assertClose(net.stateDict(), ref.stateDict(), 1e-6, 1e-5, "the weights after 100 steps");
  });

  test("replicationFactor(4), gradientAccumulation(8) and OutputMode.All shape the outputs as the docs say", () => {
    const run = (opts, n) => {
      const net = seeded(ExampleModelWithLoss);
      return poptorch.trainingModel(net, opts, sgd(net)).call(...exampleDataset(n)).map((t) => t.shape);
    };
    assert.deepEqual(run(new poptorch.Options().deviceIterations(10).replicationFactor(4), 80), [[8, 2], [4]],
      "a global batch of 8: the final batch of each replica");
    const acc = new poptorch.Options().deviceIterations(10);
    acc.Training.gradientAccumulation(8);
    assert.deepEqual(run(acc, 160), [[2, 2], []], "16 samples per update");
    const all = new poptorch.Options().deviceIterations(10).outputMode(poptorch.OutputMode.All);
    all.Training.gradientAccumulation(8);
    assert.deepEqual(run(all, 160), [[160, 2], [80]], "All: the combined batch");
  });

  test("output modes: All, Final, EveryN, Sum and the defaults", () => {
    class Doubler extends nn.Module { forward(x) { return x.scale(2); } }
    const run = (mode, period) => {
      const o = new poptorch.Options().deviceIterations(4).replicationFactor(2);
      if (mode) o.outputMode(mode, period);
      // Combined batch 8: device iteration d, replica r reads row 2d + r.
      return poptorch.inferenceModel(new Doubler(), o).call(f32([8, 1], [0, 1, 2, 3, 4, 5, 6, 7]));
    };
    const all = run(poptorch.OutputMode.All);
    assert.deepEqual([all.shape, Array.from(all.data)], [[8, 1], [0, 2, 4, 6, 8, 10, 12, 14]]);
    assert.deepEqual(run(), all, "inference defaults to All");
    assert.deepEqual(Array.from(run(poptorch.OutputMode.Final).data), [12, 14]);
    assert.deepEqual(Array.from(run(poptorch.OutputMode.EveryN, 2).data), [4, 6, 12, 14], "device iterations 2 and 4");
    assert.deepEqual(Array.from(run(poptorch.OutputMode.Sum).data), [24, 32], "per replica, over device iterations");
    assert.throws(() => run(poptorch.OutputMode.EveryN, 3), /needs deviceIterations \(4\) to be a multiple of it/);
  });
});

describe("replica-grouped weights (docs/user_guide/replica_grouped_weights.py)", () => {
  test("8 replicas, W split 4 ways over orthogonal groups of 2: together the whole model", () => {
    // W (40×56) split between groups {0,4}, {1,5}, {2,6}, {3,7}; the input split 2 ways by
    // inputReplicaGrouping(4, Consecutive): replica r computes X[r / 4] @ W[r % 4].
    const [shards, dataShards, steps] = [4, 2, 4];
    const xFull = uniform(24 * 40, 100);
    const wFull = uniform(40 * 56, 101, -(40 ** -0.5), 40 ** -0.5);
    const slice = (w, g) => Array.from({ length: 40 }, (_, i) => Array.from(w.slice(i * 56 + 14 * g, i * 56 + 14 * (g + 1)))).flat();
    const grouped = Array.from({ length: shards }, (_, g) => slice(wFull, g)).flat();

    const net = new GroupedMatmul(40, 14);
    const o = new poptorch.Options().replicationFactor(dataShards * shards);
    o.inputReplicaGrouping(shards, poptorch.CommGroupType.Consecutive).outputMode(poptorch.OutputMode.All);
    const model = poptorch.trainingModel(net, o, sgd(net));
    model.replicaGrouping("W", poptorch.CommGroupType.Orthogonal, dataShards, poptorch.VariableRetrievalMode.OnePerGroup);
    model.setParameter("W", { shape: [shards, 40, 14], data: grouped });
    const x = { shape: [dataShards, 12, 40], data: xFull };
    const losses = [];
    for (let s = 0; s < steps; s++) {
      const [z, loss] = model.call(x);
      assert.deepEqual([z.shape, loss.shape], [[8, 12, 14], [8]]);
      losses.push(loss.data.reduce((a, b) => a + b) / 8);
    }
    // The whole model, trained on the CPU by an ungrouped wrapper.
    const whole = new GroupedMatmul(40, 56);
    whole.loadStateDict({ W: { shape: [40, 56], data: wFull } });
    const plain = poptorch.trainingModel(whole, undefined, sgd(whole));
    for (let s = 0; s < steps; s++) {
      const want = plain.call({ shape: [24, 40], data: xFull })[1].data[0];
      assert.ok(Math.abs(losses[s] - want) <= 1e-5 * Math.abs(want), `step ${s}: ${losses[s]} vs the whole model's ${want}`);
    }
    const host = model.getParameter("W");
    assert.deepEqual(host.shape, [4, 40, 14], "one slice per group on the host");
    const trained = values(whole).W;
    assertClose({ W: host.data }, { W: Array.from({ length: shards }, (_, g) => slice(trained, g)).flat() }, 1e-6, 0, "W");
    // The module keeps its traced (one-replica) shape.
    assert.deepEqual(net.stateDict().W.shape, [40, 14]);
  });

  test("retrieval modes give one slice per group or per replica; scalars and late groupings are errors", () => {
    class Scaled extends nn.Module {
      constructor() { super(); this.registerParameter("w", [1, 1], [2]); }
      forward(x) { return poptorch.identity_loss(x.mul(this.param("w")), "sum"); }
    }
    const step = (kind, size, retrieval) => {
      const net = new Scaled();
      const model = poptorch.trainingModel(net, new poptorch.Options().replicationFactor(4), sgd(net, 1));
      model.replicaGrouping("w", kind, size, retrieval);
      model.call(f32([4, 2], [1, 1, 2, 2, 3, 3, 4, 4]));
      return model.getParameter("w");
    };
    const C = poptorch.CommGroupType;
    const R = poptorch.VariableRetrievalMode;
    // Consecutive groups {0,1}, {2,3}; Mean (Post) divides by accumulation × replicas = 4.
    const one = step(C.Consecutive, 2, R.OnePerGroup);
    assert.deepEqual([one.shape, Array.from(one.data)], [[2, 2], [0.25, 0.25, -0.75, -0.75]]);
    const all = step(C.Consecutive, 2, R.AllReplicas);
    assert.deepEqual([all.shape, Array.from(all.data)], [[4, 2], [0.25, 0.25, 0.25, 0.25, -0.75, -0.75, -0.75, -0.75]]);
    assert.deepEqual(Array.from(step(C.Orthogonal, 2, R.AllReplicas).data), [0, 0, -0.5, -0.5, 0, 0, -0.5, -0.5], "{0,2} and {1,3}");
    const shared = step(C.All);
    assert.deepEqual([shared.shape, Array.from(shared.data)], [[2], [-1.5, -1.5]], "one value: no group dim");
    assert.deepEqual(Array.from(step(C.NoGrouping).data), [0.75, 0.75, 0.5, 0.5, 0.25, 0.25, 0, 0]);
    assert.throws(() => step(C.Consecutive, 3), /replica group size of 3 must be a positive factor of the replication factor \(4\)/);
    const m = poptorch.inferenceModel(new Scaled(), new poptorch.Options().replicationFactor(2));
    m.call(f32([2, 2], [1, 1, 1, 1]));
    assert.throws(() => m.replicaGrouping("w", C.NoGrouping), /before the model is compiled/);
    class Scalar extends nn.Module {
      constructor() { super(); this.registerParameter("s", [1], []); }
      forward(x) { return poptorch.identity_loss(x.mul(this.param("s")), "sum"); }
    }
    const s = poptorch.trainingModel(new Scalar(), new poptorch.Options().replicationFactor(2));
    s.replicaGrouping("s", C.NoGrouping);
    assert.throws(() => s.call(f32([2], [1, 2])), { message: "Scalars cannot be passed as per-replica weight tensor values" });
  });
});

describe("buffers (docs/user_guide/buffers.py)", () => {
  test("the counter: a registered buffer counts, a plain tensor is frozen as a constant", () => {
    const plainTensor = poptorch.inferenceModel(new ConstantCounter());
    assert.deepEqual(Array.from(plainTensor.call().data), [1]);
    assert.deepEqual(Array.from(plainTensor.call().data), [1], "frozen as a constant");
    const counter = new CounterModel();
    const model = poptorch.inferenceModel(counter);
    assert.deepEqual(Array.from(model.call().data), [1]);
    assert.deepEqual(Array.from(model.call().data), [2]);
    assert.deepEqual(Array.from(counter.stateDict().i.data), [0], "an inference model does not copy buffers back by itself");
    model.copyWeightsToHost();
    assert.deepEqual(Array.from(counter.stateDict().i.data), [2]);
    assert.deepEqual(counter.namedBuffers().map(([n, b]) => [n, Array.from(b.data)]), [["i", [2]]]);
  });

  test("with replicas: broadcastBuffers(false) gives each replica its own", () => {
    const o = new poptorch.Options().replicationFactor(2).broadcastBuffers(false).deviceIterations(3);
    const out = poptorch.inferenceModel(new CounterModel(), o).call();
    assert.deepEqual(Array.from(out.data), [1, 1, 2, 2, 3, 3], "each replica counts its own 3 iterations");
  });

  test("a training model's buffers reach the module with its weights", () => {
    class Seen extends nn.Module {
      constructor() { super(); this.registerBuffer("seen", [0], []); this.registerParameter("w", [0.5], [1]); }
      forward(x) {
        this.updateBuffer("seen", this.buffer("seen").add(constant([x.shape[0]], [])));
        return poptorch.identity_loss(x.mul(this.param("w")), "mean");
      }
    }
    const net = new Seen();
    poptorch.trainingModel(net, new poptorch.Options().deviceIterations(2)).call(f32([4, 1], [1, 1, 1, 1]));
    assert.deepEqual(Array.from(net.stateDict().seen.data), [4]);
    assert.notDeepEqual(Array.from(net.stateDict().w.data), [0.5]);
  });
});

describe("slicing with the IPU's rules", () => {
  test("t[x : x + 4] wraps round past the end, on every device iteration", () => {
    const model = poptorch.inferenceModel(new Window(), new poptorch.Options().deviceIterations(3));
    const out = model.call(i32([3], [0, 6, 7]));
    assert.deepEqual(out.shape, [12]);
    assert.deepEqual(Array.from(out.data), [0, 1, 2, 3, 6, 7, 0, 1, 7, 0, 1, 2], "PyTorch would return [6, 7] and [7]");
  });

  test("PopTorch's slicing errors", () => {
    class Bad extends nn.Module {
      constructor(make) { super(); this.make = make; this.registerParameter("t", [0, 1, 2, 3, 4, 5, 6, 7], [8]); }
      forward(x) { const s = x.reshape([]); return this.make(this.param("t"), s); }
    }
    const run = (make) => poptorch.inferenceModel(new Bad(make)).call(i32([1], [0]));
    const k = (v) => constant([v], [], "int32");
    assert.throws(() => run((t, s) => poptorch.slice(t, 0, s, s.add(k(3)))), { message: "The size of the slice (3) must be a factor of the slicing dimension (8)." });
    assert.throws(() => run((t, s) => poptorch.slice(t, 0, s, s.add(k(0)))), { message: "The start and end of a slice must be different." });
    assert.throws(() => run((t, s) => poptorch.slice(t, 0, s, s.sub(k(2)))), { message: "Taking a slice of a tensor with the end less than the start is not supported." });
    assert.throws(() => run((t, s) => poptorch.slice(t, 0, s, s.cast("float32").add(constant([2], [])).cast("int32"))), {
      message: "The size of the sliced tensor must be a constant for each execution of the model when running on the IPU. In this case, there is a float added to the slice indices meaning it may change between runs.",
    });
    assert.deepEqual(Array.from(run((t) => poptorch.slice(t, 0, 2, 5)).data), [2, 3, 4], "constant bounds follow PyTorch");
    assert.deepEqual(Array.from(run((t, s) => poptorch.dynamicSlice(t, 0, s.add(k(6)), 4)).data), [6, 7, 0, 1]);
  });
});

describe("loss scaling and float16", () => {
  // loss = sum(x · w) · 2^-14 on float16: with x = 2^-12 the weight gradient is 2^-26, below
  // float16's smallest subnormal.
  const tiny = () => new ScaledDot(2 ** -14).half();
  const x16 = (n) => ({ shape: [n, 4], data: new Float32Array(n * 4).fill(2 ** -12), dtype: "float16" });

  test("manual loss scaling rescues float16 gradients from underflow", () => {
    const step = (lossScaling) => {
      const net = tiny();
      poptorch.trainingModel(net, undefined, new poptorch.optim.SGD(net.parameters(), { lr: 65536, lossScaling })).call(x16(1));
      assert.equal(net.stateDict().w.dtype, "float16");
      return Array.from(net.stateDict().w.data);
    };
    assert.deepEqual(step(1), [0.5, 0.5, 0.5, 0.5], "the gradient underflows to 0 in float16");
    // Scaled by 2^15 it is 2^-11 in float16; unscaled in float32 it moves w by 2^16 · 2^-26.
    assert.deepEqual(step(32768), Array(4).fill(0.5 - 2 ** -10));
  });

  test("manual loss scaling leaves float32 training unchanged", () => {
    const [x, y] = classifierData(8);
    const train = (lossScaling) => {
      const net = seeded(Classifier);
      const o = new poptorch.Options().deviceIterations(2).replicationFactor(2);
      poptorch.trainingModel(net, o, new poptorch.optim.SGD(net.parameters(), { lr: 0.3, lossScaling })).call(x, y);
      return net.stateDict();
    };
    assertClose(train(1024), train(1), 1e-7, 1e-6, "loss scaling 1024");
  });

  test("automatic loss scaling doubles while gradients are small and halves when the upper bin fills", () => {
    const o = new poptorch.Options().deviceIterations(4);
    o.Training.setAutomaticLossScaling(true);
    const net = tiny();
    const model = poptorch.trainingModel(net, o, new poptorch.optim.SGD(net.parameters(), { lr: 0 }));
    assert.equal(model.lossScaling, undefined, "not compiled yet");
    model.call(x16(4));
    assert.equal(model.lossScaling, 16, "1 doubled after each of 4 steps");
    // d/dw = x · ls = 16384 > 8188 (the bin edge): the scale halves each step.
    const big = new ScaledDot(1).half();
    const o2 = new poptorch.Options().deviceIterations(2);
    o2.Training.setAutomaticLossScaling(true);
    const m2 = poptorch.trainingModel(big, o2, new poptorch.optim.SGD(big.parameters(), { lr: 0, lossScaling: 32768 }));
    m2.call({ shape: [2, 4], data: new Float32Array(8).fill(1), dtype: "float16" });
    assert.equal(m2.lossScaling, 8192, "32768 → 16384 → 8192");
    const o3 = new poptorch.Options();
    o3.Training.setAutomaticLossScaling(true);
    assert.throws(() => poptorch.trainingModel(seeded(Classifier), o3).call(...classifierData(2)), {
      message: "[AutomaticLossScale transform] No tracked gradient tensors of type fp16 were found.",
    });
  });

  test("float16 training stays within half precision of float32", () => {
    const [x, y] = classifierData(24, 11);
    const net = seeded(Classifier);
    const half = twin(Classifier, net).half();
    const o = () => {
      const r = new poptorch.Options().deviceIterations(3).replicationFactor(2);
      r.Training.gradientAccumulation(2);
      return r;
    };
    poptorch.trainingModel(net, o(), new poptorch.optim.Adam(net.parameters(), { lr: 0.01 })).call(x, y);
    const [, loss] = poptorch.trainingModel(half, o(), new poptorch.optim.Adam(half.parameters(), { lr: 0.01 }))
      .call({ ...x, dtype: "float16" }, y);
    assert.equal(loss.dtype, "float16");
    assert.ok(Object.values(half.stateDict()).every((t) => t.dtype === "float16"));
    assertClose(half.stateDict(), net.stateDict(), 4e-3, 2e-2, "float16 vs float32");
    assert.equal(half.float().stateDict()["fc1.weight"].dtype, "float32");
  });
});
