#!/usr/bin/env node
// RevGNN training speed in wasm, in headless Chromium (Debian's /usr/bin/chromium driven
// by playwright-core): serves www/ (with the web package built into www/pkg/) and data/
// with scripts/serve.mjs, then trains PubMed in a module Web Worker, as the page does, and
// prints the median epoch time as JSON on the last line.
//
//   node scripts/bench-wasm.mjs [--dataset PubMed] [--epochs 6] [--json FILE] [--profile] [--plain]
//
// The page's loader picks the relaxed-SIMD build where Chromium has it; --plain loads the
// simd128 build instead.
// --profile: per-op time of the last epoch (performance.now around every executor node).
import fs from "node:fs";
import { startServer, launchChromium } from "../tests/node/helpers.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const dataset = opt("--dataset", "PubMed");
const epochs = Number(opt("--epochs", "6"));
const jsonOut = opt("--json", null);
const profile = args.includes("--profile");
const plain = args.includes("--plain");

// The bench's module worker: loads the package as the page's engine does and trains. It is
// served at a same-origin URL by a Playwright route (the page's Content-Security-Policy
// allows only same-origin workers, not blob: ones).
const WORKER_PATH = "/__bench-worker.js";
const workerSource = (origin) => `
    import { RevGnnTrainer, setProfiling } from "${origin}/pkg/ipu_playground.js";
    import { loadEngine } from "${origin}/engine/load.js";
    self.onmessage = async (e) => {
      try {
        const { dataset, epochs, profile, plain } = e.data;
        const { simd } = await loadEngine({ relaxed: !plain });
        setProfiling(profile);
        const low = dataset.toLowerCase();
        const files = {};
        for (const s of ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]) {
          const r = await fetch("${origin}/data/ind." + low + "." + s);
          if (!r.ok) throw new Error("fetching ind." + low + "." + s + ": HTTP " + r.status);
          files[s] = new Uint8Array(await r.arrayBuffer());
        }
        const t0 = performance.now();
        const t = new RevGnnTrainer(dataset, files, { epochs });
        const build = performance.now() - t0;
        const times = [], losses = [];
        let opTime = {};
        for (let i = 0; i < epochs; i++) {
          const s = performance.now();
          const r = t.trainEpoch();
          times.push((performance.now() - s) / 1000);
          losses.push(r.loss);
          opTime = r.opTime;
        }
        const acc = t.evaluate();
        self.postMessage({ ok: true, times, losses, acc, build_ms: build, opTime, simd });
      } catch (err) {
        self.postMessage({ ok: false, error: String(err && err.message || err) });
      }
    };`;

// Runs in the page: starts the bench worker and waits for its answer.
async function trainInWorker({ path, dataset, epochs, profile, plain }) {
  const w = new Worker(path, { type: "module" });
  return await new Promise((resolve) => {
    w.onmessage = (e) => resolve(e.data);
    w.onerror = (e) => resolve({ ok: false, error: e.message || "worker error" });
    w.postMessage({ dataset, epochs, profile, plain });
  });
}

const server = await startServer({ args: ["--quiet"] });
let browser;
try {
  browser = await launchChromium();
  const page = await browser.newPage();
  await page.route(`**${WORKER_PATH}`, (route) =>
    route.fulfill({
      contentType: "text/javascript",
      headers: { "Cross-Origin-Embedder-Policy": "require-corp", "Cross-Origin-Resource-Policy": "same-origin" },
      body: workerSource(server.url),
    }),
  );
  await page.goto(`${server.url}/`);
  const r = await page.evaluate(trainInWorker, { path: WORKER_PATH, dataset, epochs, profile, plain });
  if (!r.ok) throw new Error(r.error);
  const ops = Object.entries(r.opTime ?? {}).sort((a, b) => b[1][1] - a[1][1]);
  for (const [name, [calls, secs]] of ops.slice(0, 14)) {
    console.log(`[wasm]   ${name.padEnd(20)} ${String(calls).padStart(7)} calls ${secs.toFixed(3).padStart(8)}s ${((secs / calls) * 1e6).toFixed(1).padStart(8)} us/call`);
  }
  const later = r.times.length > 1 ? r.times.slice(1) : r.times;
  const sorted = [...later].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  const res = {
    framework: "ipu-playground-wasm",
    dataset,
    epochs,
    epoch_median_s: median,
    epoch_times_s: r.times,
    losses: r.losses,
    acc: r.acc,
    browser: browser.version(),
    simd: r.simd,
  };
  for (const [i, t] of r.times.entries()) console.log(`[wasm] epoch ${i + 1} loss ${r.losses[i].toFixed(4)} time ${t.toFixed(3)}s`);
  console.log(`[wasm] ${dataset}: median epoch ${median.toFixed(3)}s in Chromium ${res.browser} (${r.simd} build)`);
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(res));
} finally {
  if (browser) await browser.close();
  await server.stop();
}
