// The editor's Python, run by Pyodide in the engine's worker (and in Node for the tests).
// Pyodide loads only when Python is first asked for. The pure-Python modules in www/python/
// (torch, poptorch, torch_geometric, playground; _ipu.py bridges) are written into its
// file system; they forward every call to the package, the same API the JavaScript front end
// uses: this file only passes the package in, runs the user's file and turns what it defines
// into what analysis.js takes from a JavaScript module's default export.
//
//   const python = await loadPython({ loadPyodide, indexURL, pkg, readSource });
//   const exports = await python.run(code, ctx, fetchDataset);  // { default, revgnn? }

import { PYTHON_FILE } from "./protocol.js";

/** The shipped Python files, relative to www/python/. */
export const PYTHON_FILES = Object.freeze([
  "_ipu.py",
  "playground.py",
  "torch/__init__.py",
  "torch/nn/__init__.py",
  "torch/nn/functional.py",
  "torch/nn/init.py",
  "torch/testing.py",
  "torch/optim.py",
  "poptorch/__init__.py",
  "torch_geometric/__init__.py",
  "torch_geometric/nn/__init__.py",
  "torch_geometric/datasets.py",
  "torch_geometric/loader.py",
  "torch_geometric/transforms.py",
  "safetensors/__init__.py",
  "safetensors/torch.py",
]);

const SITE_DIR = "/home/pyodide/ipu";

/** Whether this runtime has WebAssembly stack switching (JSPI), which Pyodide's `run_sync` needs. */
export const STACK_SWITCHING = typeof WebAssembly.Suspending === "function";

/** JS helpers the bridge (_ipu.py) calls: type tests and conversions Python cannot make. */
function makeHost(pkg, datasets) {
  const tags = new WeakMap();
  const TEMPLATE = Symbol("python module");
  const typed = { float32: Float32Array, float16: Float32Array, int32: Int32Array, bool: Uint8Array };
  return {
    kind(v) {
      if (v instanceof pkg.Tensor) return "tensor";
      if (pkg.SparseTensor && v instanceof pkg.SparseTensor) return "sparse";
      if (Array.isArray(v)) return "array";
      if (v instanceof pkg.poptorch.PoplarExecutor) return "executor";
      if (v instanceof pkg.poptorch.Options) return "options";
      // A Parameter (a live view an optimizer takes) stays the package's object.
      if (v instanceof pkg.nn.Parameter) return "other";
      if (v !== null && typeof v === "object" && "shape" in v && ArrayBuffer.isView(v.data) && typeof v.dtype === "string") return "host";
      if (v && typeof v === "object" && (tags.has(v) || (typeof v.forward === "function" && v.forward[TEMPLATE] !== undefined))) return "pymodule";
      if (v && typeof v === "object" && typeof v.forward === "function") return "module";
      return "other";
    },
    /** Files the JS counterpart of Python module `id`, named as its Python class (the page's titles read `constructor.name`). */
    tag(v, id, className) {
      tags.set(v, id);
      if (className) Object.defineProperty(v, "constructor", { value: { name: className }, enumerable: false, configurable: true });
    },
    tagOf: (v) => tags.get(v),
    templateOf: (v) => v.forward?.[TEMPLATE],
    /** A Python module's forward on its JS counterpart: `this` finds the module (a copy's too). */
    forwardOf(cb, id) {
      const f = function forward(...args) {
        return cb(this, id, args);
      };
      Object.defineProperty(f, TEMPLATE, { value: id });
      return f;
    },
    get: (o, k) => o?.[k],
    has: (o, k) => o !== null && o !== undefined && k in Object(o),
    isFunction: (v) => typeof v === "function",
    isArray: (v) => Array.isArray(v),
    same: (a, b) => a === b,
    keys: (o) => Object.keys(o),
    remove: (o, k) => void delete o[k],
    className: (v) => v?.constructor?.name ?? typeof v,
    fromEntries: (entries) => Object.fromEntries(entries),
    hostTensor: (shape, dtype, data) => ({ shape: Array.from(shape), dtype, data: ArrayBuffer.isView(data) ? data : typed[dtype].from(data) }),
    isHostTensor: (v) => v !== null && typeof v === "object" && "shape" in v && "data" in v && ArrayBuffer.isView(v.data),
    named: (spec, name) => ({ ...spec, name: spec.name ?? name }),
    // The step runs promising (WebAssembly stack switching, where the runtime has it): a
    // replicated model's call on the replica workers answers with a promise, which the
    // Python step then waits for (_ipu.py `settled`) as PopTorch's call returns when done.
    train: (parts, step, evaluate) => ({ parts, step: (p) => (STACK_SWITCHING ? step.callPromising(p) : step(p)), evaluate: () => evaluate() }),
    errorMessage: (e) => (e instanceof Error ? e.message : typeof e === "string" ? e : undefined),
    field: (e, k) => (e && typeof e === "object" && typeof e[k] === "string" ? e[k] : undefined),
    planetoidFiles: (name) => datasets.get(name),
  };
}

/**
 * Loads Pyodide (`loadPyodide` from the `pyodide` package, its files at `indexURL`), writes
 * the shipped Python into it (`readSource(path)` gives each file's text) and registers `pkg`
 * (the package's module namespace) as the JS module `ipu_playground`.
 */
export async function loadPython({ loadPyodide, indexURL, pkg, readSource, pkgReady = null }) {
  // `pkgReady`: the package's wasm, instantiated while Pyodide loads (the shipped modules
  // read the package when they are imported).
  const [py, sources] = await Promise.all([
    loadPyodide({ indexURL, fullStdLib: false }),
    Promise.all(PYTHON_FILES.map(async (f) => [f, await readSource(f)])),
    pkgReady,
  ]);
  // print() goes to the console of the moment (the page records it while the code runs).
  py.setStdout({ batched: (s) => console.log(s) });
  py.setStderr({ batched: (s) => console.warn(s) });
  for (const [file, text] of sources) {
    const path = `${SITE_DIR}/${file}`;
    py.FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    py.FS.writeFile(path, text);
  }
  const datasets = new Map();
  py.registerJsModule("ipu_playground", pkg);
  py.registerJsModule("_ipu_host", makeHost(pkg, datasets));
  py.runPython(
    `import sys\nsys.path.insert(0, ${JSON.stringify(SITE_DIR)})\nimport _ipu\n_ipu.USER_FILE = ${JSON.stringify(PYTHON_FILE)}\nimport torch, poptorch, torch_geometric, playground`,
  );
  const runner = py.globals.get("_ipu").run;

  /**
   * Runs `code` as the file model.py with the page's context `ctx` (analysis.js
   * codeContext); `fetchDataset(name)` resolves a Planetoid's raw files' bytes when the code
   * asks for a dataset not yet loaded (the code then runs again). Resolves the export object
   * ({ default: { model, inputs, train? } | { revgnn }, revgnn? }); throws the page's error
   * ({ kind, message, line?, column?, code?, … }) when the code fails.
   */
  async function run(code, ctx, fetchDataset) {
    for (let attempt = 0; ; attempt++) {
      const result = runner(code, ctx);
      if (result.need !== undefined && attempt < 3 && fetchDataset) {
        datasets.set(result.need, await fetchDataset(result.need));
        continue;
      }
      if (result.need !== undefined) throw { kind: "model", message: `the raw files of ${result.need} could not be loaded` };
      if (result.error) throw result.error;
      if (!("default" in result)) {
        throw {
          kind: "model",
          message:
            "model.py must set `model` (what poptorch.trainingModel(…) or poptorch.inferenceModel(…) returned) and `inputs` (one micro-batch, e.g. inputs = {\"x\": torch.empty(32, 784)}), or call its wrapped model, or set `revgnn = dict(…)`",
        };
      }
      return result;
    }
  }
  /** Hands in a dataset's raw files before the code asks for them (fetched while Pyodide loaded). */
  const provide = (name, files) => void datasets.set(name, files);
  return { pyodide: py, run, provide };
}

/**
 * A Python traceback in `message` (Pyodide's PythonError, when the user's Python `forward`
 * failed inside a call the page made): the line of its last frame in the user's file, and
 * its last line (the exception) as the message.
 */
export function pythonTraceback(message) {
  const frames = [...String(message).matchAll(new RegExp(`File "${PYTHON_FILE.replace(".", "\\.")}", line (\\d+)`, "g"))];
  if (!frames.length) return null;
  const lines = String(message).trim().split("\n");
  return { line: Number(frames.at(-1)[1]), message: lines.at(-1) };
}
