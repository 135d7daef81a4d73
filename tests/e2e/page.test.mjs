// The page, end to end: served by scripts/serve.mjs exactly as `make playground` serves it,
// driven in Debian's Chromium by playwright-core (which never downloads a browser).
import { test, describe, before, after, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startServer, launchChromium, REPO } from "../node/helpers.mjs";
const WASM = path.join(REPO, "www", "pkg", "ipu_playground_bg.wasm");
const T = { timeout: 60000 };

describe("the playground page", () => {
  let server, browser, context, page, problems;

  before(async () => {
    assert.ok(fs.existsSync(WASM), `${WASM} is missing: build it with scripts/build-wasm.sh web`);
    server = await startServer({ args: ["--quiet"] });
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  beforeEach(async () => {
    problems = [];
    context = await browser.newContext();
    page = await context.newPage();
    const watch = (where) => (msg) => {
      if (msg.type() === "error" || msg.type() === "warning") problems.push(`${where} console.${msg.type()}: ${msg.text()}`);
    };
    page.on("console", watch("page"));
    page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
    page.on("worker", (worker) => worker.on("console", watch("worker")));
    page.on("requestfailed", (req) => problems.push(`request failed: ${req.url()} ${req.failure()?.errorText}`));
    page.on("response", (res) => {
      if (res.status() >= 400) problems.push(`HTTP ${res.status()} for ${res.url()}`);
    });
  });

  afterEach(async () => {
    await context?.close();
    // No console errors or warnings, page errors, failed requests or 4xx/5xx, in any test.
    assert.deepEqual(problems, []);
  });

  /** Opens the page and waits until the worker has sent the version and the default model. */
  async function openReady() {
    await page.goto(server.url + "/");
    await page.waitForFunction(() => document.getElementById("status").textContent === "Ready", null, { timeout: 30000 });
  }

  const text = (sel) => page.locator(sel).textContent();

  test("loads and shows the version and the default model from the worker", T, async () => {
    const wasmResponses = [];
    page.on("response", (res) => {
      if (res.url().endsWith(".wasm")) wasmResponses.push(res);
    });
    await openReady();
    assert.equal(await page.title(), "IPU Playground");
    assert.match(await text("#version"), /^\d+\.\d+\.\d+/);
    const graph = await text("#graph");
    assert.match(graph, /linear/);
    assert.match(graph, /relu/);
    assert.match(graph, /"layers\.0\.weight"/);
    assert.ok(graph.split("\n").length >= 3, graph);
    assert.equal(await text("#graph-title"), "Default model");
    assert.match(await text("#graph-stats"), /^\(([1-9]\d*) nodes\)$/);
    assert.equal(await page.locator("#error").isHidden(), true);
    assert.equal(await page.locator("#trace").isEnabled(), true);
    // Chromium has relaxed SIMD, so the page loads that build, and only that one; it was
    // served with its MIME type, so streaming compilation works.
    assert.equal(await text("#simd"), "wasm SIMD + relaxed SIMD");
    assert.equal(wasmResponses.length, 1);
    assert.match(wasmResponses[0].url(), /\/pkg\/ipu_playground_relaxed_bg\.wasm$/);
    assert.equal(wasmResponses[0].headers()["content-type"], "application/wasm");
  });

  test("falls back to the plain simd128 build when the relaxed one cannot be loaded", T, async () => {
    await page.route("**/ipu_playground_relaxed_bg.wasm", (route) => route.fulfill({ status: 404, body: "gone" }));
    await openReady();
    assert.equal(await text("#simd"), "wasm SIMD");
    assert.match(await text("#graph"), /linear/);
    assert.equal(await page.locator("#error").isHidden(), true);
    // the refused relaxed build is the only problem
    problems = problems.filter((p) => !/HTTP 404 .*ipu_playground_relaxed_bg\.wasm|404 \(Not Found\)/.test(p));
  });

  test("runs the engine in a module worker, never on the main thread", T, async () => {
    // Count every way the main thread could compile or instantiate wasm (init scripts
    // run in the page's frames only, not in workers).
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
    await openReady();
    const workers = page.workers();
    assert.equal(workers.length, 1);
    assert.match(workers[0].url(), /\/worker\.js$/);
    assert.deepEqual(await page.evaluate(() => window.__wasmCalls), [], "the main thread touched WebAssembly");
    // Chrome files the module worker's script graph (worker.js and the JS glue it imports)
    // under the page's resource timing, but the .wasm is fetched by the worker alone.
    const mainResources = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
    assert.deepEqual(mainResources.filter((u) => /\.wasm$/.test(u)), [], "the main thread fetched the wasm");
    const workerResources = await workers[0].evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
    assert.ok(workerResources.some((u) => u.endsWith("/pkg/ipu_playground_relaxed_bg.wasm")), workerResources.join("\n"));
    // COOP/COEP from the server make the page cross-origin isolated (SharedArrayBuffer later).
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
  });

  test("traces an MLP with the sizes typed in", T, async () => {
    await openReady();
    const before = await text("#graph");
    await page.getByLabel("Layer sizes").fill("3, 5,7 ,2");
    await page.getByLabel("Batch").fill("4");
    await page.getByRole("button", { name: "Trace" }).click();
    await page.waitForFunction(() => document.getElementById("graph-title").textContent.startsWith("MLP 3"));
    assert.equal(await text("#graph-title"), "MLP 3 → 5 → 7 → 2, batch 4");
    const graph = await text("#graph");
    assert.notEqual(graph, before);
    assert.equal(graph.match(/linear/g)?.length, 3, graph);
    assert.equal(graph.match(/relu/g)?.length, 2, graph);
    assert.match(await text("#status"), /^Traced in \d+ ms$/);
    assert.equal(await page.locator("#error").isHidden(), true);
    // Enter in the form traces too.
    await page.getByLabel("Layer sizes").fill("2,9");
    await page.getByLabel("Layer sizes").press("Enter");
    await page.waitForFunction(() => document.getElementById("graph-title").textContent.startsWith("MLP 2 → 9"));
    const small = await text("#graph");
    assert.equal(small.match(/linear/g)?.length, 1, small);
    assert.equal(small.match(/relu/g), null, small);
  });

  test("shows the engine's error for bad input and stays usable", T, async () => {
    await openReady();
    const defaultGraph = await text("#graph");
    const tryTrace = async (sizes, batch = "8") => {
      await page.getByLabel("Layer sizes").fill(sizes);
      await page.getByLabel("Batch").fill(batch);
      await page.getByRole("button", { name: "Trace" }).click();
      await page.waitForFunction(() => !document.getElementById("trace").disabled && document.getElementById("status").textContent !== "" && !document.getElementById("status").textContent.startsWith("Tracing"));
    };
    // Errors from the engine itself (the page passes whole numbers through unjudged).
    for (const [sizes, batch] of [["4", "8"], ["4,0,2", "8"], ["4,2", "0"]]) {
      await tryTrace(sizes, batch);
      assert.equal(await page.locator("#error").isVisible(), true, `${sizes} / ${batch}`);
      const message = await text("#error");
      assert.ok(message.length > 5, message);
      assert.doesNotMatch(message, /unreachable|RuntimeError|panicked/i, message);
      assert.equal(await text("#status"), "Trace failed");
      assert.equal(await text("#graph"), defaultGraph, "the last good graph stays");
    }
    // Input the page itself refuses.
    await tryTrace("4,x,2");
    assert.match(await text("#error"), /"x" is not a whole number/);
    // Still usable: a good trace clears the error.
    await tryTrace("6,3");
    assert.equal(await page.locator("#error").isHidden(), true);
    assert.equal(await text("#graph-title"), "MLP 6 → 3, batch 8");
    assert.match(await text("#graph"), /linear/);
    assert.equal(page.workers().length, 1, "the same worker kept running");
  });

  test("shows a worker that fails to start, and stays usable", T, async () => {
    // The worker script throws at load, as a broken deployment would.
    await page.route("**/worker.js", (route) =>
      route.fulfill({
        contentType: "text/javascript",
        headers: { "Cross-Origin-Embedder-Policy": "require-corp", "Cross-Origin-Resource-Policy": "same-origin" },
        body: 'throw new Error("worker boom");',
      }),
    );
    await page.goto(server.url + "/");
    await page.waitForFunction(() => document.getElementById("status").textContent === "Engine unavailable");
    assert.match(await text("#error"), /Could not start the engine: .*(worker boom|failed to start)/);
    // The error surfaces on the page, so the console noise it makes is expected here.
    problems = problems.filter((p) => !/worker boom|Uncaught/.test(p));
    assert.equal(await page.locator("#trace").isEnabled(), true);
  });

  test("shows an engine whose wasm cannot be fetched", T, async () => {
    // neither build: the loader falls back from the relaxed one to the plain one, which fails too
    await page.route("**/*.wasm", (route) => route.fulfill({ status: 404, body: "gone" }));
    await page.goto(server.url + "/");
    await page.waitForFunction(() => document.getElementById("status").textContent === "Engine unavailable");
    assert.match(await text("#error"), /^Could not start the engine: loading the wasm failed: \S/);
    assert.equal(await page.locator("#graph").textContent(), "");
    problems = problems.filter((p) => !/HTTP 404 .*ipu_playground(_relaxed)?_bg\.wasm|404 \(Not Found\)/.test(p));
  });

  test("labels every control", T, async () => {
    await openReady();
    for (const id of ["sizes", "batch"]) {
      const labelled = await page.evaluate((i) => document.getElementById(i).labels.length, id);
      assert.equal(labelled, 1, id);
    }
    assert.equal(await page.locator("#status").getAttribute("role"), "status");
    assert.equal(await page.locator("#error").getAttribute("role"), "alert");
    assert.equal(await page.locator("html").getAttribute("lang"), "en");
  });
});
