#!/usr/bin/env node
// Planner speed in wasm, in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core): serves www/ (with the web package built into www/pkg/) with
// scripts/serve.mjs and, in a module Web Worker as the page runs the engine, traces a
// RevGNN (`demoModel`), builds its training graph and plans it (`plan`) a few times.
// Prints the median times and, on the last line, a JSON summary.
//
//   node scripts/bench-plan-wasm.mjs [--layers 1000] [--ipus 8] [--runs 3] [--json FILE]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startServer, launchChromium } from "../tests/node/helpers.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const layers = Number(opt("--layers", "1000"));
const ipus = Number(opt("--ipus", "8"));
const runs = Number(opt("--runs", "3"));
const jsonOut = opt("--json", null);

// The module worker that loads the package and plans, as the page runs the engine. It is
// served from a folder of its own (the server's CSP allows workers from 'self' only, not
// blob: URLs).
const WORKER_SRC = `
    import init, { demoModel, plan } from "/pkg/ipu_playground.js";
    self.onmessage = async (e) => {
      try {
        const { layers, ipus, runs } = e.data;
        await init();
        const out = [];
        for (let r = 0; r < runs; r++) {
          const t0 = performance.now();
          const m = demoModel("revgnn", { layers, ipus, training: true, graph: false });
          const t1 = performance.now();
          const p = plan(m, { Training: { gradientAccumulation: 2 * ipus }, autoRoundNumIPUs: true },
                         { training: true, optimizer: "adam", microBatchSize: m.microBatchSize });
          const t2 = performance.now();
          out.push({ demo_ms: t1 - t0, plan_call_ms: t2 - t1, parameters_ms: m.timings.parametersMs,
                     trace_ms: m.timings.traceMs, training_graph_ms: p.timings.trainingGraphMs,
                     plan_ms: p.timings.planMs, nodes: p.numNodes, valid: p.valid, fits: p.fits });
          m.traced.free();
        }
        self.postMessage({ ok: true, out, agent: navigator.userAgent });
      } catch (err) {
        self.postMessage({ ok: false, error: String(err && err.message || err) });
      }
    };`;

// Runs in the page: starts the worker and waits for its answer.
async function planInWorker({ layers, ipus, runs }) {
  const w = new Worker("/bench-plan/worker.mjs", { type: "module" });
  return await new Promise((resolve) => {
    w.onmessage = (e) => resolve(e.data);
    w.onerror = (e) => resolve({ ok: false, error: e.message || "worker error" });
    w.postMessage({ layers, ipus, runs });
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const workerDir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-plan-"));
fs.writeFileSync(path.join(workerDir, "worker.mjs"), WORKER_SRC);
const server = await startServer({ args: ["--quiet", "--mount", `/bench-plan/=${workerDir}`] });
let browser;
try {
  browser = await launchChromium();
  const page = await browser.newPage();
  await page.goto(`${server.url}/`);
  const r = await page.evaluate(planInWorker, { layers, ipus, runs });
  if (!r.ok) throw new Error(r.error);
  for (const [i, x] of r.out.entries()) {
    console.log(`[wasm plan] run ${i + 1}: parameters ${x.parameters_ms.toFixed(0)} ms, trace ${x.trace_ms.toFixed(0)} ms, training graph ${x.training_graph_ms.toFixed(0)} ms, plan ${x.plan_ms.toFixed(0)} ms, plan() call ${x.plan_call_ms.toFixed(0)} ms (${x.nodes} nodes)`);
  }
  const m = (k) => median(r.out.map((x) => x[k]));
  const res = {
    framework: "ipu-playground-wasm",
    layers,
    ipus,
    runs,
    nodes: r.out[0].nodes,
    parameters_ms: m("parameters_ms"),
    trace_ms: m("trace_ms"),
    training_graph_ms: m("training_graph_ms"),
    plan_ms: m("plan_ms"),
    // plan() as called from JS: training graph, plan, JSON out and JSON.parse.
    plan_call_ms: m("plan_call_ms"),
    total_ms: median(r.out.map((x) => x.trace_ms + x.training_graph_ms + x.plan_ms)),
    browser: browser.version(),
  };
  console.log(`[wasm plan] ${layers}-layer RevGNN training plan on ${ipus} IPUs, median of ${runs}: trace ${res.trace_ms.toFixed(0)} ms + training graph ${res.training_graph_ms.toFixed(0)} ms + plan ${res.plan_ms.toFixed(0)} ms = ${res.total_ms.toFixed(0)} ms (plan() call with JSON: ${res.plan_call_ms.toFixed(0)} ms) in Chromium ${res.browser}`);
  console.log(JSON.stringify(res));
  if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(res));
} finally {
  if (browser) await browser.close();
  await server.stop();
  fs.rmSync(workerDir, { recursive: true, force: true });
}
