// PopTorch's replicas as parallel workers (ipu-playground/replicas.mjs), from the npm
// package imported by name: N worker_threads, each with its own wasm instance, train the
// same weights as the one-worker path (today's model.call, itself checked against PyTorch),
// every replica's weights stay bit-identical, Sum and Mean, a replica-grouped weight, and
// the errors (too many workers, a worker that throws, workers that built other weights).
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { REPO } from "./helpers.mjs";
import { classifierData } from "./poptorch-helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const MODEL = pathToFileURL(path.join(CONSUMER, "replica-model.mjs"));
const { ReplicaWorkers, replicaRanges } = await import(
  pathToFileURL(createRequire(path.join(CONSUMER, "package.json")).resolve("ipu-playground/replicas.mjs")).href
);
const build = (await import(MODEL.href)).default;
const NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];
const STEPS = 3;

/** Options as the model module sets them: a combined batch of 4 samples per micro-batch. */
function batch(args) {
  const { replicas = 4, accumulation = 2, iterations = 2 } = args;
  return classifierData(4 * replicas * accumulation * iterations, 11);
}

/** The one-worker path: `model.call` STEPS times; the outputs, host state and replicas' weights. */
function oneWorker(args) {
  const model = build(args);
  const [x, y] = batch(args);
  const outputs = [];
  for (let i = 0; i < STEPS; i++) outputs.push(model.call(x, y));
  const replicas = {};
  for (let r = 0; r < (args.replicas ?? 4); r++) {
    replicas[r] = Object.fromEntries(NAMES.map((n) => [n, model.getReplicaParameter(r, n)]));
  }
  const host = Object.fromEntries(NAMES.map((n) => [n, model.getParameter(n)]));
  return { outputs, replicas, host };
}

async function workers(args, n) {
  const w = await ReplicaWorkers.start(MODEL, { workers: n, args });
  try {
    const [x, y] = batch(args);
    const outputs = [];
    for (let i = 0; i < STEPS; i++) outputs.push(await w.call(x, y));
    const replicas = await w.replicaParameters(NAMES);
    const host = await w.hostParameters(NAMES);
    return { outputs, replicas, host, stats: w.workers.map((s) => ({ ...s })) };
  } finally {
    w.close();
  }
}

const bits = (t) => Array.from(new Uint32Array(Float32Array.from(t.data).buffer));

function assertSameTensor(a, b, what) {
  assert.deepEqual(Array.from(a.shape), Array.from(b.shape), what);
  assert.equal(a.dtype ?? "float32", b.dtype ?? "float32", what);
  assert.deepEqual(bits(a), bits(b), `${what}: bit for bit`);
}

describe("replicas on worker_threads", () => {
  test("replicaRanges splits replicas over workers and refuses more workers than replicas", () => {
    assert.deepEqual(replicaRanges(4, 2), [[0, 2], [2, 4]]);
    assert.deepEqual(replicaRanges(4, 3), [[0, 1], [1, 2], [2, 4]]);
    assert.throws(() => replicaRanges(2, 3), /3 workers for 2 replicas: each worker runs at least one replica/);
    assert.throws(() => replicaRanges(2, 0), /at least 1/);
  });

  for (const reduction of ["mean", "sum"]) {
    test(`4 replicas on 2 workers train what one worker trains (${reduction}), every replica bit-identical`, async () => {
      const args = { reduction };
      const ref = oneWorker(args);
      const par = await workers(args, 2);
      // The reference itself trained: the weights moved from their seeded start.
      const start = build(args);
      assert.notDeepEqual(bits(ref.host["fc1.weight"]), bits(start.getParameter("fc1.weight")));
      for (let i = 0; i < STEPS; i++) {
        const [[la, lossA], [lb, lossB]] = [ref.outputs[i], par.outputs[i]];
        assertSameTensor(lb, la, `step ${i} logits`);
        assertSameTensor(lossB, lossA, `step ${i} loss`);
      }
      for (let r = 0; r < 4; r++) {
        for (const n of NAMES) {
          assertSameTensor(par.replicas[r][n], ref.replicas[r][n], `replica ${r} ${n} vs one worker`);
          assertSameTensor(par.replicas[r][n], par.replicas[0][n], `replica ${r} ${n} vs replica 0`);
        }
      }
      for (const n of NAMES) assertSameTensor(par.host[n], ref.host[n], `host ${n}`);
      // Each worker ran its two replicas and reports its busy time.
      assert.deepEqual(par.stats.map((s) => s.replicas), [[0, 2], [2, 4]]);
      for (const s of par.stats) {
        assert.equal(s.steps, STEPS);
        assert.ok(s.busyMs > 0 && s.lastStepMs > 0 && s.lastStepMs <= s.busyMs, JSON.stringify(s));
      }
    });
  }

  test("Sum and Mean differ as PopTorch's reduction says: Sum's update is replicas × accumulation times Mean's", async () => {
    // One device iteration: SGD's first update with momentum is lr·g, so the factor shows exactly.
    const args = { accumulation: 2, replicas: 4, iterations: 1 };
    const start = build(args).getParameter("fc2.weight").data;
    const [x, y] = batch(args);
    const update = async (reduction) => {
      const w = await ReplicaWorkers.start(MODEL, { workers: 2, args: { ...args, reduction } });
      try {
        await w.call(x, y);
        const after = (await w.hostParameters(["fc2.weight"]))["fc2.weight"].data;
        return Array.from(after, (v, i) => v - start[i]);
      } finally {
        w.close();
      }
    };
    const [mean, sum] = [await update("mean"), await update("sum")];
    assert.ok(mean.some((d) => Math.abs(d) > 1e-4), `the weight moved: ${mean}`);
    mean.forEach((d, i) => assert.ok(Math.abs(sum[i] - 8 * d) <= 1e-5 + 1e-3 * Math.abs(8 * d), `[${i}]: Sum ${sum[i]} vs 8 × Mean ${8 * d}`));
  });

  test("a replica-grouped weight: each group's replicas share it, groups differ, as on one worker", async () => {
    const args = { grouped: true };
    const ref = oneWorker(args);
    const par = await workers(args, 2);
    for (let r = 0; r < 4; r++) {
      for (const n of NAMES) assertSameTensor(par.replicas[r][n], ref.replicas[r][n], `replica ${r} ${n}`);
    }
    // Consecutive groups of 2: {0, 1} on worker 0 and {2, 3} on worker 1.
    assertSameTensor(par.replicas[1]["fc2.bias"], par.replicas[0]["fc2.bias"], "group {0, 1}");
    assertSameTensor(par.replicas[3]["fc2.bias"], par.replicas[2]["fc2.bias"], "group {2, 3}");
    assert.notDeepEqual(bits(par.replicas[0]["fc2.bias"]), bits(par.replicas[2]["fc2.bias"]), "the groups trained apart");
    assertSameTensor(par.host["fc2.bias"], ref.host["fc2.bias"], "host: one slice per replica (AllReplicas)");
  });

  test("dropout: each replica's masks are drawn from its own seed, as on one worker", async () => {
    const args = { dropout: true };
    const ref = oneWorker(args);
    const par = await workers(args, 2);
    for (const n of NAMES) assertSameTensor(par.host[n], ref.host[n], `host ${n}`);
    for (let i = 0; i < STEPS; i++) assertSameTensor(par.outputs[i][0], ref.outputs[i][0], `step ${i} logits`);
    // Dropout was on: the same model without it trains other weights.
    const plain = oneWorker({});
    assert.notDeepEqual(bits(plain.host["fc1.weight"]), bits(ref.host["fc1.weight"]), "dropout changed training");
    assert.equal(ref.outputs[0][0].shape[0], 4 * 4, "Final: the last micro-batch of each of the 4 replicas");
  });

  test("buffers with broadcastBuffers(false): each replica keeps its own on the worker running it, as on one worker; broadcast is PopTorch's error", async () => {
    const args = { buffer: true };
    const model = build(args);
    const [x, y] = batch(args);
    for (let i = 0; i < STEPS; i++) model.call(x, y);
    const one = Array.from({ length: 4 }, (_, r) => model.getReplicaBuffer(r, "seen"));
    const w = await ReplicaWorkers.start(MODEL, { workers: 2, args });
    try {
      for (let i = 0; i < STEPS; i++) await w.call(x, y);
      const par = await w.replicaBuffers(["seen"]);
      for (let r = 0; r < 4; r++) assertSameTensor(par[r].seen, one[r], `replica ${r}'s buffer vs one worker`);
      // Each sample is seen once a step, by one replica: the replicas' counts add up to it.
      const total = one.reduce((a, t) => a + t.data[0], 0);
      const expected = STEPS * Array.from(x.data).reduce((a, v) => a + v, 0);
      assert.ok(Math.abs(total - expected) <= 1e-4 * Math.abs(expected), `${total} vs ${expected}`);
      assert.notEqual(one[0].data[0], one[2].data[0], "the replicas saw different samples (not broadcast)");
      // The weights are still every replica's, as on one worker.
      const host = await w.hostParameters(NAMES);
      for (const n of NAMES) assertSameTensor(host[n], model.getParameter(n), `host ${n}`);
    } finally {
      w.close();
    }
    // broadcastBuffers(true) with a buffer the model updates: PopTorch's message, named by the worker.
    const bad = await ReplicaWorkers.start(MODEL, { workers: 2, args: { buffer: true, broadcastBuffers: true } });
    try {
      await assert.rejects(bad.call(x, y), /PopTorch does not support broadcasting buffers/);
    } finally {
      bad.close();
    }
  });

  test("4 replicas on 4 workers and on 3 (uneven) give the one-worker weights too", async () => {
    const ref = oneWorker({});
    for (const n of [4, 3]) {
      const par = await workers({}, n);
      for (const name of NAMES) assertSameTensor(par.host[name], ref.host[name], `${n} workers: ${name}`);
    }
  });

  test("errors: more workers than replicas; a worker that throws stops every worker, with its cause", async () => {
    await assert.rejects(ReplicaWorkers.start(MODEL, { workers: 3, args: { replicas: 2 } }), /3 workers for 2 replicas/);
    const args = { failReplica: 3 };
    const w = await ReplicaWorkers.start(MODEL, { workers: 2, args });
    const [x, y] = batch(args);
    await w.call(x, y);
    const err = await w.call(x, y).then(() => null, (e) => e);
    assert.ok(err, "the second call fails");
    assert.match(err.message, /^replica worker 1 \(replicas 2\.\.4\): replica 3 failed on purpose/);
    assert.equal(err.cause.name, "RangeError");
    assert.match(err.cause.stack, /replica-model\.mjs/);
    // The workers are stopped: a later call fails at once with the same error.
    await assert.rejects(w.call(x, y), (e) => e === err);
    await assert.rejects(
      ReplicaWorkers.start(MODEL, { workers: 2, args: { unseeded: true } }),
      /replica worker 1 built the model with other weights than worker 0/,
    );
  });

  test("a worker's core error names the worker and keeps PopTorch's message", async () => {
    const w = await ReplicaWorkers.start(MODEL, { workers: 2, args: {} });
    try {
      const [x, y] = classifierData(6);
      // Both workers refuse; whichever answers first names itself.
      await assert.rejects(
        w.call(x, y),
        /^Error: replica worker (0 \(replicas 0\.\.2\)|1 \(replicas 2\.\.4\)): Invalid batch dimension: In the input torch\.Size\(\[6, 3\]\), .* = 16 /,
      );
    } finally {
      w.close();
    }
  });

  test("the split call refuses misuse with the core's messages", () => {
    const model = build({});
    model.setLocalReplicas(0, 2);
    const [x, y] = batch({});
    assert.throws(() => model.call(x, y), /runs replicas 0\.\.2 of 4: a call needs every replica's gradients/);
    assert.throws(() => build({}).setLocalReplicas(2, 5), /replicas 2\.\.5: an executor runs a non-empty range of the model's 4 replicas/);
    const m = build({});
    assert.throws(() => m.contribute(), /Model has not been compiled|no call has begun/);
    m.beginCall([x, y]);
    assert.throws(() => m.apply(new Float32Array(4 * m.contributionLength)), /has not been contributed/);
    m.contribute();
    assert.throws(() => m.contribute(), /contributed already/);
    assert.throws(() => m.apply(new Float32Array(3)), /must hold/);
    assert.throws(() => m.endCall(), /applied 0 of its 2 device iterations/);
  });
});

// ---- sparse inputs: each replica its own graph parts ----

const GNN = pathToFileURL(path.join(CONSUMER, "replica-gnn-model.mjs"));
const gnn = await import(GNN.href);
const GNN_NAMES = ["conv.lin_l.weight", "conv.lin_l.bias", "conv.lin_r.weight", "lin.weight", "lin.bias"];

describe("replicas of a sparse-input (GNN) model, fed graph parts", () => {
  test("4 replicas, each its own graph part, on 2 workers train what one worker trains, bit for bit", async () => {
    const ref = gnn.default({});
    const names = ref.model.namedParameters().map(([n]) => n);
    assert.deepEqual(names.sort(), [...GNN_NAMES].sort());
    const refLoss = [];
    for (let s = 0; s < STEPS; s++) refLoss.push(ref.call(...gnn.partInputs([s, s + 1, s + 2, s + 3]))[1]);
    const w = await ReplicaWorkers.start(GNN, { workers: 2, args: {} });
    try {
      for (let s = 0; s < STEPS; s++) {
        const [, loss] = await w.call(...gnn.partInputs([s, s + 1, s + 2, s + 3]));
        // Final: one loss per replica, each its own part's.
        assert.deepEqual(Array.from(loss.shape), [4]);
        assertSameTensor(loss, refLoss[s], `step ${s} losses`);
      }
      const replicas = await w.replicaParameters(names);
      const host = await w.hostParameters(names);
      for (const n of names) {
        assertSameTensor(host[n], ref.getParameter(n), `host ${n} vs one worker`);
        for (let r = 0; r < 4; r++) assertSameTensor(replicas[r][n], replicas[0][n], `replica ${r} ${n} vs replica 0`);
      }
      assert.notDeepEqual(bits(host["lin.weight"]), bits(gnn.default({}).getParameter("lin.weight")), "the weights trained");
    } finally {
      w.close();
    }
  });

  for (const reduction of ["mean", "sum"]) {
    test(`2 replicas × 2 accumulation steps reduce the four parts' gradients by ${reduction} (against single-part runs)`, async () => {
      const lr = 0.1;
      const start = gnn.default({ replicas: 1, optimizer: "sgd" });
      const w0 = Object.fromEntries(GNN_NAMES.map((n) => [n, start.getParameter(n).data]));
      // Each part alone: SGD's step w - lr·g gives that part's gradient g = (w - w') / lr.
      const grads = [0, 1, 2, 3].map((k) => {
        const m = gnn.default({ replicas: 1, optimizer: "sgd" });
        m.call(...gnn.partInputs([k]));
        return Object.fromEntries(GNN_NAMES.map((n) => [n, Array.from(m.getParameter(n).data, (v, i) => (w0[n][i] - v) / lr)]));
      });
      const scale = reduction === "mean" ? 1 / 4 : 1;
      const w = await ReplicaWorkers.start(GNN, { workers: 2, args: { replicas: 2, accumulation: 2, reduction, optimizer: "sgd" } });
      try {
        // The combined batch's order: slice (a × 2 + r) is accumulation step a of replica r.
        await w.call(...gnn.partInputs([0, 1, 2, 3]));
        const host = await w.hostParameters(GNN_NAMES);
        let moved = 0;
        for (const n of GNN_NAMES) {
          host[n].data.forEach((got, i) => {
            const want = w0[n][i] - lr * scale * grads.reduce((a, g) => a + g[n][i], 0);
            moved = Math.max(moved, Math.abs(got - w0[n][i]));
            assert.ok(Math.abs(got - want) <= 1e-5 + 1e-4 * Math.abs(want), `${reduction} ${n}[${i}]: ${got} vs ${want}`);
          });
        }
        assert.ok(moved > 1e-3, `the weights moved (${moved})`);
      } finally {
        w.close();
      }
    });
  }

  test("a sparse input given whole to a replicated model, or as the wrong number of parts, is an error saying how", () => {
    const m = gnn.default({ replicas: 2 });
    const p = gnn.graphPart(0);
    assert.throws(() => m.call(p.x, p.adj, p.y), /input 1 \('input1'\) is a sparse matrix, which cannot be cut into micro-batches: give it as an array of combinedBatchFactor \(2\) sparse parts/);
    assert.throws(() => m.call(...gnn.partInputs([0, 1, 2])), /input 0 \('input0'\): 3 parts given, but a call takes combinedBatchFactor = .* = 2 of them/);
    const [xs, adjs, ys] = gnn.partInputs([0, 1]);
    const other = gnn.graphPart(1).adj;
    adjs[1] = { ...other, shape: [4, 5], indptr: other.indptr.slice(0, 5), indices: other.indices.slice(0, 8), values: other.values.slice(0, 8) };
    assert.throws(() => m.call(xs, adjs, ys), /call: inputs\[1\]\[1\]: a 4x5 sparse matrix, part 0 5x5: every part must have one shape/);
  });
});
