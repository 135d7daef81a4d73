#!/usr/bin/env node
// Tracing speed through the JavaScript API, in Node with the npm package (pkg-node/, built
// by `scripts/build-wasm.sh nodejs`): every op goes from JS through the wasm glue and
// records the caller's `file:line`, as a user's model does.
//
//   1. a chain `h = h.add(c)` of --chain ops (Tensor ops called from this file);
//   2. one `Linear` applied --linear times (a module's forward, through its Proxy).
//
// For each: the time of `forward` alone (ops recorded per second: the figure with the
// target, at least 100,000 ops/s in wasm) and of the whole `trace(...)` call (which also
// verifies the graph and hands it to JS as text and objects). The recorded source of the
// ops is checked to be this file's line. Prints one line per figure and, on the last line,
// a JSON summary.
//
//   node scripts/bench-trace.mjs [--chain 200000] [--linear 100000] [--runs 3] [--json FILE]
//                                [--stack-string]
//
// --stack-string makes `Error.prepareStackTrace` read-only first, so the package cannot
// read V8's call sites and parses the formatted `stack` string instead, as it does on
// engines other than V8 (and as every op did before the call-site reader).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const chain = Number(opt("--chain", "200000"));
const linear = Number(opt("--linear", "100000"));
const runs = Number(opt("--runs", "3"));
const jsonOut = opt("--json", null);
if (args.includes("--stack-string")) {
  Object.defineProperty(Error, "prepareStackTrace", { value: undefined, writable: false, configurable: false });
}

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const pkg = require(path.join(ROOT, "pkg-node", "ipu_playground.js"));
const { Module, Linear, trace, constant } = pkg;
const THIS = path.basename(fileURLToPath(import.meta.url));
const SRC = fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n");
const lineOf = (marker) => SRC.findIndex((l) => l.includes(marker) && !l.includes("lineOf")) + 1;

// CPU time of this process since `c0` (ms): on a shared machine the wall time also counts
// the time spent waiting for a CPU.
const cpuMs = (c0) => {
  const d = process.cpuUsage(c0);
  return (d.user + d.system) / 1e3;
};

class Chain extends Module {
  constructor(n) {
    super();
    this.n = n;
  }
  forward(x) {
    const c = constant([1], [1]);
    let h = x;
    const [t0, c0] = [performance.now(), process.cpuUsage()];
    for (let i = 0; i < this.n; i++) h = h.add(c); // CHAIN-OP
    [this.forwardMs, this.cpuMs] = [performance.now() - t0, cpuMs(c0)];
    return h;
  }
}

class Repeat extends Module {
  constructor(n) {
    super();
    this.n = n;
    this.fc = new Linear(16, 16);
  }
  forward(x) {
    let h = x;
    const [t0, c0] = [performance.now(), process.cpuUsage()];
    for (let i = 0; i < this.n; i++) h = this.fc.forward(h); // LINEAR-OP
    [this.forwardMs, this.cpuMs] = [performance.now() - t0, cpuMs(c0)];
    return h;
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function bench(name, make, ops, op, marker) {
  const forward = [];
  const cpu = [];
  const total = [];
  let nodes = 0;
  for (let r = 0; r < runs; r++) {
    const model = make();
    const t0 = performance.now();
    const { graph } = trace(model, [{ name: "x", shape: [4, 16] }]);
    total.push(performance.now() - t0);
    forward.push(model.forwardMs);
    cpu.push(model.cpuMs);
    nodes = graph.nodes.length;
    const recorded = graph.nodes.filter((n) => n.opname === op);
    const want = `${THIS}:${lineOf(marker)}`;
    if (recorded.length !== ops || recorded.some((n) => n.meta.source !== want)) {
      throw new Error(`${name}: expected ${ops} '${op}' ops recorded at ${want}, got ${recorded.length} ` +
        `(first source ${recorded[0]?.meta.source})`);
    }
  }
  const f = median(forward);
  const t = median(total);
  const c = median(cpu);
  const r = { ops, nodes, forward_ms: f, forward_cpu_ms: c, trace_ms: t, ops_per_s: ops / (f / 1e3),
    cpu_ops_per_s: ops / (c / 1e3), trace_ops_per_s: ops / (t / 1e3) };
  console.log(
    `${name}: ${ops} ops (${nodes} nodes): forward ${f.toFixed(0)} ms = ${r.ops_per_s.toFixed(0)} ops/s ` +
      `(${c.toFixed(0)} ms of process CPU: ${r.cpu_ops_per_s.toFixed(0)} ops/s); ` +
      `whole trace() ${t.toFixed(0)} ms = ${r.trace_ops_per_s.toFixed(0)} ops/s (median of ${runs})`,
  );
  return r;
}

const out = { runtime: `node ${process.version}`, stack: args.includes("--stack-string") ? "string" : "call sites" };
if (chain > 0) out.chain = bench("chain h = h.add(c)", () => new Chain(chain), chain, "add", "CHAIN-OP");
if (linear > 0) out.linear = bench("Linear applied repeatedly", () => new Repeat(linear), linear, "linear", "LINEAR-OP");
const figs = [out.chain, out.linear].filter(Boolean).map((r) => r.ops_per_s);
out.ops_per_s = Math.min(...figs);
console.log(
  `tracing ops/s (wasm, Node ${process.version}, stack read as ${out.stack}): ${out.ops_per_s.toFixed(0)} ` +
    `(the slower of the two); ` +
    `target >= 100000: ${out.ops_per_s >= 100000 ? "met" : "NOT met"}`,
);
if (jsonOut) fs.writeFileSync(jsonOut, JSON.stringify(out));
console.log(JSON.stringify(out));
