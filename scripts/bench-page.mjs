#!/usr/bin/env node
// The page in headless Chromium, served as `make playground` serves it:
//   1. first render: a fresh profile opens the playground (so the default preset loads) and
//      the page's "first-render" mark is read: the time from navigation start until the
//      default preset's code was traced in the worker and its first view drawn;
//   2. with --train-epochs N (N > 0): the default RevGNN trained on PubMed for N epochs
//      through the Training view (its own worker, as a user runs it), wall time from the
//      Train click to "Done", and the median epoch (the epoch log's training seconds, the
//      first epoch left out); with --train-workers W (default 1) the options' replication
//      factor set to W and the view's Workers field to W: W replicas on W workers, each
//      replica its own part of every call (#18 (b): against PyG with its default threads);
//      Playwright attaches an inspector to the workers, which slows stack captures (the
//      trace), not the kernels; with --train-layers L the preset's code edited to `layers: L`
//      first (#18 (e): a 1,000-layer epoch with workers; each worker's wasm memory is in the
//      workers' line);
//   3. with --deep-layers L (default 1000; 0 skips): the default RevGNN preset edited to
//      `layers: L` in the editor, as a user types it, and the time from the edit until its
//      analysis (trace + plan in the worker, every view drawn) is done, median of 3
//      (target at 1,000 layers: under 2 s on a quiet machine).
//
//   2b. with --python-runs N (default: --runs; 0 skips): Python mode's first plan, cold: a fresh
//      profile opens a link whose state is the default preset in Python, so the first analysis
//      loads Pyodide in the worker, runs the Python and plans it; the same "first-render"
//      mark (target: under 6 s), median of N.
//
//   4. with --preset-runs N (default 3; 0 skips): the BERT-Large and ResNet-50 presets chosen
//      in the menu, the time until every view is drawn (target for BERT-Large: under 2 s) and
//      the analysis engine's wasm memory after it (target: under 256 MiB), median of N.
//
//   --root DIR serves another build of the page (a copy of www/ with its pkg/ and dist/), to
//   compare builds interleaved; the staged data/ is mounted as usual.
//
//   node scripts/bench-page.mjs [--runs 5] [--python-runs 5] [--train-epochs 0] [--train-workers 1] [--train-layers L] [--deep-layers 1000] [--preset-runs 3] [--root DIR] [--json FILE]
import fs from "node:fs";
import zlib from "node:zlib";
import { startServer, launchChromium } from "../tests/node/helpers.mjs";
import { editorText, seqOf, setCode, waitAnalysis } from "../tests/e2e/helpers.mjs";
import revgnn from "../www/presets/revgnn.js";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const runs = Number(opt("--runs", "5"));
const trainEpochs = Number(opt("--train-epochs", "0"));
const trainWorkers = Number(opt("--train-workers", "1"));
const trainLayers = Number(opt("--train-layers", "0"));
const deepLayers = Number(opt("--deep-layers", "1000"));
const presetRuns = Number(opt("--preset-runs", "3"));
const pythonRuns = Number(opt("--python-runs", String(runs)));
const jsonOut = opt("--json", null);
const root = opt("--root", null);

const server = await startServer({ args: ["--quiet", ...(root ? ["--root", root] : [])] });
let browser;
try {
  browser = await launchChromium();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => performance.getEntriesByName("first-render").length > 0, null, { timeout: 60000 });
    const t = await page.evaluate(() => ({
      firstRender: performance.getEntriesByName("first-render")[0].startTime,
      domContentLoaded: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd,
    }));
    times.push(t);
    console.log(`[page] run ${i + 1}: first render ${t.firstRender.toFixed(0)} ms (DOMContentLoaded ${t.domContentLoaded.toFixed(0)} ms)`);
    await context.close();
  }
  const out = { runs: times, browser: browser.version() };
  if (runs > 0) {
    const sorted = times.map((t) => t.firstRender).sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)];
    console.log(`[page] first render of the default preset: median ${median.toFixed(0)} ms over ${runs} loads (target < 2000 ms: ${median < 2000 ? "met" : "NOT met"})`);
    out.first_render_median_ms = median;
  }
  if (pythonRuns > 0) {
    // A link to the default preset in Python (state.js reads #z=: deflate-raw, base64url JSON).
    const z = zlib.deflateRawSync(JSON.stringify({ v: 2, preset: "revgnn", language: "python" })).toString("base64url");
    const py = [];
    for (let i = 0; i < pythonRuns; i++) {
      const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
      const page = await context.newPage();
      await page.goto(`${server.url}/#z=${z}`);
      await page.waitForFunction(() => performance.getEntriesByName("first-render").length > 0 || document.body.dataset.analysis === "error", null, { timeout: 120000 });
      const t = await page.evaluate(() => ({ firstRender: performance.getEntriesByName("first-render")[0]?.startTime ?? NaN, error: document.getElementById("error").textContent }));
      if (!Number.isFinite(t.firstRender)) throw new Error(`Python mode did not plan: ${t.error}`);
      py.push(t.firstRender);
      console.log(`[page] run ${i + 1}: Python mode's first plan ${t.firstRender.toFixed(0)} ms (cold: Pyodide loaded, the Python run and planned)`);
      await context.close();
    }
    const med = [...py].sort((a, b) => a - b)[Math.floor(py.length / 2)];
    console.log(`[page] Python mode's first plan of the default preset, cold: median ${med.toFixed(0)} ms over ${pythonRuns} loads (target < 6000 ms: ${med < 6000 ? "met" : "NOT met"})`);
    Object.assign(out, { python_runs: py, python_first_plan_median_ms: med });
  }
  if (trainEpochs > 0) {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => performance.getEntriesByName("first-render").length > 0, null, { timeout: 60000 });
    if (trainLayers > 0) {
      const code = revgnn.code.replace(/layers: \d+,/, `layers: ${trainLayers},`);
      if (!/layers: \d+,/.test(revgnn.code)) throw new Error("the RevGNN preset's code has no `layers: N,` to edit");
      const seq = await seqOf(page);
      await setCode(page, code, { wait: false });
      await waitAnalysis(page, seq, 120000);
    }
    if (trainWorkers > 1) {
      const seq = await seqOf(page);
      await page.getByLabel("Replication factor").fill(String(trainWorkers));
      await waitAnalysis(page, seq, 60000);
    }
    await page.getByRole("tab", { name: "Training" }).click();
    await page.getByLabel("Dataset").selectOption("PubMed");
    await page.getByLabel("Epochs").fill(String(trainEpochs));
    await page.getByLabel("Workers").fill(String(trainWorkers));
    await page.locator("summary", { hasText: "Epoch log" }).click(); // its rows: each epoch's seconds
    const t0 = Date.now();
    await page.getByRole("button", { name: "Train" }).click();
    await page.waitForFunction(() => /^(Done|Training failed)/.test(document.getElementById("train-progress-text").textContent), null, { timeout: 0 });
    const wall = (Date.now() - t0) / 1000;
    const text = await page.locator("#train-progress-text").textContent();
    if (!text.startsWith("Done")) throw new Error(`training in the page failed: ${await page.locator("#train-error").textContent()}`);
    const acc = /final test accuracy ([\d.]+) %/.exec(text)?.[1];
    const epochs = await page.evaluate(() => [...document.querySelectorAll("#train-log tbody tr")].map((tr) => Number(tr.children[5].textContent)));
    const later = (epochs.length > 1 ? epochs.slice(1) : epochs).sort((a, b) => a - b);
    if (!later.length) throw new Error("the Training view's epoch log has no rows");
    const median = later[Math.floor(later.length / 2)];
    const busy = await page.locator("#train-workers-busy").textContent();
    console.log(`[page] PubMed${trainLayers ? ` at ${trainLayers} layers` : ""}, ${trainEpochs} epochs in the page on ${trainWorkers} worker${trainWorkers > 1 ? "s" : ""}: ${wall.toFixed(1)} s wall (${(wall / trainEpochs).toFixed(3)} s/epoch with evaluations), median epoch ${median.toFixed(3)} s, final test accuracy ${acc ?? "?"} %${busy ? ` (${busy})` : ""}`);
    Object.assign(out, { train_epochs: trainEpochs, train_workers: trainWorkers, train_layers: trainLayers || null, train_wall_s: wall, train_epoch_median_s: median, train_final_test_acc: acc ? Number(acc) / 100 : null });
    await context.close();
  }
  // A fresh page at the default preset, `act(page, prepared)` (an edit), and the time until
  // the analysis it starts is done (every view drawn); `prepare(page)` before the clock starts
  // (what the edit needs to know, e.g. the editor's text), `read(page)` before the page closes.
  const timed = async (what, act, read = async () => null, prepare = async () => null) => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await waitAnalysis(page, null, 60000);
    const prepared = await prepare(page);
    const seq = await seqOf(page);
    const t0 = Date.now();
    await act(page, prepared);
    const state = await waitAnalysis(page, seq, 300000);
    const ms = Date.now() - t0;
    if (!["ok", "warn"].includes(state)) throw new Error(`${what}: the analysis ended in ${state}: ${await page.locator("#error").textContent()}`);
    const extra = await read(page);
    await context.close();
    return { ms, extra };
  };
  if (deepLayers > 0) {
    const deep = [];
    for (let i = 0; i < 3; i++) {
      // Where the time goes: the edit typed (the browser's own insertion of the text into the
      // editor, until Playwright's insertText returns), the engine's round trip (the page's
      // status line: the request to the worker until its answer arrived), and the rest (the
      // 300 ms typing pause, the answer's views drawn).
      // The edited code is made before the clock starts, as in the e2e test (reading the
      // editor's text, which draws every line of it, is no part of the edit).
      let typedMs = 0;
      const { ms, extra } = await timed(
        `the ${deepLayers}-layer RevGNN`,
        async (page, code) => {
          const t = Date.now();
          await page.locator(".cm-content").click();
          await page.keyboard.press("Control+A");
          await page.keyboard.insertText(code);
          typedMs = Date.now() - t;
        },
        (page) => page.evaluate(() => Number(/ in (\d+) ms/.exec(document.getElementById("status").textContent)?.[1] ?? NaN)),
        async (page) => {
          const code = (await editorText(page)).replace(/\blayers: 7,/, `layers: ${deepLayers},`);
          if (!code.includes(`layers: ${deepLayers},`)) throw new Error("the default preset has no `layers: 7,` to edit");
          return code;
        },
      );
      deep.push(ms);
      console.log(
        `[page] run ${i + 1}: RevGNN preset at ${deepLayers} layers analysed in ${ms} ms (the edit to every view drawn; the page waits for typing to pause first): ` +
          `typed in ${typedMs} ms, the engine's round trip ${extra} ms, the rest ${ms - typedMs - extra} ms (the 300 ms pause, the views drawn)`,
      );
    }
    const med = [...deep].sort((a, b) => a - b)[1];
    console.log(`[page] RevGNN preset at ${deepLayers} layers: median ${med} ms (under Playwright's inspector, which slows each of the trace's stack captures ~10×; the target, under 2000 ms, is judged by bench-page-plain.mjs, with no debugger on the worker)`);
    Object.assign(out, { deep_layers: deepLayers, deep_analysis_ms: deep, deep_analysis_median_ms: med });
  }
  if (presetRuns > 0) {
    // Each large preset chosen in the menu, as a user picks it: the time until every view is
    // drawn, and the analysis engine's wasm memory after it (a fresh page each time).
    for (const id of ["bert-large", "resnet50"]) {
      const times = [];
      let wasm = 0;
      for (let i = 0; i < presetRuns; i++) {
        const { ms, extra } = await timed(`the ${id} preset`, (page) => page.locator("#preset").selectOption(id), (page) =>
          page.evaluate(() => Number(document.body.dataset.wasmBytes)),
        );
        wasm = Math.max(wasm, extra);
        times.push(ms);
        console.log(`[page] run ${i + 1}: the ${id} preset analysed in ${ms} ms (chosen in the menu to every view drawn), wasm memory ${(wasm / 2 ** 20).toFixed(0)} MiB`);
      }
      const med = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
      console.log(`[page] ${id} preset: median ${med} ms (target < 2000 ms: ${med < 2000 ? "met" : "NOT met"}), wasm memory ${(wasm / 2 ** 20).toFixed(0)} MiB (target < 256 MiB: ${wasm < 256 * 2 ** 20 ? "met" : "NOT met"})`);
      out[`preset_${id.replace("-", "_")}_ms`] = times;
      out[`preset_${id.replace("-", "_")}_wasm_bytes`] = wasm;
    }
  }
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(out));
} finally {
  if (browser) await browser.close();
  await server.stop();
}
