#!/usr/bin/env node
// RevGNN training speed in wasm, in headless Chromium (Debian's /usr/bin/chromium driven
// by playwright-core): serves www/ (with the web package built into www/pkg/) and data/
// with scripts/serve.mjs, then trains PubMed in a module Web Worker, as the page does, and
// prints the median epoch time as JSON on the last line.
//
//   node scripts/bench-wasm.mjs [--dataset PubMed] [--epochs 6] [--json FILE] [--profile] [--plain]
//                               [--half | --vs-half]
//
// The page's loader picks the relaxed-SIMD build where Chromium has it; --plain loads the
// simd128 build instead.
// --profile: per-op time of the last epoch (performance.now around every executor node), the
// 14 costliest ops (BENCH_PROFILE_TOP=N for N).
// --half: the float16 model (the trainer's `half` option: float16 weights and activations).
// --vs-half: a float32 and a float16 trainer built side by side and trained epoch by epoch in
// turn (float32, float16, float32, …), so that the two medians and their ratio (float16 /
// float32 epoch time) come from runs seconds apart; the JSON has both and `half_ratio`.
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
const vsHalf = args.includes("--vs-half");
// One trainer per entry, trained in turn each epoch.
const variants = vsHalf ? [false, true] : [args.includes("--half")];

// The bench's module worker: loads the package as the page's engine does and trains. It is
// served at a same-origin URL by a Playwright route (the page's Content-Security-Policy
// allows only same-origin workers, not blob: ones).
const WORKER_PATH = "/__bench-worker.js";
const workerSource = (origin) => `
    import { RevGnnTrainer, setProfiling } from "${origin}/pkg/ipu_playground.js";
    import { loadEngine } from "${origin}/engine/load.js";
    self.onmessage = async (e) => {
      try {
        const { dataset, epochs, profile, plain, variants } = e.data;
        const { simd } = await loadEngine({ relaxed: !plain });
        setProfiling(profile);
        const low = dataset.toLowerCase();
        const files = {};
        for (const s of ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]) {
          const r = await fetch("${origin}/data/ind." + low + "." + s);
          if (!r.ok) throw new Error("fetching ind." + low + "." + s + ": HTTP " + r.status);
          files[s] = new Uint8Array(await r.arrayBuffer());
        }
        const runs = variants.map((half) => {
          const t0 = performance.now();
          const trainer = new RevGnnTrainer(dataset, files, { epochs, half });
          return { half, trainer, build_ms: performance.now() - t0, times: [], losses: [], opTime: {} };
        });
        for (let i = 0; i < epochs; i++) {
          for (const run of runs) {
            const s = performance.now();
            const r = run.trainer.trainEpoch();
            run.times.push((performance.now() - s) / 1000);
            run.losses.push(r.loss);
            run.opTime = r.opTime;
          }
        }
        const out = runs.map(({ half, trainer, build_ms, times, losses, opTime }) =>
          ({ half, build_ms, times, losses, opTime, acc: trainer.evaluate() }));
        self.postMessage({ ok: true, runs: out, simd });
      } catch (err) {
        self.postMessage({ ok: false, error: String(err && err.message || err) });
      }
    };`;

// Runs in the page: starts the bench worker and waits for its answer.
async function trainInWorker({ path, dataset, epochs, profile, plain, variants }) {
  const w = new Worker(path, { type: "module" });
  return await new Promise((resolve) => {
    w.onmessage = (e) => resolve(e.data);
    w.onerror = (e) => resolve({ ok: false, error: e.message || "worker error" });
    w.postMessage({ dataset, epochs, profile, plain, variants });
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
  const r = await page.evaluate(trainInWorker, { path: WORKER_PATH, dataset, epochs, profile, plain, variants });
  if (!r.ok) throw new Error(r.error);
  const median = (times) => {
    const later = times.length > 1 ? times.slice(1) : times;
    const sorted = [...later].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)];
  };
  const summaries = r.runs.map((run) => {
    const tag = run.half ? "float16" : "float32";
    const ops = Object.entries(run.opTime ?? {}).sort((a, b) => b[1][1] - a[1][1]);
    for (const [name, [calls, secs]] of ops.slice(0, Number(process.env.BENCH_PROFILE_TOP ?? 14))) {
      console.log(`[wasm ${tag}]   ${name.padEnd(20)} ${String(calls).padStart(7)} calls ${secs.toFixed(3).padStart(8)}s ${((secs / calls) * 1e6).toFixed(1).padStart(8)} us/call`);
    }
    for (const [i, t] of run.times.entries()) console.log(`[wasm ${tag}] epoch ${i + 1} loss ${run.losses[i].toFixed(4)} time ${t.toFixed(3)}s`);
    return {
      framework: "ipu-playground-wasm",
      dataset,
      dtype: tag,
      epochs,
      epoch_median_s: median(run.times),
      epoch_times_s: run.times,
      losses: run.losses,
      acc: run.acc,
      browser: browser.version(),
      simd: r.simd,
    };
  });
  let res = summaries[0];
  if (vsHalf) {
    const [f32, f16] = summaries;
    res = { ...f32, float16: f16, half_ratio: f16.epoch_median_s / f32.epoch_median_s };
    console.log(`[wasm] ${dataset}: median epoch float32 ${f32.epoch_median_s.toFixed(3)}s, float16 ${f16.epoch_median_s.toFixed(3)}s (float16 / float32 ${res.half_ratio.toFixed(2)}, same run, epochs in turn) in Chromium ${res.browser} (${r.simd} build)`);
  } else {
    console.log(`[wasm] ${dataset}: median epoch ${res.epoch_median_s.toFixed(3)}s (${res.dtype}) in Chromium ${res.browser} (${r.simd} build)`);
  }
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(res));
} finally {
  if (browser) await browser.close();
  await server.stop();
}
