// The engine: a module Web Worker holding the wasm package. The page's main thread never
// loads WebAssembly; it talks to this file through engine/client.js, with the messages
// defined in engine/protocol.js. The page runs two of these: one analyses the editor's
// code (engine/analysis.js; it can be terminated and replaced when that code loops
// forever), one trains (engine/training.js).
import * as pkg from "../pkg/ipu_playground.js";
import { loadEngine } from "./load.js";
import { Request, Event, ErrorKind, Language, reply, failure, event, makeError } from "./protocol.js";
import { describe } from "./usercode.js";
import { analyse, pythonEngine, exportPython } from "./analysis.js";
import { train, pause, resume, stop, weights } from "./training.js";

// The editor's code calls into wasm, whose frames come before the user's in a stack: keep
// enough frames to find the user's line (usercode.js locate()).
Error.stackTraceLimit = 100;

// ---------------------------------------------------------------- dispatch

const HANDLERS = {
  [Request.HELLO]: async () => ({ version: pkg.version(), simd: (await ready).simd }),
  [Request.ANALYSE]: async (args) => {
    const result = await analyse(args);
    // Each edit's module stays loaded (with the parameters its model holds in wasm memory,
    // which never shrinks); the page replaces the worker when this grows large.
    result.wasmBytes = (await ready).memory?.buffer.byteLength ?? 0;
    return result;
  },
  [Request.TRAIN]: train,
  [Request.PAUSE]: pause,
  [Request.RESUME]: resume,
  [Request.STOP]: stop,
  [Request.WEIGHTS]: weights,
  [Request.EXPORT]: exportPython,
};

// The engine reports progress while it traces, differentiates and plans; the client's
// guard restarts its timer on each report, so a long analysis (a 1,000-layer model on a busy
// machine) is not taken for an endless loop. At most one report per PROGRESS_MS.
const PROGRESS_MS = 250;
let lastProgress = 0;
function progress() {
  const now = performance.now();
  if (now - lastProgress < PROGRESS_MS) return;
  lastProgress = now;
  self.postMessage(event(Event.PROGRESS, {}));
}

const ready = loadEngine();

/**
 * Pyodide, loading (analysis.js pythonEngine: once per worker), with progress reported
 * meanwhile: its seconds of loading are work, not code that hangs. A failure is the Python
 * request's error (analysis.js importCode).
 */
function loadPython() {
  // Pyodide's start runs its interpreter, then the shipped modules' imports, for seconds in
  // synchronous stretches (longer on a busy machine) in which no report can be sent: each
  // report while it loads asks the client for that much more time.
  const grace = () => self.postMessage(event(Event.PROGRESS, { graceMs: PYTHON_START_GRACE_MS }));
  if (!pythonLoaded) grace();
  const loading = pythonEngine();
  const timer = setInterval(grace, PROGRESS_MS);
  loading.then(
    () => {
      pythonLoaded = true;
      clearInterval(timer);
    },
    () => clearInterval(timer),
  );
}
let pythonLoaded = false;
const PYTHON_START_GRACE_MS = 60000;

// Started for Python (client.js workerUrl): Pyodide loads now, beside the package's wasm.
if (new URL(import.meta.url).searchParams.get("language") === Language.PYTHON) loadPython();
ready.then(
  ({ simd }) => {
    pkg.setProgressHook(progress);
    self.postMessage(event(Event.READY, { version: pkg.version(), simd }));
  },
  (err) => self.postMessage(event(Event.FAILED, { message: `loading the wasm failed: ${err?.message ?? err}` })),
);

self.onmessage = async ({ data }) => {
  const { seq, type, args } = data ?? {};
  try {
    if (args?.language === Language.PYTHON) loadPython();
    await ready;
    const fn = Object.hasOwn(HANDLERS, type) ? HANDLERS[type] : null;
    if (!fn) throw makeError(ErrorKind.ENGINE, `unknown request "${type}"`);
    const result = await fn(args ?? {});
    const transfer = result?.bytes instanceof Uint8Array ? [result.bytes.buffer] : [];
    self.postMessage(...reply(seq, result, transfer));
  } catch (err) {
    const info = err && typeof err === "object" && "kind" in err && !(err instanceof Error) ? err : describe(err, null);
    self.postMessage(failure(seq, info));
  }
};
