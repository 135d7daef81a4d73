// Replicas as parallel workers in the page: the Training view trains the editor's RevGNN
// (the preset's code, made small) with replicationFactor 2 on 2 workers — the engine worker
// and a replica Web Worker, each with its own wasm instance — sharing gradients through a
// SharedArrayBuffer (the page is cross-origin isolated: scripts/serve.mjs sends COOP/COEP).
// After training, each replica's weights, fingerprinted by the worker running it, are
// identical.
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { REPO } from "../node/helpers.mjs";
import { pageSuite, openReady, setCode, seqOf, waitAnalysis, screenshot } from "./helpers.mjs";
import revgnn from "../../www/presets/revgnn.js";

const T = { timeout: 240000 };
const CORA = path.join(REPO, "data", "ind.cora.x");

/** The RevGNN preset's code, two layers of 32 channels (a short test). */
const SMALL = revgnn.code.replace(/layers: 7,/, "layers: 2,").replace(/hidden: 160,/, "hidden: 32,");

/** The small model (`code`, the JavaScript one by default) with replicationFactor 2, analysed, and the Training view on Cora. */
async function replicatedOnCora(page, code = SMALL) {
  await setCode(page, code);
  let seq = await seqOf(page);
  await page.getByLabel("Replication factor").fill("2");
  await waitAnalysis(page, seq);
  await page.getByRole("tab", { name: "Training" }).click();
  seq = await seqOf(page);
  await page.getByLabel("Dataset").selectOption("Cora");
  await waitAnalysis(page, seq);
}

/** The Training view's epoch log opened, `epochs` epochs trained on `workers` workers, until "Done". */
async function trainOnWorkers(page, workers, epochs) {
  await page.locator("summary", { hasText: "Epoch log" }).click();
  await page.getByLabel("Workers").fill(String(workers));
  await page.getByLabel("Epochs").fill(String(epochs));
  await page.getByRole("button", { name: "Train" }).click();
  await page.waitForFunction((n) => new RegExp(`^Done: ${n} epochs`).test(document.getElementById("train-progress-text").textContent), epochs, { timeout: 200000 });
}

describe("replicas on parallel workers in the page", () => {
  let server, page;
  const suite = pageSuite([[CORA, "stage the data with scripts/stage-data.sh"]]);
  beforeEach(() => ({ server, page } = suite));

  test("Cora with replicationFactor 2 on 2 workers: each worker busy, the loss falls, the replicas' weights identical", T, async () => {
    assert.ok(SMALL.includes("layers: 2,") && SMALL.includes("hidden: 32,"));
    await openReady(page, server.url + "/");
    assert.equal(await page.evaluate(() => crossOriginIsolated), true, "the page is cross-origin isolated");
    await replicatedOnCora(page);
    assert.match(await page.locator("#train-config").textContent(), /^Trains the model of your code/);
    assert.equal(await page.locator("#train-workers-note").textContent(), "", "isolated: no note");
    await trainOnWorkers(page, 2, 3);
    const busy = await page.locator("#train-workers-busy").textContent();
    const m = /^2 workers: worker 0 \(replica 0\) busy ([\d.]+) (m?s), last step [\d.]+ m?s, wasm ([\d.]+) (MiB|GiB) · worker 1 \(replica 1\) busy ([\d.]+) (m?s), last step [\d.]+ m?s, wasm ([\d.]+) (MiB|GiB)/.exec(busy);
    assert.ok(m, busy);
    const ms = (v, u) => Number(v) * (u === "s" ? 1000 : 1);
    assert.ok(ms(m[1], m[2]) > 0 && ms(m[5], m[6]) > 0, busy);
    // Each worker's own wasm instance, its memory reported (a small model: far below 1 GiB).
    for (const [v, u] of [[m[3], m[4]], [m[7], m[8]]]) assert.ok(u === "MiB" && Number(v) > 1 && Number(v) < 1024, busy);
    // The fingerprints: one per replica, each from the worker that runs it, all the same.
    const prints = JSON.parse(await page.locator("#train-workers-busy").getAttribute("data-fingerprints"));
    assert.deepEqual(Object.keys(prints).sort(), ["0", "1"]);
    assert.match(prints[0], /^[0-9a-f]{8}$/);
    assert.equal(prints[1], prints[0], "the replicas' weights are bit-identical");
    assert.match(busy, /The 2 replicas' weights are identical/);
    const log = await page.evaluate(() => [...document.querySelectorAll("#train-log tbody tr")].map((tr) => Number(tr.children[1].textContent)));
    assert.equal(log.length, 3);
    assert.ok(log[2] < log[0], `the loss did not fall: ${log}`);
    const acc = await page.locator("#train-progress-text").textContent();
    assert.match(acc, /final test accuracy [\d.]+ %/);
    await screenshot(page, "training-replicas-done");
  });

  test("Python: the RevGNN preset (PyG's rev_gnn.py) with replicationFactor 2 trains on 2 workers, each its own Pyodide, the replicas' weights identical", T, async () => {
    const small = revgnn.python.replace(/layers=7,/, "layers=2,").replace(/hidden=160,/, "hidden=32,");
    assert.ok(small.includes("layers=2,") && small.includes("hidden=32,"));
    await openReady(page, server.url + "/");
    let seq = await seqOf(page);
    await page.getByLabel("Language").selectOption("python");
    await waitAnalysis(page, seq, 120000);
    await replicatedOnCora(page, small);
    assert.equal(await page.locator("#train-workers-note").textContent(), "", "Chromium has stack switching: no note");
    await trainOnWorkers(page, 2, 2);
    const busy = await page.locator("#train-workers-busy").textContent();
    assert.match(busy, /^2 workers: worker 0 \(replica 0\) busy [\d.]+ m?s, .* · worker 1 \(replica 1\) busy [\d.]+ m?s/);
    const prints = JSON.parse(await page.locator("#train-workers-busy").getAttribute("data-fingerprints"));
    assert.deepEqual(Object.keys(prints).sort(), ["0", "1"]);
    assert.equal(prints[1], prints[0], "the replicas' weights are bit-identical");
    const log = await page.evaluate(() => [...document.querySelectorAll("#train-log tbody tr")].map((tr) => Number(tr.children[1].textContent)));
    assert.equal(log.length, 2);
    assert.ok(log.every(Number.isFinite) && log[1] < log[0], `the loss falls: ${JSON.stringify(log)}`);
    await screenshot(page, "training-replicas-python-done");
  });

  test("a page served without cross-origin isolation says so and trains the 2 replicas on one worker", T, async () => {
    // The same server's replies without COOP/COEP: no SharedArrayBuffer in the page.
    await page.route("**/*", async (route) => {
      const res = await route.fetch();
      const headers = { ...res.headers() };
      delete headers["cross-origin-opener-policy"];
      delete headers["cross-origin-embedder-policy"];
      await route.fulfill({ response: res, headers });
    });
    await openReady(page, server.url + "/");
    assert.equal(await page.evaluate(() => crossOriginIsolated), false);
    await replicatedOnCora(page);
    assert.match(await page.locator("#train-workers-note").textContent(), /not cross-origin isolated .*training runs on one worker/);
    assert.equal(await page.getByLabel("Workers").isDisabled(), true);
    assert.equal(await page.getByLabel("Workers").inputValue(), "1");
    await page.getByLabel("Epochs").fill("2");
    await page.getByRole("button", { name: "Train" }).click();
    await page.waitForFunction(() => /^Done: 2 epochs/.test(document.getElementById("train-progress-text").textContent), null, { timeout: 200000 });
    // Both replicas ran, on this one worker: no worker line, no fingerprints from other workers.
    const busy = await page.locator("#train-workers-busy").textContent();
    assert.doesNotMatch(busy, /workers:/, busy);
    assert.equal(await page.locator("#train-workers-busy").getAttribute("data-fingerprints"), null);
  });
});
