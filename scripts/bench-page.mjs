#!/usr/bin/env node
// The page's first render: headless Chromium opens the playground (served as `make
// playground` serves it, fresh profile each time, so the default preset loads) and reads
// the page's "first-render" mark: the time from navigation start until the default
// preset's code was traced in the worker and its first view drawn.
//
//   node scripts/bench-page.mjs [--runs 5] [--json FILE]
import fs from "node:fs";
import { startServer, launchChromium } from "../tests/node/helpers.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const runs = Number(opt("--runs", "5"));
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
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify({ runs: times, first_render_median_ms: median, browser: browser.version() }));
} finally {
  if (browser) await browser.close();
  await server.stop();
}
