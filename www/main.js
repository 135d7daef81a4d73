// The page: UI only. Every engine call goes to a worker through engine/client.js; this file
// wires the state (state.js), the editor, the options panel and the views together.
// web/build.mjs bundles it (with CodeMirror and uPlot) into dist/main.js.
import "uplot/dist/uPlot.min.css";
import { Store, presetState, PRESETS, VIEWS } from "./state.js";
import { createEditor } from "./editor.js";
import { EngineClient, EngineError } from "./engine/client.js";
import { Request, Event, ErrorKind, TrainingPhase } from "./engine/protocol.js";
import { fitItems } from "./plan/adapter.js";
import { diagnosticLine } from "./plan/lines.js";
import { toPlannerOptions } from "./options.js";
import { presetById } from "./presets/index.js";
import { createOptionsPanel } from "./views/options.js";
import { createGraphView } from "./views/graph.js";
import { createAssignmentView } from "./views/assignment.js";
import { createMemoryView } from "./views/memory.js";
import { createExecutionView } from "./views/execution.js";
import { createFitView } from "./views/fit.js";
import { createTrainingView } from "./views/training.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
/** How long the editor's code may run before its worker is replaced (?timeout=ms for tests). */
const TIMEOUT_MS = Math.max(500, Number(params.get("timeout")) || 8000);
const DEBOUNCE_MS = 300;
/** Past this much wasm memory the analysis worker is replaced between requests (each
 *  edit's module and the parameters its model allocated stay alive in the worker). */
const RECYCLE_BYTES = (Number(params.get("recycle-mib")) || 512) * 2 ** 20;
const TITLES = { graph: "Graph", assignment: "Assignment", memory: "Memory", execution: "Execution", fit: "Fit & errors", training: "Training" };

const store = new Store();
const ui = { status: $("status"), error: $("error"), stale: $("stale"), analysisState: $("analysis-state") };

function setStatus(text, bad = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle("bad", bad);
}

function setAnalysisState(state, text) {
  document.body.dataset.analysis = state;
  ui.analysisState.className = `pill is-${state}`;
  ui.analysisState.textContent = text;
}

// ---------------------------------------------------------------- views and tabs

const panels = {};
const tabs = {};
for (const id of VIEWS) {
  const tab = document.createElement("button");
  Object.assign(tab, { type: "button", id: `tab-${id}`, textContent: TITLES[id] });
  tab.setAttribute("role", "tab");
  tab.setAttribute("aria-controls", `view-${id}`);
  $("tabs").append(tab);
  const panel = document.createElement("div");
  panel.id = `view-${id}`;
  panel.className = `view view-${id}`;
  panel.setAttribute("role", "tabpanel");
  panel.setAttribute("aria-labelledby", tab.id);
  panel.tabIndex = 0;
  $("panels").append(panel);
  tabs[id] = tab;
  panels[id] = panel;
  tab.addEventListener("click", () => store.set({ view: id }));
}
$("tabs").addEventListener("keydown", (e) => {
  const i = VIEWS.indexOf(store.get().view);
  const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: VIEWS.length - 1 }[e.key];
  if (next === undefined) return;
  e.preventDefault();
  const id = VIEWS[(next + VIEWS.length) % VIEWS.length];
  store.set({ view: id });
  tabs[id].focus();
});

let editor;
const views = {
  graph: createGraphView(panels.graph, { onColorBy: (colorBy) => store.set({ colorBy }) }),
  assignment: createAssignmentView(panels.assignment),
  memory: createMemoryView(panels.memory),
  execution: createExecutionView(panels.execution),
  fit: createFitView(panels.fit, { onGoToLine: (line, message) => goToLine(line, message) }),
};

function goToLine(line, message) {
  const doc = editor.view.state.doc;
  const l = doc.line(Math.min(Math.max(1, line), doc.lines));
  editor.view.dispatch({ selection: { anchor: l.from }, scrollIntoView: true });
  editor.view.focus();
  if (message) editor.showError(line, 0, message);
}

let analysis = null; // the last result that traced
const dirty = new Set();

function renderView(id) {
  if (id === "training" || !analysis) return;
  views[id].render(analysis, store.get());
  dirty.delete(id);
}

function showView(id) {
  for (const v of VIEWS) {
    const on = v === id;
    tabs[v].setAttribute("aria-selected", String(on));
    tabs[v].tabIndex = on ? 0 : -1;
    panels[v].hidden = !on;
  }
  if (dirty.has(id)) renderView(id);
  if (id === "training") {
    training.resize(panels.training.clientWidth);
    // Load the training engine's wasm now, so that Train starts at once (and its compilation,
    // which keeps both cores busy for a moment, is not in the middle of a run).
    trainer.start().catch(() => {}); // a failure is reported when Train is pressed
  }
}

// ---------------------------------------------------------------- analysis in the worker

const analyser = new EngineClient({
  name: "engine",
  onRestart: (reason) => setStatus(`Engine restarted: ${reason}`, true),
});
let latest = 0;
let debounce = 0;

/** What the engine runs the editor's code with: the code, the panel's options, and what the code gets beside them. */
function codeRun(s) {
  return { code: s.code, options: toPlannerOptions(s.options), ipus: s.ipus, half: s.half };
}

function scheduleAnalysis(delay = DEBOUNCE_MS) {
  clearTimeout(debounce);
  setAnalysisState("pending", "editing…");
  debounce = setTimeout(analyse, delay);
}

async function analyse() {
  const s = store.get();
  let mine = 0;
  setAnalysisState("running", "tracing…");
  const t0 = performance.now();
  try {
    const { seq, result } = await analyser.call(
      Request.ANALYSE,
      { ...codeRun(s), dataset: s.train.dataset },
      { timeoutMs: TIMEOUT_MS, onSeq: (n) => (mine = latest = n) },
    );
    if (seq !== latest) return; // an older request's answer: never shown as current
    showAnalysis(result, performance.now() - t0);
    if (result.wasmBytes > RECYCLE_BYTES) analyser.recycle();
  } catch (err) {
    if (mine !== latest) return;
    showAnalysisError(err);
  }
}

/**
 * Plan errors and warnings as editor diagnostics: at the line of the node they name, or, for
 * one about an option the code set itself, at the line that sets it.
 */
function planDiagnostics(result) {
  const out = [];
  for (const e of fitItems(result.plan, result.checks)) {
    const line = diagnosticLine(result, e);
    if (line) out.push({ line, message: e.fix ? `${e.message}\nFix: ${e.fix}` : e.message, severity: e.level });
  }
  return out;
}

/** What the code printed (console.log, …) while it ran, under the editor. */
function showConsole(lines) {
  const box = $("console-box");
  box.hidden = !lines?.length;
  $("console").textContent = (lines ?? []).map((l) => (l.level === "log" || l.level === "info" || l.level === "debug" ? l.text : `${l.level}: ${l.text}`)).join("\n");
  $("console-count").textContent = lines?.length ? `${lines.length} line${lines.length === 1 ? "" : "s"}` : "";
}

function showAnalysis(result, ms) {
  analysis = result;
  editor.showDiagnostics(planDiagnostics(result));
  ui.error.hidden = true;
  ui.stale.hidden = true;
  $("panels").classList.remove("stale");
  views.fit.clearError();
  showConsole(result.console);
  for (const id of VIEWS) dirty.add(id);
  renderView(store.get().view);
  const items = fitItems(result.plan, result.checks);
  optionsPanel.showPlanDiagnostics(items);
  optionsPanel.showCodeOptions(result.optionsFromCode ?? []);
  const errors = items.filter((i) => i.level === "error").length;
  setAnalysisState(errors ? "warn" : "ok", errors ? `${errors} plan error${errors > 1 ? "s" : ""}` : result.plan.fits ? "planned · fits" : "planned");
  tabs.fit.dataset.count = items.length ? String(items.length) : "";
  revgnnConfig = result.revgnn;
  updateTrainingConfig();
  document.body.dataset.seq = String(latest);
  setStatus(`Traced ${result.graph.nodes.length} nodes and planned ${result.plan.numNodes} in ${Math.round(ms)} ms · Ready`);
  if (!firstRender) {
    firstRender = performance.now();
    performance.mark("first-render");
  }
}

function showAnalysisError(err) {
  const info = err instanceof EngineError ? err.info : { kind: ErrorKind.ENGINE, message: err?.message ?? String(err) };
  document.body.dataset.seq = String(latest);
  let text = info.message;
  if (info.line) {
    editor.showError(info.line, info.column, info.message);
    text = `Line ${info.line}: ${info.message}`;
  } else {
    editor.clearErrors();
  }
  ui.error.textContent = text;
  ui.error.hidden = false;
  showConsole(info.console);
  // An invalid option, or an error about one: at its field too (the planner's checks are the only ones).
  optionsPanel.showPlanDiagnostics(info.kind === ErrorKind.OPTION || info.field ? [{ level: "error", code: "options_json", field: info.field, message: info.message }] : []);
  optionsPanel.showCodeOptions([]);
  if (analysis) {
    ui.stale.hidden = false;
    ui.stale.textContent = "The views show the last model that traced, not your current code: fix the error above to update them.";
    $("panels").classList.add("stale");
  }
  if (info.kind === ErrorKind.ENGINE) {
    ui.error.textContent = `Could not start the engine: ${info.message}. It is tried again on your next edit.`;
    views.fit.showError({ ...info, message: ui.error.textContent });
    setAnalysisState("error", "no engine");
    setStatus("Engine unavailable", true);
    return;
  }
  views.fit.showError(info);
  tabs.fit.dataset.count = "!";
  updateTrainingConfig();
  setAnalysisState("error", info.kind === ErrorKind.TIMEOUT ? "stopped" : "error");
  setStatus(info.kind === ErrorKind.TIMEOUT ? "Engine restarted: your code was stopped; it is still in the editor" : "The model did not trace", true);
}

// ---------------------------------------------------------------- training in its own worker

let revgnnConfig = null;
/** How long a training worker may take to stop after Stop before it is replaced (?stop-grace=ms for tests). */
const STOP_GRACE_MS = Math.max(200, Number(params.get("stop-grace")) || 20000);
let stopWatch = 0;
const ENDED = new Set(["stopped", "done", "error"]);

// A run the worker has said nothing about for this long (and for at least 5 epochs' time)
// is said to be quiet in the view: its code may loop forever (Stop then replaces the worker).
const QUIET_MS = Math.max(200, Number(params.get("quiet")) || 60000);
let quietWatch = 0;
let epochMs = 0;

/** Restarts the quiet watch after news of a run in `phase` (none while paused or ended). */
function watchQuiet(phase) {
  clearTimeout(quietWatch);
  if (phase !== TrainingPhase.BUILDING && phase !== TrainingPhase.RUNNING) return;
  const ms = Math.max(QUIET_MS, 5 * epochMs);
  quietWatch = setTimeout(() => training.showQuiet(ms / 1000), ms);
}

const trainer = new EngineClient({
  name: "trainer",
  onEvent: (name, data) => {
    if (name !== Event.TRAINING) return;
    if (ENDED.has(data.phase)) clearTimeout(stopWatch);
    if (data.epochSeconds) epochMs = data.epochSeconds * 1000;
    watchQuiet(data.phase);
    training.update(data);
  },
  onRestart: (reason) => {
    watchQuiet(null);
    training.showError(`The training engine was restarted: ${reason}`);
  },
});

/**
 * Stop: asked between epochs. A worker that does not answer in time is busy for good (the
 * code's `step` or its module loops forever): it is terminated and replaced, and the view says so.
 */
function stopTraining() {
  watchQuiet(null);
  trainer.call(Request.STOP).catch(() => {});
  clearTimeout(stopWatch);
  stopWatch = setTimeout(() => {
    const s = (STOP_GRACE_MS / 1000).toFixed(STOP_GRACE_MS % 1000 ? 1 : 0);
    trainer.restart(`it did not stop within ${s} s of Stop (does the code's training loop forever?), so it was replaced; your code is still in the editor`);
  }, STOP_GRACE_MS);
}

/** Whether the Training view trains the editor's model: its last analysis gave a `train`, and the code has not broken since. */
function trainsCode() {
  return Boolean(analysis?.trainable) && document.body.dataset.analysis !== "error";
}

function trainingConfig() {
  if (revgnnConfig) return revgnnConfig;
  // Not on the RevGNN preset: train the preset's defaults.
  return { layers: 7, hidden: 160, groups: 2, dropout: 0.5, lr: 0.003, parts: 10, seed: 0 };
}

function updateTrainingConfig() {
  if (trainsCode()) {
    training.setConfig(
      `Trains the model of your code: ${analysis.title.replace(/ called with.*/, "")}, one step per part of its \`train.parts\`, ` +
        "evaluated by its `train.evaluate()`, in the training worker (the code runs there again with the dataset and epochs chosen here).",
    );
    return;
  }
  const c = trainingConfig();
  const from = revgnnConfig
    ? "as your code's `revgnn` configures it"
    : "with the RevGNN preset's configuration (this view trains RevGNN; your code exports no `revgnn`)";
  training.setConfig(
    `RevGNN ${c.layers} layers × ${c.hidden} channels, ${c.groups} groups, dropout ${c.dropout}, Adam lr ${c.lr}, ${c.parts} parts per epoch, ` +
      `trained by the package's RevGnnTrainer (PyG's rev_gnn.py model, built in Rust, on the PopTorch execution path) — ${from}.`,
  );
}

const training = createTrainingView(panels.training, {
  onStart: ({ dataset, epochs }) => {
    store.set({ train: { dataset, epochs } });
    const s = store.get();
    const code = trainsCode() ? codeRun(s) : {};
    epochMs = 0;
    watchQuiet(TrainingPhase.BUILDING);
    trainer.call(Request.TRAIN, { dataset, epochs, config: trainingConfig(), ...code }).catch((err) => {
      watchQuiet(null);
      const info = err instanceof EngineError ? err.info : { message: String(err) };
      training.showError(info.kind === ErrorKind.ENGINE ? `The training engine stopped: ${info.message}` : info.message);
    });
  },
  onPause: () => trainer.call(Request.PAUSE).then(({ result }) => training.setPaused(result.paused, result.epoch)),
  onResume: () =>
    trainer.call(Request.RESUME).then(() => {
      training.setPaused(false);
      watchQuiet(TrainingPhase.RUNNING);
    }),
  onStop: stopTraining,
  onDownload: async () => {
    try {
      const { result } = await trainer.call(Request.WEIGHTS);
      const url = URL.createObjectURL(new Blob([result.bytes], { type: "application/octet-stream" }));
      const a = Object.assign(document.createElement("a"), { href: url, download: result.filename });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      training.showError(err.message);
    }
  },
  onSettings: (patch) => store.set({ train: { ...store.get().train, ...patch } }),
});

// ---------------------------------------------------------------- state changes

const optionsPanel = createOptionsPanel($("options"), {
  onChange: (patch) => store.set(patch),
});

store.subscribe((s, patch) => {
  if ("view" in patch) showView(s.view);
  if ("colorBy" in patch && analysis) {
    dirty.add("graph");
    if (s.view === "graph") renderView("graph");
  }
  if ("code" in patch || "options" in patch || "ipus" in patch || "half" in patch) scheduleAnalysis();
  // A model built from the Training view's dataset (the code read `dataset`) is planned again for another.
  if ("train" in patch && analysis?.dataset && patch.train.dataset !== analysis.dataset) scheduleAnalysis();
});

function loadPreset(id) {
  const s = presetState(id, store.get());
  store.set(s);
  editor.setText(s.code);
  optionsPanel.set(s);
  revgnnConfig = null;
  updateTrainingConfig();
}

// ---------------------------------------------------------------- boot

let firstRender = 0;

async function boot() {
  const s = await store.load();
  const presetSel = $("preset");
  for (const p of PRESETS) presetSel.append(Object.assign(document.createElement("option"), { value: p.id, textContent: p.title }));
  presetSel.value = s.preset;
  presetSel.addEventListener("change", () => loadPreset(presetSel.value));

  editor = createEditor($("editor"), s.code, (code) => {
    if (code !== store.get().code) store.set({ code });
  });
  optionsPanel.set(s);
  training.setSettings(s.train);
  updateTrainingConfig();
  showView(s.view);
  if (store.source === "link") setStatus("Restored from the link");
  if (store.source === "bad-link") setStatus("The link could not be read; showing your last state", true);

  store.onForeignHash(() => location.reload()); // a pasted link: load its state
  $("share").addEventListener("click", async () => {
    const link = await store.link();
    const box = $("share-box");
    box.hidden = false;
    $("share-link").value = link;
    $("share-link").select();
    try {
      await navigator.clipboard.writeText(link);
      $("share-status").textContent = "Copied.";
    } catch {
      $("share-status").textContent = "Select and copy the link.";
    }
  });

  analyser
    .start()
    .then(({ version, simd }) => {
      $("version").textContent = version;
      $("simd").textContent = simd === "relaxed" ? "wasm SIMD + relaxed SIMD" : "wasm SIMD";
    })
    .catch(() => {}); // reported by the first analysis, which waits for the same start
  analyse();
  addEventListener("resize", () => {
    for (const id of VIEWS) dirty.add(id);
    renderView(store.get().view);
    if (store.get().view === "training") training.resize(panels.training.clientWidth);
  });
}

boot();
