// A bounded, seeded fuzz run against the npm package, imported by name from tests/consumer
// as a user's project would: a few thousand random calls, bad and good (wrong types;
// negative, fractional, NaN and huge sizes; names with control characters; stale and fake
// tensor handles; freed objects; models that throw, from forward or from a getter during
// module discovery; Proxies; nested traces; bad trainer configs). Every bad call must throw
// an Error (of the expected class where the argument's type or range decides it) with a
// message; no call may trap (WebAssembly.RuntimeError); and a model traced before the run
// prints exactly the same graph after it.
//
// FUZZ_SEED=<n> replays a run (the seed is printed); FUZZ_CALLS=<n> sizes it.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { REPO, rng } from "./helpers.mjs";
import { BAD_NAMES, SHAPES, DTYPES, randomLayers, randomOps, randomOpsModel } from "./random-model.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const api = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CALLS = Number(process.env.FUZZ_CALLS ?? 4000);
const HERE = path.basename(fileURLToPath(import.meta.url));
const SRC = fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n");
const lineOf = (snippet) => SRC.findIndex((l) => l.includes(snippet)) + 1;
const L = api.limits();

const rand = rng(SEED);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const chance = (p) => rand() < p;
/** A value for a message, whatever it is (symbols and bigints included). */
function show(v) {
  try {
    if (typeof v === "symbol" || typeof v === "bigint" || typeof v === "function") return String(v);
    return JSON.stringify(v, (_, x) => (typeof x === "symbol" || typeof x === "bigint" ? String(x) : x)) ?? String(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}

// Values for a whole-number argument: a few good ones, and every kind of bad one.
const GOOD_SIZES = [1, 2, 3, 4, 5, 8];
const BAD_NUMBERS = [-1, -0.5, 4.7, NaN, Infinity, -Infinity, 1e9, 1e300, 2 ** 53, 2 ** 64, -(2 ** 31)];
const NOT_NUMBERS = ["4", "", "abc", null, undefined, true, {}, [], [4], () => 4, 4n, Symbol("s"), new Number(4)];
const sizeArg = () => (chance(0.5) ? pick(GOOD_SIZES) : chance(0.6) ? pick(BAD_NUMBERS) : pick(NOT_NUMBERS));

/** What a whole-number argument from 1 to `max` gives: "ok", "TypeError" or "RangeError". */
function sizeClass(v, max, min = 1) {
  if (typeof v !== "number" || !Number.isFinite(v) || !Number.isInteger(v)) return "TypeError";
  return v < min || v > max ? "RangeError" : "ok";
}
const GOOD_NAMES = ["x", "input", "ünï", "a b", "stage-0"];

let counted = { calls: 0, rejected: 0, accepted: 0 };

/** Runs `f`, which must throw an Error of `cls` ("any" for any Error class) with a message. */
function bad(what, f, cls = "any") {
  counted.calls++;
  let threw = null;
  try {
    f();
  } catch (e) {
    threw = e;
  }
  assert.ok(threw !== null, `${what}: was accepted (seed ${SEED})`);
  check(what, threw);
  if (cls !== "any") assert.equal(threw.name, cls, `${what}: ${threw.name}: ${threw.message} (seed ${SEED})`);
  counted.rejected++;
  return threw;
}

/** Runs `f`, which must not throw. */
function good(what, f) {
  counted.calls++;
  try {
    const r = f();
    counted.accepted++;
    return r;
  } catch (e) {
    assert.fail(`${what}: threw ${e?.name}: ${e?.message} (seed ${SEED})`);
  }
}

/** Runs `f`, which may succeed or throw, but only an Error with a message. */
function maybe(what, f) {
  counted.calls++;
  try {
    const r = f();
    counted.accepted++;
    return r;
  } catch (e) {
    check(what, e);
    counted.rejected++;
    return undefined;
  }
}

function check(what, e) {
  assert.ok(!(e instanceof WebAssembly.RuntimeError), `${what}: trapped: ${e?.message} (seed ${SEED})`);
  assert.ok(e instanceof Error, `${what}: threw a non-Error ${typeof e}: ${show(e)} (seed ${SEED})`);
  assert.equal(typeof e.message, "string", what);
  assert.ok(e.message.length > 0, `${what}: an empty message (seed ${SEED})`);
  assert.doesNotMatch(e.message, /unreachable|panicked|memory access out of bounds|null pointer passed to rust/, what);
}

// The model traced before and after the run: its printed graph must not change.
class Reference extends api.nn.Module {
  constructor() {
    super();
    this.fc = new api.nn.Linear(4, 3);
    this.norm = new api.nn.LayerNorm(3);
  }
  forward(x) {
    const h = api.block("stage0", 0, () => this.fc.forward(x).relu()); // reference line A
    return this.norm.forward(h).add(api.constant([1, 2, 3], [3])); // reference line B
  }
}
const traceReference = () => api.trace(new Reference(), [{ name: "x", shape: [2, 4] }]).text;
const A = `${HERE}:${lineOf("// reference line A")}`;
const B = `${HERE}:${lineOf("// reference line B")}`;
const EXPECTED = `graph(x: f32[2,4]) {
  %0 = input "x" : f32[2,4]
  %1 = parameter "fc.weight" : f32[3,4]     # fc
  %2 = parameter "fc.bias" : f32[3]         # fc
  %3 = linear(%0, %1, %2) : f32[2,3]        # fc | block "stage0" ipu 0 | ${A}
  %4 = relu(%3) : f32[2,3]                  # block "stage0" ipu 0 | ${A}
  %5 = parameter "norm.weight" : f32[3]     # norm
  %6 = parameter "norm.bias" : f32[3]       # norm
  %7 = layer_norm(%4, %5, %6) [eps=0.00001] : f32[2,3]  # norm | ${B}
  %8 = constant "_tensor_constant0" [3] : f32[3]  # ${B}
  %9 = add(%7, %8) : f32[2,3]               # ${B}
  return (%9)
}
`;

// The random ops and models of tests/node/random-model.mjs (scripts/check-export.mjs draws
// its models from the same generator), on layers shared by every fuzzed model.
const LAYERS = randomLayers(api);
const randomOp = randomOps(api, pick, LAYERS);

// Models for trace(): some good, most bad in one way or another.
const keptTensor = { stale: null };
function randomModel() {
  const stale = keptTensor.stale;
  const kind = int(0, 13);
  switch (kind) {
    case 0: // good: random ops (many failing, each caught) on the inputs and their results
    case 1:
      return { expect: "ok", model: randomOpsModel(api, { pick, randomOp, layers: LAYERS, attempt: maybe, kept: keptTensor }) };
    case 2: // uses a tensor kept from an earlier trace
      return { expect: stale ? "Error" : "ok", model: { forward: (x) => (stale ? stale.add(x) : x) } };
    case 3: // returns a look-alike
      return { expect: "TypeError", model: { forward: () => pick([{ _id: 0 }, { _id: 1, shape: [2, 4] }, 42, "x", null, [{}], undefined]) } };
    case 4: // throws from forward
      return { expect: "Error", model: { forward() { throw new Error("the user's forward failed"); } } };
    case 5: { // a submodule getter that throws during module discovery
      const m = new api.Module();
      m.forward = (x) => x;
      Object.defineProperty(m, "sub", { enumerable: true, get() { throw new TypeError("getter failed during discovery"); } });
      return { expect: "TypeError", model: m };
    }
    case 6: { // a Proxy whose traps throw
      const target = { forward: (x) => x, child: new api.Linear(4, 4) };
      const trap = pick(["ownKeys", "getOwnPropertyDescriptor", "get"]);
      const handler = { [trap]() { throw new RangeError(`the ${trap} trap failed`); } };
      return { expect: trap === "get" ? "RangeError" : "RangeError", model: new Proxy(target, handler) };
    }
    case 7: // calls trace from inside forward
      return { expect: "Error", model: { forward: (x) => api.trace({ forward: (y) => y }, [{ shape: [1] }]) && x } };
    case 8: { // a frozen submodule: its forward cannot be wrapped
      const sub = Object.freeze({ forward: (x) => x });
      return { expect: "Error", model: { sub, forward(x) { return this.sub.forward(x); } } };
    }
    case 9: // submodule names that would break the printed graph
      return { expect: "Error", model: { [pick(BAD_NAMES.filter((n) => n && !n.startsWith("n")))]: new api.ReLU(), forward: (x) => x } };
    case 10: // not a model at all
      return { expect: "TypeError", model: pick([null, undefined, 3, "model", {}, [], { forward: 3 }, () => 1, new api.Tensor()]) };
    case 11: { // modules nested deeper than the limit
      let m = { forward: (x) => x };
      for (let i = 0; i < L.maxModuleDepth + 2; i++) m = { inner: m, forward: (x) => x };
      return { expect: "Error", model: m };
    }
    case 12: // a model that frees its input
      return { expect: "Error", model: { forward: (x) => { x.free(); return x.relu(); } } };
    default: // a good model with a Sequential and a ModuleList
      return { expect: "ok", model: new (class extends api.Module {
        constructor() {
          super();
          this.seq = new api.Sequential([new api.Linear(4, 4), new api.ReLU()]);
          this.list = new api.ModuleList([new api.GELU(), new api.Dropout(0.1)]);
        }
        forward(x) {
          // Fits a float [.., 4] input; other inputs make it fail, caught, and x is the result.
          return maybe("Sequential and ModuleList", () => this.list.get(1).forward(this.list.get(0).forward(this.seq.forward(x)))) ?? x;
        }
      })() };
  }
}

function randomInputs() {
  if (chance(0.6)) {
    const n = int(1, 3);
    const inputs = Array.from({ length: n }, (_, i) => ({ name: `${pick(GOOD_NAMES)}${i}`, shape: pick(SHAPES), dtype: pick(DTYPES) }));
    return { good: true, inputs };
  }
  const bads = [
    () => [{ name: pick(BAD_NAMES), shape: [2, 4] }],
    () => [{ name: "x", shape: pick([[-1, 4], [2.5, 4], ["2", 4], [1e9, 1e9], [2 ** 53, 2], Array(17).fill(1), "2,4", 8, null, [NaN]]) }],
    () => [{ name: "x", shape: [2, 4], dtype: pick(["float64", 32, "", "x".repeat(50)]) }],
    () => [{ name: "x", shape: [2, 4] }, { name: "x", shape: [2, 4] }],
    () => pick([null, 3, "x", {}, [3], [null], Array(L.maxInputs + 1).fill({ shape: [1] })]),
    () => [{ name: 42, shape: [2, 4] }],
  ];
  return { good: false, inputs: pick(bads)() };
}

const BAD_CONFIGS = [
  { epochs: 1e6 }, { layers: 1e5 }, { hidden: 1e9 }, { lr: NaN }, { lr: Infinity }, { lr: -0.1 }, { lr: 0 },
  { weightDecay: NaN }, { weightDecay: -1 }, { dropout: 1 }, { dropout: "0.5" }, { optimizer: 42 },
  { optimizer: "adagrad" }, { noRev: "yes" }, { noRev: 1 }, { epochs: 4.5 }, { epochs: "4" }, { seed: -1 },
  { seed: 2 ** 60 }, { epoch: 3 }, { groups: 1 }, { hidden: 7 }, { parts: 0 }, { layers: [] }, 3, "config",
];

function randomCall() {
  const k = int(0, 17);
  switch (k) {
    case 0: {
      const [a, b] = [sizeArg(), sizeArg()];
      const bias = pick([undefined, true, false, undefined, "yes", 1]);
      const cls = [sizeClass(a, L.maxTensorBytes), sizeClass(b, L.maxTensorBytes)].find((c) => c !== "ok") ??
        (typeof bias === "boolean" || bias === undefined ? "ok" : "TypeError");
      // Whole sizes within range whose weight is still too big are an Error naming the bytes.
      if (cls === "ok" && a * b * 4 > L.maxTensorBytes) return bad(`Linear(${a}, ${b})`, () => new api.Linear(a, b), "Error");
      return cls === "ok" ? good(`Linear(${a}, ${b}, ${bias})`, () => new api.Linear(a, b, bias))
        : bad(`Linear(${show(a)}, ${show(b)}, ${show(bias)})`, () => new api.Linear(a, b, bias), cls);
    }
    case 1: {
      const [a, b] = [sizeArg(), sizeArg()];
      const cls = [sizeClass(a, L.maxTensorBytes), sizeClass(b, L.maxTensorBytes)].find((c) => c !== "ok");
      if (!cls && a * b * 4 > L.maxTensorBytes) return bad(`Embedding(${a}, ${b})`, () => new api.Embedding(a, b), "Error");
      return cls ? bad(`Embedding(${show(a)}, ${show(b)})`, () => new api.Embedding(a, b), cls)
        : good(`Embedding(${a}, ${b})`, () => new api.Embedding(a, b));
    }
    case 2: {
      const a = sizeArg();
      const cls = sizeClass(a, L.maxTensorBytes);
      if (cls === "ok" && a * 4 > L.maxTensorBytes) return bad(`LayerNorm(${a})`, () => new api.LayerNorm(a), "Error");
      return cls === "ok" ? good(`LayerNorm(${a})`, () => new api.LayerNorm(a)) : bad(`LayerNorm(${show(a)})`, () => new api.LayerNorm(a), cls);
    }
    case 3: {
      const p = pick([0, 0.5, 0.99, 1, -0.1, NaN, Infinity, "0.5", undefined, null, {}]);
      const ok = typeof p === "number" && p >= 0 && p < 1;
      return ok ? good(`Dropout(${p})`, () => new api.Dropout(p))
        : bad(`Dropout(${show(p)})`, () => new api.Dropout(p), typeof p === "number" ? "RangeError" : "TypeError");
    }
    case 4: {
      const s = pick([0, 7, 2 ** 53 - 1, ...BAD_NUMBERS, ...NOT_NUMBERS]);
      const cls = sizeClass(s, L.maxSeed, 0);
      return cls === "ok" ? good(`manualSeed(${s})`, () => api.manualSeed(s)) : bad(`manualSeed(${show(s)})`, () => api.manualSeed(s), cls);
    }
    case 5: {
      const sizes = chance(0.7) ? Array.from({ length: int(0, 4) }, sizeArg) : pick(NOT_NUMBERS);
      const batch = sizeArg();
      return maybe(`traceMlp(${show(sizes)}, ${show(batch)})`, () => api.traceMlp(sizes, batch));
    }
    case 6: {
      const items = pick([[new api.ReLU()], [3], ["x"], [null], "abc", 5, [{}], [{ forward: 1 }], undefined]);
      const ok = Array.isArray(items) && items.every((m) => m && typeof m.forward === "function");
      const Cls = pick([api.Sequential, api.ModuleList]);
      return ok ? good(`${Cls.name}`, () => new Cls(items)) : bad(`${Cls.name}(${show(items)})`, () => new Cls(items), "TypeError");
    }
    case 7: {
      const list = new api.ModuleList([new api.ReLU(), new api.GELU()]);
      const i = pick([0, 1, 2, -1, 1.5, NaN, "0", 2 ** 40, undefined]);
      const cls = sizeClass(i, 2 ** 32 - 1, 0);
      return cls === "ok" && i < 2 ? good(`ModuleList.get(${i})`, () => list.get(i)) : bad(`ModuleList.get(${show(i)})`, () => list.get(i), cls === "ok" ? "RangeError" : cls);
    }
    case 8: // outside any trace
      return bad("constant outside a trace", () => api.constant([1], [1]), "Error");
    case 9:
      return bad("block outside a trace", () => api.block("b", 0, () => 1), "Error");
    case 10: { // registering parameters and buffers
      const m = new api.Module();
      const name = pick(["w", ...BAD_NAMES, "a.b", 3, undefined]);
      const values = pick([[1, 2], new Float32Array(2), [1], ["a", "b"], "12", null, new Float64Array([1, 2])]);
      const shape = pick([[2], [1, 2], [3], [-2], [2.5], "2", [1e9, 1e9], null]);
      return maybe(`registerParameter(${show(name)}, ${show(values)}, ${show(shape)})`, () => m.registerParameter(name, values, shape));
    }
    case 11: { // wrong `this` and freed objects
      const l = new api.Linear(2, 2);
      l.free();
      return pick([
        () => bad("a freed Linear", () => l.forward(undefined), "TypeError"),
        () => bad("Tensor.relu on a plain object", () => api.Tensor.prototype.relu.call({}), "TypeError"),
        () => bad("Module.param on null", () => api.Module.prototype.param.call(null, "w"), "TypeError"),
        () => bad("a Tensor made with new", () => new api.Tensor().relu(), "TypeError"),
      ])();
    }
    case 12: { // trainer configs, checked before the files are read
      const config = pick(BAD_CONFIGS);
      const cls = typeof config !== "object" ? "TypeError" : undefined;
      return bad(`RevGnnTrainer config ${JSON.stringify(config)}`, () => new api.RevGnnTrainer("Cora", {}, config), cls ?? "any");
    }
    case 13: { // trainer names and files
      const name = pick([42, null, "Nope", "Cora", "x".repeat(100)]);
      const files = pick([{}, { x: "bytes" }, { x: new Uint8Array([1, 2, 3]) }, { x: new Float32Array(2) }, null, 7]);
      return bad(`RevGnnTrainer(${show(name)})`, () => new api.RevGnnTrainer(name, files, undefined));
    }
    case 14:
      return bad("setProfiling('yes')", () => api.setProfiling("yes"), "TypeError");
    default: { // a trace
      const { model, expect } = randomModel();
      const { good: inputsOk, inputs } = randomInputs();
      const options = pick([undefined, undefined, { training: true }, { training: "yes" }, { train: true }, 5]);
      const optionsOk = options === undefined || (typeof options === "object" && typeof options.training === "boolean");
      if (!inputsOk || !optionsOk || expect !== "ok") {
        // Inputs and options are checked first; a bad model fails either way.
        return expect === "ok" || !inputsOk || !optionsOk
          ? bad("trace with bad inputs or options", () => api.trace(model, inputs, options))
          : bad("trace of a bad model", () => api.trace(model, inputs, options), expect === "Error" ? "any" : expect);
      }
      return good("trace of a good model", () => api.trace(model, inputs, options));
    }
  }
}

test(`fuzz: ${CALLS} random calls never trap, bad ones throw Errors, the engine still traces the same graph (FUZZ_SEED=${SEED})`, (t) => {
  t.diagnostic(`FUZZ_SEED=${SEED} FUZZ_CALLS=${CALLS}`);
  console.log(`fuzz: FUZZ_SEED=${SEED} FUZZ_CALLS=${CALLS}`);
  api.manualSeed(0);
  const before = traceReference();
  assert.equal(before, EXPECTED);
  for (let i = 0; i < CALLS; i++) randomCall();
  // Outside a trace again: no session was left open by any of the failures.
  bad("constant after the run", () => api.constant([1], [1]), "Error");
  api.manualSeed(0);
  assert.equal(traceReference(), EXPECTED);
  t.diagnostic(`${counted.calls} calls: ${counted.rejected} rejected, ${counted.accepted} accepted`);
  assert.ok(counted.rejected > CALLS / 3 && counted.accepted > CALLS / 10, JSON.stringify(counted));
});

test("a handle from an ended trace, or a look-alike, is an Error; a forward kept from a trace still works", () => {
  let kept, keptForward, keptLeaf;
  const sub = new api.Linear(4, 2);
  const relu = (x) => x.relu();
  const js = { forward: relu };
  api.trace({ sub, js, forward(x) {
    kept = x;
    keptForward = this.js.forward;
    keptLeaf = this.sub.forward;
    return this.sub.forward(this.js.forward(x));
  } }, [{ shape: [3, 4] }]);
  const e = bad("a stale handle", () => api.trace({ forward: (x) => kept.add(x) }, [{ shape: [3, 4] }]), "Error");
  assert.match(e.message, /belongs to trace #\d+, which has ended/);
  assert.match(bad("a look-alike", () => api.trace({ forward: () => ({ _id: 0 }) }, [{ shape: [1] }]), "TypeError").message,
    /forward's result must be a Tensor, got an object/);
  // A JS submodule's forward was wrapped for the trace (a Proxy entering its scope), then put
  // back; a kept wrapper calls the original forward (not the trace's dropped trap), which finds
  // the kept tensor stale. A leaf Rust module (nn.Linear) enters its scope itself: its forward
  // is never replaced.
  assert.equal(js.forward, relu, "the wrapper was removed");
  assert.notEqual(keptForward, relu);
  assert.match(bad("a kept wrapper", () => keptForward.call(js, kept), "Error").message, /which has ended/);
  assert.equal(Object.hasOwn(sub, "forward"), false);
  assert.equal(keptLeaf, api.Linear.prototype.forward);
  assert.match(bad("a kept leaf forward", () => keptLeaf.call(sub, kept), "Error").message, /which has ended/);
});

test("the trace ends whatever throws: discovery getters, forward, a nested trace", () => {
  const m = new api.Module();
  m.forward = (x) => x;
  m.fc = new api.Linear(2, 2);
  Object.defineProperty(m, "boom", { enumerable: true, get() { throw new Error("getter failed"); } });
  assert.equal(bad("a throwing getter", () => api.trace(m, [{ shape: [2] }])).message, "getter failed");
  // Nothing works outside a trace afterwards, and the wrappers are gone.
  assert.match(bad("constant", () => api.constant([1], [1])).message, /no trace is running/);
  assert.equal(Object.hasOwn(m.fc, "forward"), false);
  assert.match(bad("nested", () => api.trace({ forward: (x) => { api.trace({ forward: (y) => y }, [{ shape: [1] }]); return x; } }, [{ shape: [1] }])).message,
    /traces do not nest/);
  assert.equal(traceReference(), EXPECTED);
});

test("names print on one line: a newline in an input name is an Error, not a forged line", () => {
  const e = bad("newline", () => api.trace(new Reference(), [{ name: "x\n  %99 = forged()", shape: [2, 4] }]), "Error");
  assert.match(e.message, /U\+000A/);
  assert.ok(!e.message.includes("\n"));
});

test("sizes each within the limits can still make a model too big as a whole: an Error before anything is allocated", () => {
  const e = bad("traceMlp of five 256 MiB layers", () => api.traceMlp(Array(6).fill(8192), 1), "Error");
  assert.match(e.message, /has 1342341120 bytes of parameters, more than the limit of 1073741824/);
  assert.match(bad("Linear over the tensor limit", () => new api.Linear(100000, 100000), "Error").message,
    /f32\[100000,100000\] needs 40000000000 bytes, more than the limit of 268435456 bytes/);
});

test("a forward that recurses until the stack runs out, calling the engine at every depth on its way back, leaves it working", () => {
  // Without the glue's stack-headroom check, a call entering wasm with the stack nearly
  // spent overflowed inside Rust and left the module broken ("memory access out of bounds").
  // The glue probes less stack for the tracer's small entries (a Tensor op, a leaf module's
  // forward, a submodule call's scope through its Proxy) than for the others: each is called
  // at every depth here.
  let calls = 0;
  let refused = 0;
  const weight = new api.Linear(2, 2).parameters()[0];
  good("a deeply recursing forward", () =>
    api.trace({
      fc: new api.Linear(2, 2),
      forward(x) {
        const down = () => {
          try {
            down();
          } catch {}
          for (const op of [() => x.relu(), () => this.fc.forward(x), () => x.add(x), () => api.isTraining(), () => weight._key()]) {
            try {
              calls++;
              op();
            } catch (e) {
              check("an op near the end of the stack", e);
              assert.equal(e.name, "RangeError", e.message);
              refused++;
            }
          }
        };
        down();
        return x.relu();
      },
    }, [{ shape: [2] }]));
  assert.ok(refused > 0 && calls > 10 * refused, `${calls} calls, ${refused} refused`);
  assert.equal(traceReference(), EXPECTED);
});
