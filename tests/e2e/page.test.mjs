// The page, end to end: served by scripts/serve.mjs exactly as `make playground` serves it,
// driven in Debian's Chromium by playwright-core (which never downloads a browser). Every
// test fails on any console error or warning, page error, failed request or HTTP error,
// unless it names the one it provokes.
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { REPO } from "../node/helpers.mjs";
import {
  pageSuite,
  openContext,
  openReady,
  waitAnalysis,
  seqOf,
  selectPreset,
  setCode,
  editorText,
  errorLines,
  assignmentIpus,
  memoryChart,
  ganttRects,
  screenshot,
  assertClean,
} from "./helpers.mjs";

const WASM = path.join(REPO, "www", "pkg", "ipu_playground_bg.wasm");
const BUNDLE = path.join(REPO, "www", "dist", "main.js");
const T = { timeout: 90000 };

// What the presets must show (presets/index.js says the same in `expect`).
const PRESET_IPUS = {
  revgnn: [0],
  "mlp-pipelined": [0, 1, 2, 3],
  "transformer-serial": [0, 1],
  "transformer-parallel": [0, 1],
  replicated: [0, 1],
  "buffer-counter": [0],
  "bert-large": [0, 1, 2, 3],
  "bert-base": [0, 1, 2, 3],
  resnet50: [0],
};

describe("the playground page", () => {
  let server, browser, context, page, problems, allowed;
  const suite = pageSuite([
    [WASM, "build it with scripts/build-wasm.sh web"],
    [BUNDLE, "build it with node web/build.mjs"],
  ]);
  beforeEach(() => ({ server, browser, context, page, problems, allowed } = suite));

  const text = (sel) => page.locator(sel).textContent();

  test("loads: version, the relaxed-SIMD build, the default preset traced and drawn", T, async () => {
    const wasmResponses = [];
    page.on("response", (res) => {
      if (res.url().endsWith(".wasm")) wasmResponses.push(res);
    });
    await openReady(page, server.url + "/");
    assert.equal(await page.title(), "IPU Playground");
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok");
    assert.match(await text("#version"), /^\d+\.\d+\.\d+/);
    assert.equal(await text("#simd"), "wasm SIMD + relaxed SIMD");
    assert.equal(wasmResponses.length, 1, "one wasm, fetched once by the one worker");
    assert.match(wasmResponses[0].url(), /\/pkg\/ipu_playground_relaxed_bg\.wasm$/);
    assert.equal(wasmResponses[0].headers()["content-type"], "application/wasm");
    assert.equal(await page.getByLabel("Preset").inputValue(), "revgnn");
    assert.match(await editorText(page), /new nn\.GroupAddRev\(new GNNBlock\(c, c, dropout\), \{ numGroups \}\)/);
    // The graph: RevGNN written with nn.SAGEConv and nn.GroupAddRev, wrapped by
    // poptorch.trainingModel and planned on one padded part of PubMed (RandomNodeLoader, 10
    // parts); its seven reversible layers are each one `call` region, in `convs` (collapsed
    // on open, as every scope is).
    assert.equal(await text("#graph-title"), "poptorch.trainingModel(RevGNN, Adam) called with x [1973×500], adj [1973×1973], y [1973], mask [1973]");
    const nodes = await page.locator("#graph-chart .node").count();
    assert.ok(nodes >= 13, `${nodes} nodes drawn`);
    assert.match(await text('#graph-chart .node.group[data-group="convs"] .group-info'), /^7 ops · IPU 0$/);
    await page.locator('#graph-chart [data-toggle="convs"]').click();
    assert.equal(await page.locator("#graph-chart g.op", { hasText: "call" }).count(), 7);
    assert.match(await text("#graph"), /spmm\(/);
    assert.match(await text("#status"), /Ready$/);
    assert.equal(await page.locator("#error").isHidden(), true);
  });

  test("falls back to the plain simd128 build when the relaxed one cannot be loaded", T, async () => {
    await page.route("**/ipu_playground_relaxed_bg.wasm", (route) => route.fulfill({ status: 404, body: "gone" }));
    await openReady(page, server.url + "/");
    assert.equal(await text("#simd"), "wasm SIMD");
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok");
    allowed.push(/HTTP 404 .*ipu_playground_relaxed_bg\.wasm|404 \(Not Found\)/);
  });

  test("runs the engine in a module worker under /engine/, never on the main thread", T, async () => {
    await page.addInitScript(() => {
      window.__wasmCalls = [];
      for (const name of ["compile", "compileStreaming", "instantiate", "instantiateStreaming"]) {
        const original = WebAssembly[name];
        WebAssembly[name] = function (...args) {
          window.__wasmCalls.push(name);
          return original.apply(this, args);
        };
      }
      const OriginalModule = WebAssembly.Module;
      WebAssembly.Module = function (...args) {
        window.__wasmCalls.push("Module");
        return new OriginalModule(...args);
      };
    });
    await openReady(page, server.url + "/");
    const workers = page.workers();
    assert.equal(workers.length, 1, "one engine worker until training starts");
    assert.match(workers[0].url(), /\/engine\/worker\.js$/);
    assert.deepEqual(await page.evaluate(() => window.__wasmCalls), [], "the main thread touched WebAssembly");
    const mainResources = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
    assert.deepEqual(mainResources.filter((u) => /\.wasm$/.test(u)), [], "the main thread fetched the wasm");
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
  });

  test("a worker that fails to start is shown, and the page stays usable", T, async () => {
    await page.route("**/engine/worker.js", (route) =>
      route.fulfill({
        contentType: "text/javascript",
        headers: { "Cross-Origin-Embedder-Policy": "require-corp", "Cross-Origin-Resource-Policy": "same-origin" },
        body: 'throw new Error("worker boom");',
      }),
    );
    await page.goto(server.url + "/");
    await page.waitForFunction(() => document.getElementById("status").textContent === "Engine unavailable");
    assert.match(await text("#error"), /^Could not start the engine: .*(worker boom|failed to start)/);
    // The editor and the options still work.
    await page.getByLabel("Preset").selectOption("mlp-pipelined");
    assert.match(await editorText(page), /class MLP/);
    allowed.push(/worker boom|Uncaught/);
  });

  test("an engine whose wasm cannot be fetched is shown", T, async () => {
    await page.route("**/*.wasm", (route) => route.fulfill({ status: 404, body: "gone" }));
    await page.goto(server.url + "/");
    await page.waitForFunction(() => document.getElementById("status").textContent === "Engine unavailable");
    assert.match(await text("#error"), /^Could not start the engine: loading the wasm failed: \S/);
    allowed.push(/HTTP 404 .*ipu_playground(_relaxed)?_bg\.wasm|404 \(Not Found\)/);
  });

  test("is served with a Content-Security-Policy without third-party origins or eval", T, async () => {
    const res = await page.goto(server.url + "/");
    const csp = res.headers()["content-security-policy"];
    assert.match(csp, /default-src 'self'/);
    assert.match(csp, /script-src 'self' 'wasm-unsafe-eval';/);
    const tokens = csp.split(/[\s;]+/);
    assert.deepEqual(tokens.filter((t) => /^https?:|^\*|^'unsafe-eval'$/.test(t)), [], csp);
    const worker = await fetch(server.url + "/engine/worker.js");
    assert.match(worker.headers.get("content-security-policy"), /script-src 'self' 'wasm-unsafe-eval' blob:;/);
    await waitAnalysis(page);
    // No inline script in the page: every script is a file of this origin.
    const inline = await page.evaluate(() => [...document.scripts].filter((s) => !s.src).length);
    assert.equal(inline, 0);
  });

  test("each preset shows its IPUs in the assignment view, and non-empty graph, memory and execution charts", T, async () => {
    await openReady(page, server.url + "/");
    for (const [id, ipus] of Object.entries(PRESET_IPUS)) {
      if (id !== "revgnn") await selectPreset(page, id);
      assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok", `${id}: ${await text("#error")} ${await text("#fit-list")}`);
      await page.getByRole("tab", { name: "Graph" }).click();
      const nodes = await page.locator("#graph-chart .node").count();
      assert.ok(nodes > 0, `${id}: empty graph`);
      await screenshot(page, `preset-${id}-graph`, page.locator(".right"));
      assert.deepEqual(await assignmentIpus(page), ipus, id);
      await screenshot(page, `preset-${id}-assignment`, page.locator(".right"));
      // The memory timeline of every IPU the plan uses: drawn, with the IPU's classes.
      for (const ipu of ipus) {
        const m = await memoryChart(page, ipu);
        assert.ok(m.painted > 0.1, `${id}, IPU ${ipu}: memory chart mostly blank (${m.painted})`);
        assert.ok(m.legend.includes("activations") && m.legend.includes("code"), `${id}, IPU ${ipu}: ${m.legend}`);
        assert.match(m.stats, /\d.*peak.*capacity.*yesfits/, `${id}, IPU ${ipu}`);
      }
      await screenshot(page, `preset-${id}-memory`, page.locator(".right"));
      const gantt = await ganttRects(page);
      assert.deepEqual(Object.keys(gantt).map(Number), ipus, `${id}: a lane per IPU`);
      for (const ipu of ipus) assert.ok(gantt[ipu].compute > 0, `${id}, IPU ${ipu}: no compute drawn`);
      assert.match(await text("#execution-stats"), /step time.*samples\/s/);
      await screenshot(page, `preset-${id}-execution`, page.locator(".right"));
      if (id === "replicated") {
        // 2 IPUs per replica × 4 replicas.
        await page.getByRole("tab", { name: "Assignment" }).click();
        assert.match(await text("#assignment-stats"), /8IPUs used/);
        assert.match(await text("#assignment-stats"), /2 × 4per replica × replicas/);
      }
      if (id === "transformer-serial" || id === "transformer-parallel") {
        // Phased: a column per phase; training adds the backward phases.
        await page.getByRole("tab", { name: "Assignment" }).click();
        const heads = await page.locator("#stages-chart .col-head").allTextContents();
        assert.deepEqual(heads, id === "transformer-serial" ? ["Phase 0", "Phase 1", "Phase 2"] : ["Phase 0", "Phase 1", "Phase 2", "Phase 3", "Phase 4", "Phase 5", "Phase 6"]);
      }
    }
  });

  test("every preset honours the float16 switch: traced in float16, planned on the same IPUs, weights no larger", T, async () => {
    await openReady(page, server.url + "/");
    const weightBytes = () => page.locator("#memory-stats").evaluate((e) => Number(e.dataset.weights) + Number(e.dataset.buffers));
    for (const [id, ipus] of Object.entries(PRESET_IPUS)) {
      if (id !== "revgnn") await selectPreset(page, id);
      const half = page.getByLabel("float16 (model.half())");
      // The BERT and ResNet-50 presets start in float16, as Graphcore trains them.
      if (await half.isChecked()) {
        const before = await seqOf(page);
        await half.uncheck();
        // In float32 their stochastic rounding has no float16 to round to: a warning.
        assert.ok(["ok", "warn"].includes(await waitAnalysis(page, before)), `${id} in float32: ${await text("#error")} ${await text("#fit-list")}`);
      }
      await page.getByRole("tab", { name: "Memory" }).click();
      const f32 = await weightBytes();
      const seq = await seqOf(page);
      await half.check();
      assert.equal(await waitAnalysis(page, seq), "ok", `${id}: ${await text("#error")} ${await text("#fit-list")}`);
      const f16 = await weightBytes();
      assert.ok(f16 <= f32 && (f32 === 0 || f16 < f32), `${id}: on-chip weights and buffers ${f32} B in float32, ${f16} B in float16`);
      await page.getByRole("tab", { name: "Graph" }).click();
      assert.match(await text("#graph"), /f16\[/, `${id}: nothing traced in float16`);
      await page.getByRole("tab", { name: /Fit/ }).click();
      assert.doesNotMatch(await text("#fit-list"), /does not read `half`/, id);
      assert.deepEqual(await assignmentIpus(page), ipus, id);
    }
  });

  test("the pipelined MLP: 7 training stages, the ramp-up/steady/ramp-down chart, copies between IPUs", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.equal(await page.locator("#stages-chart .col-head").count(), 7);
    assert.deepEqual(await page.locator("#stages-chart .col-sub").allTextContents(), ["forward", "forward", "forward", "fwd + bwd", "backward", "backward", "backward"]);
    // 7 stages × 8 micro-batches: 14 steps, 6 up, 2 steady, 6 down.
    assert.equal(await page.locator("#pipeline-chart rect.mb").count(), 56);
    assert.match(await text("#view-assignment .pipeline"), /ramp-up 6 steps, steady 2, ramp-down 6/);
    // Activations forward over IPUs 0 → 1 → 2 → 3, gradients back 3 → 2 → 1 → 0: 32 × 512 floats each.
    assert.deepEqual(await page.locator(".copies tbody td:nth-child(2)").allTextContents(), ["IPU 0", "IPU 1", "IPU 2", "IPU 3", "IPU 2", "IPU 1"]);
    assert.deepEqual([...new Set(await page.locator(".copies tbody td:nth-child(4)").allTextContents())], ["64.0 KiB"]);
    // A long accumulation: the steady state is drawn shortened.
    const seq = await seqOf(page);
    await page.getByLabel("Gradient accumulation").fill("200");
    await waitAnalysis(page, seq);
    assert.match(await text("#view-assignment .pipeline"), /7 stages × 200 micro-batches .*ramp-up 6 steps, steady 194, ramp-down 6\. The steady state is drawn shortened/);
    assert.equal(await page.locator("#pipeline-chart .pipe-gap").count(), 1);
    assert.ok((await page.locator("#pipeline-chart rect.mb").count()) < 200);
  });

  test("editing the code moves a Block to another IPU", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    assert.deepEqual(await assignmentIpus(page), [0, 1, 2, 3]);
    const code = await editorText(page);
    assert.ok(code.includes('block("head", 3,'));
    // head to IPU 2, with hidden2: IPUs 0, 1, 2 in order, 3 pipeline stages forward.
    await setCode(page, code.replace('block("head", 3,', 'block("head", 2,'));
    assert.deepEqual(await assignmentIpus(page), [0, 1, 2]);
    const head = page.locator('#stages-chart .cell[data-blocks~="head"]');
    // hidden2 and head share the last forward stage, which also runs the first backward step: 2 × 3 − 1 stages.
    assert.deepEqual(await head.evaluateAll((cells) => cells.map((c) => `${c.dataset.ipu}:${c.dataset.blocks}`)), ["2:hidden2 head"]);
    assert.deepEqual(await page.locator("#stages-chart .col-sub").allTextContents(), ["forward", "forward", "fwd + bwd", "backward", "backward"]);
    // Three IPUs: PopTorch reserves a power of two, so the planner says 4 are needed.
    assert.match(await text("#assignment-stats"), /3IPUs used/);
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-list"), /The model uses 3 IPUs, but PopTorch must reserve at least 4/);
    assert.match(await text("#err-autoRound"), /must reserve at least 4/, "shown at the option that fixes it");
    await screenshot(page, "edit-move-block-fit", page.locator(".right"));
    // autoRoundNumIPUs: a warning, and 4 reserved.
    const seq = await seqOf(page);
    await page.getByLabel(/Round the IPU count up/).check();
    await waitAnalysis(page, seq);
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok");
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.match(await text("#assignment-stats"), /3IPUs used4IPUs reserved/);
  });

  test("broken code: the error marker sits at its line, and fixing it clears it", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const good = await editorText(page);
    const lines = good.split("\n");
    const at = (needle) => lines.findIndex((l) => l.includes(needle)) + 1;

    // A syntax error.
    const fc2 = at("this.fc2 = new nn.Linear(width, width);");
    await setCode(page, good.replace("this.fc2 = new nn.Linear(width, width);", "this.fc2 = new nn.Linear(width, width));"));
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "error");
    assert.deepEqual(await errorLines(page), [fc2]);
    assert.match(await text("#error"), new RegExp(`^Line ${fc2}: Syntax error: Unexpected token`));
    assert.equal(await page.locator(".cm-lint-marker-error").count(), 1);
    // The views still show the last model that traced, and say so.
    assert.equal(await page.locator("#stale").isVisible(), true);
    await screenshot(page, "error-syntax");

    // A shape mismatch, found by the tracer, at the call that makes it.
    const fc1 = at("this.fc1.forward(x)");
    await setCode(page, good.replace("shape: [32, 784]", "shape: [32, 100]"));
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "error");
    assert.deepEqual(await errorLines(page), [fc1]);
    assert.match(await text("#error"), /100|784/);

    // A model that throws.
    const head = at('block("head", 3,');
    await setCode(page, good.replace('return block("head", 3,', 'throw new Error("no head today"); return block("head", 3,'));
    assert.deepEqual(await errorLines(page), [head]);
    assert.match(await text("#error"), /no head today/);

    // Fixed: the marker and the message go, the views are current again.
    assert.equal(await setCode(page, good), "ok");
    assert.deepEqual(await errorLines(page), []);
    assert.equal(await page.locator("#error").isHidden(), true);
    assert.equal(await page.locator("#stale").isHidden(), true);
    assert.equal(page.workers().length, 1, "the same worker kept running");
  });

  test("a RevGNN hyper-parameter the model refuses is marked where it throws; the dataset picked for training is planned", T, async () => {
    await openReady(page, server.url + "/");
    const good = await editorText(page);
    const line = good.split("\n").findIndex((l) => l.includes("throw new Error(`hidden size")) + 1;
    await setCode(page, good.replace("hidden: 160,", "hidden: 15,"));
    assert.deepEqual(await errorLines(page), [line]);
    assert.match(await text("#error"), /hidden size 15 is not divisible by the number of groups 2/);
    assert.equal(await setCode(page, good), "ok");
    assert.deepEqual(await errorLines(page), []);
    // The code reads the Training view's dataset: choosing Cora plans RevGNN on Cora's parts.
    await page.getByRole("tab", { name: "Training" }).click();
    const seq = await seqOf(page);
    await page.getByLabel("Dataset").selectOption("Cora");
    await waitAnalysis(page, seq);
    await page.getByRole("tab", { name: "Graph" }).click();
    assert.match(await text("#graph-title"), /called with x \[272×1433\], adj \[272×272\], y \[272\], mask \[272\]$/);
  });

  test("a plain nn.Module export: a training model without a loss is named at its `training` line; the loss output is found or named", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    // The old convention, still accepted for plain modules: { model: net, inputs, training, optimizer }.
    const preset = await editorText(page);
    const good = preset.slice(0, preset.indexOf("// `options`")) +
      'export default {\n  model: new MLP(64),\n  inputs: [{ name: "x", shape: [32, 784] }, { name: "labels", shape: [32], dtype: "int32" }],\n  training: true,\n  optimizer: "adam",\n};\n';
    assert.equal(await setCode(page, good), "ok", await text("#error"));
    const line = (code, needle) => code.split("\n").findIndex((l) => l.includes(needle)) + 1;
    const noLoss = good.replace("return [logits, logits.crossEntropy(labels)];", "return logits;");
    await setCode(page, noLoss);
    assert.deepEqual(await errorLines(page), [line(noLoss, "training: true")]);
    assert.match(await text("#error"), /training: true, but forward returns no loss: a training model \(poptorch\.trainingModel\) returns its loss/);
    // An output index that is not there, at the `loss:` line.
    const badIndex = good.replace("training: true,", "training: true,\n  loss: 5,");
    await setCode(page, badIndex);
    assert.deepEqual(await errorLines(page), [line(badIndex, "loss: 5")]);
    assert.match(await text("#error"), /`loss: 5` names output 5, but forward returns 2 outputs/);
    // An optimizer the planner does not model, at the `optimizer:` line.
    const badOpt = good.replace('optimizer: "adam"', 'optimizer: "adagrad"');
    await setCode(page, badOpt);
    assert.deepEqual(await errorLines(page), [line(badOpt, "optimizer:")]);
    assert.match(await text("#error"), /`optimizer` must be one of "sgd", "sgdMomentum", "adam", "adamW", got "adagrad"/);
    assert.equal(await setCode(page, good), "ok");
    assert.deepEqual(await errorLines(page), []);
  });

  test("PopTorch API errors are marked at the line that caused them and listed in Fit & errors", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const good = await editorText(page);
    const line = (code, needle) => code.split("\n").findIndex((l) => l.includes(needle)) + 1;
    const wrap = "model: poptorch.trainingModel(net, options, adam),";
    const fit = async () => {
      await page.getByRole("tab", { name: /Fit/ }).click();
      return text("#fit-current");
    };
    const expectError = async (code, needle, message, name) => {
      assert.equal(await setCode(page, code), "error", name);
      assert.deepEqual(await errorLines(page), [line(code, needle)], `${name}: ${await text("#error")}`);
      assert.match(await text("#error"), message, name);
      assert.match(await fit(), message, `${name}: in Fit & errors`);
      assert.match(await text("#fit-current"), new RegExp(`Go to line ${line(code, needle)}`), name);
    };

    // Wrapping the same module for training twice (without destroy()).
    const twice = good.replace(wrap, `model: (poptorch.trainingModel(net, options, adam),\n      poptorch.trainingModel(net, options, adam)),`);
    await expectError(twice, "      poptorch.trainingModel(net, options, adam)),", /Model has already been wrapped in 'poptorch\.trainingModel'/, "wrapped twice");
    await screenshot(page, "error-wrapped-twice");

    // A training model whose forward returns no loss: at the trainingModel line.
    await expectError(good.replace("return [logits, logits.crossEntropy(labels)];", "return logits;"), wrap, /Couldn't find a loss in graph!/, "no loss");

    // An option PopTorch rejects, set in the code: thrown by the setter, at its line.
    const zero = good.replace("const net = new MLP(512);", "options.deviceIterations(0);\n  const net = new MLP(512);");
    await expectError(zero, "options.deviceIterations(0);", /deviceIterations must be a positive whole number, got 0/, "deviceIterations(0)");

    // Static shapes: a second call with another shape is PopTorch's error, at that call.
    const shapes = good.replace(
      "  return {\n    model: poptorch.trainingModel(net, options, adam),",
      "  const model = poptorch.trainingModel(net, options, adam);\n" +
        "  const batch = (n) => [{ shape: [n * 8, 784], data: new Float32Array(n * 8 * 784) }, { shape: [n * 8], data: new Int32Array(n * 8) }];\n" +
        "  model.call(...batch(32));\n" +
        "  model.call(...batch(16));\n" +
        "  return {\n    model,",
    );
    await expectError(shapes, "model.call(...batch(16));", /Shape mismatch for input0: expected torch\.Size\(\[256, 784\]\) but got torch\.Size\(\[128, 784\]\)/, "static shapes");

    // Gradient accumulation below 2F − 1, set in the code: the plan's error at the setter's line,
    // in Fit & errors and at the panel's field, which says the code's value is the one planned.
    const acc = good.replace("const net = new MLP(512);", "options.Training.gradientAccumulation(4);\n  const net = new MLP(512);");
    assert.equal(await setCode(page, acc), "warn");
    assert.deepEqual(await errorLines(page), [line(acc, "gradientAccumulation(4)")]);
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-list"), /Training\.gradientAccumulation \(4\) must be greater than or equal to the number of pipeline stages \(7\)/);
    assert.equal(await page.locator("#fit-current").isHidden(), true);
    assert.match(await text("#fit-list"), new RegExp(`Go to line ${line(acc, "gradientAccumulation(4)")}`));
    assert.match(await text("#note-gradientAccumulation"), new RegExp(`^Set by your code \\(line ${line(acc, "gradientAccumulation(4)")}\\): 4\\. The code's value is planned`));
    assert.equal(await page.getByLabel("Gradient accumulation").inputValue(), "8", "the panel keeps its own value");
    await screenshot(page, "error-accumulation-in-code");

    // Fixed: nothing marked, nothing listed.
    assert.equal(await setCode(page, good), "ok");
    assert.deepEqual(await errorLines(page), []);
    assert.equal(await page.locator("#fit-current").isHidden(), true);
    assert.equal(await text("#note-gradientAccumulation"), "");
  });

  test("options set in the code win over the panel, and the panel says which", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "transformer-serial");
    const code = await editorText(page);
    const at = code.split("\n").findIndex((l) => l.includes("options.setExecutionStrategy(")) + 1;
    // The panel holds PopTorch's default strategy; the code's SerialPhasedExecution is planned.
    assert.equal(await page.getByLabel("Execution strategy").inputValue(), "pipelined");
    assert.match(await text("#note-strategy"), new RegExp(`^Set by your code \\(line ${at}\\): Serial phased, 2 phases: \\[layer0 \\| layer1 on IPUs 0, 1\\], \\[layer2 \\| layer3 on IPUs 0, 1\\]`));
    assert.match(await text("#note-options"), /its values win/);
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.match(await text("#assignment-stats"), /Serial phased/);
    await screenshot(page, "options-set-in-code");
    // The panel's strategy changes nothing the code sets…
    let seq = await seqOf(page);
    await page.getByLabel("AutoStage").selectOption("autoIncrement");
    await waitAnalysis(page, seq);
    assert.match(await text("#assignment-stats"), /Serial phased/);
    // … while an option the code leaves alone is the panel's.
    seq = await seqOf(page);
    await page.getByLabel("Device iterations").fill("2");
    await waitAnalysis(page, seq);
    await page.getByRole("tab", { name: "Graph" }).click();
    assert.match(await text("#graph-title"), /called with x \[16×32×64\], targets \[512\] \(2 micro-batches\)/);
    // Without the code's strategy the panel's is planned.
    await setCode(page, code.replace("  options.setExecutionStrategy(", "  if (false) options.setExecutionStrategy("));
    assert.equal(await text("#note-strategy"), "");
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.match(await text("#assignment-stats"), /Pipelined/);
  });

  test("the float16 switch: the preset calls model.half(), each IPU's weights halve, Adam's state stays float32; kept on reload", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    await page.getByRole("tab", { name: "Memory" }).click();
    const always = async () => {
      const out = [];
      for (const ipu of ["0", "1", "2", "3"]) {
        await page.locator("#memory-ipu").selectOption(ipu);
        out.push(await page.locator("#memory-stats").evaluate((e) => ({ weights: Number(e.dataset.weights), optimizer: Number(e.dataset.optimizer) })));
      }
      return out;
    };
    const f32 = await always();
    // fc1 784×512 + 512 on IPU 0, in float32 bytes.
    assert.equal(f32[0].weights, (784 * 512 + 512) * 4);
    const half = page.getByLabel("float16 (model.half())");
    assert.equal(await half.isChecked(), false);
    let seq = await seqOf(page);
    await half.check();
    assert.equal(await waitAnalysis(page, seq), "ok", await text("#error"));
    const f16 = await always();
    for (let i = 0; i < 4; i++) {
      assert.ok(f32[i].weights > 0, `IPU ${i} holds weights`);
      assert.equal(f16[i].weights * 2, f32[i].weights, `IPU ${i}: float16 weights take half the bytes`);
      assert.equal(f16[i].optimizer, f32[i].optimizer, `IPU ${i}: Adam's state keeps PopTorch's float32 accumulation`);
    }
    assert.match(await text("#memory-stats"), /weights/);
    await page.getByRole("tab", { name: "Graph" }).click();
    assert.match(await text("#graph"), /f16\[32,784\]/, "the traced input is float16");
    await screenshot(page, "options-float16", page.locator("#options"));
    await page.waitForTimeout(400); // saved after 250 ms
    await page.reload();
    await waitAnalysis(page);
    assert.equal(await page.getByLabel("float16 (model.half())").isChecked(), true);

    // Code that never reads `half`: said at the switch and in Fit & errors.
    const code = await editorText(page);
    const ignoring = code.replace("({ options, half })", "({ options })").replace("if (half) net.half();", "").replace('half ? "float16" : "float32"', '"float32"');
    assert.equal(await setCode(page, ignoring), "ok", "a warning, not an error");
    assert.match(await text("#err-half"), /^Warning: The float16 switch is on, but your code does not read `half`/);
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-list"), /does not read `half`/);
    await setCode(page, code);
    assert.equal(await text("#err-half"), "");

    // Automatic loss scaling needs float16 gradients: refused for the float32 model, at the switch's field too.
    seq = await seqOf(page);
    await page.getByLabel("Automatic loss scaling (Training.setAutomaticLossScaling)").check();
    assert.equal(await waitAnalysis(page, seq), "ok", await text("#error"));
    seq = await seqOf(page);
    await page.getByLabel("float16 (model.half())").uncheck();
    assert.equal(await waitAnalysis(page, seq), "error");
    assert.match(await text("#error"), /No tracked gradient tensors of type fp16 were found\. Automatic loss scaling needs a float16 model: turn on float16/);
    assert.match(await text("#err-automaticLossScaling"), /No tracked gradient tensors of type fp16/);
  });

  test("the buffer counter counts in place over calls, and the replicated model keeps a weight per replica group", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "buffer-counter");
    assert.equal(await page.locator("#console-box").isVisible(), true);
    assert.equal(await text("#console"), "after call 1: count = 1\nafter call 2: count = 2\nafter call 3: count = 3");
    // The buffer is a tensor of its own class in the plan, updated in place.
    await page.getByRole("tab", { name: "Graph" }).click();
    assert.match(await text("#graph"), /buffer_update/);
    const m = await memoryChart(page, 0);
    assert.ok(m.legend.includes("buffers"), m.legend.join());
    // Two device iterations: two micro-batches, two updates, per call.
    const seq = await seqOf(page);
    await page.getByLabel("Device iterations").fill("2");
    await waitAnalysis(page, seq);
    assert.equal(await text("#console"), "after call 1: count = 2\nafter call 2: count = 4\nafter call 3: count = 6");
    await screenshot(page, "preset-buffer-counter-console");
    // Replicas with buffers broadcast: PopTorch's error, at the call that compiles the model.
    const code = await editorText(page);
    const seq2 = await seqOf(page);
    await page.getByLabel("Replication factor").fill("2");
    await waitAnalysis(page, seq2);
    assert.deepEqual(await errorLines(page), [code.split("\n").findIndex((l) => l.includes("model.call(x);")) + 1]);
    assert.match(await text("#error"), /PopTorch does not support broadcasting buffers/);

    await selectPreset(page, "replicated");
    const out = (await text("#console")).split("\n");
    assert.equal(out[0], "decoder.weight on the host: [2,16,256], one copy per group");
    const m1 = /^after one step, group 1's copy differs from group 0's by up to (\S+)$/.exec(out[1]);
    assert.ok(m1 && Number(m1[1]) > 0, `each group trained on its own replicas' data: ${out[1]}`);
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.match(await text("#assignment-stats"), /8IPUs used.*2 × 4per replica × replicas/);
  });

  test("a plan error is marked at the line of the Block it names", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const good = await editorText(page);
    const line = good.split("\n").findIndex((l) => l.includes('block("hidden2", 2,')) + 1;
    // IPUs 0, 1, 0, 3: with AutoStage.SameAsIpu the stages are 0, 1, 0, 3, which PopTorch cannot schedule.
    assert.equal(await setCode(page, good.replace('block("hidden2", 2,', 'block("hidden2", 0,')), "warn");
    assert.deepEqual(await errorLines(page), [line]);
    assert.equal(await page.locator("#error").isHidden(), true, "the code traced; the plan is what fails");
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-list"), /Block 'hidden2' \(stage 0, IPU 0\) runs after block 'hidden1' \(stage 1\)/);
    assert.match(await text("#fit-list"), /Fix: Use poptorch\.AutoStage\.AutoIncrement/);
    assert.match(await text("#err-autoStage"), /runs after block 'hidden1'/);
    // AutoIncrement (one stage per Block) schedules it.
    const seq = await seqOf(page);
    await page.getByLabel("AutoStage").selectOption("autoIncrement");
    await waitAnalysis(page, seq);
    assert.deepEqual(await errorLines(page), []);
    assert.equal(await text("#err-autoStage"), "");
    assert.match(await text("#fit-verdict"), /^Valid configuration/);
  });

  test("a stale answer is never shown as current", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const good = await editorText(page);
    // Two edits in quick succession: only the last one's result may be drawn.
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(good.replace('block("head", 3,', 'block("head", 2,'));
    const seq = await seqOf(page);
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(good.replace('block("head", 3,', 'block("head", 0,'));
    await waitAnalysis(page, seq);
    await page.waitForFunction(() => document.body.dataset.analysis === "ok" || document.body.dataset.analysis === "warn");
    const head = page.locator('#stages-chart .cell[data-blocks~="head"]');
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.equal(await head.first().getAttribute("data-ipu"), "0");
  });

  test("an option PopTorch rejects shows the planner's message at its field and in the fit view", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    let seq = await seqOf(page);
    await page.getByLabel("Gradient accumulation").fill("4");
    await waitAnalysis(page, seq);
    const message = /Training\.gradientAccumulation \(4\) must be greater than or equal to the number of pipeline stages \(7\) when using PipelinedExecution/;
    assert.match(await text("#err-gradientAccumulation"), message);
    assert.equal(await page.getByLabel("Gradient accumulation").getAttribute("aria-invalid"), "true");
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-list"), message);
    assert.match(await text("#fit-list"), /Fix: Set poptorch\.Options\(\)\.Training\.gradientAccumulation\(7\) or more/);
    assert.match(await text("#fit-verdict"), /^Invalid: PopTorch would reject this configuration/);
    await screenshot(page, "error-option");
    // A value the planner's checks reject outright.
    seq = await seqOf(page);
    await page.getByLabel("Device iterations").fill("0");
    await waitAnalysis(page, seq);
    assert.match(await text("#err-deviceIterations"), /deviceIterations must be a positive whole number, got 0/);
    // Not a whole number: the page says so at once, the planner refuses it too.
    seq = await seqOf(page);
    await page.getByLabel("Gradient accumulation").fill("1.5");
    await waitAnalysis(page, seq);
    assert.match(await text("#err-gradientAccumulation"), /whole number .* got 1\.5/);
    // The page cannot make a poptorch.Options of it: the code is not run, and Fit & errors says why.
    assert.match(await text("#fit-current"), /^error ?Invalid options: `Training\.gradientAccumulation`: invalid type: floating point `1\.5`/);
    seq = await seqOf(page);
    await page.getByLabel("Gradient accumulation").fill("8");
    await page.getByLabel("Device iterations").fill("1");
    await waitAnalysis(page, seq);
    await page.waitForFunction(() => document.body.dataset.analysis === "ok");
    assert.equal(await text("#err-gradientAccumulation"), "");
    assert.equal(await text("#err-deviceIterations"), "");
    // Phases that are not what the planner reads are named at the phases field.
    await page.getByLabel("Execution strategy").selectOption("serialPhased");
    seq = await seqOf(page);
    await page.getByLabel(/^Phases/).fill('[[{ "blocks": ["embed"], "ipu": 0 }]]');
    await waitAnalysis(page, seq);
    assert.match(await text("#err-phases"), /block ids must be strings/);
    seq = await seqOf(page);
    await page.getByLabel(/^Phases/).fill('[["embed", "hidden1", "hidden2", "head"]]');
    await waitAnalysis(page, seq);
    assert.equal(await text("#err-phases"), "");
    await page.getByRole("tab", { name: "Assignment" }).click();
    assert.match(await text("#assignment-stats"), /Serial phased/);
  });

  test("a model that does not fit: fits = no, the IPU's largest tensors, the peak step's live tensors", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const good = await editorText(page);
    // 4096 wide, micro-batches of 8192 (× 8 accumulated): the hidden layers' weights, Adam's
    // state, the accumulators and the activations pass an Mk2 IPU's 897 MiB.
    const big = good.replace("new MLP(512)", "new MLP(4096)").replace("shape: [32, 784]", "shape: [8192, 784]").replace("shape: [32]", "shape: [8192]");
    assert.equal(await setCode(page, big), "warn", await text("#error"));
    await page.getByRole("tab", { name: /Fit/ }).click();
    assert.match(await text("#fit-verdict"), /^Valid, but it does not fit: 2 IPUs out of memory\./);
    assert.match(await text("#fit-stats"), /nofits/);
    assert.match(await text("#fit-list"), /Out of memory on IPU 1: it needs 1\.28 GiB at step \d+ .* but has 897\.0 MiB/);
    assert.deepEqual((await page.locator("#fit-largest h3").allTextContents()).map((t) => t.slice(0, 6)), ["IPU 1:", "IPU 2:"]);
    assert.match(await page.locator("#fit-largest tbody tr").first().locator("td").first().textContent(), /\S/);
    // The error is marked in the editor at the line of the op its step belongs to.
    assert.ok((await errorLines(page)).length > 0);
    await screenshot(page, "fit-out-of-memory", page.locator(".right"));
    // The memory view opens on an IPU that does not fit, at its peak: the capacity line is crossed.
    await page.getByRole("tab", { name: "Memory" }).click();
    assert.equal(await page.locator("#memory-ipu").inputValue(), "1");
    assert.match(await text("#memory-stats"), /nofits/);
    assert.match(await text("#live-tensors h4"), /^Live at step \d+ of \d+: unary_grad \(backward\)/);
    await screenshot(page, "memory-out-of-memory", page.locator(".right"));
  });

  test("live tensors at a step add up to the step's activations and gradients", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    await page.getByRole("tab", { name: "Memory" }).click();
    for (const ipu of ["0", "3"]) {
      await page.locator("#memory-ipu").selectOption(ipu);
      await page.locator("#memory-chart").focus();
      await page.keyboard.press("Home");
      for (let step = 0; step < 42; step++) {
        const r = await page.evaluate(() => {
          const live = document.getElementById("live-tensors");
          const sum = (cls) => [...live.querySelectorAll(`tbody tr[data-class=${cls}]`)].reduce((a, tr) => a + Number(tr.dataset.bytes), 0);
          return { head: live.querySelector("h4").textContent, activations: [sum("activation"), Number(live.dataset.activations)], gradients: [sum("gradient"), Number(live.dataset.gradients)] };
        });
        assert.match(r.head, new RegExp(`^Live at step ${step} of 42: `));
        assert.equal(r.activations[0], r.activations[1], `IPU ${ipu}, ${r.head}: activations`);
        assert.equal(r.gradients[0], r.gradients[1], `IPU ${ipu}, ${r.head}: gradients`);
        await page.keyboard.press("ArrowRight");
      }
    }
  });

  test("the RevGNN preset edited to 1,000 layers is analysed, never taken for an endless loop: the engine's progress keeps a short guard from firing", T, async () => {
    // A guard of 2 s, shorter than this analysis takes on a busy machine: only progress
    // reports (tracing, autograd, planning) keep the worker alive.
    await openReady(page, server.url + "/?timeout=2000");
    const code = (await editorText(page)).replace(/\blayers: 7,/, "layers: 1000,");
    assert.match(code, /layers: 1000,/);
    const t0 = Date.now();
    const seq = await seqOf(page);
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(code);
    const state = await waitAnalysis(page, seq, 180000);
    const ms = Date.now() - t0;
    assert.ok(["ok", "warn"].includes(state), `${state}: ${await text("#error")}`);
    assert.doesNotMatch(await text("#status"), /restarted|stopped/);
    // Opening `convs` lays out its 1,000 layers (one `call` each) in one level.
    assert.match(await text('#graph-chart .node.group[data-group="convs"] .group-info'), /^1000 ops/);
    const t1 = Date.now();
    await page.locator('#graph-chart [data-toggle="convs"]').click();
    assert.equal(await page.locator("#graph-chart g.op", { hasText: "call" }).count(), 1000);
    console.log(`RevGNN at 1,000 layers analysed in the page in ${ms} ms; convs opened in ${Date.now() - t1} ms (layout ${await page.locator("#graph-chart").getAttribute("data-layout-ms")} ms)`);
  });

  test("a model that loops forever: the worker is replaced, the page says so, the code is kept", T, async () => {
    await openReady(page, server.url + "/?timeout=1500");
    const looping = 'import { nn } from "ipu-playground";\n// never returns\nwhile (true) {}\nexport default {};\n';
    await setCode(page, looping);
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "error");
    assert.match(await text("#error"), /ran for more than 1\.5 s without progress and was stopped .*fresh engine/);
    assert.match(await text("#status"), /still in the editor/);
    assert.equal(await editorText(page), looping);
    // The fresh engine works.
    await page.getByLabel("Preset").selectOption("buffer-counter");
    await waitAnalysis(page);
    await page.waitForFunction(() => document.body.dataset.analysis === "ok");
    // The stopped worker is gone (Playwright drops it once it has closed).
    for (let i = 0; i < 50 && page.workers().length !== 1; i++) await page.waitForTimeout(100);
    assert.equal(page.workers().length, 1);
  });

  test("the analysis worker is replaced quietly once its wasm memory grows past the limit", T, async () => {
    let started = 0;
    page.on("worker", () => started++);
    await openReady(page, server.url + "/?recycle-mib=1");
    await selectPreset(page, "buffer-counter");
    await page.waitForFunction(() => document.body.dataset.analysis === "ok");
    assert.ok(started >= 2, `${started} workers started`);
    assert.doesNotMatch(await text("#status"), /restarted/);
    await selectPreset(page, "mlp-pipelined");
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok");
  });

  test("reload keeps the edit; a shared link restores code, preset and options", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "replicated");
    const code = (await editorText(page)).replace("new nn.Linear(256, 16)", "new nn.Linear(256, 24)");
    await setCode(page, code);
    let seq = await seqOf(page);
    await page.getByLabel("Replication factor").fill("2");
    await waitAnalysis(page, seq);
    await page.waitForTimeout(400); // saved after 250 ms
    await page.reload();
    await waitAnalysis(page);
    assert.equal(await editorText(page), code);
    assert.equal(await page.getByLabel("Replication factor").inputValue(), "2");
    assert.equal(await page.getByLabel("Preset").inputValue(), "replicated");

    await page.getByRole("button", { name: "Share link" }).click();
    await page.waitForFunction(() => document.getElementById("share-link").value !== "");
    const link = await page.getByLabel("Link to this state").inputValue();
    assert.match(link, /#z=[A-Za-z0-9_-]+$/);
    // A fresh browser profile (no localStorage) opening the link.
    const other = await openContext(browser);
    try {
      await openReady(other.page, link);
      assert.equal(await editorText(other.page), code);
      assert.equal(await other.page.getByLabel("Preset").inputValue(), "replicated");
      assert.equal(await other.page.getByLabel("Replication factor").inputValue(), "2");
      // The link's options are planned: 2 IPUs per replica × 2 replicas.
      await other.page.getByRole("tab", { name: "Assignment" }).click();
      assert.match(await other.page.locator("#assignment-stats").textContent(), /4IPUs used.*2 × 2per replica × replicas/);
      assert.match(await other.page.locator("#status").textContent(), /Restored from the link|Ready/);
      assertClean(other.problems);
    } finally {
      await other.context.close();
    }
  });

  test("every control has an accessible name, and the views work with the keyboard", T, async () => {
    await openReady(page, server.url + "/");
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea, button, [role=tab], .cm-content")]
        .filter((e) => !(e.labels?.length || e.getAttribute("aria-label") || e.textContent.trim()))
        .map((e) => e.outerHTML.slice(0, 80)),
    );
    assert.deepEqual(unnamed, []);
    assert.equal(await page.locator("#status").getAttribute("role"), "status");
    assert.equal(await page.locator("#error").getAttribute("role"), "alert");
    assert.equal(await page.locator("html").getAttribute("lang"), "en");
    // Tabs: arrow keys move between the views.
    await page.getByRole("tab", { name: "Graph" }).focus();
    await page.keyboard.press("ArrowRight");
    assert.equal(await page.getByRole("tab", { name: "Assignment" }).getAttribute("aria-selected"), "true");
    assert.equal(await page.locator("#view-assignment").isVisible(), true);
    await page.keyboard.press("End");
    assert.equal(await page.getByRole("tab", { name: "Training" }).getAttribute("aria-selected"), "true");
    // The editor is reachable with Tab and does not trap it.
    await page.locator(".cm-content").focus();
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate(() => document.activeElement.closest(".cm-editor") === null), true);
  });

  test("a screenshot of each view", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    for (const [name, tab] of [["graph", "Graph"], ["assignment", "Assignment"], ["memory", "Memory"], ["execution", "Execution"], ["fit", /Fit/], ["training", "Training"]]) {
      await page.getByRole("tab", { name: tab }).click();
      assert.equal(await page.locator(`#view-${name}`).isVisible(), true);
      await screenshot(page, `view-${name}`);
    }
    // Every view is drawn from the planner: nothing says it is missing.
    assert.doesNotMatch(await page.locator("#panels").textContent(), /not available|placeholder/i);
    // The tile map at the peak, drawn for each IPU.
    await page.getByRole("tab", { name: "Memory" }).click();
    assert.match(await text("#tile-note"), /^1472 tiles of 624 KiB; the fullest holds [\d.]+ KiB; 0 over capacity/);
    assert.equal(await page.locator("#tile-map").isVisible(), true);
  });
});
