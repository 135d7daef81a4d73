// The page: UI only. Every engine call goes to a worker through engine/client.js; this file
// wires the state (state.js), the editor, the options panel, the tabs (tabs.js), the views and
// the training controller (training-controller.js) together, and runs the analysis.
// web/build.mjs bundles it (with CodeMirror and uPlot) into dist/main.js.
import "uplot/dist/uPlot.min.css";
import { Store, presetState, switchLanguage, PRESETS, VIEWS } from "./state.js";
import { createEditor } from "./editor.js";
import { EngineClient, EngineError } from "./engine/client.js";
import { Request, ErrorKind, Language } from "./engine/protocol.js";
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
import { createTabs } from "./tabs.js";
import { createTrainingController } from "./training-controller.js";

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
  ui.status.title = "";
  ui.status.classList.toggle("bad", bad);
}

function setAnalysisState(state, text) {
  document.body.dataset.analysis = state;
  ui.analysisState.className = `pill is-${state}`;
  ui.analysisState.textContent = text;
}

// ---------------------------------------------------------------- views and tabs

const { panels, tabs, show: showTab } = createTabs({
  tabList: $("tabs"),
  panelBox: $("panels"),
  views: VIEWS,
  titles: TITLES,
  onSelect: (id) => store.set({ view: id }),
});

let editor;
const views = {
  graph: createGraphView(panels.graph, { onColorBy: (colorBy) => store.set({ colorBy }), onGoToLine: (line) => goToLine(line) }),
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
  showTab(id);
  if (dirty.has(id)) renderView(id);
  if (id === "training") training.shown();
}

// ---------------------------------------------------------------- analysis in the worker

const analyser = new EngineClient({
  name: "engine",
  language: () => store.get().language,
  onRestart: (reason) => setStatus(`Engine restarted: ${reason}`, true),
});
let latest = 0;
let debounce = 0;

/** What the engine runs the editor's code with: the code, the panel's options, and what the code gets beside them. */
function codeRun(s) {
  return { code: s.code, language: s.language, options: toPlannerOptions(s.options), ipus: s.ipus, half: s.half };
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

/** Saves `bytes` (a string or bytes) as file `name` through a download link. */
function download(bytes, name, type) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  const a = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** The export buttons: usable while the last analysis has a wrapped model. */
function setExportable(on) {
  for (const id of ["export-poptorch", "export-pytorch"]) $(id).disabled = !on;
}

/** "Export as PopTorch" / "Export as PyTorch": the worker writes the .py (and the weights beside it). */
async function exportAs(target) {
  try {
    const { result } = await analyser.call(Request.EXPORT, { target }, { timeoutMs: TIMEOUT_MS });
    download(result.code, result.filename, "text/x-python");
    if (result.weights) download(result.weights, result.weightsFilename, "application/octet-stream");
    setStatus(result.note ?? `Exported ${result.filename}${result.weights ? ` and ${result.weightsFilename}` : ""}`);
  } catch (err) {
    setStatus(`Export failed: ${err.message}`, true);
  }
}

function showAnalysis(result, ms) {
  analysis = result;
  setExportable(Boolean(result.exportable));
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
  training.setRevgnnConfig(result.revgnn);
  document.body.dataset.seq = String(latest);
  // The analysis engine's wasm memory after this analysis (read by scripts/bench-page.mjs).
  document.body.dataset.wasmBytes = String(result.wasmBytes ?? 0);
  setStatus(`Traced ${result.graph.nodes.length} nodes and planned ${result.plan.numNodes} in ${Math.round(ms)} ms · Ready`);
  // Where the engine's time went (analysis.js phaseClock), and the rest of the round trip: the
  // answer's copy to this thread.
  const phases = (result.phases ?? []).map(([name, t]) => `${name} ${t} ms`);
  if (result.ms !== undefined) phases.push(`the answer's transfer ${Math.round(ms - result.ms)} ms`);
  ui.status.title = phases.join(" · ");
  if (!firstRender) {
    firstRender = performance.now();
    performance.mark("first-render");
  }
}

function showAnalysisError(err) {
  setExportable(false);
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
  training.updateConfig();
  setAnalysisState("error", info.kind === ErrorKind.TIMEOUT ? "stopped" : "error");
  setStatus(info.kind === ErrorKind.TIMEOUT ? "Engine restarted: your code was stopped; it is still in the editor" : "The model did not trace", true);
}

// ---------------------------------------------------------------- training in its own worker

const training = createTrainingController({
  panel: panels.training,
  params,
  store,
  analysis: () => analysis,
  codeRun,
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
  if ("code" in patch || "language" in patch || "options" in patch || "ipus" in patch || "half" in patch) scheduleAnalysis();
  // A model built from the Training view's dataset (the code read `dataset`) is planned again for another.
  if ("train" in patch && analysis?.dataset && patch.train.dataset !== analysis.dataset) scheduleAnalysis();
});

function loadPreset(id) {
  const s = presetState(id, store.get());
  store.set(s);
  editor.setText(s.code);
  optionsPanel.set(s);
  training.setRevgnnConfig(null);
}

// ---------------------------------------------------------------- boot

let firstRender = 0;

async function boot() {
  const s = await store.load();
  const presetSel = $("preset");
  for (const p of PRESETS) presetSel.append(Object.assign(document.createElement("option"), { value: p.id, textContent: p.title }));
  presetSel.value = s.preset;
  presetSel.addEventListener("change", () => loadPreset(presetSel.value));

  editor = createEditor(
    $("editor"),
    s.code,
    (code) => {
      if (code !== store.get().code) store.set({ code });
    },
    s.language,
  );
  const languageSel = $("language");
  for (const [value, text] of [[Language.JAVASCRIPT, "JavaScript"], [Language.PYTHON, "Python"]]) {
    languageSel.append(Object.assign(document.createElement("option"), { value, textContent: text }));
  }
  languageSel.value = s.language;
  languageSel.addEventListener("change", () => {
    const patch = switchLanguage(store.get(), languageSel.value);
    if (!patch) return;
    store.set(patch);
    editor.setLanguage(patch.language);
    editor.setText(patch.code);
    document.body.dataset.language = patch.language;
  });
  document.body.dataset.language = s.language;
  optionsPanel.set(s);
  training.setSettings(s.train);
  training.updateConfig();
  showView(s.view);
  if (store.source === "link") setStatus("Restored from the link");
  if (store.source === "bad-link") setStatus("The link could not be read; showing your last state", true);

  store.onForeignHash(() => location.reload()); // a pasted link: load its state
  $("export-poptorch").addEventListener("click", () => exportAs("poptorch"));
  $("export-pytorch").addEventListener("click", () => exportAs("pytorch"));
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
    if (store.get().view === "training") training.resize();
  });
}

boot();
