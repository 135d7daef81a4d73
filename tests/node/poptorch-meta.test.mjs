// Planning without materialising (PyTorch's meta device): built-in modules' parameters are
// shape-only until something needs their values, model.plan takes shape-only inputs, and a
// seeded parameter has the same values whether it is made early or late.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { api, nn, poptorch, f32 } from "./poptorch-helpers.mjs";

const MiB = 2 ** 20;

/** Layers of `width` (4 × Linear width→width, a LayerNorm) `depth` times, and a loss. */
class Wide extends nn.Module {
  constructor(width, depth) {
    super();
    this.blocks = new nn.ModuleList(
      Array.from({ length: depth }, () => new nn.Sequential([
        new nn.Linear(width, width), new nn.Linear(width, width), new nn.Linear(width, width),
        new nn.Linear(width, width), new nn.LayerNorm(width),
      ])),
    );
    this.depth = depth;
  }
  forward(x) {
    let h = x;
    for (let i = 0; i < this.depth; i++) h = this.blocks.get(i).forward(h);
    return poptorch.identity_loss(h.mul(h), "mean");
  }
}

const rss = () => process.memoryUsage().rss;

describe("planning without materialising", () => {
  test("a model of 1 GiB of weights is built, wrapped and planned without allocating them", () => {
    const before = rss();
    const net = new Wide(4096, 4); // 16 × 4096² floats: 1 GiB
    const opts = new poptorch.Options().deviceIterations(2);
    opts.Training.gradientAccumulation(64);
    const model = poptorch.trainingModel(net, opts, new poptorch.optim.SGD(net.parameters(), { lr: 0.01 }));
    const plan = model.plan({ shape: [2 * 64 * 4, 4096], dtype: "float32" });
    assert.equal(plan.training, true);
    assert.equal(plan.valid, true, JSON.stringify(plan.errors));
    const grown = (rss() - before) / MiB;
    assert.ok(grown < 256, `planning grew the process by ${grown.toFixed(0)} MiB (the weights are 1024 MiB)`);
    // Shapes and dtypes are read without making the values.
    const [name, p] = net.namedParameters()[0];
    assert.equal(name, "blocks.0.0.weight");
    assert.deepEqual(Array.from(p.shape), [4096, 4096]);
    assert.equal(p.dtype, "float32");
    assert.ok((rss() - before) / MiB < 256);
  });

  test("shape-only inputs plan as the same inputs with data", () => {
    const make = () => {
      api.manualSeed(5);
      return new Wide(8, 2);
    };
    const opts = () => new poptorch.Options().deviceIterations(4);
    const a = poptorch.trainingModel(make(), opts(), undefined);
    const b = poptorch.trainingModel(make(), opts(), undefined);
    const shaped = a.plan({ shape: [16, 8], dtype: "float32" });
    const data = b.plan(f32([16, 8], new Float32Array(128)));
    assert.deepEqual(shaped, data);
    // A call needs data: a shape-only input is an error there.
    assert.throws(() => a.call({ shape: [16, 8], dtype: "float32" }), /data/);
  });

  test("a shape-only combined batch may exceed one tensor's limit; the traced micro-batch may not", () => {
    // ResNet-50's step in Graphcore's configuration: 18 images × 16 replicas × 57 micro-batches
    // of 3 × 224 × 224 in float16 is 4.9 GB, never allocated; each micro-batch is 5.4 MB.
    class Stem extends nn.Module {
      constructor() {
        super();
        this.conv = new nn.Conv2d(3, 8, 7, { stride: 2, padding: 3, bias: false });
      }
      forward(x) {
        return poptorch.identity_loss(this.conv.forward(x).mean(), "mean");
      }
    }
    const opts = () => {
      const o = new poptorch.Options().replicationFactor(16);
      o.Training.gradientAccumulation(57);
      return o;
    };
    const model = poptorch.trainingModel(new Stem().half(), opts(), undefined);
    const plan = model.plan({ shape: [18 * 16 * 57, 3, 224, 224], dtype: "float16" }, { throwOnInvalid: false });
    assert.equal(plan.samplesPerStep ?? plan.time.samplesPerStep, 18 * 16 * 57);
    assert.deepEqual(model.tracedModel.graph.values[0].shape, [18, 3, 224, 224]);
    // A micro-batch over the limit is still the tracer's error, naming the input.
    const big = poptorch.trainingModel(new Stem().half(), opts(), undefined);
    assert.throws(() => big.plan({ shape: [16 * 57 * 2048, 3, 224, 224], dtype: "float16" }), /model input 'input0'.*256 MiB/);
  });

  test("a parameter's values are the same made early or late, in any order", () => {
    const build = () => {
      api.manualSeed(11);
      return [new nn.Linear(5, 3), new nn.Embedding(7, 2), new nn.LayerNorm(3)];
    };
    const [l1, e1, n1] = build();
    const early = [l1.stateDict(), e1.stateDict(), n1.stateDict()];
    const [l2, e2, n2] = build();
    new nn.Linear(50, 50).stateDict(); // another module made and drawn in between
    const late = [n2.stateDict(), e2.stateDict(), l2.stateDict()].reverse();
    for (let i = 0; i < 3; i++) {
      for (const k of Object.keys(early[i])) {
        assert.deepEqual(Array.from(late[i][k].data), Array.from(early[i][k].data), k);
      }
    }
    assert.ok(early[0].weight.data.every((v) => Math.abs(v) <= 1 / Math.sqrt(5)));
    assert.deepEqual(Array.from(early[2].weight.data), [1, 1, 1]);
  });

  test("half() keeps a parameter shape-only, and its values are the float32 ones rounded", () => {
    api.manualSeed(2);
    const a = new nn.Linear(3, 2);
    api.manualSeed(2);
    const b = new nn.Linear(3, 2).half();
    assert.equal(b.namedParameters()[0][1].dtype, "float16");
    new nn.Embedding(1, 1); // a later draw: b's values were fixed when it was made
    const w32 = a.stateDict().weight;
    const w16 = b.stateDict().weight;
    assert.equal(w16.dtype, "float16");
    assert.deepEqual(w16.shape, [2, 3]);
    for (let i = 0; i < 6; i++) assert.ok(Math.abs(w16.data[i] - w32.data[i]) <= 1e-3 * Math.max(1, Math.abs(w32.data[i])));
  });

  test("training materialises the weights and writes them back; the plan stays the same", () => {
    api.manualSeed(4);
    const net = new Wide(4, 1);
    const model = poptorch.trainingModel(net, new poptorch.Options(), new poptorch.optim.SGD(net.parameters(), { lr: 0.1 }));
    const before = model.plan({ shape: [2, 4], dtype: "float32" });
    const w0 = Array.from(net.stateDict()["blocks.0.0.weight"].data);
    model.call(f32([2, 4], [1, 2, 3, 4, 5, 6, 7, 8]));
    const w1 = Array.from(net.stateDict()["blocks.0.0.weight"].data);
    assert.notDeepEqual(w1, w0, "trained");
    assert.deepEqual(model.plan(f32([2, 4], new Float32Array(8))), before);
  });
});
