// The engine lives here, in a module Web Worker: the page's main thread never loads the wasm.
//
// Protocol: the page posts {id, type, args}; the worker answers {id, ok: true, result}
// or {id, ok: false, error, fatal}. `type` names one of the calls in API below and
// `args` is the array of its arguments. An error thrown by the engine comes back as a
// message; `fatal` is true when the wasm instance itself trapped (a Rust panic), after
// which the page starts a fresh worker.

import { version, defaultModel, traceMlp } from "./pkg/ipu_playground.js";
import { loadEngine } from "./engine.js";

const ready = loadEngine();

const API = {
  version: () => version(),
  simd: async () => (await ready).simd,
  defaultModel: () => defaultModel(),
  traceMlp: (sizes, batch) => traceMlp(sizes, batch),
};

// Marked handled here so that a failed start is not an unhandled rejection when it fails
// before the first request; every request still awaits it and reports the failure.
ready.catch(() => {});

function describe(err) {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === "string") return err;
  try {
    return JSON.stringify(err);
  } catch {
    return String(err);
  }
}

self.onmessage = async (event) => {
  const { id, type, args = [] } = event.data ?? {};
  try {
    await ready.catch((err) => {
      throw new Error(`loading the wasm failed: ${describe(err)}`);
    });
    const fn = Object.hasOwn(API, type) ? API[type] : null;
    if (!fn) throw new Error(`unknown request "${type}"`);
    const result = await fn(...args);
    self.postMessage({ id, ok: true, result });
  } catch (err) {
    self.postMessage({ id, ok: false, error: describe(err), fatal: err instanceof WebAssembly.RuntimeError });
  }
};
