#!/usr/bin/env node
// Replicas as parallel workers in Node (ipu-playground/replicas.mjs): the time of one host
// call of a training model with 4 replicas, on one worker (model.call in this thread) and on
// 2 and 4 worker_threads. A figure, never a test: `make bench` step 10 prints it with the load.
//
//   node scripts/bench-replicas.mjs [--calls N] [--hidden H] [--micro B]
// Prints one `REPLICAS workers=<n> ms_per_call=<median>` line per worker count.
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const CONSUMER = path.join(ROOT, "tests", "consumer");
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const [calls, hidden, micro] = [arg("calls", 5), arg("hidden", 512), arg("micro", 256)];
const MODEL = pathToFileURL(path.join(CONSUMER, "replica-model.mjs"));
const { ReplicaWorkers } = await import(pathToFileURL(createRequire(path.join(CONSUMER, "package.json")).resolve("ipu-playground/replicas.mjs")).href);
const build = (await import(MODEL.href)).default;
const args = { replicas: 4, accumulation: 2, iterations: 1, hidden };
const n = micro * 4 * 2;
const x = { shape: [n, 3], data: Float32Array.from({ length: n * 3 }, (_, i) => Math.sin(i * 12.9898) % 1) };
const y = { shape: [n], data: Int32Array.from({ length: n }, (_, i) => (x.data[3 * i] + x.data[3 * i + 1] > 0 ? 1 : 0)) };
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function time(run) {
  await run(); // compile
  const ms = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await run();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

console.log(`# 4 replicas, gradientAccumulation 2, micro-batch ${micro}, hidden ${hidden}; load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; ${os.cpus().length} cores`);
const model = build(args);
console.log(`REPLICAS workers=1 ms_per_call=${(await time(() => model.call(x, y))).toFixed(1)} (model.call, this thread)`);
for (const workers of [2, 4]) {
  const w = await ReplicaWorkers.start(MODEL, { workers, args });
  try {
    const ms = await time(() => w.call(x, y));
    const busy = w.workers.map((s) => s.lastStepMs.toFixed(0)).join(",");
    console.log(`REPLICAS workers=${workers} ms_per_call=${ms.toFixed(1)} busy_ms_last=${busy}`);
  } finally {
    w.close();
  }
}
