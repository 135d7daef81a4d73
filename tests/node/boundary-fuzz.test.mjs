// A seeded fuzz of the JS boundary of the npm package (imported by name from tests/consumer):
// methods called with a wrong `this` (every exported class's methods on instances of the
// other classes, on plain objects carrying a forged __wbg_ptr, on freed objects), double
// free() and Symbol.dispose, re-entrant getters and forwards (module getters that change an
// optimizer or call back into the API while trainingModel, trace or plan walks the module),
// huge option arrays, IPU indices and counts up to 65,536, option bags that are arrays
// or Maps, and pickle bombs in a dataset's raw files (repetition, memo references, 64-bit
// numbers). The properties: 0 traps (no RuntimeError, no "unreachable", no "memory access out
// of bounds"), 0 silent acceptances (each bad call throws), every error message under
// 1 KiB, and a small reference training step, after every 100 bad calls, equal to the one a
// fresh process computes.
//
// FUZZ_SEED=<n> replays a run (the seed is printed); FUZZ_CALLS=<n> sizes it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";
import fs from "node:fs";
import path from "node:path";
import { REPO, rng } from "./helpers.mjs";
import { api, models, nn, poptorch, classifierData, referenceStep } from "./poptorch-helpers.mjs";

const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CALLS = Number(process.env.FUZZ_CALLS ?? 2000);
const MESSAGE_CAP = 1024;
const rand = rng(SEED);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const chance = (p) => rand() < p;

/** The reference step as a fresh process computes it (the package loaded by name, nothing else run). */
function freshReference() {
  const helpers = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), "poptorch-helpers.mjs")).href;
  const code = `const { referenceStep } = await import(${JSON.stringify(helpers)}); process.stdout.write(JSON.stringify(referenceStep()));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", code], { encoding: "utf8", timeout: 120000 });
  assert.equal(r.status, 0, `the fresh process failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const counted = { calls: 0, bad: 0, ok: 0, messages: 0, longest: 0 };
const overCap = [];
// How long each rejected call took, slowest per case, for `make bench` (FUZZ_TIMES=file):
// a call that must fail fails within 1 s. Recorded here, never asserted (a timed test
// would fail on a busy machine).
const TIMES = process.env.FUZZ_TIMES;
const slowest = new Map();
function noteRejected(what, ms) {
  const key = what.replace(/\d+/g, "N");
  if (!(slowest.get(key)?.ms >= ms)) slowest.set(key, { what, ms });
}

/** Checks a thrown value: an Error with a message under the cap, never a trap. */
function check(what, e) {
  assert.ok(!(e instanceof WebAssembly.RuntimeError), `${what}: trapped: ${e?.message} (seed ${SEED})`);
  assert.ok(e instanceof Error, `${what}: threw a non-Error ${String(e)} (seed ${SEED})`);
  assert.ok(typeof e.message === "string" && e.message.length > 0, `${what}: no message (seed ${SEED})`);
  assert.doesNotMatch(e.message, /unreachable|panicked|memory access out of bounds|null pointer passed to rust|recursive use|already (mutably )?borrowed/,
    `${what} (seed ${SEED})`);
  counted.messages++;
  const bytes = Buffer.byteLength(e.message);
  counted.longest = Math.max(counted.longest, bytes);
  if (bytes >= MESSAGE_CAP) overCap.push(`${what}: ${bytes} bytes: ${e.message.slice(0, 120)}…`);
}

/** `f` must throw (an Error of class `cls` when given, its message matching `re`). */
function bad(what, f, cls, re) {
  counted.calls++;
  let threw = null;
  const t0 = performance.now();
  try {
    f();
  } catch (e) {
    threw = e;
    noteRejected(what, performance.now() - t0);
  }
  assert.ok(threw !== null, `${what}: was accepted (seed ${SEED})`);
  check(what, threw);
  if (cls) assert.equal(threw.name, cls, `${what}: ${threw.name}: ${threw.message} (seed ${SEED})`);
  if (re) assert.match(threw.message, re, `${what} (seed ${SEED})`);
  counted.bad++;
  return threw;
}

/** `f` works, or throws an Error that passes `check`. */
function maybe(what, f) {
  counted.calls++;
  const t0 = performance.now();
  try {
    const r = f();
    counted.ok++;
    return r;
  } catch (e) {
    noteRejected(what, performance.now() - t0);
    check(what, e);
    counted.bad++;
    return undefined;
  }
}

const net0 = models.seeded(models.Classifier);
/** A live object of each of the package's classes, made fresh on each call. */
const MAKERS = {
  "nn.Module": () => new nn.Module(),
  "nn.Linear": () => new nn.Linear(2, 2),
  "nn.LayerNorm": () => new nn.LayerNorm(2),
  "nn.Dropout": () => new nn.Dropout(0.5),
  "nn.ReLU": () => new nn.ReLU(),
  "nn.GELU": () => new nn.GELU(),
  "nn.Embedding": () => new nn.Embedding(3, 2),
  "nn.Sequential": () => new nn.Sequential([new nn.ReLU()]),
  "nn.ModuleList": () => new nn.ModuleList([new nn.ReLU()]),
  "nn.Parameter": () => net0.parameters()[0],
  "poptorch.Options": () => new poptorch.Options(),
  "poptorch.Options.Training": () => new poptorch.Options().Training,
  "poptorch.Options.TensorLocations": () => new poptorch.Options().TensorLocations,
  "poptorch.TensorLocationSettings": () => new poptorch.TensorLocationSettings(),
  "poptorch.Stage": () => new poptorch.Stage("a"),
  "poptorch.Phase": () => new poptorch.Phase("a"),
  "poptorch.PipelinedExecution": () => new poptorch.PipelinedExecution("a"),
  "poptorch.ShardedExecution": () => new poptorch.ShardedExecution("a"),
  "poptorch.SerialPhasedExecution": () => new poptorch.SerialPhasedExecution(["a"]),
  "poptorch.ParallelPhasedExecution": () => new poptorch.ParallelPhasedExecution(["a"]),
  "poptorch.optim.SGD": () => new poptorch.optim.SGD(net0.parameters(), { lr: 0.1 }),
  "poptorch.optim.Adam": () => new poptorch.optim.Adam(net0.parameters(), { lr: 0.1 }),
  "poptorch.optim.AdamW": () => new poptorch.optim.AdamW(net0.parameters(), { lr: 0.1 }),
  "poptorch.optim.RMSprop": () => new poptorch.optim.RMSprop(net0.parameters(), { lr: 0.1 }),
  "poptorch.optim.LAMB": () => new poptorch.optim.LAMB(net0.parameters(), { lr: 0.1 }),
  "poptorch.optim variableAttrs": () => new poptorch.optim.SGD(net0.parameters(), { lr: 0.1 }).variableAttrs,
  "poptorch.PoplarExecutor": () => poptorch.inferenceModel(models.seeded(models.Classifier)),
  TracedGraph: () => api.trace(new nn.ReLU(), [{ shape: [2] }]).traced,
  Tensor: () => {
    let kept; // a Tensor the package made (its trace has ended: its methods are Errors)
    api.trace({ forward: (x) => (kept = x) }, [{ shape: [2] }]);
    return kept;
  },
};
const CLASS_NAMES = Object.keys(MAKERS);

/** The glue methods (and getters) of an object's class: those that enter wasm with `this`. */
function glueMethods(obj) {
  const out = [];
  for (let proto = Object.getPrototypeOf(obj); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      if (key === "constructor") continue;
      const d = Object.getOwnPropertyDescriptor(proto, key);
      const f = d.get ?? d.value;
      if (typeof f === "function" && String(f).includes("__ipuThis(this")) out.push({ key, getter: Boolean(d.get), f });
    }
  }
  return out;
}
/** The user-facing class name a glue method checks `this` against (from its own source). */
const checkedClass = (f) => String(f).match(/__ipuThis\(this, "([^"]+)"/)[1];

/** Calls `method` of some class with `self` as this. */
function callOn(m, self) {
  return m.getter ? m.f.call(self) : m.f.call(self);
}

function wrongThis() {
  const cls = pick(CLASS_NAMES);
  const owner = MAKERS[cls]();
  const methods = glueMethods(owner);
  assert.ok(methods.length > 0, `${cls} has no glue methods`);
  const m = pick(methods);
  const kind = int(0, 4);
  if (kind === 0) {
    // An instance of another class.
    const otherCls = pick(CLASS_NAMES.filter((c) => c !== cls));
    const other = MAKERS[otherCls]();
    // The optimizers share no class; the same class reached through another name is fine.
    if (glueMethods(other).some((o) => o.f === m.f)) return maybe(`${cls}.${m.key} on a ${otherCls}`, () => callOn(m, other));
    const e = bad(`${cls}.${m.key} on a ${otherCls}`, () => callOn(m, other), "TypeError", /called on a /);
    assert.ok(e.message.includes(`.${m.key} called on a `), e.message);
    return e;
  }
  if (kind === 1) {
    const fake = pick([{ __wbg_ptr: 8 }, { __wbg_ptr: int(1, 2 ** 24) }, { __wbg_ptr: 2 ** 32 - 8 }, Object.create(Object.getPrototypeOf(owner)), { __wbg_ptr: -1 }]);
    if (Object.getPrototypeOf(fake) !== Object.prototype) fake.__wbg_ptr = int(8, 1 << 20);
    return bad(`${cls}.${m.key} on a forged object`, () => callOn(m, fake), "TypeError", /not one of this package's/);
  }
  if (kind === 2) {
    owner.free();
    return bad(`${cls}.${m.key} on a freed one`, () => callOn(m, owner), "TypeError", /was freed/);
  }
  if (kind === 3) {
    return bad(`${cls}.${m.key} on ${String(pick([null, undefined, 3, "x"]))}`, () => callOn(m, pick([null, undefined, 3, "x", Symbol("s")])), "TypeError");
  }
  // Its own class with a forged pointer: the registry's pointer is used, so it works as usual
  // (or fails on its arguments), and the object it was forged from is unharmed.
  owner.__wbg_ptr = int(8, 1 << 20);
  return maybe(`${cls}.${m.key} with a forged __wbg_ptr`, () => callOn(m, owner));
}

function doubleFree() {
  const cls = pick(CLASS_NAMES.filter((c) => c !== "nn.Parameter")); // a Parameter is the module's
  const o = MAKERS[cls]();
  maybe(`${cls}.free`, () => o.free());
  for (let i = int(1, 3); i > 0; i--) {
    counted.calls++;
    const how = pick(["free", "dispose"]);
    const r = how === "free" ? o.free() : o[Symbol.dispose]?.();
    assert.equal(r, undefined, `a second ${how} of a ${cls}`);
  }
  bad(`free() of a ${cls} on a forged object`, () => Object.getPrototypeOf(o).free.call({ __wbg_ptr: 8 }), "TypeError", /free called on/);
}

/** Re-entrancy: a module whose getter or forward calls back into the API mid-walk. */
function reentrant() {
  const net = models.seeded(models.Classifier);
  const opt = new poptorch.optim.SGD(net.parameters(), { lr: 0.1 });
  const prior = poptorch.inferenceModel(models.seeded(models.Classifier));
  let wrapper = null;
  const actions = [
    () => opt.update({ lr: pick([0.2, -1, NaN]) }),
    () => opt.variableAttrs.markAsConstant(pick(["lr", "momentum", "bogus"])),
    () => opt.variableAttrs.markAsVariable("lr"),
    () => wrapper?.setOptimizer(new poptorch.optim.SGD(net.parameters(), { lr: 0.3 })),
    () => wrapper?.setOptimizer(opt),
    () => wrapper?.call(...classifierData(2)),
    () => wrapper?.destroy(),
    () => prior.setOptimizer(opt),
    () => prior.call(...classifierData(2)),
    () => poptorch.trainingModel(net, new poptorch.Options(), opt),
    () => api.trace(new nn.ReLU(), [{ shape: [2] }]),
    () => net.parameters().map((p) => p.data),
    () => net.loadStateDict(net.stateDict()),
    () => net.fc1.free?.(),
    () => opt.free(),
  ];
  const action = pick(actions);
  let hits = 0;
  Object.defineProperty(net, "sneaky", {
    enumerable: true,
    configurable: true,
    get() {
      if (hits++ < 3) maybe("a re-entrant getter's call", action);
      return undefined;
    },
  });
  if (chance(0.5)) {
    const forward = net.forward;
    net.forward = function (...xs) {
      maybe("a re-entrant forward's call", action);
      return forward.apply(this, xs);
    };
  }
  wrapper = maybe("trainingModel of a re-entrant module", () => poptorch.trainingModel(net, new poptorch.Options(), opt));
  const during = pick([
    () => wrapper?.call(...classifierData(4)),
    () => wrapper?.plan(...classifierData(4)),
    () => wrapper?.compile(...classifierData(4)),
    () => wrapper?.setOptimizer(opt),
    () => api.trace(net, [{ name: "x", shape: [2, 3] }, { name: "y", shape: [2], dtype: "int32" }]),
    () => net.stateDict(),
  ]);
  maybe("a walk of a re-entrant module", during);
  maybe("destroy", () => wrapper?.destroy());
}

/** Huge arrays and objects as options: each is an Error, with a short message. */
function huge() {
  const n = pick([1e5, 1e6]);
  const holes = new Array(n);
  const filled = () => new Array(n).fill(0.5);
  const cases = [
    ["fromJSON availableMemoryProportion: holes", () => poptorch.Options.fromJSON({ availableMemoryProportion: holes })],
    ["fromJSON availableMemoryProportion: filled", () => poptorch.Options.fromJSON({ availableMemoryProportion: filled() })],
    ["fromJSON deviceIterations: an array", () => poptorch.Options.fromJSON({ deviceIterations: filled() })],
    ["fromJSON: a huge JSON text", () => poptorch.Options.fromJSON(JSON.stringify({ bogus: filled() }))],
    ["setAvailableMemoryProportion: an array", () => new poptorch.Options().setAvailableMemoryProportion(filled())],
    ["setAvailableMemoryProportion: many keys", () =>
      new poptorch.Options().setAvailableMemoryProportion(Object.fromEntries(Array.from({ length: Math.min(n, 1e5) }, (_, i) => [`IPU${i}`, 0.5])))],
    ["outputMode: an array", () => new poptorch.Options().outputMode(holes)],
    ["deviceIterations: an array", () => new poptorch.Options().deviceIterations(filled())],
    ["optimizer params: holes", () => new poptorch.optim.SGD(holes, { lr: 0.1 })],
    ["optimizer update: an array", () => new poptorch.optim.SGD(net0.parameters(), { lr: 0.1 }).update({ lr: filled() })],
    ["optimizer options: betas", () => new poptorch.optim.Adam(net0.parameters(), { lr: 0.1, betas: filled() })],
    ["Phase.ipus: an array of holes", () => new poptorch.Phase("a").ipus(holes)],
    ["trace inputs: holes", () => api.trace(new nn.ReLU(), holes)],
    ["trace: a shape of 1e5 dims", () => api.trace(new nn.ReLU(), [{ shape: new Array(1e5).fill(1) }])],
  ];
  const [what, f] = pick(cases);
  bad(`${what} (${n})`, f);
}

/** IPU indices and counts up to 65,536: accepted where valid, else an Error (an index above
 * 65,535, the largest a Block may have, is always one). */
function ipus() {
  const ipu = pick([0, 1, 3, 63, 64, 1000, 4095, 65535, 65536, 2 ** 31, -1]);
  const invalid = ipu < 0 || ipu > 65535;
  const plan = () => {
    const net = new (class extends nn.Module {
      constructor() { super(); this.fc = new nn.Linear(3, 2); }
      forward(x) { return api.block("b", ipu, () => this.fc.forward(x)); }
    })();
    const strategy = pick([() => new poptorch.ShardedExecution(new poptorch.Stage("b").ipu(ipu)), () => new poptorch.PipelinedExecution("b")])();
    return poptorch.inferenceModel(net, new poptorch.Options().setExecutionStrategy(strategy)).plan({ shape: [2, 3], data: new Float32Array(6) });
  };
  const cases = [
    ["Stage.ipu", () => new poptorch.Stage("a").ipu(ipu), invalid],
    ["Phase.ipus", () => new poptorch.Phase("a").ipus(ipu), invalid],
    ["a Block's IPU in a trace", () => api.trace({ forward: (x) => api.block("b", ipu, () => x.relu()) }, [{ shape: [2] }]), invalid],
    ["a plan with a Block on it", plan, invalid],
    ["setAvailableMemoryProportion", () => new poptorch.Options().setAvailableMemoryProportion({ [`IPU${ipu}`]: 0.5 }), false],
    ["replicationFactor", () => new poptorch.Options().replicationFactor(ipu), ipu < 0],
    ["fromJSON availableMemoryProportion", () => poptorch.Options.fromJSON({ availableMemoryProportion: { [`IPU${ipu}`]: 0.5 } }), false],
  ];
  const [what, f, mustFail] = pick(cases);
  return mustFail ? bad(`${what}: IPU ${ipu}`, f) : maybe(`${what}: IPU ${ipu}`, f);
}

/** Option bags that are arrays, Maps or other containers: a TypeError each (a state dict may
 * be a Map, as torch.load gives one: one whose keys are not the model's is PyTorch's error). */
function containers() {
  const value = pick([[], [1, 2], new Map([["deviceIterations", 2]]), new Set(), new Uint8Array(2), new Date(0), Promise.resolve({})]);
  if (value instanceof Map && chance(0.5)) {
    bad("loadStateDict given a Map of other keys", () => net0.loadStateDict(value), "Error", /Unexpected key\(s\) in state_dict: "deviceIterations"/);
    return;
  }
  const cases = [
    ["Options.fromJSON", () => poptorch.Options.fromJSON(value)],
    ["RevGnnTrainer config", () => new api.RevGnnTrainer("Cora", {}, value)],
    ["SGD options", () => new poptorch.optim.SGD(net0.parameters(), value)],
    ["optimizer.update", () => new poptorch.optim.SGD(net0.parameters(), { lr: 0.1 }).update(value)],
    ["setAvailableMemoryProportion", () => new poptorch.Options().setAvailableMemoryProportion(value)],
    ["trace options", () => api.trace(new nn.ReLU(), [{ shape: [2] }], value)],
    ...(value instanceof Map ? [] : [["loadStateDict", () => net0.loadStateDict(value)]]),
  ];
  const [what, f] = pick(cases);
  bad(`${what} given ${Object.prototype.toString.call(value)}`, f, "TypeError", /must be a plain object/);
}

/** Cora's raw files as staged (make test stages them first), read once. */
let coraFiles = null;
function cora() {
  if (coraFiles === null) {
    coraFiles = {};
    for (const s of ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]) {
      coraFiles[`ind.cora.${s}`] = new Uint8Array(fs.readFileSync(path.join(REPO, "data", `ind.cora.${s}`)));
    }
  }
  return coraFiles;
}

/** Pickle bombs in one of Cora's raw files, given to the trainer (which parses every file
 * first): each is an Error naming the file, within the reader's memory budget (64 bytes per
 * byte of the file), never a trap or a size cut to 32 bits. */
function pickles() {
  const u32 = (n) => [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255];
  const u64 = (n) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(n), true);
    return [...b];
  };
  const cases = [
    // [None] * n: one byte per object in the file, far more in memory.
    ["a repetition bomb", () => {
      const n = pick([1e5, 1e6, 4e6]);
      const b = new Uint8Array(n + 6);
      b.set([0x80, 2, 0x5d, 0x28]); // PROTO 2, EMPTY_LIST, MARK
      b.fill(0x4e, 4, 4 + n); // NONE
      b.set([0x65, 0x2e], 4 + n); // APPENDS, STOP
      return b;
    }],
    // One 1 MiB string, then thousands of references to it (BINGET): gigabytes as a tree.
    ["a memo reference bomb", () => {
      const big = 1 << 20;
      const refs = pick([100, 1000, 5000]);
      const b = new Uint8Array(4 + 5 + big + 2 + 2 * refs + 2);
      b.set([0x80, 2, 0x5d, 0x28, 0x54, ...u32(big)]); // PROTO, EMPTY_LIST, MARK, BINSTRING len
      b.fill(0x61, 9, 9 + big);
      let at = 9 + big;
      b.set([0x71, 0], at); // BINPUT 0
      at += 2;
      for (let i = 0; i < refs; i++, at += 2) b.set([0x68, 0], at); // BINGET 0
      b.set([0x65, 0x2e], at);
      return b;
    }],
    // A node id past 32 bits in the graph (LONG1): read whole, never as the id it is mod 2^32.
    ["a 64-bit node id", () => {
      const id = 2 ** 32 + pick([0, 5, 2707]);
      const long1 = [];
      for (let v = BigInt(id); v > 0n; v >>= 8n) long1.push(Number(v & 255n));
      // PROTO 2, EMPTY_DICT, MARK, LONG1 id, EMPTY_LIST, BININT1 0, APPEND, SETITEMS, STOP
      return Uint8Array.from([0x80, 2, 0x7d, 0x28, 0x8a, long1.length, ...long1, 0x5d, 0x4b, 0, 0x61, 0x75, 0x2e]);
    }, ["graph"], new RegExp(`node ${2 ** 32}|node ${2 ** 32 + 5}|node ${2 ** 32 + 2707}`)],
  ];
  const [what, make, inFiles = ["x", "allx", "graph", "y"], re = null] = pick(cases);
  const file = pick(inFiles);
  const files = { ...cora(), [`ind.cora.${file}`]: make() };
  const e = bad(`${what} in ind.cora.${file}`, () => new api.RevGnnTrainer("Cora", files, { epochs: 1 }), "Error", new RegExp(`ind\\.cora\\.${file}`));
  if (re) assert.match(e.message, re);
}

const FAMILIES = [wrongThis, wrongThis, wrongThis, doubleFree, reentrant, huge, ipus, containers, pickles];

test(`boundary fuzz: ${CALLS} calls, 0 traps, 0 silent acceptances, messages under 1 KiB, the reference step as a fresh process's (FUZZ_SEED=${SEED})`, (t) => {
  t.diagnostic(`FUZZ_SEED=${SEED} FUZZ_CALLS=${CALLS}`);
  console.log(`boundary fuzz: FUZZ_SEED=${SEED} FUZZ_CALLS=${CALLS}`);
  const fresh = freshReference();
  assert.deepEqual(referenceStep(), fresh, "the reference step before the fuzz");
  let checkedAt = 0;
  let checks = 0;
  while (counted.calls < CALLS) {
    pick(FAMILIES)();
    if (counted.bad - checkedAt >= 100) {
      checkedAt = counted.bad;
      checks++;
      assert.deepEqual(referenceStep(), fresh, `the reference step after ${counted.bad} bad calls (seed ${SEED})`);
    }
  }
  assert.deepEqual(referenceStep(), fresh, "the reference step after the fuzz");
  t.diagnostic(`${counted.calls} calls: ${counted.bad} rejected, ${counted.ok} accepted; ${checks} reference checks; longest message ${counted.longest} bytes`);
  if (TIMES) {
    const rows = [...slowest.values()].sort((a, b) => b.ms - a.ms);
    fs.writeFileSync(TIMES, JSON.stringify({ seed: SEED, calls: counted.calls, rejected: counted.bad, slowest: rows }, null, 1));
  }
  assert.deepEqual(overCap, [], `messages of 1 KiB or more (seed ${SEED})`);
  assert.ok(counted.bad > CALLS / 4 && counted.ok > CALLS / 10, JSON.stringify(counted));
});

test("poptorch.Options.deviceIterations called on a poptorch.Stage is a TypeError naming both, and reads nothing", () => {
  const e = bad("the issue's example", () => poptorch.Options.prototype.deviceIterations.call(new poptorch.Stage("a"), 2).toJSON(), "TypeError");
  assert.equal(e.message, "poptorch.Options.deviceIterations called on a poptorch.Stage: a method works only on a live poptorch.Options made by this package");
  bad("an nn.Linear as this", () => poptorch.Options.prototype.deviceIterations.call(new nn.Linear(2, 2), 2), "TypeError", /called on a nn\.Linear/);
  bad("a forged pointer", () => poptorch.Options.prototype.deviceIterations.call({ __wbg_ptr: 8 }, 2), "TypeError", /not one of this package's/);
  const traced = api.trace(new nn.ReLU(), [{ shape: [2] }]).traced;
  bad("TracedGraph.plan on a Stage", () => Object.getPrototypeOf(traced).plan.call(new poptorch.Stage("a")), "TypeError", /TracedGraph\.plan called on a poptorch\.Stage/);
  // A real object's own pointer cannot be redirected through __wbg_ptr.
  const o = new poptorch.Options().deviceIterations(3);
  const s = new poptorch.Stage("a");
  o.__wbg_ptr = s.__wbg_ptr;
  assert.equal(o.toJSON().deviceIterations, 3);
  assert.deepEqual(referenceStep(), freshReference());
});

test("100,000 double frees and 100,000 wrong-this calls leave the engine as a fresh process has it", () => {
  for (let i = 0; i < 1000; i++) {
    const l = new nn.Linear(2, 2);
    l.free();
    for (let k = 0; k < 100; k++) l.free();
  }
  const stage = new poptorch.Stage("a");
  const f = poptorch.Options.prototype.deviceIterations;
  let refused = 0;
  for (let i = 0; i < 100000; i++) {
    try {
      f.call(stage, 2);
    } catch (e) {
      if (e instanceof TypeError) refused++;
    }
  }
  assert.equal(refused, 100000);
  assert.deepEqual(referenceStep(), freshReference());
});

test("a module getter that changes the optimizer while trainingModel walks the module: a clear outcome, never a trap", () => {
  const net = models.seeded(models.Classifier);
  const opt = new poptorch.optim.SGD(net.parameters(), { lr: 0.1 });
  let calls = 0;
  Object.defineProperty(net, "sneaky", {
    enumerable: true,
    get() {
      calls++;
      opt.update({ lr: 0.2 });
      opt.variableAttrs.markAsConstant("lr");
      return undefined;
    },
  });
  const m = poptorch.trainingModel(net, new poptorch.Options(), opt);
  assert.ok(calls > 0, "the getter ran");
  const [, loss] = m.call(...classifierData(4));
  assert.ok(Number.isFinite(loss.data[0]));
  // setOptimizer, with the same getter running while it resolves the groups.
  maybe("setOptimizer mid-walk", () => m.setOptimizer(opt));
  m.destroy();
  assert.deepEqual(referenceStep(), freshReference());
});

test("option bags that are not plain objects are a TypeError: Options.fromJSON(new Map(…)), RevGnnTrainer(…, [])", () => {
  bad("fromJSON(Map)", () => poptorch.Options.fromJSON(new Map([["deviceIterations", 4]])), "TypeError", /must be a plain object .*got a Map/);
  bad("RevGnnTrainer config []", () => new api.RevGnnTrainer("Cora", {}, []), "TypeError", /config must be a plain object .*got an array/);
  bad("RevGnnTrainer files []", () => new api.RevGnnTrainer("Cora", [], undefined), "TypeError", /files must be a plain object .*got an array/);
  // A plain object, and one of a class, are still options.
  assert.equal(poptorch.Options.fromJSON({ deviceIterations: 4 }).toJSON().deviceIterations, 4);
  assert.equal(poptorch.Options.fromJSON(Object.assign(Object.create(null), { deviceIterations: 2 })).toJSON().deviceIterations, 2);
});

test("a look-alike naming another object's state through `_handle` is not that object: options and optimizers are found by the package, not by what the object answers", () => {
  const a = new poptorch.Options().deviceIterations(3);
  const net = new nn.Linear(2, 2);
  const lookAlikes = [
    { _handle: () => a._handle() },
    Object.assign(Object.create(poptorch.Options.prototype), { _handle: () => a._handle() }),
  ];
  for (const forged of lookAlikes) {
    const e = bad("a look-alike Options", () => poptorch.inferenceModel(net, forged), "TypeError");
    assert.match(e.message, /Expected poptorch\.Options/);
  }
  // A live Options given a `_handle` of its own is still itself.
  const b = new poptorch.Options();
  b._handle = () => a._handle();
  assert.equal(poptorch.inferenceModel(net, b).options.deviceIterations, 1);
  // An optimizer likewise: setOptimizer with a look-alike of a live SGD is refused.
  const model = poptorch.trainingModel(models.seeded(models.Classifier), new poptorch.Options(), new poptorch.optim.SGD(net0.parameters(), { lr: 0.1 }));
  const sgd = new poptorch.optim.SGD(net0.parameters(), { lr: 0.5 });
  bad("a look-alike optimizer", () => model.setOptimizer({ _handle: () => sgd._handle() }), "TypeError");
});
