// Convolutional layers from the npm package: a JS module with Conv2d, BatchNorm2d and
// MaxPool2d traced for training and planned (tests/consumer/vision.mjs imports
// "ipu-playground" by name, as a user does).
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");

describe("convolutional layers from the npm package", () => {
  let m;
  before(async () => {
    m = await import(pathToFileURL(path.join(CONSUMER, "vision.mjs")).href);
  });

  test("a ResNet-style module traces (scoped ops, buffers updated in place) and plans", () => {
    const model = m.traceTinyResNet();
    const ops = model.graph.nodes.map((n) => n.opname);
    for (const op of ["conv2d", "batch_norm", "max_pool2d", "adaptive_avg_pool2d", "cross_entropy", "buffer_update"]) {
      assert.ok(ops.includes(op), `${op} in ${[...new Set(ops)]}`);
    }
    assert.match(model.text, /conv2d\(.*stride=\[2, 2\] padding=\[3, 3\]/);
    assert.match(model.text, /label_smoothing=0\.1/);
    const conv = model.graph.nodes.find((n) => n.opname === "conv2d");
    assert.equal(conv.meta.scope, "conv1");
    // Three batch norms, each updating running_mean, running_var and num_batches_tracked.
    assert.equal(ops.filter((o) => o === "buffer_update").length, 9);
    const p = m.plan(model, {}, { training: true, optimizer: "sgd" });
    assert.equal(p.valid, true, JSON.stringify(p.errors));
    assert.equal(p.fits, true);
    assert.ok(p.program.ops.includes("conv2d_grad_weight") && p.program.ops.includes("batch_norm_grad"));
    assert.ok(p.memory.ipus[0].peakBytes > 0 && p.time.stepTimeS > 0);
  });

  test("crossEntropy ignores targets of -100 unless told otherwise, as F.cross_entropy: the mean of -log softmax over the other rows", () => {
    const { nn, poptorch } = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
    const logits = [2.0, -1.0, 0.5, 0.1, 0.2, 0.3, -2.0, 1.5, 0.0, 1.0, 1.0, 1.0];
    const x = { shape: [4, 3], data: new Float32Array(logits) };
    const loss = (options, targets) => {
      const net = new (class extends nn.Module {
        forward(x, y) { return x.crossEntropy(y, null, options); }
      })();
      return poptorch.inferenceModel(net).call(x, { shape: [4], dtype: "int32", data: new Int32Array(targets) }).data[0];
    };
    // The reference, by hand: -log softmax(x_i)[y_i] averaged over the rows not ignored.
    const reference = (targets, ignore) => {
      let sum = 0, n = 0;
      targets.forEach((t, i) => {
        if (t === ignore) return;
        const row = logits.slice(3 * i, 3 * i + 3);
        const lse = Math.log(row.reduce((a, v) => a + Math.exp(v), 0));
        sum += lse - row[t];
        n++;
      });
      return sum / n;
    };
    const targets = [0, -100, 1, 2];
    assert.ok(Math.abs(loss(undefined, targets) - reference(targets, -100)) < 1e-6);
    assert.ok(Math.abs(loss({}, targets) - reference(targets, -100)) < 1e-6);
    // Another ignoreIndex: -100 is then a class index out of range.
    const other = [0, 1, 1, 2];
    assert.ok(Math.abs(loss({ ignoreIndex: 1 }, other) - reference(other, 1)) < 1e-6);
    assert.throws(() => loss({ ignoreIndex: 1 }, targets), /-100/);
  });

  test("BatchNorm2d with replicas follows PopTorch's buffer rule: broadcastBuffers(False), then each replica keeps its own running statistics", () => {
    const { nn, poptorch } = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
    class Net extends nn.Module {
      constructor() { super(); this.bn = new nn.BatchNorm2d(2, { momentum: 0.1 }); }
      forward(x) { return poptorch.identity_loss(this.bn.forward(x).mul(x).mean(), "mean"); }
    }
    // A combined batch of 4 images (2 channels, 1×2) for 2 replicas: replica 0 gets the first two.
    const data = Float32Array.from({ length: 16 }, (_, i) => ((i * 7) % 11) / 4 - 1);
    const x = { shape: [4, 2, 1, 2], data };
    const sgd = (net) => new poptorch.optim.SGD(net.parameters(), { lr: 0.1 });
    const refused = new Net();
    assert.throws(() => poptorch.trainingModel(refused, new poptorch.Options().replicationFactor(2), sgd(refused)).call(x),
      /PopTorch does not support broadcasting buffers.*broadcastBuffers\(False\)/);
    const net = new Net();
    const model = poptorch.trainingModel(net, new poptorch.Options().replicationFactor(2).broadcastBuffers(false), sgd(net));
    model.call(x);
    model.copyWeightsToHost();
    // PyTorch's update from replica 0's two images: mean, and the unbiased variance, per channel.
    const channel = (c) => [0, 1].flatMap((n) => [0, 1].map((w) => data[n * 4 + c * 2 + w]));
    const state = net.stateDict();
    for (const c of [0, 1]) {
      const v = channel(c);
      const mean = v.reduce((a, b) => a + b, 0) / v.length;
      const varU = v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1);
      assert.ok(Math.abs(state["bn.running_mean"].data[c] - 0.1 * mean) < 1e-6, `running_mean[${c}]`);
      assert.ok(Math.abs(state["bn.running_var"].data[c] - (0.9 + 0.1 * varU)) < 1e-6, `running_var[${c}]`);
    }
  });

  test("padding 'same' keeps the spatial size and 'valid' pads nothing, with PyTorch's limits", () => {
    const shapeOf = (conv) => {
      const model = { conv, forward(x) { return this.conv.forward(x); } };
      const t = m.trace(model, [{ name: "x", shape: [2, 3, 9, 11] }]);
      return t.graph.values[t.graph.outputs[0]].shape;
    };
    // PyTorch: Conv2d(3, 8, 3, padding='same') and Conv2d(3, 8, 5, padding='same', dilation=2)
    // keep 9 x 11; padding='valid' gives 9 - 3 + 1 = 7 by 11 - 3 + 1 = 9.
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, 3, { padding: "same" })), [2, 8, 9, 11]);
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, 5, { padding: "same", dilation: 2 })), [2, 8, 9, 11]);
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, [3, 1], { padding: "same" })), [2, 8, 9, 11]);
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, 3, { padding: "valid" })), [2, 8, 7, 9]);
    // An even kernel pads unevenly (1 before, 2 after for 4), as PyTorch: a zero row and
    // column are padded after the input first (values: tests/conv_models.rs, PyTorch's).
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, 4, { padding: "same" })), [2, 8, 9, 11]);
    assert.deepEqual(shapeOf(new m.nn.Conv2d(3, 8, [2, 3], { padding: "same", dilation: [3, 1] })), [2, 8, 9, 11]);
    const pkg = createRequire(path.join(REPO, "tests", "consumer", "index.mjs"))("ipu-playground");
    const direct = m.trace({ forward: (x) => x.conv2d(pkg.constant(new Float32Array(3 * 2 * 2), [1, 3, 2, 2]), null, { padding: "same" }) },
      [{ name: "x", shape: [2, 3, 9, 11] }]);
    assert.deepEqual(direct.graph.values[direct.graph.outputs[0]].shape, [2, 1, 9, 11]);
    // PyTorch's own refusal.
    assert.throws(() => new m.nn.Conv2d(3, 8, 3, { padding: "same", stride: 2 }), /padding='same' is not supported for strided convolutions/);
    assert.throws(() => new m.nn.Conv2d(3, 8, 3, { padding: "full" }), /padding must be a size, \[h, w\], "valid" or "same"/);
  });

  test("wrong sizes are errors naming the layer and the cause", () => {
    assert.throws(() => new m.nn.Conv2d(3, 4, 3, { groups: 2 }), /in_channels must be divisible by groups/);
    assert.throws(() => new m.nn.MaxPool2d([2, 2, 2]), /kernelSize must be a whole number or \[h, w\]/);
    assert.throws(() => new m.nn.BatchNorm2d(0), /numFeatures must be at least 1/);
  });
});
