// The one definition of the messages between the page (engine/client.js) and the engine
// worker (engine/worker.js). Both import this file; no request name is typed anywhere else.
//
// Page → worker, a request:   { seq, type, args }
//   seq: a number, increasing per client; the reply carries it back.
// Worker → page, a reply:     { seq, ok: true, result } | { seq, ok: false, error }
//   error: { message, kind, line?, column?, fatal? } (see makeError)
// Worker → page, an event:    { event, data }   (no seq: the worker speaks first)

/** Requests the worker answers, by name. */
export const Request = Object.freeze({
  /** () → { version, simd } */
  HELLO: "hello",
  /** ({ code, language, options, ipus, half, dataset }) → Analysis: the user's model traced and planned. */
  ANALYSE: "analyse",
  /**
   * ({ dataset, epochs, config, code?, language?, options?, ipus?, half?, workers? }) → { state, acc }: trains the
   * model of `code` (its default export's `train`, run with `options`, `ipus`, `half` and the dataset) or, without
   * `code` or `train`, the built-in RevGnnTrainer with `config`; progress comes as events. `workers`: a replicated
   * training model of the code runs its replicas on that many workers (this one and replica Web Workers; at most
   * replicationFactor; one when the page is not cross-origin isolated).
   */
  TRAIN: "train",
  /** () → { state }: pause / resume / stop the running training between epochs. */
  PAUSE: "pause",
  RESUME: "resume",
  STOP: "stop",
  /** () → { bytes: Uint8Array, names: [..], filename }: the trained weights as safetensors. */
  WEIGHTS: "weights",
  /**
   * ({ target: "poptorch" | "pytorch" }) → { code, filename, weights: Uint8Array | null,
   * weightsFilename, note }: the last analysed wrapped model as a Python file, and its weights
   * as the safetensors file the code loads (none past WEIGHTS_EXPORT_LIMIT bytes: `note` says so).
   */
  EXPORT: "export",
});

/**
 * The engine worker ↔ its replica workers (engine/replica-worker.js), when the Training view
 * trains a replicated model on several workers (engine/training.js). The engine worker posts
 *   { type: Replica.INIT, code, language, options, ipus, half, dataset, epochs, range }
 * and the replica worker runs the code as the engine worker does, then answers
 *   { type: Replica.READY } | { error: { name, message, stack } }
 * after which the coordinator's messages (pkg/replica-core.mjs: hello, begin, contribute,
 * apply, end, assemble, parameters, host, fingerprints; `{ id, … }` each, answered
 * `{ id, value, busyMs }` or `{ id, error }`) go both ways.
 */
export const Replica = Object.freeze({
  INIT: "replica-init",
  READY: "replica-ready",
});

/** The most workers the Training view offers (its default: the cores the browser reports, up to this). */
export const MAX_TRAINING_WORKERS = 8;

/** Events the worker sends by itself. */
export const Event = Object.freeze({
  /** { version, simd }: the wasm is loaded; timed requests may start. */
  READY: "ready",
  /** { message }: the wasm could not be loaded. */
  FAILED: "failed",
  /** Progress of a training run: see TrainingEvent below. */
  TRAINING: "training",
  /** { graceMs? }: long engine work advances (tracing, autograd, planning; at most a few a
   * second): the client's guard stops only a request that makes no progress. `graceMs`: the
   * next stretch reports nothing for up to that long (Pyodide starting its interpreter). */
  PROGRESS: "progress",
});

/**
 * data of Event.TRAINING:
 *   { phase: "building" | "running" | "paused" | "stopped" | "done" | "error",
 *     epoch, epochs, steps, loss, acc: {train, val, test} | null, epochSeconds,
 *     peakBytes, savedForBackward, message?,
 *     workers?: { count, isolated, note, stats: [{ worker, replicas, busyMs, lastStepMs, steps }],
 *                 fingerprints?: { replica: hex } } }
 */
export const TrainingPhase = Object.freeze({
  BUILDING: "building",
  RUNNING: "running",
  PAUSED: "paused",
  STOPPED: "stopped",
  DONE: "done",
  ERROR: "error",
});

/** Kinds of error, so the page knows where to show one. */
export const ErrorKind = Object.freeze({
  /** The user's code does not parse: line/column point into the editor. */
  SYNTAX: "syntax",
  /** The user's code threw, or the tracer refused an op (shape mismatch, …): line when known. */
  MODEL: "model",
  /** An option is invalid: `field` names it. */
  OPTION: "option",
  /** A dataset file is missing on the server. */
  DATASET: "dataset",
  /** The engine itself (the wasm failed to load, a trap). */
  ENGINE: "engine",
  /** The worker was stopped because a request ran past its time limit. */
  TIMEOUT: "timeout",
});

export function request(seq, type, args = {}) {
  return { seq, type, args };
}

export function reply(seq, result, transfer) {
  return [{ seq, ok: true, result }, transfer ?? []];
}

export function failure(seq, error) {
  return { seq, ok: false, error };
}

export function event(name, data) {
  return { event: name, data };
}

/** An error object as it crosses the boundary (plain data, structured-cloneable). */
export function makeError(kind, message, extra = {}) {
  return { kind, message: String(message), ...extra };
}

/** The file name user code is shown as, in the graph's source column and in messages. */
export const USER_FILE = "model.js";

/**
 * The language of the editor's code, the `language` of ANALYSE and TRAIN (JavaScript when
 * absent): JavaScript runs as an ES module, Python in Pyodide (engine/python.js), loaded on
 * the first Python request.
 */
export const Language = Object.freeze({ JAVASCRIPT: "javascript", PYTHON: "python" });

/** The file name Python code runs as (tracebacks and the graph's source column name it). */
export const PYTHON_FILE = "model.py";
