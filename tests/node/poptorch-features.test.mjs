// The PopTorch features of BERT-style models from JavaScript (issue #16): tied weights,
// recomputationCheckpoint, set_available_memory, Options.Precision, serializedMatMul and
// nn.SerializedEmbedding. Values are checked against numbers worked out here by hand.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { api, nn, poptorch, f32, i32 } from "./poptorch-helpers.mjs";

const { block, constant } = api;
const V = 5;
const D = 3;
const IDS = [1, 4, 1, 0];
const C = Array.from({ length: IDS.length * V }, (_, k) => (((k * 7) % 11) - 5) / 4);

/** An embedding and a decoder tied to it; loss = sum(decoder(embed(ids)) · c). */
class Tied extends nn.Module {
  constructor() {
    super();
    this.embed = new nn.Embedding(V, D);
    this.decoder = new nn.Linear(D, V, false);
    this.decoder.tieParameter("weight", this.embed);
  }
  forward(ids) {
    const logits = this.decoder.forward(this.embed.forward(ids));
    return poptorch.identityLoss(logits.mul(constant(C, [IDS.length, V])), "sum");
  }
}

const weightOf = (m, name) => Array.from(m.stateDict()[name].data);

/**
 * One SGD step (lr 0.5) of `net`, whose loss is sum(embed(ids) · W^T · c) with W its
 * `embed.weight` read twice; asserts the new W is the step computed by hand. Returns it.
 */
function trainOneStepAndCheck(net) {
  const w = weightOf(net, "embed.weight");
  const lr = 0.5;
  const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.SGD(net.parameters(), { lr }));
  model.call(i32([IDS.length], IDS));
  // By hand: dL/dW[v] = Σ_b c[b,v]·W[ids[b]] (the product's use) and
  // dL/dW[ids[b]] += Σ_v c[b,v]·W[v] (the lookup's use).
  const grad = new Array(V * D).fill(0);
  IDS.forEach((row, b) => {
    for (let v = 0; v < V; v++) {
      for (let d = 0; d < D; d++) {
        grad[v * D + d] += C[b * V + v] * w[row * D + d];
        grad[row * D + d] += C[b * V + v] * w[v * D + d];
      }
    }
  });
  const want = w.map((x, k) => x - lr * grad[k]);
  const got = weightOf(net, "embed.weight");
  got.forEach((x, k) => assert.ok(Math.abs(x - want[k]) < 1e-5, `${got} vs ${want}`));
  return got;
}

describe("tied weights", () => {
  test("a tied parameter is listed and traced once, and trains as one (gradient = sum of both uses)", () => {
    const net = new Tied();
    assert.deepEqual(weightOf(net, "embed.weight"), weightOf(net, "decoder.weight"));
    assert.deepEqual(net.namedParameters().map((e) => e[0]), ["embed.weight"]);
    const t = api.trace(net, [{ name: "ids", shape: [IDS.length], dtype: "int32" }]);
    assert.deepEqual(t.parameters.map((p) => p[0]), ["embed.weight"]);
    const got = trainOneStepAndCheck(net);
    assert.deepEqual(weightOf(net, "decoder.weight"), got, "both modules see the trained tensor");
    assert.throws(() => net.decoder.tieParameter("weight", new nn.Embedding(V + 1, D)), /cannot replace|shape/);
    assert.throws(() => net.decoder.tieParameter("nope", net.embed), /no parameter 'nope'/);
  });
});

describe("another module's parameter read in forward (F.linear(x, self.embed.weight))", () => {
  /** The same loss as `Tied`, the decoder's product written with the embedding's weight. */
  class Reads extends nn.Module {
    constructor() {
      super();
      this.embed = new nn.Embedding(V, D);
    }
    forward(ids) {
      const logits = this.embed.forward(ids).matmul(this.embed.param("weight").transpose(0, 1));
      return poptorch.identityLoss(logits.mul(constant(C, [IDS.length, V])), "sum");
    }
  }

  test("is the same parameter, traced once under its module's path, with the sum of both uses' gradients", () => {
    const net = new Reads();
    const t = api.trace(net, [{ name: "ids", shape: [IDS.length], dtype: "int32" }]);
    assert.deepEqual(t.parameters.map((p) => p[0]), ["embed.weight"]);
    trainOneStepAndCheck(net);
    assert.throws(() => net.embed.param("weight"), /no trace is running/);
    const bad = { embed: new nn.Embedding(V, D), forward(ids) { return this.embed.param("bias"); } };
    assert.throws(() => api.trace(bad, [{ name: "ids", shape: [2], dtype: "int32" }]), /Embedding has no parameter "bias" \(its parameters: weight\)/);
  });
});

describe("tied weights stay tied", () => {
  test("through half() and loadStateDict (the last value written to either name)", () => {
    const net = new Tied().half();
    assert.deepEqual(net.namedParameters().map((e) => e[0]), ["embed.weight"]);
    assert.equal(net.stateDict()["decoder.weight"].dtype, "float16");
    net.float();
    const ones = { shape: [V, D], data: new Float32Array(V * D).fill(1) };
    net.loadStateDict({ "decoder.weight": ones }, false);
    assert.deepEqual(weightOf(net, "embed.weight"), new Array(V * D).fill(1));
    assert.deepEqual(net.namedParameters().map((e) => e[0]), ["embed.weight"]);
    const twos = { shape: [V, D], data: new Float32Array(V * D).fill(2) };
    net.loadStateDict({ "embed.weight": ones, "decoder.weight": twos });
    assert.deepEqual(weightOf(net, "embed.weight"), new Array(V * D).fill(2));
    assert.deepEqual(weightOf(net, "decoder.weight"), new Array(V * D).fill(2));
  });
});

/** Four Linear + tanh layers on IPU 0 (a checkpoint after the second when asked), the loss on IPU 1. */
class TwoStages extends nn.Module {
  constructor(checkpoint) {
    super();
    this.checkpoint = checkpoint;
    for (let i = 0; i < 5; i++) this[`l${i}`] = new nn.Linear(32, 32);
  }
  forward(x) {
    const h = block("a", 0, () => {
      let h = x;
      for (let i = 0; i < 4; i++) {
        h = this[`l${i}`].forward(h).tanh();
        if (this.checkpoint && i === 1) h = poptorch.recomputationCheckpoint(h);
      }
      return h;
    });
    return block("b", 1, () => poptorch.identityLoss(this.l4.forward(h), "mean"));
  }
}

describe("recomputationCheckpoint", () => {
  test("a checkpoint is stashed in pipelined training instead of recomputed", () => {
    const stash = (checkpoint) => {
      const net = new TwoStages(checkpoint);
      const opts = new poptorch.Options();
      opts.Training.gradientAccumulation(4);
      // The combined batch: 4 micro-batches of 64.
      const p = poptorch.trainingModel(net, opts).plan(f32([256, 32], new Float32Array(256 * 32)));
      assert.equal(p.valid, true, JSON.stringify(p.errors));
      return p;
    };
    const [plain, ck] = [stash(false), stash(true)];
    const value = 64 * 32 * 4;
    assert.equal(plain.memory.ipus[0].peak.stash, 2 * value);
    assert.equal(ck.memory.ipus[0].peak.stash, 4 * value);
    assert.ok(ck.time.iterationTimeS < plain.time.iterationTimeS);
  });

  test("one tensor in gives one back; several, or an array, give an array; the producer is marked", () => {
    class M extends nn.Module {
      forward(x) {
        const a = x.tanh();
        const one = poptorch.recomputationCheckpoint(a);
        const two = poptorch.recomputationCheckpoint(a.exp(), a.relu());
        const arr = poptorch.recomputationCheckpoint([a.sigmoid()]);
        assert.ok(!Array.isArray(one) && Array.isArray(two) && two.length === 2 && Array.isArray(arr));
        assert.throws(() => poptorch.recomputationCheckpoint(3), /must be Tensors/);
        return one.add(two[0]).add(two[1]).add(arr[0]);
      }
    }
    const { graph } = api.trace(new M(), [{ name: "x", shape: [2] }]);
    const marked = graph.nodes.filter((n) => n.meta.checkpoint).map((n) => n.opname);
    assert.deepEqual(marked.sort(), ["exp", "relu", "sigmoid", "tanh"]);
  });
});

describe("set_available_memory and Options.Precision", () => {
  test("the proportion goes to the product; PopTorch's checks", () => {
    class M extends nn.Module {
      constructor() {
        super();
        this.fc = new nn.Linear(4, 4);
      }
      forward(x) {
        assert.throws(() => poptorch.set_available_memory([1], 0.5), /only set available memory for Tensor values/);
        assert.throws(() => poptorch.setAvailableMemory(x, 0), /\(0, 1\]/);
        return poptorch.set_available_memory(this.fc.forward(x).reshape([-1]), 0.2);
      }
    }
    const { graph } = api.trace(new M(), [{ name: "x", shape: [2, 4] }]);
    const lin = graph.nodes.find((n) => n.opname === "linear");
    assert.equal(lin.meta.available_memory, 0.2);
  });

  test("Precision options: partials type, stochastic rounding, JSON, errors and warnings", () => {
    const o = new poptorch.Options();
    o.Precision.setPartialsType("half").enableStochasticRounding(true);
    const j = o.toJSON();
    assert.equal(j.Precision.partialsType, "half");
    assert.equal(j.Precision.enableStochasticRounding, true);
    assert.deepEqual(poptorch.Options.fromJSON(j).toJSON().Precision, j.Precision);
    const e = (() => { try { o.Precision.setPartialsType("int32"); } catch (err) { return err; } })();
    assert.equal(e.option, "Precision.partialsType");
    assert.throws(() => o.Precision.setPartialsType("double"), /float32.*float16/);
    class M extends nn.Module {
      constructor() {
        super();
        this.fc = new nn.Linear(4, 4);
      }
      forward(x) {
        return this.fc.forward(x);
      }
    }
    const p = poptorch.inferenceModel(new M(), o).plan(f32([2, 4], new Float32Array(8)));
    const codes = p.warnings.map((w) => w.code);
    assert.ok(codes.includes("stochastic_rounding_inference") && codes.includes("stochastic_rounding_without_float16"), codes.join());
  });
});

describe("serializedMatMul and SerializedEmbedding", () => {
  test("every mode gives the product's values", () => {
    const [m, n, p] = [4, 6, 8];
    const a = Array.from({ length: m * n }, (_, k) => (((k * 5) % 13) - 6) / 8);
    const b = Array.from({ length: n * p }, (_, k) => (((k * 3) % 7) - 3) / 4);
    const want = [];
    for (let i = 0; i < m; i++) for (let j = 0; j < p; j++) want.push(a.slice(i * n, i * n + n).reduce((s, x, k) => s + x * b[k * p + j], 0));
    const Mode = poptorch.MatMulSerializationMode;
    assert.deepEqual(Object.keys(Mode), ["InputChannels", "ReducingDim", "OutputChannels", "Disabled"]);
    for (const [mode, factor] of [[Mode.InputChannels, 2], [Mode.ReducingDim, 3], [Mode.OutputChannels, 4], [Mode.Disabled, undefined]]) {
      class M extends nn.Module {
        forward(x) {
          return poptorch.serializedMatMul(x, constant(b, [n, p]), mode, factor);
        }
      }
      const out = poptorch.inferenceModel(new M()).call(f32([m, n], a));
      Array.from(out.data).forEach((x, k) => assert.ok(Math.abs(x - want[k]) < 1e-5, `${mode}: ${out.data} vs ${want}`));
    }
    class Bad extends nn.Module {
      forward(x) {
        return poptorch.serializedMatMul(x, constant(b, [n, p]), Mode.OutputChannels, 3);
      }
    }
    assert.throws(() => api.trace(new Bad(), [{ name: "x", shape: [m, n] }]), /factor \(3\) must be a factor/);
  });

  test("SerializedEmbedding.fromEmbedding looks up the embedding's rows, one parameter per split", () => {
    const emb = new nn.Embedding(10, 3);
    const ser = nn.SerializedEmbedding.fromEmbedding(emb, 5);
    assert.deepEqual(ser.namedParameters().map((e) => e[0]), [0, 1, 2, 3, 4].map((i) => `split_embeddings.${i}.weight`));
    const ids = i32([6], [0, 9, 4, 5, 1, 4]);
    const w = Array.from(emb.stateDict().weight.data);
    const want = [0, 9, 4, 5, 1, 4].flatMap((i) => w.slice(3 * i, 3 * i + 3));
    assert.deepEqual(Array.from(poptorch.inferenceModel(ser).call(ids).data), want);
    assert.throws(() => new nn.SerializedEmbedding(10, 3, 3), /divisible/);
  });
});
