// The page's Python mode: the editor's code in Python, run by Pyodide in the engine's worker
// (www/engine/python.js, loaded on the first Python request). Every preset opens, plans and
// draws the views the JavaScript shows; errors are marked at their Python lines; a switch of
// language keeps the state; the RevGNN preset trains on Cora from Python.
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import zlib from "node:zlib";
import { REPO } from "../node/helpers.mjs";
import { pageSuite, openReady, waitAnalysis, seqOf, selectPreset, setCode, editorText, errorLines, assignmentIpus, memoryChart, ganttRects, screenshot } from "./helpers.mjs";

const PYODIDE = path.join(REPO, "www", "engine", "vendor", "pyodide", "pyodide.asm.wasm");
const CORA = path.join(REPO, "data", "ind.cora.x");
const T = { timeout: 300000 };
const { PRESETS } = await import(path.join(REPO, "www", "presets", "index.js"));

/** Switches the editor's language and waits for the analysis of its code (Pyodide loads on the first Python request). */
async function chooseLanguage(page, language) {
  const seq = await seqOf(page);
  await page.getByLabel("Language").selectOption(language);
  return waitAnalysis(page, seq, 120000);
}

/** What the views say about the plan (their summary lines), which both languages must share. */
async function viewStats(page) {
  const read = async (tab, sel) => {
    await page.getByRole("tab", { name: tab }).click();
    return page.locator(sel).textContent();
  };
  return { assignment: await read("Assignment", "#assignment-stats"), execution: await read("Execution", "#execution-stats") };
}

describe("the page in Python", () => {
  let server, page, allowed;
  const suite = pageSuite([[PYODIDE, "build the page with node web/build.mjs (it copies Pyodide)"], [CORA, "stage the data with scripts/stage-data.sh"]]);
  beforeEach(() => ({ server, page, allowed } = suite));
  const text = (sel) => page.locator(sel).textContent();

  test("opens every preset in Python: planned, the views the JavaScript draws, the same figures", T, async () => {
    await openReady(page, server.url + "/");
    const js = {};
    for (const p of PRESETS) {
      if (p.id !== "revgnn") await selectPreset(page, p.id);
      js[p.id] = await viewStats(page);
    }
    await selectPreset(page, "revgnn");
    assert.equal(await chooseLanguage(page, "python"), "ok", await text("#error"));
    for (const p of PRESETS) {
      if (p.id !== "revgnn") await selectPreset(page, p.id);
      const id = p.id;
      assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok", `${id}: ${await text("#error")}`);
      assert.match(await editorText(page), /^(#|import)/, `${id}: the editor holds the Python`);
      await page.getByRole("tab", { name: "Graph" }).click();
      assert.ok((await page.locator("#graph-chart .node").count()) > 0, `${id}: empty graph`);
      await screenshot(page, `python-preset-${id}-graph`, page.locator(".right"));
      assert.deepEqual(await assignmentIpus(page), p.expect.ipus, id);
      await screenshot(page, `python-preset-${id}-assignment`, page.locator(".right"));
      for (const ipu of p.expect.ipus) {
        const m = await memoryChart(page, ipu);
        assert.ok(m.painted > 0.1, `${id}, IPU ${ipu}: memory chart mostly blank (${m.painted})`);
      }
      await screenshot(page, `python-preset-${id}-memory`, page.locator(".right"));
      const gantt = await ganttRects(page);
      for (const ipu of p.expect.ipus) assert.ok(gantt[ipu].compute > 0, `${id}, IPU ${ipu}: no compute drawn`);
      await screenshot(page, `python-preset-${id}-execution`, page.locator(".right"));
      assert.deepEqual(await viewStats(page), js[id], `${id}: the Python plan's figures are the JavaScript's`);
    }
    // The buffer counter's print() under the editor.
    await selectPreset(page, "buffer-counter");
    assert.match(await text("#console"), /after call 1: count = 1\.0\nafter call 2: count = 2\.0\nafter call 3: count = 3\.0/);
  });

  test("Pyodide loads only when Python is chosen: the JavaScript page fetches none of it", T, async () => {
    const fetched = [];
    page.on("request", (req) => fetched.push(new URL(req.url()).pathname));
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    assert.deepEqual(fetched.filter((p) => p.includes("pyodide") || p.startsWith("/python/")), []);
    await chooseLanguage(page, "python");
    for (const file of ["/engine/vendor/pyodide/pyodide.asm.wasm", "/engine/vendor/pyodide/python_stdlib.zip", "/python/torch/__init__.py"]) {
      assert.ok(fetched.includes(file), `${file} was not fetched from this origin`);
    }
  });

  test("Pyodide's start is not taken for a hang: a worker started for JavaScript switches to Python under a 3 s time limit", T, async () => {
    // The pipelined MLP (no dataset to load), in JavaScript, with a time limit shorter than Pyodide's start.
    const z = zlib.deflateRawSync(JSON.stringify({ v: 2, preset: "mlp-pipelined" })).toString("base64url");
    await openReady(page, `${server.url}/?timeout=3000#z=${z}`);
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "ok", `JavaScript: ${await text("#error")}`);
    assert.equal(await chooseLanguage(page, "python"), "ok", `Python: ${await text("#error")}`);
    assert.match(await text("#status"), /^Traced \d+ nodes/);
  });

  test("Python errors at their editor lines: syntax, runtime, PopTorch's", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    await chooseLanguage(page, "python");
    const good = await editorText(page);
    const lines = good.split("\n");
    const at = (needle) => lines.findIndex((l) => l.includes(needle)) + 1;
    // Syntax: an unclosed bracket.
    await setCode(page, good.replace("self.fc2 = torch.nn.Linear(width, width)", "self.fc2 = torch.nn.Linear(width, width"));
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "error");
    assert.match(await text("#error"), /^Line \d+: SyntaxError: /);
    assert.ok((await errorLines(page)).length === 1);
    await screenshot(page, "python-error-syntax");
    // A shape error in forward: at the line of the op, through the page's own plan call.
    await setCode(page, good.replace("self.fc3 = torch.nn.Linear(width, width)", "self.fc3 = torch.nn.Linear(width + 1, width)"));
    assert.deepEqual(await errorLines(page), [at("h3 = self.fc3(h2).relu()")], await text("#error"));
    // PopTorch: wrapping a model twice, at the second wrapper's line.
    const twice = good.replace("model = poptorch.trainingModel(net, options, adam)", "model = poptorch.trainingModel(net, options, adam)\nmodel = poptorch.trainingModel(net, options, adam)");
    await setCode(page, twice);
    assert.match(await text("#error"), /Model has already been wrapped in 'poptorch\.trainingModel'/);
    assert.deepEqual(await errorLines(page), [at("model = poptorch.trainingModel(net, options, adam)") + 1]);
    await screenshot(page, "python-error-wrapped-twice");
    // A plan error at an op: the loss outside every Block (PopTorch's "No active Block"), at its line.
    const outside = good.replace("            return logits, torch.nn.functional.cross_entropy(logits, labels)", "        loss = torch.nn.functional.cross_entropy(logits, labels)\n        return logits, loss");
    await setCode(page, outside);
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "warn", await text("#error"));
    await page.getByRole("tab", { name: "Fit & errors" }).click();
    assert.match(await text("#fit-list"), /No active Block/);
    await screenshot(page, "python-error-no-active-block");
    assert.ok((await errorLines(page)).includes(at("return logits, torch.nn.functional.cross_entropy(logits, labels)")), `${await errorLines(page)}`);
    // A plan error (accumulation below the 7 pipeline stages) set in the code: at that line.
    await setCode(page, good.replace("adam = poptorch.optim", "options.Training.gradientAccumulation(4)\nadam = poptorch.optim"));
    assert.equal(await page.evaluate(() => document.body.dataset.analysis), "warn");
    assert.ok((await errorLines(page)).includes(at("adam = poptorch.optim")), `${await errorLines(page)}`);
  });

  test("switching language keeps the state: the options, each language's text, the link and the saved state", T, async () => {
    await openReady(page, server.url + "/");
    await selectPreset(page, "mlp-pipelined");
    const jsEdited = (await editorText(page)).replace("new MLP(512)", "new MLP(256)");
    await setCode(page, jsEdited);
    const ga = page.getByLabel("Gradient accumulation");
    let seq = await seqOf(page);
    await ga.fill("16");
    await ga.press("Tab");
    await waitAnalysis(page, seq);
    await chooseLanguage(page, "python");
    assert.equal(await ga.inputValue(), "16", "the options stay");
    const pyEdited = (await editorText(page)).replace("MLP(512)", "MLP(128)");
    await setCode(page, pyEdited);
    assert.match(await text("#status"), /Traced/);
    // The link and localStorage hold the language and both texts.
    const link = await page.evaluate(async () => {
      document.getElementById("share").click();
      await new Promise((r) => setTimeout(r, 300));
      return document.getElementById("share-link").value;
    });
    const saved = await page.evaluate(() => JSON.parse(localStorage.getItem("ipu-playground.state")));
    assert.equal(saved.language, "python");
    assert.equal(saved.code, pyEdited);
    assert.equal(saved.other, jsEdited);
    // Back to JavaScript: its edited text; and Python again: its edited text.
    await chooseLanguage(page, "javascript");
    assert.equal(await editorText(page), jsEdited);
    await chooseLanguage(page, "python");
    assert.equal(await editorText(page), pyEdited);
    // A fresh page from the link: Python, the edit, the options.
    const other = await suite.browser.newPage();
    await openReady(other, link);
    assert.equal(await other.getByLabel("Language").inputValue(), "python");
    assert.equal(await other.getByLabel("Gradient accumulation").inputValue(), "16");
    assert.equal(await editorText(other), pyEdited);
    await other.close();
    // A reload: the saved state.
    await page.reload();
    await waitAnalysis(page, null, 120000);
    assert.equal(await page.getByLabel("Language").inputValue(), "python");
    assert.equal(await editorText(page), pyEdited);
  });

  test("trains the RevGNN preset (PyG's rev_gnn.py) on Cora from Python in the Training view", T, async () => {
    await openReady(page, server.url + "/");
    await chooseLanguage(page, "python");
    await page.getByRole("tab", { name: "Training" }).click();
    const seq = await seqOf(page);
    await page.getByLabel("Dataset").selectOption("Cora");
    await waitAnalysis(page, seq, 120000);
    await page.locator("summary", { hasText: "Epoch log" }).click();
    await page.getByLabel("Epochs").fill("2");
    await page.getByRole("button", { name: "Train" }).click();
    await page.waitForFunction(() => /^Done: 2 epochs/.test(document.getElementById("train-progress-text").textContent), null, { timeout: 240000 });
    const log = await page.evaluate(() => [...document.querySelectorAll("#train-log tbody tr")].map((tr) => Number(tr.children[1].textContent)));
    assert.equal(log.length, 2);
    assert.ok(log.every(Number.isFinite) && log[1] < log[0], `the loss falls: ${JSON.stringify(log)}`);
    await screenshot(page, "python-training-cora", page.locator(".right"));
  });
});
