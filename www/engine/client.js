// The main thread's handle on one engine worker (engine/worker.js). The page never touches
// WebAssembly itself: everything goes through call(), which posts a request with a
// sequence number and resolves with the worker's reply.
//
// A request given `timeoutMs` that makes no progress for that long (user code in an endless
// loop: the engine reports progress while it traces and plans, Event.PROGRESS, and each
// report restarts the timer) terminates the worker: every pending call is rejected with an
// ErrorKind.TIMEOUT error, a fresh worker is started, and onRestart(reason) tells the page.
import { Request, Event, ErrorKind, Language, request, makeError } from "./protocol.js";

/** An Error carrying the worker's structured error ({ kind, message, line, … }). */
export class EngineError extends Error {
  constructor(info) {
    super(info.message);
    this.name = "EngineError";
    this.info = info;
  }
}

export class EngineClient {
  /**
   * @param {object} o
   * @param {string} o.name        the worker's name (shows in devtools)
   * @param {(name, data) => void} [o.onEvent]   worker events (ready, training progress)
   * @param {(reason: string) => void} [o.onRestart]  the worker was replaced
   * @param {() => string | null} [o.language]  the editor's language when a worker starts: a
   *   worker started for Python loads Pyodide at once, beside the package's wasm
   */
  constructor({ name, onEvent = () => {}, onRestart = () => {}, language = () => null }) {
    this.name = name;
    this.language = language;
    this.onEvent = onEvent;
    this.onRestart = onRestart;
    this.seq = 0;
    this.pending = new Map();
    this.worker = null;
    this.ready = null;
    this.generation = 0;
  }

  /** The worker's script: next to the page, under engine/ (the bundle lives in dist/); `?language=python` when it will run Python first. */
  static workerUrl(language = null) {
    const url = new URL("engine/worker.js", document.baseURI);
    if (language === Language.PYTHON) url.searchParams.set("language", language);
    return url;
  }

  /** Starts the worker if none is running; resolves with its READY data. */
  start() {
    if (this.worker) return this.ready;
    const generation = ++this.generation;
    const worker = new Worker(EngineClient.workerUrl(this.language()), { type: "module", name: this.name });
    this.worker = worker;
    let settle;
    this.ready = new Promise((resolve, reject) => (settle = { resolve, reject }));
    this.ready.catch(() => {}); // reported through the calls that wait on it
    worker.onmessage = ({ data }) => {
      if (generation !== this.generation) return;
      if (data && "event" in data) {
        if (data.event === Event.PROGRESS) {
          for (const call of this.pending.values()) call.arm?.(data.data?.graceMs);
          return;
        }
        if (data.event === Event.READY) settle.resolve(data.data);
        else if (data.event === Event.FAILED) {
          settle.reject(new EngineError(makeError(ErrorKind.ENGINE, data.data.message)));
          this.stop(`could not start the engine: ${data.data.message}`);
          return;
        }
        this.onEvent(data.event, data.data);
        return;
      }
      const call = this.pending.get(data?.seq);
      if (!call) return;
      this.pending.delete(data.seq);
      clearTimeout(call.timer);
      if (data.ok) call.resolve({ seq: data.seq, result: data.result });
      else {
        call.reject(new EngineError(data.error));
        if (data.error?.fatal) this.restart(`the engine stopped after an internal error: ${data.error.message}`);
      }
    };
    worker.onerror = (e) => {
      e.preventDefault();
      if (generation !== this.generation) return;
      const message = e.message || "the engine worker failed to start";
      settle.reject(new EngineError(makeError(ErrorKind.ENGINE, message)));
      this.stop(message);
    };
    worker.onmessageerror = () => this.restart("a message from the engine could not be read");
    return this.ready;
  }

  /** Terminates the worker and rejects every pending call with `reason` (an error of `kind`). */
  stop(reason, kind = ErrorKind.ENGINE) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.generation++;
    for (const call of this.pending.values()) {
      clearTimeout(call.timer);
      call.reject(new EngineError(makeError(kind, reason)));
    }
    this.pending.clear();
  }

  /** Replaces an idle worker with a fresh one, quietly (to give its memory back). */
  recycle() {
    if (this.pending.size) return false;
    this.stop("recycled");
    this.start();
    return true;
  }

  /** Replaces the worker with a fresh one and tells the page why. */
  restart(reason, kind = ErrorKind.ENGINE) {
    this.stop(reason, kind);
    this.start();
    this.onRestart(reason);
  }

  /**
   * Sends `type` with `args`; resolves `{ seq, result }`. The sequence number is known at
   * once (`onSeq`), so the page can tell a stale answer from the current one.
   */
  async call(type, args = {}, { timeoutMs = 0, onSeq, transfer = [] } = {}) {
    const seq = ++this.seq;
    onSeq?.(seq);
    await this.start();
    if (!this.worker) throw new EngineError(makeError(ErrorKind.ENGINE, "the engine is not running"));
    return new Promise((resolve, reject) => {
      const call = { resolve, reject, timer: 0, arm: null };
      if (timeoutMs > 0) {
        const s = (timeoutMs / 1000).toFixed(timeoutMs % 1000 ? 1 : 0);
        // `graceMs`: a longer wait the worker asked for before work that reports nothing (Pyodide starting).
        call.arm = (graceMs = 0) => {
          clearTimeout(call.timer);
          call.timer = setTimeout(() => {
            this.restart(`the model's code ran for more than ${s} s without progress and was stopped (an endless loop?); a fresh engine was started`, ErrorKind.TIMEOUT);
          }, Math.max(timeoutMs, graceMs));
        };
        call.arm();
      }
      this.pending.set(seq, call);
      this.worker.postMessage(request(seq, type, args), transfer);
    });
  }
}

export { Request };
