// The page: UI only. Every engine call goes to the worker (worker.js) as a message.

const $ = (id) => document.getElementById(id);

/** A promise-based client for the engine worker; restarts the worker after a crash. */
class Engine {
  constructor(onCrash) {
    this.nextId = 1;
    this.pending = new Map();
    this.onCrash = onCrash;
    this.worker = null;
  }

  start() {
    const worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module", name: "engine" });
    worker.onmessage = (event) => {
      const { id, ok, result, error, fatal } = event.data;
      const call = this.pending.get(id);
      if (!call) return;
      this.pending.delete(id);
      if (ok) call.resolve(result);
      else call.reject(new Error(error));
      if (fatal) this.crash(`the engine stopped after an internal error: ${error}`);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      this.crash(event.message || "the engine worker failed to start");
    };
    worker.onmessageerror = () => this.crash("a message from the engine could not be read");
    this.worker = worker;
  }

  crash(reason) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    for (const call of this.pending.values()) call.reject(new Error(reason));
    this.pending.clear();
    this.onCrash(reason);
  }

  call(type, ...args) {
    if (!this.worker) this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, type, args });
    });
  }
}

const ui = {
  form: $("trace-form"),
  sizes: $("sizes"),
  batch: $("batch"),
  button: $("trace"),
  error: $("error"),
  graph: $("graph"),
  title: $("graph-title"),
  stats: $("graph-stats"),
  status: $("status"),
  version: $("version"),
  simd: $("simd"),
};

function setStatus(text, bad = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle("bad", bad);
}

function showError(message) {
  ui.error.textContent = message;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function showModel(title, model) {
  ui.title.textContent = title;
  const nodes = Array.isArray(model?.graph?.nodes) ? model.graph.nodes.length : null;
  ui.stats.textContent = nodes === null ? "" : `(${nodes} nodes)`;
  ui.graph.textContent = model.text;
  ui.graph.setAttribute("aria-busy", "false");
}

/** Reads "4, 16,16 ,3" into [4, 16, 16, 3]; the engine itself judges the values. */
function parseSizes(text) {
  const parts = text.split(",").map((s) => s.trim());
  if (parts.length === 1 && parts[0] === "") throw new Error("Enter the layer sizes, e.g. 4,16,16,3.");
  return parts.map((p) => {
    if (!/^\d+$/.test(p)) throw new Error(`Layer size "${p}" is not a whole number.`);
    return Number(p);
  });
}

function parseBatch(text) {
  if (!/^\s*\d+\s*$/.test(text)) throw new Error(`Batch "${text}" is not a whole number.`);
  return Number(text);
}

const engine = new Engine((reason) => {
  showError(`The engine crashed: ${reason}. It restarts on the next request.`);
  setStatus("Engine crashed", true);
});

async function trace() {
  let sizes, batch;
  try {
    sizes = parseSizes(ui.sizes.value);
    batch = parseBatch(ui.batch.value);
  } catch (err) {
    showError(err.message);
    setStatus("Check the input", true);
    return;
  }
  ui.button.disabled = true;
  setStatus(`Tracing MLP ${sizes.join(" → ")}…`);
  const t0 = performance.now();
  try {
    const model = await engine.call("traceMlp", sizes, batch);
    clearError();
    showModel(`MLP ${sizes.join(" → ")}, batch ${batch}`, model);
    setStatus(`Traced in ${Math.round(performance.now() - t0)} ms`);
  } catch (err) {
    showError(err.message);
    setStatus("Trace failed", true);
  } finally {
    ui.button.disabled = false;
  }
}

ui.form.addEventListener("submit", (event) => {
  event.preventDefault();
  trace();
});

async function boot() {
  try {
    const [version, simd, model] = await Promise.all([
      engine.call("version"),
      engine.call("simd"),
      engine.call("defaultModel"),
    ]);
    ui.version.textContent = version;
    ui.simd.textContent = simd === "relaxed" ? "wasm SIMD + relaxed SIMD" : "wasm SIMD";
    showModel("Default model", model);
    ui.button.disabled = false;
    setStatus("Ready");
  } catch (err) {
    ui.graph.textContent = "";
    ui.graph.setAttribute("aria-busy", "false");
    showError(`Could not start the engine: ${err.message}`);
    setStatus("Engine unavailable", true);
    ui.button.disabled = false; // a retry starts a fresh worker
  }
}

boot();
