#!/usr/bin/env node
// The page in headless Chromium, served as `make playground` serves it:
//   1. first render: a fresh profile opens the playground (so the default preset loads) and
//      the page's "first-render" mark is read: the time from navigation start until the
//      default preset's code was traced in the worker and its first view drawn;
//   2. with --train-epochs N (N > 0): the default RevGNN trained on PubMed for N epochs
//      through the Training view (its own worker, as a user runs it), wall time from the
//      Train click to "Done".
//
//   node scripts/bench-page.mjs [--runs 5] [--train-epochs 0] [--json FILE]
import fs from "node:fs";
import { startServer, launchChromium } from "../tests/node/helpers.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const runs = Number(opt("--runs", "5"));
const trainEpochs = Number(opt("--train-epochs", "0"));
const jsonOut = opt("--json", null);

const server = await startServer({ args: ["--quiet"] });
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
  const sorted = times.map((t) => t.firstRender).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  console.log(`[page] first render of the default preset: median ${median.toFixed(0)} ms over ${runs} loads (target < 2000 ms: ${median < 2000 ? "met" : "NOT met"})`);
  const out = { runs: times, first_render_median_ms: median, browser: browser.version() };
  if (trainEpochs > 0) {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => performance.getEntriesByName("first-render").length > 0, null, { timeout: 60000 });
    await page.getByRole("tab", { name: "Training" }).click();
    await page.getByLabel("Dataset").selectOption("PubMed");
    await page.getByLabel("Epochs").fill(String(trainEpochs));
    const t0 = Date.now();
    await page.getByRole("button", { name: "Train" }).click();
    await page.waitForFunction(() => /^(Done|Training failed)/.test(document.getElementById("train-progress-text").textContent), null, { timeout: 0 });
    const wall = (Date.now() - t0) / 1000;
    const text = await page.locator("#train-progress-text").textContent();
    if (!text.startsWith("Done")) throw new Error(`training in the page failed: ${await page.locator("#train-error").textContent()}`);
    const acc = /final test accuracy ([\d.]+) %/.exec(text)?.[1];
    console.log(`[page] PubMed, ${trainEpochs} epochs in the page: ${wall.toFixed(1)} s wall (${(wall / trainEpochs).toFixed(3)} s/epoch with evaluations), final test accuracy ${acc ?? "?"} %`);
    Object.assign(out, { train_epochs: trainEpochs, train_wall_s: wall, train_final_test_acc: acc ? Number(acc) / 100 : null });
    await context.close();
  }
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(out));
} finally {
  if (browser) await browser.close();
  await server.stop();
}
