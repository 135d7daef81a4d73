#!/usr/bin/env node
// After wasm-pack: checks the generated package.json and fills in what wasm-pack leaves out.
//
//   node scripts/fix-pkg.mjs OUT_DIR web|nodejs
//
// Fails loudly if an entry point it names is missing; adds every generated file to
// `files` (wasm-pack has missed snippets/ in the past), `engines` (wasm SIMD needs
// Node 16.4+; we test on 20) and `keywords`; patches the glue so that a freed object's
// methods fail in JS (see below); and states the API's limits, read from the built
// package's limits(), at the top of the `.d.ts`.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [outDir, target] = process.argv.slice(2);
if (!outDir || !["web", "nodejs"].includes(target)) {
  console.error("usage: fix-pkg.mjs OUT_DIR web|nodejs");
  process.exit(2);
}
const file = path.join(outDir, "package.json");
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
const problems = [];

if (pkg.name !== "ipu-playground") problems.push(`name is "${pkg.name}", expected "ipu-playground"`);
if (!/^\d+\.\d+\.\d+/.test(pkg.version ?? "")) problems.push(`version "${pkg.version}" is not semver`);
for (const key of ["main", "module", "types"]) {
  if (pkg[key] && !fs.existsSync(path.join(outDir, pkg[key]))) problems.push(`${key} names ${pkg[key]}, which was not generated`);
}
if (!pkg.main && !pkg.module) problems.push("neither main nor module is set");
if (!pkg.types) problems.push("types is not set");

// Every generated file a user needs, top level and snippets/.
const generated = fs
  .readdirSync(outDir)
  .filter((f) => !f.startsWith(".") && f !== "package.json" && !/^readme|^license/i.test(f));
pkg.files = [...new Set([...(pkg.files ?? []), ...generated])].sort();

pkg.keywords = [...new Set([...(pkg.keywords ?? []), "wasm", "webassembly", "ipu", "graphcore", "gnn", "tracer"])];
if (target === "nodejs") pkg.engines = { node: ">=18", ...(pkg.engines ?? {}) };

if (problems.length) {
  console.error(`fix-pkg: ${file}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
// The namespaces PyTorch users expect (`class Net extends nn.Module`, `poptorch.trainingModel`):
// wasm-bindgen exports classes and functions only at the top level, so each namespace object
// is appended here, to the JS glue and to its type declarations, naming the same classes.
// NAMESPACES below builds them; the GNN stack adds `datasets` and `loaders` there.
const NN = [
  "Module", "Linear", "LayerNorm", "Dropout", "ReLU", "GELU", "Embedding", "SerializedEmbedding", "Sequential", "ModuleList", "Parameter",
  "SAGEConv", "GCNConv", "GroupAddRev",
  "Conv2d", "BatchNorm2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "Flatten",
];
// The classes of `datasets` and `loaders` (the GNN stack, api/datasets.rs and api/loaders.rs).
const GNN_CLASSES = ["PlanetoidDataset", "GraphData", "RandomNodeLoader", "Batch", "SparseTensor"];
// Every class of `poptorch`, top-level names as the Rust code exports them.
const POPTORCH_CLASSES = [
  "PoptorchOptions", "PoptorchTrainingOptions", "PoptorchTensorLocations", "PoptorchTensorLocationSettings",
  "PoptorchStage", "PoptorchPhase", "PoptorchPipelinedExecution", "PoptorchShardedExecution",
  "PoptorchSerialPhasedExecution", "PoptorchParallelPhasedExecution", "PoptorchSGD", "PoptorchAdam", "PoptorchAdamW",
  "PoptorchRMSprop", "PoptorchLAMB", "PoptorchVariableAttrs", "PoplarExecutor",
];
const entry = path.join(outDir, pkg.main ?? pkg.module);
const dts = path.join(outDir, pkg.types);
const glue = fs.readFileSync(entry, "utf8");
const types = fs.readFileSync(dts, "utf8");
for (const name of [...NN, ...POPTORCH_CLASSES, ...GNN_CLASSES]) {
  if (!new RegExp(`class ${name}\\b`).test(glue)) problems.push(`${entry} defines no class ${name}`);
}
if (problems.length) {
  console.error(`fix-pkg: ${file}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
// User-facing names of the classes the namespaces rename (for error messages).
const USER_NAMES = {
  ...Object.fromEntries(NN.map((n) => [n, `nn.${n}`])),
  PoptorchOptions: "poptorch.Options", PoptorchTrainingOptions: "poptorch.Options.Training",
  PoptorchTensorLocations: "poptorch.Options.TensorLocations", PoptorchTensorLocationSettings: "poptorch.TensorLocationSettings",
  PoptorchStage: "poptorch.Stage", PoptorchPhase: "poptorch.Phase", PoptorchPipelinedExecution: "poptorch.PipelinedExecution",
  PoptorchShardedExecution: "poptorch.ShardedExecution", PoptorchSerialPhasedExecution: "poptorch.SerialPhasedExecution",
  PoptorchParallelPhasedExecution: "poptorch.ParallelPhasedExecution", PoptorchSGD: "poptorch.optim.SGD",
  PoptorchAdam: "poptorch.optim.Adam", PoptorchAdamW: "poptorch.optim.AdamW", PoptorchRMSprop: "poptorch.optim.RMSprop",
  PoptorchLAMB: "poptorch.optim.LAMB", PoptorchVariableAttrs: "poptorch.optim variableAttrs", PoplarExecutor: "poptorch.PoplarExecutor",
  PlanetoidDataset: "datasets.PlanetoidDataset", GraphData: "datasets.GraphData", RandomNodeLoader: "loaders.RandomNodeLoader",
  Batch: "loaders.Batch",
};
// Three patches to wasm-bindgen's glue, so that no call hands wasm a pointer it should not
// have, and no exception unwinds through a Rust frame (such an exception skips restoring
// wasm's own stack pointer and leaves borrows held: the module does not recover).
// 1. Own class: wasm-bindgen's glue hands wasm `this.__wbg_ptr`, a property anyone can
//    write, and a method called with another class's object as `this` passed that object's
//    pointer (reading another type's memory, or trapping). Every object the glue makes (its
//    constructors and `__wrap`) is registered here, in a module-private WeakMap, with its
//    class and pointer; every method, `free()` and `Symbol.dispose`, and every argument the
//    glue passes by reference (`_assertClass`) or by value (`__destroy_into_raw`), reads the
//    pointer from there, after checking the class: a wrong `this` or argument is a TypeError
//    naming both classes, a freed object's method a TypeError saying so, a second `free()` a
//    no-op, and `free()` during one of the object's own calls frees it when that call ends.
//    Nothing enters wasm with a null or foreign pointer.
// 2. Stack headroom: a call entering wasm with the JS stack nearly spent (a forward that
//    recurses without end) overflows inside Rust. Every entry into wasm first probes, in
//    JS, that some stack is left, and throws the RangeError itself when it is not.
const SITE_FRAMES = 3;
// The tracer's reading of the site (crate/src/api/nn.rs `js_caller`, imported by the name
// `__ipuCallerSite`): the first frame outside this package as "file:line", the number 1 when
// that is the same text as the previous answer (a loop's ops cross no string), or undefined
// where the site is unknown (no capture, a stack of strings, only the package's own frames):
// the tracer then reads the whole stack itself. The caller's Error.prepareStackTrace, own
// property or not, is put back as it was.
const SITE_READER = `var __ipuSite = null;
var __ipuSiteRead = null;
var __ipuSiteText;
var __ipuSiteLast;
function __ipuSiteFrames(_error, frames) {
    return frames;
}
function __ipuSiteOf(frames) {
    if (!Array.isArray(frames)) return undefined;
    for (const f of frames) {
        const file = f.getFileName();
        if (typeof file !== "string" || file.includes("ipu_playground") || file.startsWith("wasm") || file.includes("<anonymous>")) continue;
        if (f.isEval()) continue;
        const line = f.getLineNumber();
        return typeof line === "number" ? file + ":" + line : undefined;
    }
    return undefined;
}
function __ipuCallerSite() {
    const site = __ipuSite;
    if (site === null) return undefined;
    if (site !== __ipuSiteRead) {
        const own = Object.hasOwn(Error, "prepareStackTrace");
        const prepare = Error.prepareStackTrace;
        let frames;
        __ipuSiteRead = site;
        __ipuSiteText = undefined;
        try {
            Error.prepareStackTrace = __ipuSiteFrames;
            frames = site.stack;
        } catch (_) {
            return undefined;
        } finally {
            try {
                if (own) Error.prepareStackTrace = prepare;
                else delete Error.prepareStackTrace;
            } catch (_) {}
        }
        __ipuSiteText = __ipuSiteOf(frames);
    }
    const text = __ipuSiteText;
    if (text === undefined) return undefined;
    if (text === __ipuSiteLast) return 1;
    __ipuSiteLast = text;
    return text;
}
// The Proxy handler of a submodule's forward during a trace (crate/src/api/nn.rs
// \`wrap_forward\`): the module's scope entered and left around the call, in JS, so that no
// wasm frame lies between the module's caller and the ops it records.
function __ipuModuleHandler(trace, index) {
    return {
        apply(target, self, args) {
            _enterModule(trace, index);
            try {
                return Reflect.apply(target, self, args);
            } finally {
                _exitModule(trace);
            }
        },
    };
}`;
let patched = glue;
const STACK_PROBE_LEVELS = 400; // 100 were enough for 27,000 calls at every depth near the end
const STACK_PROBE_SMALL = 50;
const STACK_PROBE_TINY = 16;
const fail = (msg) => {
  console.error(`fix-pkg: ${entry}: ${msg}: has wasm-bindgen's glue changed?`);
  process.exit(1);
};
if (!patched.includes("/* own-class check */")) {
  if (/__wbg_ptr_[A-Za-z_$]/.test(patched)) fail("a class extends another (per-class __wbg_ptr_<Class> fields), which the own-class patch does not handle");
  const lines = patched.split("\n");
  const out = [];
  let cls = null; // the class whose body the line is in
  let method = null; // the method (of cls) the line is in
  const registered = new Set();
  const counts = { methods: 0, args: 0, frees: 0, destroys: 0 };
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    const open = line.match(/^(?:export )?class ([A-Za-z_$][\w$]*) \{$/);
    if (open) {
      cls = open[1];
      method = null;
      out.push(line);
      continue;
    }
    if (cls && line === "}") {
      cls = null;
      method = null;
      out.push(line);
      continue;
    }
    if (cls) {
      const m = line.match(/^ {4}(?:static |get |set |async )*([A-Za-z_$][\w$]*|\[Symbol\.\w+\])\(.*\) \{$/);
      if (m) method = m[1];
      if (method === "__destroy_into_raw" && m) {
        // The whole method: the pointer from the registry (its class checked), then cleared.
        const body = [];
        while (lines[++i] !== "    }") body.push(lines[i]);
        if (!body.some((l) => l.includes("this.__wbg_ptr = 0")) || !body.some((l) => l.includes(`${cls}Finalization.unregister(this)`))) {
          fail(`${cls}.__destroy_into_raw is not the expected shape`);
        }
        out.push(line, `        const ptr = __ipuTake(this, "${cls}");`, `        ${cls}Finalization.unregister(this);`, "        return ptr;", "    }");
        counts.destroys++;
        continue;
      }
      if (method === "free" && m) {
        const body = [];
        while (lines[++i] !== "    }") body.push(lines[i]);
        const call = body.map((l) => l.match(/^\s*(wasm\.[\w$]+)\(ptr, 0\);$/)).find(Boolean);
        if (!call || body.length !== 2) fail(`${cls}.free is not the expected shape`);
        // allow_delayed = 1: an object freed while one of its own methods runs (a forward
        // that frees its model) lives until that method returns, instead of Rust throwing
        // "attempted to take ownership …" through its own frame (which leaks wasm stack).
        out.push(line, `        const ptr = __ipuFree(this, "${cls}");`, "        if (ptr === 0) return;", `        ${cls}Finalization.unregister(this);`, `        ${call[1]}(ptr, 1);`, "    }");
        counts.frees++;
        continue;
      }
      if (method === "__unwrap") fail(`${cls}.__unwrap is used (a Vec or JsValue of this class reaches Rust), which the own-class patch does not handle`);
    }
    // Registration: right after the glue's own FinalizationRegistry registration.
    line = line.replace(/^(\s*)([A-Za-z_$][\w$]*)Finalization\.register\((this|obj), \3\.__wbg_ptr, \3\);$/, (all, ws, c, o) => {
      registered.add(c);
      return `${all}\n${ws}__ipuRegister(${o}, "${c}", ${o}.__wbg_ptr);`;
    });
    const isCtorOrWrap = cls && (method === "constructor" || method === "__wrap");
    if (!isCtorOrWrap) {
      line = line.replace(/\bthis\.__wbg_ptr\b(?!\s*=[^=])/g, () => {
        counts.methods++;
        if (!cls || !method) fail(`this.__wbg_ptr outside a method: ${line.trim()}`);
        return `__ipuThis(this, "${cls}", ${JSON.stringify(method)})`;
      });
      line = line.replace(/\b(?<!\.)((?!this\b)[A-Za-z_$][\w$]*)\.__wbg_ptr\b(?!\s*=[^=])/g, (_, v) => {
        counts.args++;
        return `__ipuArg(${v})`;
      });
    }
    out.push(line);
  }
  patched = out.join("\n");
  const leftRead = patched.split("\n").filter((l) => /__wbg_ptr\b/.test(l) && !/__wbg_ptr = |Finalization\.register\(|__ipuRegister\(/.test(l));
  if (counts.methods === 0 || counts.frees === 0 || leftRead.length) {
    fail(`the own-class patch rewrote ${counts.methods} methods and ${counts.frees} free()s, and left ${leftRead.length} reads of __wbg_ptr (${leftRead[0]?.trim()})`);
  }
  const made = new Set([...glue.matchAll(/([A-Za-z_$][\w$]*)Finalization\.register\(/g)].map((m) => m[1]));
  const unregistered = [...made].filter((c) => !registered.has(c));
  if (unregistered.length) fail(`no registration patched for ${unregistered.join(", ")}`);
  // _assertClass checks the registry's class, not the prototype chain (which anyone can set).
  const assertDef = /function _assertClass\(instance, klass\) \{\n(?:.*\n)*?\}\n/;
  if (patched.includes("_assertClass(")) {
    if (!assertDef.test(patched)) fail("_assertClass is not the expected shape");
    patched = patched.replace(assertDef, "function _assertClass(instance, klass) {\n    __ipuCheck(instance, klass.name);\n}\n");
  }
  let entries = 0;
  patched = patched.replace(/\bwasm\.((?!__wbindgen_|__externref_)[A-Za-z0-9_$]+)\(/g, (_, f) => {
    entries++;
    // A module call's scope entry and exit call no JS and run a few frames: the smallest
    // probe, and no call site to capture (they record no op).
    // Freeing an object (free(), Symbol.dispose, the FinalizationRegistry) likewise.
    if (/^(_enterModule|_exitModule)$/.test(f) || /^__wbg_[a-z0-9]+_free$/.test(f)) {
      return `(__ipuStack(${STACK_PROBE_TINY}), wasm.${f})(`;
    }
    // A module's hidden state methods, which the engine's walks of a module tree call for
    // every module (_stateNames, _getState, …: no user code, no op recorded): a small probe
    // and no call site.
    // So are isTraining() (a forward asks it once a layer) and a Parameter's hidden `_key()`
    // (the optimizer's key, asked per parameter when a wrapper attaches); and the reads a
    // forward makes between its ops, which record none: a ModuleList's `get(i)` and `length`
    // (a deep model's loop asks both once a layer) and a Tensor's `shape` and `dtype`. (A
    // capture is the costliest part of an entry: some 10 % of a 1,000-layer RevGNN's were these.)
    const reads = /^(modulelist_(get|length)|tensor_(shape|dtype))$/.test(f);
    if (/^[a-z0-9]+__(stateNames|getState|setState|stateParam|setStateParam|moduleKey|children|handle|resetCopy|key)$/.test(f) || f === "isTraining" || reads) {
      return `(__ipuStack(${STACK_PROBE_SMALL}), wasm.${f})(`;
    }
    // The tracer's other small entries, a Tensor op and a leaf module's forward (no call back
    // into the user's code), need less stack than the engine's deepest call: a smaller probe
    // (the recursion test in tests/node/fuzz.test.mjs calls them at every depth near the end).
    const small = /^tensor_/.test(f) || (/_forward$/.test(f) && !/^(groupaddrev|module|modulelist|sequential)_forward$/.test(f));
    return `(__ipuEnter(${small ? STACK_PROBE_SMALL : STACK_PROBE_LEVELS}), wasm.${f})(`;
  });
  if (entries < counts.methods) fail(`the stack-headroom patch found only ${entries} entries into wasm`);
  patched += `
/* stack headroom */
// Each level pushes its 16 arguments, so that the probe takes about the same stack cold or
// optimised: ${STACK_PROBE_LEVELS} levels leave room for the engine's deepest call.
function __ipuStackProbe(n, a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q) {
    return n <= 0 ? 0 : 1 + __ipuStackProbe(n - 1, a, b, c, d, e, f, g, h, i, j, k, l, m, o, p, q);
}
// Every entry into wasm: the stack probe, then the call site that entered, captured (not
// formatted: V8 formats a stack when it is first read) for the tracer's \`file:line\`.
function __ipuEnter(levels) {
    __ipuStack(levels);
    __ipuSite = null;
    if (typeof Error.captureStackTrace !== "function") return; // not V8: the tracer parses Error().stack
    const limit = Error.stackTraceLimit;
    try {
        // The frames below this one: the glue's method, then its caller (the glue's own
        // wrappers, at most a few, before the user's frame).
        Error.stackTraceLimit = ${SITE_FRAMES};
        const site = {};
        Error.captureStackTrace(site, __ipuEnter);
        __ipuSite = site;
    } catch (_) {
        // Error.stackTraceLimit made read-only by the caller: no site, the tracer reads the stack itself.
    } finally {
        if (Error.stackTraceLimit !== limit) Error.stackTraceLimit = limit;
    }
}
${SITE_READER}
function __ipuStack(levels) {
    try {
        __ipuStackProbe(levels, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    } catch (e) {
        throw new RangeError("Maximum call stack size exceeded: too little stack is left to enter the engine (does a forward recurse without end?)");
    }
}
`;
  // The classes whose state a function finds through their hidden \`_handle()\`
  // (crate/src/api/poptorch/handles.rs): asked through the registry and the class's own
  // method, never a \`_handle\` the object itself answers (a look-alike naming another
  // object's state).
  const handleClasses = [...patched.matchAll(/^(?:export )?class ([A-Za-z_$][\w$]*) \{$[\s\S]*?^\}$/gm)]
    .filter((m) => /^ {4}_handle\(\) \{$/m.test(m[0]))
    .map((m) => m[1]);
  if (handleClasses.length === 0) fail("no class has a _handle() method");
  patched += `
/* handles */
// The number of the Rust state behind \`obj\`, a live object of this package of a class with
// \`_handle()\`, read through that class's own method; undefined for anything else.
function __ipuHandleOf(obj) {
    const e = __ipuEntry(obj);
    if (e === undefined || e.ptr === 0) return undefined;
    switch (e.cls) {
${handleClasses.map((c) => `        case "${c}": return ${c}.prototype._handle.call(obj);`).join("\n")}
    }
    return undefined;
}
`;
  patched += `
/* own-class check */
// Every object the glue made: object -> { cls, ptr } (ptr 0 once freed or passed by value).
// \`var\` and function declarations: defined before any of the glue's code runs.
var __ipuObjects;
function __ipuName(cls) {
    const names = ${JSON.stringify(USER_NAMES)};
    return Object.hasOwn(names, cls) ? names[cls] : cls;
}
function __ipuRegister(obj, cls, ptr) {
    (__ipuObjects || (__ipuObjects = new WeakMap())).set(obj, { cls, ptr });
}
function __ipuEntry(obj) {
    return (obj !== null && (typeof obj === "object" || typeof obj === "function") && __ipuObjects) ? __ipuObjects.get(obj) : undefined;
}
function __ipuWhat(obj) {
    if (obj === null) return "null";
    if (typeof obj !== "object" && typeof obj !== "function") return typeof obj;
    const e = __ipuEntry(obj);
    if (e) return "a " + __ipuName(e.cls);
    return "an object that is not one of this package's";
}
function __ipuFreed(cls) {
    return new TypeError("this " + __ipuName(cls) + " was freed (its free() was called, or it was passed by value and consumed): it can no longer be used");
}
// The pointer of \`obj\` as the \`this\` of \`cls\`.\`method\`.
function __ipuThis(obj, cls, method) {
    const e = __ipuEntry(obj);
    if (e === undefined || e.cls !== cls) {
        throw new TypeError(__ipuName(cls) + "." + method + " called on " + __ipuWhat(obj) + ": a method works only on a live " + __ipuName(cls) + " made by this package");
    }
    if (e.ptr === 0) throw __ipuFreed(cls);
    return e.ptr;
}
// \`_assertClass(arg, klass)\`: \`arg\` is a live \`klass\` made by this package.
function __ipuCheck(obj, cls) {
    const e = __ipuEntry(obj);
    if (e === undefined || e.cls !== cls) {
        throw new TypeError("expected a " + __ipuName(cls) + ", got " + __ipuWhat(obj));
    }
    if (e.ptr === 0) throw __ipuFreed(cls);
}
// The pointer of an argument passed by reference (its class checked by _assertClass).
function __ipuArg(obj) {
    const e = __ipuEntry(obj);
    if (e === undefined) throw new TypeError("expected one of this package's objects, got " + __ipuWhat(obj));
    if (e.ptr === 0) throw __ipuFreed(e.cls);
    return e.ptr;
}
// Takes the pointer of \`obj\`, an argument passed by value: checked, then cleared.
function __ipuTake(obj, cls) {
    __ipuCheck(obj, cls);
    const e = __ipuEntry(obj);
    const ptr = e.ptr;
    e.ptr = 0;
    try { obj.__wbg_ptr = 0; } catch (_) {}
    return ptr;
}
// \`free()\`: the pointer to free, or 0 for an object already freed (a no-op).
function __ipuFree(obj, cls) {
    const e = __ipuEntry(obj);
    if (e === undefined || e.cls !== cls) {
        throw new TypeError(__ipuName(cls) + ".free called on " + __ipuWhat(obj) + ": free() works only on a " + __ipuName(cls) + " made by this package");
    }
    const ptr = e.ptr;
    e.ptr = 0;
    try { obj.__wbg_ptr = 0; } catch (_) {}
    return ptr;
}
`;
  fs.writeFileSync(entry, patched);
}
// The built package itself (before the namespaces are appended: loading it runs no wasm code
// of theirs), for the facts whose home is the Rust code: the limits and PopTorch's enums.
async function loadPackage() {
  if (target === "nodejs") return createRequire(import.meta.url)(path.resolve(entry));
  const mod = await import(pathToFileURL(path.resolve(entry)).href);
  mod.initSync({ module: fs.readFileSync(path.join(outDir, "ipu_playground_bg.wasm")) });
  return mod;
}
const built = await loadPackage();

const glueNow = fs.readFileSync(entry, "utf8");
if (!glueNow.includes("/* namespaces */")) {
  const ref = (n) => (target === "nodejs" ? `exports.${n}` : n);
  // PopTorch's enums as literals (the Rust enums' JSON names; `_poptorchEnums()` is their source).
  const enums = built._poptorchEnums();
  const enumJs = Object.entries(enums).map(([name, members]) => `${name}: Object.freeze(${JSON.stringify(members)})`);
  const js = `
/* namespaces */
// PopTorch's *args: the Rust constructors and methods take one array.
class Stage extends ${ref("PoptorchStage")} { constructor(...ids) { super(ids); } }
class Phase extends ${ref("PoptorchPhase")} {
    constructor(...items) { super(items); }
    ipus(...ipus) { return super.ipus(ipus.length === 1 && Array.isArray(ipus[0]) ? ipus[0] : ipus); }
}
class PipelinedExecution extends ${ref("PoptorchPipelinedExecution")} { constructor(...args) { super(args); } }
class ShardedExecution extends ${ref("PoptorchShardedExecution")} { constructor(...args) { super(args); } }
class SerialPhasedExecution extends ${ref("PoptorchSerialPhasedExecution")} { constructor(...phases) { super(phases); } }
class ParallelPhasedExecution extends ${ref("PoptorchParallelPhasedExecution")} { constructor(...phases) { super(phases); } }
{
    const P = ${ref("PoplarExecutor")}.prototype;
    P.call = function (...inputs) { return this._call(inputs); };
    P.run = P.call;
    P.compile = function (...inputs) { return this._compile(inputs); };
    // PopTorch-style keyword arguments last: plan(...inputs, { throwOnInvalid: false }).
    P.plan = function (...inputs) {
        const last = inputs[inputs.length - 1];
        const settings = last !== null && typeof last === "object" && !Array.isArray(last) && Object.hasOwn(last, "throwOnInvalid") ? inputs.pop() : undefined;
        return this._plan(inputs, settings);
    };
    P.returnInputGradients = function (...inputs) { return this._returnInputGradients(inputs); };
    P.referenceStep = function (...inputs) { return this._referenceStep(inputs); };
}
// Module state (api/state.rs) on every nn class, as PyTorch's nn.Module has it.
for (const C of [${NN.filter((n) => n !== "Parameter").map(ref).join(", ")}]) {
    const P = C.prototype;
    P.namedParameters = function () { return ${ref("_namedParameters")}(this); };
    P.parameters = function () { return ${ref("_namedParameters")}(this).map((e) => e[1]); };
    P.namedBuffers = function () { return ${ref("_namedBuffers")}(this); };
    P.buffers = function () { return ${ref("_namedBuffers")}(this).map((e) => e[1]); };
    P.stateDict = function () { return ${ref("_stateDict")}(this); };
    P.loadStateDict = function (stateDict, strict) { return ${ref("_loadStateDict")}(this, stateDict, strict); };
    P.tieParameter = function (name, source, sourceName) { ${ref("_tieParameter")}(this, name, source, sourceName); return this; };
    P.half = function () { return ${ref("_moduleTo")}(this, "float16"); };
    P.float = function () { return ${ref("_moduleTo")}(this, "float32"); };
}
// datasets.Planetoid(name, files | baseUrl, options): the bytes as given (Node), or the raw
// files fetched from a base URL (a page or worker: the page serves them at /data/).
async function __planetoid(name, source, options) {
    let files = source;
    if (typeof source === "string" || source instanceof URL) {
        let base;
        try {
            const dir = String(source).endsWith("/") ? String(source) : \`\${source}/\`;
            base = new URL(dir, globalThis.location?.href);
        } catch (e) {
            throw new Error(\`datasets.Planetoid: cannot fetch the raw files from \${JSON.stringify(String(source))}: it is not a URL here (\${e.message}); outside a page, pass the files' bytes\`);
        }
        files = {};
        await Promise.all(${ref("_planetoidFiles")}(name).map(async (f) => {
            const url = new URL(f, base);
            let res;
            try {
                res = await fetch(url);
            } catch (e) {
                throw new Error(\`datasets.Planetoid: fetch \${url}: \${e.message}\`);
            }
            if (!res.ok) throw new Error(\`datasets.Planetoid: fetch \${url}: HTTP \${res.status}\`);
            files[f] = new Uint8Array(await res.arrayBuffer());
        }));
    }
    return new ${ref("PlanetoidDataset")}(name, files, options);
}
// A loader is iterable: each for … of draws the next epoch's parts. Each part is yielded as
// a plain object (Batch._toHost()) and its Rust batch freed at once: the garbage collector
// does not see the wasm memory a batch holds, and would let epochs of them pile up.
${ref("RandomNodeLoader")}.prototype[Symbol.iterator] = function () {
    const batches = this._epoch();
    let i = 0;
    return {
        next() {
            if (i >= batches.length) return { done: true, value: undefined };
            const b = batches[i];
            batches[i++] = null;
            try {
                const h = b._toHost();
                const [mean, gcn] = [h.meanAdjacency, h.gcnAdjacency];
                h.meanAdjacency = () => mean;
                h.gcnAdjacency = () => gcn;
                return { done: false, value: h };
            } finally {
                b.free();
            }
        },
        return(value) {
            for (; i < batches.length; i++) batches[i]?.free();
            return { done: true, value };
        },
        [Symbol.iterator]() { return this; },
    };
};
const __namespaces = {
    nn: Object.freeze({ ${NN.map((n) => `${n}: ${ref(n)}`).join(", ")} }),
    poptorch: Object.freeze({
        Options: ${ref("PoptorchOptions")},
        TensorLocationSettings: ${ref("PoptorchTensorLocationSettings")},
        Stage, Phase, PipelinedExecution, ShardedExecution, SerialPhasedExecution, ParallelPhasedExecution,
        ${enumJs.join(",\n        ")},
        optim: Object.freeze({ SGD: ${ref("PoptorchSGD")}, Adam: ${ref("PoptorchAdam")}, AdamW: ${ref("PoptorchAdamW")}, RMSprop: ${ref("PoptorchRMSprop")}, LAMB: ${ref("PoptorchLAMB")} }),
        trainingModel: ${ref("trainingModel")},
        inferenceModel: ${ref("inferenceModel")},
        PoplarExecutor: ${ref("PoplarExecutor")},
        identity_loss: ${ref("identityLoss")},
        identityLoss: ${ref("identityLoss")},
        BeginBlock: ${ref("_beginBlockOf")},
        // PopTorch: one tensor gives one back, several (or one array) an array.
        recomputationCheckpoint: (...ts) => {
            const one = ts.length === 1 && !Array.isArray(ts[0]);
            const out = ${ref("_recomputationCheckpoint")}(ts.length === 1 && Array.isArray(ts[0]) ? ts[0] : ts);
            return one ? out[0] : out;
        },
        set_available_memory: ${ref("setAvailableMemory")},
        setAvailableMemory: ${ref("setAvailableMemory")},
        serializedMatMul: ${ref("serializedMatMul")},
        slice: ${ref("_poptorchSlice")},
        dynamic_slice: ${ref("_poptorchDynamicSlice")},
        dynamicSlice: ${ref("_poptorchDynamicSlice")},
    }),
    datasets: Object.freeze({ Planetoid: __planetoid, PlanetoidDataset: ${ref("PlanetoidDataset")}, GraphData: ${ref("GraphData")} }),
    loaders: Object.freeze({ RandomNodeLoader: ${ref("RandomNodeLoader")}, Batch: ${ref("Batch")} }),
};
${target === "nodejs"
    ? // Plain assignments: Node finds a CommonJS module's named exports by reading them.
      "exports.nn = __namespaces.nn;\nexports.poptorch = __namespaces.poptorch;\nexports.datasets = __namespaces.datasets;\nexports.loaders = __namespaces.loaders;"
    : "export const { nn, poptorch, datasets, loaders } = __namespaces;"}
`;
  fs.writeFileSync(entry, `${glueNow}\n${js}`);

  // Their types. Enum types are string unions of the same values.
  const enumTypes = Object.entries(enums).map(
    ([name, members]) => `/** \`poptorch.${name}\` */\nexport type ${name} = ${Object.values(members).map((v) => JSON.stringify(v)).join(" | ")};`,
  );
  const enumDecl = Object.entries(enums).map(
    ([name, members]) => `    readonly ${name}: { ${Object.entries(members).map(([k, v]) => `readonly ${k}: ${JSON.stringify(v)}`).join("; ")} };`,
  );
  const stateMethods = `    /** Own parameters first, then each submodule's, by traced name (\`encoder.layers.0.weight\`). */
    namedParameters(): [string, Parameter][];
    /** Live views of the parameters (for optimizers). */
    parameters(): Parameter[];
    namedBuffers(): [string, HostTensor][];
    buffers(): HostTensor[];
    /** Parameters then buffers, as host tensors (copies). */
    stateDict(): Record<string, HostTensor>;
    /** Writes each value into its parameter or buffer (same dtype and shape); strict (default): every key, no others. A value may also be PyTorch's \`tensor.tolist()\` (nested arrays, read in the parameter's dtype), and the dict a Map (as \`torch.load\` gives one). */
    loadStateDict(stateDict: Record<string, StateDictValue> | Map<string, StateDictValue>, strict?: boolean): void;
    /** This module's parameter \`name\` becomes \`source\`'s parameter \`sourceName\` (default \`name\`): PyTorch's \`decoder.weight = embed.weight\`, one parameter with one gradient and one optimizer state. Returns the module. */
    tieParameter(name: string, source: object, sourceName?: string): this;
    /** Every float parameter and buffer cast to float16 (PyTorch's half()); returns the module. */
    half(): this;
    /** Every float parameter and buffer cast to float32; returns the module. */
    float(): this;`;
  const d = `
/** A tensor on the host: row-major \`data\` (Float32Array for float32 and float16, Int32Array for int32, Uint8Array of 0/1 for bool). */
export interface HostTensor {
    shape: number[];
    dtype: "float32" | "float16" | "int32" | "bool";
    data: Float32Array | Int32Array | Uint8Array;
}
/** A host tensor given as input: \`dtype\` defaults from \`data\` (Int32Array: int32, Uint8Array: bool, else float32); \`name\` names a model input. */
export interface HostTensorInput {
    shape: number[];
    data: Float32Array | Int32Array | Uint8Array | number[] | boolean[];
    dtype?: "float32" | "float16" | "int32" | "bool";
    name?: string;
}
/** PyTorch's \`tensor.tolist()\`: a number (0-d), or arrays nested as deep as the tensor's rank. */
export type NestedNumbers = number | boolean | NestedNumbers[];
/** A value of a state dict: a host tensor, or PyTorch's \`tensor.tolist()\`. */
export type StateDictValue = HostTensorInput | NestedNumbers;
${enumTypes.join("\n")}
/** Any \`poptorch.optim\` optimizer. */
export type PoptorchOptimizer = PoptorchSGD | PoptorchAdam | PoptorchAdamW | PoptorchRMSprop | PoptorchLAMB;
${NN.filter((n) => n !== "Parameter").map((n) => `export interface ${n} {\n${stateMethods}\n}`).join("\n")}
export interface PoptorchPhase {
    /** One IPU per stage: \`phase.ipus(0, 2)\` (poptorch.Phase). */
    ipus(...ipus: number[]): PoptorchPhase;
}
export interface PoplarExecutor {
    /** \`model(...inputs)\`: compiles on the first call; the outputs per outputMode (an array when forward returns one). */
    call(...inputs: CallInput[]): HostTensor | HostTensor[];
    /** The same as call. */
    run(...inputs: CallInput[]): HostTensor | HostTensor[];
    compile(...inputs: CallInput[]): void;
    /** The planner's Plan for this model, its options and these inputs (see plan()); PopTorch's error for a configuration it refuses. */
    plan(...inputs: (CallInput | { shape: number[], dtype?: string, name?: string } | { shape: number[], dtype?: string, name?: string }[])[]): any;
    /** The same Plan even when PopTorch would refuse the configuration: \`valid: false\`, PopTorch's reasons in \`errors\` (each with \`code\` and \`option\`). */
    plan(...args: [...(CallInput | { shape: number[], dtype?: string, name?: string } | { shape: number[], dtype?: string, name?: string }[])[], { throwOnInvalid: boolean }]): any;
    /** Returns the gradients of these inputs (indices or names) after the outputs. */
    returnInputGradients(...inputs: (number | string)[]): void;
    /** One step of the engine on one micro-batch, training nothing: the outputs, the loss's index among them and every parameter's gradient (training models), and the dropout masks drawn, in order. What \`make check-export\` compares an export with. */
    referenceStep(...inputs: (HostTensorInput | HostSparse)[]): { outputs: HostTensor[], lossOutput: number | null, gradients: [string, HostTensor][], masks: HostTensor[] };
}
/** PyTorch-style namespace: \`class Net extends nn.Module\`. */
export declare const nn: { ${NN.map((n) => `${n}: typeof ${n}`).join("; ")} };
${NN.map((n) => `type __nn_${n} = ${n};`).join("\n")}
/** The classes of \`nn\` as types (\`let fc: nn.Linear\`). */
export declare namespace nn {
${NN.map((n) => `    type ${n} = __nn_${n};`).join("\n")}
}
/** PopTorch's API: Options, strategies, enums, optimizers, trainingModel and inferenceModel (see the README). */
export declare const poptorch: {
    Options: typeof PoptorchOptions;
    TensorLocationSettings: typeof PoptorchTensorLocationSettings;
    Stage: new (...blockIds: string[]) => PoptorchStage;
    Phase: new (...items: (string | PoptorchStage)[]) => PoptorchPhase;
    PipelinedExecution: new (...args: (AutoStage | string | string[] | PoptorchStage)[]) => PoptorchPipelinedExecution;
    ShardedExecution: new (...args: (AutoStage | string | string[] | PoptorchStage)[]) => PoptorchShardedExecution;
    SerialPhasedExecution: new (...phases: (PoptorchPhase | string | string[])[]) => PoptorchSerialPhasedExecution;
    ParallelPhasedExecution: new (...phases: (PoptorchPhase | string | string[])[]) => PoptorchParallelPhasedExecution;
${enumDecl.join("\n")}
    optim: { SGD: typeof PoptorchSGD; Adam: typeof PoptorchAdam; AdamW: typeof PoptorchAdamW; RMSprop: typeof PoptorchRMSprop; LAMB: typeof PoptorchLAMB };
    trainingModel: typeof trainingModel;
    inferenceModel: typeof inferenceModel;
    PoplarExecutor: typeof PoplarExecutor;
    identity_loss: typeof identityLoss;
    identityLoss: typeof identityLoss;
    /** Block \`id\` on \`ipu\` starts each time \`module\` is called (PopTorch's BeginBlock: a forward pre-hook), until the next block starts; returns \`module\`. */
    BeginBlock: <M>(module: M, id: string, ipu?: number) => M;
    /** Stashes each tensor for the backward pass instead of recomputing it; recomputation restarts from it. One tensor in, one out; several (or an array), an array. */
    recomputationCheckpoint: { (x: Tensor): Tensor; (...xs: Tensor[]): Tensor[]; (xs: Tensor[]): Tensor[] };
    /** The share of tile memory, in (0, 1], the op that made x may use for temporaries; returns x. */
    set_available_memory: typeof setAvailableMemory;
    setAvailableMemory: typeof setAvailableMemory;
    serializedMatMul: typeof serializedMatMul;
    slice: typeof _poptorchSlice;
    dynamic_slice: typeof _poptorchDynamicSlice;
    dynamicSlice: typeof _poptorchDynamicSlice;
};
/** The classes of \`poptorch\` as types (\`let opts: poptorch.Options\`). */
export declare namespace poptorch {
    type Options = PoptorchOptions;
    type TensorLocationSettings = PoptorchTensorLocationSettings;
    type Stage = PoptorchStage;
    type Phase = PoptorchPhase;
    type PipelinedExecution = PoptorchPipelinedExecution;
    type ShardedExecution = PoptorchShardedExecution;
    type SerialPhasedExecution = PoptorchSerialPhasedExecution;
    type ParallelPhasedExecution = PoptorchParallelPhasedExecution;
    type PoplarExecutor = __poptorch_PoplarExecutor;
${Object.keys(enums).map((n) => `    type ${n} = __poptorch_${n};`).join("\n")}
    namespace optim {
        type SGD = PoptorchSGD;
        type Adam = PoptorchAdam;
        type AdamW = PoptorchAdamW;
        type RMSprop = PoptorchRMSprop;
        type LAMB = PoptorchLAMB;
        type Optimizer = PoptorchOptimizer;
    }
}
type __poptorch_PoplarExecutor = PoplarExecutor;
${Object.keys(enums).map((n) => `type __poptorch_${n} = ${n};`).join("\n")}
/**
 * One input of a call: its combined batch as one tensor (dim 0 cut into combinedBatchFactor
 * micro-batch slices), or as an array of those slices, one per micro-batch in the combined
 * batch's order (slice k = (d × gradientAccumulation + a) × inputGroups + g; with one device
 * iteration and no accumulation, part r is replica r's). A sparse matrix is given as parts
 * (a graph part per micro-batch: RandomNodeLoader's parts with fixedSize), every part of one
 * shape and type.
 */
export type CallInput = HostTensorInput | HostSparse | HostTensorInput[] | HostSparse[];
/** A sparse matrix on the host, CSR: row \`r\`'s entries are \`indices\`/\`values\` from \`indptr[r]\` to \`indptr[r + 1]\` (a model input, traced as a SparseTensor). */
export interface HostSparse {
    layout: "csr";
    shape: number[];
    indptr: Int32Array | number[];
    indices: Int32Array | number[];
    values: Float32Array | number[];
    name?: string;
}
/** \`datasets.Planetoid\`'s options (PyG's split arguments and transforms). */
export interface PlanetoidOptions {
    split?: "public" | "full" | "random";
    numTrainPerClass?: number;
    numVal?: number;
    numTest?: number;
    seed?: number;
    transform?: ("AddSelfLoops" | "NormalizeFeatures" | "ToUndirected")[];
}
/** \`loaders.RandomNodeLoader\`'s options: \`fixedSize\` pads every part to one size (exact for \`epochs\` epochs, else a bound). */
export interface RandomNodeLoaderOptions {
    numParts: number;
    shuffle?: boolean;
    seed?: number;
    fixedSize?: boolean;
    epochs?: number;
}
/** A part as a loader's iterator yields it: a Batch's members as plain values. */
export type LoaderBatch = Omit<Batch, "free" | "_toHost" | typeof Symbol.dispose>;
export interface RandomNodeLoader {
    /** One epoch: the next epoch's parts. */
    [Symbol.iterator](): Iterator<LoaderBatch>;
}
/** PyG's datasets: \`await datasets.Planetoid("PubMed", files | baseUrl, { split: "full", transform: ["AddSelfLoops"] })\`. */
export declare const datasets: {
    /** The eight raw files as bytes (\`{ "ind.cora.x": Uint8Array, … }\` or keyed \`x\`, \`tx\`, …), or a base URL (a string, or a URL object) to fetch them from. */
    Planetoid(name: string, source: string | Record<string, Uint8Array>, options?: PlanetoidOptions): Promise<PlanetoidDataset>;
    PlanetoidDataset: typeof PlanetoidDataset;
    GraphData: typeof GraphData;
};
type __datasets_GraphData = GraphData;
export declare namespace datasets {
    type Planetoid = PlanetoidDataset;
    type GraphData = __datasets_GraphData;
}
/** PyG's loaders: \`new loaders.RandomNodeLoader(data, { numParts, shuffle, seed, fixedSize, epochs })\`. */
export declare const loaders: { RandomNodeLoader: typeof RandomNodeLoader; Batch: typeof Batch };
type __loaders_RandomNodeLoader = RandomNodeLoader;
type __loaders_Batch = LoaderBatch;
export declare namespace loaders {
    type RandomNodeLoader = __loaders_RandomNodeLoader;
    type Batch = __loaders_Batch;
}
`;
  // A subclass of Module defines forward with its own inputs: the base declares them all.
  const moduleClass = types.match(/export class Module \{[\s\S]*?\n\}/);
  if (!moduleClass || !moduleClass[0].includes("    forward(): any;")) {
    console.error(`fix-pkg: ${dts}: class Module has no "forward(): any;" to widen: has wasm-bindgen's output changed?`);
    process.exit(1);
  }
  const widened = types.replace(moduleClass[0], moduleClass[0].replace("    forward(): any;", "    forward(...inputs: any[]): any;"));
  fs.writeFileSync(dts, `${widened}\n${d}`);
}

// The limits, as the package itself reports them (the Rust constants are their one home),
// stated at the top of the .d.ts; every key limits() has must be described here.
const LIMIT_TEXT = {
  maxTensorBytes: "bytes in one tensor (a parameter, a constant, a traced input or an op's result)",
  maxRank: "dimensions of one tensor",
  maxNameBytes: "bytes of UTF-8 in a name (inputs, parameters, buffers, modules, Blocks); names hold no control characters or line breaks",
  maxIpu: "the largest IPU index of a Block",
  maxNodes: "nodes recorded by one trace",
  maxList: "items in one list (Sequential, ModuleList, concat) and submodules of one model",
  maxInputs: "inputs of one trace",
  maxModuleDepth: "levels of nested submodules",
  maxMlpLayers: "layers of traceMlp (sizes.length - 1)",
  maxMlpBytes: "bytes of all the parameters traceMlp builds",
  maxSeed: "the largest seed (manualSeed, the trainer's seed)",
  "trainer.maxEpochs": "RevGnnTrainer config.epochs",
  "trainer.maxLayers": "RevGnnTrainer config.layers",
  "trainer.maxHidden": "RevGnnTrainer config.hidden",
  "trainer.maxBlocks": "RevGnnTrainer config.layers × config.groups (GNN blocks)",
  "trainer.maxParts": "RevGnnTrainer config.parts (and at most the graph's nodes)",
  "trainer.maxLr": "RevGnnTrainer config.lr (above 0)",
  "trainer.maxWeightDecay": "RevGnnTrainer config.weightDecay",
  "trainer.maxParams": "trainable scalars of the RevGNN a config builds",
  "trainer.maxActivationBytes": "bytes of activations a training step or the evaluation keeps at once",
  "trainer.maxFileBytes": "bytes of one raw dataset file",
};
const flat = (o, prefix = "") =>
  Object.entries(o).flatMap(([k, v]) => (typeof v === "object" ? flat(v, `${prefix}${k}.`) : [[`${prefix}${k}`, v]]));
const typesNow = fs.readFileSync(dts, "utf8");
if (!typesNow.includes("@limits")) {
  const limits = flat(built.limits());
  const unknown = limits.filter(([k]) => !LIMIT_TEXT[k]).map(([k]) => k);
  if (unknown.length) {
    console.error(`fix-pkg: limits() has ${unknown.join(", ")}, which LIMIT_TEXT does not describe`);
    process.exit(1);
  }
  const lines = limits.map(([k, v]) => ` * - \`${k}\` = ${v}: ${LIMIT_TEXT[k]}`);
  const header = [
    "/**",
    " * ipu-playground, compiled to WebAssembly (see its README).",
    " *",
    " * @limits Every size, count and index is checked before anything is allocated: whole numbers",
    " * (4.7, \"4\", NaN are a TypeError naming the argument), not negative, and within these limits",
    " * (a RangeError or an Error naming the size asked for). `limits()` returns them.",
    ...lines,
    " */",
  ].join("\n");
  fs.writeFileSync(dts, `${header}\n${typesNow}`);
}

fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
console.log(`fix-pkg: ${file}: ${pkg.name}@${pkg.version}, ${pkg.main ?? pkg.module}, files: ${pkg.files.join(" ")}`);
