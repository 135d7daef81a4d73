// The JS tracer from the npm package: a user's Module subclass (tests/consumer/model.mjs)
// traced into a graph with scopes, Blocks, parameter names and JS source lines.
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import { REPO } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const MODEL_SRC = fs.readFileSync(path.join(CONSUMER, "model.mjs"), "utf8").split("\n");
const lineOf = (snippet) => MODEL_SRC.findIndex((l) => l.includes(snippet)) + 1;

describe("tracing a JS model with the npm package", () => {
  let m;
  before(async () => {
    m = await import(pathToFileURL(path.join(CONSUMER, "model.mjs")).href);
  });

  test("records every op with its module path, Block, IPU and JS source line", () => {
    const { text, graph, parameters, modules } = m.traceNet();
    const ops = graph.nodes.map((n) => n.opname);
    assert.deepEqual(
      ops.filter((o) => !["input", "parameter"].includes(o)),
      ["linear", "relu", "layer_norm", "linear", "relu", "linear", "relu", "linear"],
      text,
    );
    assert.deepEqual(
      parameters.map((p) => p[0]),
      [
        "embed.0.weight", "embed.0.bias", "encoder.norm.weight", "encoder.norm.bias",
        "encoder.layers.0.weight", "encoder.layers.0.bias", "encoder.layers.1.weight",
        "encoder.layers.1.bias", "head.weight",
      ],
    );
    assert.deepEqual(modules, ["embed", "embed.0", "embed.1", "encoder", "encoder.norm", "encoder.layers",
      "encoder.layers.0", "encoder.layers.1", "drop", "head"]);
    const byOp = (op) => graph.nodes.filter((n) => n.opname === op);
    const [l0, l1, l2, head] = byOp("linear");
    assert.equal(l0.meta.scope, "embed.0");
    assert.equal(l1.meta.scope, "encoder.layers.0");
    assert.equal(l2.meta.scope, "encoder.layers.1");
    assert.equal(head.meta.scope, "head");
    assert.deepEqual([l0.meta.block, l0.meta.ipu], ["stage0", 0]);
    assert.deepEqual([head.meta.block, head.meta.ipu], ["stage1", 1]);
    // relu called on a Tensor in the user's file records that line.
    const relus = byOp("relu");
    assert.equal(relus[1].meta.source, `model.mjs:${lineOf(".forward(h).relu()")}`);
    assert.equal(head.meta.source, `model.mjs:${lineOf("this.head.forward(this.drop.forward(h))")}`);
    // Inference trace: dropout is the identity; the printed form names it all.
    assert.ok(!ops.includes("dropout"));
    assert.match(text, /%\d+ = linear\(%\d+, %\d+\) \[bias=false\] : f32\[2,3\] +# head \| block "stage1" ipu 1 \| model\.mjs:\d+/);
  });

  test("recording source lines leaves the caller's Error.prepareStackTrace and stackTraceLimit as they were", () => {
    // Each op reads the JS stack (on V8 through a prepareStackTrace of the package's own,
    // set only while it reads): a user's own settings survive, and lines are still found.
    const had = Object.hasOwn(Error, "prepareStackTrace");
    const orig = Error.prepareStackTrace;
    const limit = Error.stackTraceLimit;
    m.traceNet();
    assert.equal(Object.hasOwn(Error, "prepareStackTrace"), had);
    assert.equal(Error.stackTraceLimit, limit);
    const mine = (_err, frames) => `custom ${frames.length}`;
    Error.prepareStackTrace = mine;
    Error.stackTraceLimit = 3;
    try {
      const { graph } = m.traceNet();
      const head = graph.nodes.filter((n) => n.opname === "linear").at(-1);
      assert.equal(head.meta.source, `model.mjs:${lineOf("this.head.forward(this.drop.forward(h))")}`);
      assert.equal(Error.prepareStackTrace, mine);
      assert.equal(Error.stackTraceLimit, 3);
      assert.match(new Error("x").stack, /^custom \d+$/);
    } finally {
      if (had) Error.prepareStackTrace = orig;
      else delete Error.prepareStackTrace;
      Error.stackTraceLimit = limit;
    }
  });

  test("the nn namespace names the same classes as the top-level exports", () => {
    assert.equal(m.nn.Module, m.Module);
    assert.equal(m.nn.Linear, m.Linear);
    assert.ok(new m.Net() instanceof m.Module);
    assert.ok(Object.isFrozen(m.nn));
  });

  test("a training trace records a dropout mask; the model object is left as it was", () => {
    const net = new m.Net();
    const own = Object.keys(net);
    const { graph } = m.trace(net, [{ name: "x", shape: [2, 4] }], { training: true });
    assert.ok(graph.nodes.some((n) => n.op === "random_mask"));
    assert.ok(graph.nodes.some((n) => n.op === "dropout"));
    assert.deepEqual(Object.keys(net), own, "no forward wrappers left behind");
    assert.equal(Object.hasOwn(net.encoder, "forward"), false);
  });

  test("a shape error names the op, the module, the JS line and both shapes", () => {
    assert.throws(
      () => m.trace(new m.Broken(), [{ name: "x", shape: [3, 4] }]),
      (err) => {
        assert.ok(err instanceof Error);
        assert.match(err.message, /'linear' in scope fc/);
        assert.match(err.message, new RegExp(`model\\.mjs:${lineOf("x has 4 features")}`));
        assert.match(err.message, /f32\[3,4\]/);
        assert.match(err.message, /f32\[2,5\]/);
        // The same place as a field, for a caller that marks the line.
        assert.equal(err.source, `model.mjs:${lineOf("x has 4 features")}`);
        assert.equal(err.kind, "ir");
        return true;
      },
    );
  });

  test("buffers are read and updated in place, parameters and constants are named; reassignment is rejected", () => {
    const { text, graph, parameters, constants } = m.trace(new m.WithTracker(), [{ name: "x", shape: [4, 3] }]);
    const names = graph.nodes.map((n) => n.opname);
    assert.ok(names.includes("buffer") && names.includes("buffer_update"), text);
    assert.match(text, /buffer "track\.running_mean" : f32\[3\]/);
    assert.match(text, /buffer_update\(%\d+\) \["track\.running_mean"\]/);
    assert.deepEqual(parameters, [["track.scale", [3]]]);
    assert.deepEqual(constants, ["_tensor_constant0"]);
    assert.throws(
      () => m.trace(new m.Reassigns(), [{ name: "x", shape: [4, 3] }]),
      { message: /^Buffer running_mean is reassigned within the model when calling the forward method\. This is not supported\. Consider using this\.updateBuffer\("running_mean", src\)/, kind: "poptorch" },
    );
  });

  test("traces without generating code from strings (the page's CSP has no unsafe-eval)", () => {
    // Node's --disallow-code-generation-from-strings makes eval and new Function throw, as a
    // Content-Security-Policy without 'unsafe-eval' does in the page's worker.
    const r = spawnSync(
      process.execPath,
      ["--disallow-code-generation-from-strings", "--input-type=module", "-e",
        `import { traceNet } from "./model.mjs";
         let blocked = false;
         try { new Function("return 1"); } catch { blocked = true; }
         console.log(blocked, traceNet().modules.join(","));`],
      { cwd: CONSUMER, encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), "true embed,embed.0,embed.1,encoder,encoder.norm,encoder.layers,encoder.layers.0,encoder.layers.1,drop,head");
  });

  test("bad models and inputs are clear errors, and tracing still works after them", () => {
    assert.throws(() => m.trace({}, [{ shape: [1] }]), /forward method/);
    assert.throws(() => m.trace(new m.Net(), [{ name: "x" }]), /input 'x' needs a shape/);
    class Throws extends m.Net {
      forward() {
        throw new Error("user bug");
      }
    }
    assert.throws(() => m.trace(new Throws(), [{ name: "x", shape: [2, 4] }]), /user bug/);
    class NotTensor extends m.Net {
      forward() {
        return 42;
      }
    }
    assert.throws(() => m.trace(new NotTensor(), [{ name: "x", shape: [2, 4] }]), /forward's result must be a Tensor/);
    assert.match(m.traceNet().text, /linear/);
  });
});
