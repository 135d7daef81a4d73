// Convolutional layers from the npm package: a JS module with Conv2d, BatchNorm2d and
// MaxPool2d traced for training and planned (tests/consumer/vision.mjs imports
// "ipu-playground" by name, as a user does).
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";
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

  test("wrong sizes are errors naming the layer and the cause", () => {
    assert.throws(() => new m.nn.Conv2d(3, 4, 3, { groups: 2 }), /in_channels must be divisible by groups/);
    assert.throws(() => new m.nn.MaxPool2d([2, 2, 2]), /kernelSize must be a whole number or \[h, w\]/);
    assert.throws(() => new m.nn.BatchNorm2d(0), /numFeatures must be at least 1/);
  });
});
