// Training view: RevGNN trained in its own worker (engine/worker.js), with a progress bar
// (epoch, steps, ETA), live loss and accuracy charts (uPlot), pause / resume / stop, the
// final test accuracy, the measured activation peak beside the planner's prediction, and the
// trained weights as safetensors.
//
// The main thread's work per epoch is small and bounded: a training event only records its
// numbers; at most once per animation frame the view writes them out — text into a fixed
// set of elements (only what changed), one setData per chart, the new rows of the epoch log
// when it is open — so a fast run never queues more than one redraw, the DOM does not grow
// with the epochs (the log aside, in its own contained box), and nothing outside the
// view's fixed-size, contained boxes is laid out again.
import { h, stat } from "./dom.js";
import { lineChart } from "../charts/line.js";
import { bytes } from "../charts/svg.js";
import { DATASET_NAMES } from "../state.js";
import { TrainingPhase as P, MAX_TRAINING_WORKERS } from "../engine/protocol.js";

function duration(s) {
  if (!Number.isFinite(s) || s < 0) return "–";
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function createTrainingView(root, { onStart, onPause, onResume, onStop, onDownload, onSettings }) {
  const dataset = h("select", { id: "train-dataset" }, DATASET_NAMES.map((d) => h("option", { value: d, text: d })));
  const epochs = h("input", { id: "train-epochs", type: "number", min: 1, max: 10000, step: 1, inputmode: "numeric" });
  // Replicas on parallel workers (the code's replicationFactor): SharedArrayBuffer needs a
  // cross-origin isolated page; without it the engine trains on one worker and says so.
  const isolated = globalThis.crossOriginIsolated === true;
  const cores = Math.max(1, Math.min(navigator.hardwareConcurrency || 1, MAX_TRAINING_WORKERS));
  const workers = h("input", { id: "train-workers", type: "number", min: 1, max: MAX_TRAINING_WORKERS, step: 1, inputmode: "numeric", value: String(isolated ? cores : 1) });
  workers.disabled = !isolated;
  workers.title = `Workers for a replicated training model (the options' replicationFactor): each runs some replicas on its own wasm instance; default the ${navigator.hardwareConcurrency || 1} cores the browser reports, at most ${MAX_TRAINING_WORKERS}`;
  const workersNote = h("p", {
    class: "muted",
    id: "train-workers-note",
    text: isolated ? "" : "This page is not cross-origin isolated (no SharedArrayBuffer, which replica workers share gradients through): training runs on one worker.",
  });
  const workersBusy = h("p", { class: "muted", id: "train-workers-busy", role: "status" });
  const start = h("button", { type: "button", id: "train-start", class: "primary", text: "Train" });
  const pause = h("button", { type: "button", id: "train-pause", text: "Pause", disabled: true });
  const stop = h("button", { type: "button", id: "train-stop", text: "Stop", disabled: true });
  const download = h("button", { type: "button", id: "train-download", text: "Download weights (.safetensors)", disabled: true });
  const config = h("p", { class: "muted", id: "train-config" });
  const progress = h("progress", { id: "train-progress", max: 1, value: 0, "aria-label": "Training progress" });
  const progressText = h("p", { class: "progress-text", id: "train-progress-text", role: "status", "aria-live": "polite", text: "Not started." });
  const error = h("div", { class: "error", id: "train-error", role: "alert", hidden: true });
  // Said when the worker has been silent for long (showQuiet), gone with its next event.
  const quiet = h("p", { class: "field-error", id: "train-quiet", role: "status", "aria-live": "polite", hidden: true });
  // The stats: a fixed set of elements, filled in place.
  const STATS = [
    ["testAcc", "test accuracy", "test-acc", "Accuracy on the test nodes, at the last evaluation"],
    ["valAcc", "val accuracy", "", "Accuracy on the validation nodes, at the last evaluation"],
    ["measured", "measured activation peak", "peak", "The most activation bytes the executor held at once in a training step"],
    ["predicted", "planner's prediction", "predicted", "The activation peak the IPU planner predicts for the same training step (ir::liveness, as the executor counts)"],
    ["ratio", "prediction ÷ measured", "ratio", "The planner's prediction over the measurement"],
    ["ipu", "IPU peak", "ipu-peak", "Everything the planner puts on one IPU at the step's peak (code, exchange, weights, optimizer state, activations, …) against its memory"],
    ["kept", "kept for backward", "", "Bytes the forward pass keeps for the backward pass (reversible layers keep almost none)"],
  ];
  const statEls = {};
  const stats = h(
    "div",
    { class: "stats", id: "train-stats" },
    STATS.map(([key, label, cls, title]) => {
      const el = stat(label, "", cls);
      el.title = title;
      el.hidden = true;
      statEls[key] = { el, value: el.querySelector(".stat-value"), label: el.querySelector(".stat-label") };
      return el;
    }),
  );
  const predictionNote = h("p", { class: "muted", id: "train-prediction" });
  const charts = h("div", { class: "train-charts" });
  const logBody = h("tbody");
  const log = h("details", { class: "printed" }, [
    h("summary", { text: "Epoch log" }),
    h("div", { class: "train-log-box" }, [
      h("table", { class: "table", id: "train-log" }, [
        h("thead", {}, [h("tr", {}, ["epoch", "loss", "train", "val", "test", "seconds"].map((t) => h("th", { text: t, scope: "col" })))]),
        logBody,
      ]),
    ]),
  ]);
  const logRows = [];
  let logShown = 0;
  const logRow = (cells) => h("tr", {}, cells.map((t) => h("td", { text: String(t) })));
  log.addEventListener("toggle", () => {
    logBody.replaceChildren();
    logShown = 0;
    if (log.open) showLog();
  });
  root.append(
    h("form", { class: "train-controls", novalidate: true, onsubmit: (e) => e.preventDefault() }, [
      h("div", { class: "field" }, [h("label", { for: "train-dataset", text: "Dataset" }), dataset]),
      h("div", { class: "field narrow" }, [h("label", { for: "train-epochs", text: "Epochs" }), epochs]),
      h("div", { class: "field narrow" }, [h("label", { for: "train-workers", text: "Workers" }), workers]),
      h("div", { class: "buttons" }, [start, pause, stop, download]),
    ]),
    config,
    workersNote,
    h("div", { class: "progress" }, [progress, progressText]),
    workersBusy,
    quiet,
    error,
    stats,
    predictionNote,
    charts,
    log,
  );
  const lossBox = h("div", { class: "chart", id: "loss-chart" });
  const accBox = h("div", { class: "chart", id: "acc-chart" });
  charts.append(lossBox, accBox);
  const lossChart = lineChart(lossBox, "Training loss", [["loss", "#e45756"]], "loss");
  const accChart = lineChart(accBox, "Accuracy", [["train", "#4c78a8"], ["val", "#54a24b"], ["test", "#f58518"]], "accuracy");

  let series = { epoch: [], loss: [], train: [], val: [], test: [] };
  let state = "idle";
  let paused = false;
  let prediction = null;
  /** What the next frame writes out: the latest numbers, and whether the charts changed. */
  const pending = { frame: 0, text: null, stats: null, charts: false, progress: null, workers: null };
  /** Counts of what the view wrote, for the page tests (chart redraws, frames). */
  const counters = { frames: 0, chartUpdates: 0, events: 0 };

  const setText = (el, text) => {
    if (el.textContent !== text) el.textContent = text;
  };

  function showLog() {
    if (!log.open || logShown >= logRows.length) return;
    const frag = document.createDocumentFragment();
    for (; logShown < logRows.length; logShown++) frag.append(logRow(logRows[logShown]));
    logBody.append(frag);
  }

  function writeStats(d) {
    const v = {};
    if (d.acc) Object.assign(v, { testAcc: `${(d.acc.test * 100).toFixed(1)} %`, valAcc: `${(d.acc.val * 100).toFixed(1)} %` });
    if (d.peakBytes) v.measured = bytes(d.peakBytes);
    if (prediction?.livePeakBytes !== undefined) {
      v.predicted = bytes(prediction.livePeakBytes);
      if (d.peakBytes) v.ratio = (prediction.livePeakBytes / d.peakBytes).toFixed(3);
      v.ipu = bytes(prediction.peakBytes);
    } else if (prediction?.error) {
      v.predicted = "could not plan";
    }
    if (d.savedForBackward) v.kept = bytes(d.savedForBackward);
    for (const [key] of STATS) {
      const s = statEls[key];
      const text = v[key] ?? "";
      if (s.el.hidden !== !text) s.el.hidden = !text;
      setText(s.value, text);
    }
    if (prediction?.capacityBytes) setText(statEls.ipu.label, `IPU peak, of ${bytes(prediction.capacityBytes)}`);
    if (prediction?.generation) statEls.ipu.el.title = `${STATS[5][3]}: one ${prediction.generation}.`;
    const ratio = d.peakBytes && prediction?.livePeakBytes !== undefined ? prediction.livePeakBytes / d.peakBytes : null;
    statEls.ratio.el.classList.toggle("ok", ratio !== null && Math.abs(ratio - 1) < 0.05);
    statEls.ipu.el.classList.toggle("ok", prediction?.fits === true);
    statEls.ipu.el.classList.toggle("bad", prediction?.fits === false);
  }

  /** The workers' line: each worker's replicas and busy time; once done, whether the replicas' weights agree. */
  function writeWorkers(w) {
    if (!w) return;
    const parts = [];
    if (w.note) parts.push(w.note);
    if (w.count > 1) {
      const s = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);
      parts.push(
        `${w.count} workers: ` +
          w.stats.map((x) => `worker ${x.worker} (replica${x.replicas[1] - x.replicas[0] > 1 ? `s ${x.replicas[0]}–${x.replicas[1] - 1}` : ` ${x.replicas[0]}`}) busy ${s(x.busyMs)}, last step ${s(x.lastStepMs)}${x.memoryBytes ? `, wasm ${bytes(x.memoryBytes)}` : ""}`).join(" · ") + ".",
      );
    }
    if (w.fingerprints) {
      const prints = Object.values(w.fingerprints);
      const same = prints.every((f) => f === prints[0]);
      workersBusy.dataset.fingerprints = JSON.stringify(w.fingerprints);
      parts.push(same ? `The ${prints.length} replicas' weights are identical (${prints[0]}).` : `The replicas' weights differ: ${prints.join(", ")}.`);
    }
    setText(workersBusy, parts.join(" "));
  }

  /** Writes out what the events since the last frame recorded. */
  function flush() {
    pending.frame = 0;
    counters.frames++;
    if (pending.progress) {
      progress.max = pending.progress.max;
      progress.value = pending.progress.value;
    }
    if (pending.text !== null) setText(progressText, pending.text);
    if (pending.stats) writeStats(pending.stats);
    if (pending.workers) writeWorkers(pending.workers);
    if (pending.charts && series.epoch.length) {
      lossChart.setData([series.epoch, series.loss]);
      accChart.setData([series.epoch, series.train, series.val, series.test]);
      counters.chartUpdates++;
    } else if (pending.charts) {
      // Empty: keep the axes laid out (see resize), so the first epoch's draw stays cheap.
      lossChart.setData([[0, 1], [null, null]]);
      accChart.setData([[0, 1], [null, null], [null, null], [null, null]]);
    }
    showLog();
    Object.assign(pending, { text: null, stats: null, charts: false, progress: null, workers: null });
  }

  /** Asks for a write-out at the next frame (once however many events come first), or now. */
  function schedule(now = false) {
    if (now) {
      if (pending.frame) cancelAnimationFrame(pending.frame);
      flush();
    } else if (!pending.frame) {
      pending.frame = requestAnimationFrame(flush);
    }
  }

  const setBusy = (running) => {
    start.disabled = running;
    pause.disabled = !running;
    stop.disabled = !running;
    dataset.disabled = running;
    epochs.disabled = running;
    workers.disabled = running || !isolated;
  };

  start.addEventListener("click", () => {
    const n = Number(epochs.value);
    if (!Number.isInteger(n) || n < 1 || n > 10000) {
      error.hidden = false;
      error.textContent = `Epochs must be a whole number from 1 to 10000, got "${epochs.value}".`;
      epochs.setAttribute("aria-invalid", "true");
      return;
    }
    epochs.setAttribute("aria-invalid", "false");
    error.hidden = true;
    series = { epoch: [], loss: [], train: [], val: [], test: [] };
    logRows.length = 0;
    logShown = 0;
    logBody.replaceChildren();
    prediction = null;
    predictionNote.textContent = "";
    workersBusy.textContent = "";
    delete workersBusy.dataset.fingerprints;
    Object.assign(pending, { text: null, stats: {}, charts: true, progress: { max: n, value: 0 } });
    schedule(true);
    download.disabled = true;
    setBusy(true);
    paused = false;
    pause.textContent = "Pause";
    const nw = Number(workers.value);
    onStart({ dataset: dataset.value, epochs: n, workers: Number.isInteger(nw) && nw >= 1 ? Math.min(nw, MAX_TRAINING_WORKERS) : 1 });
  });
  pause.addEventListener("click", () => (paused ? onResume() : onPause()));
  stop.addEventListener("click", () => onStop());
  download.addEventListener("click", () => onDownload());
  dataset.addEventListener("change", () => onSettings({ dataset: dataset.value }));
  epochs.addEventListener("change", () => {
    const n = Number(epochs.value);
    if (Number.isInteger(n) && n >= 1 && n <= 10000) onSettings({ epochs: n });
  });

  return {
    setSettings({ dataset: d, epochs: e }) {
      dataset.value = d;
      epochs.value = String(e);
    },
    setConfig(text) {
      config.textContent = text;
    },
    setPaused(p, epoch) {
      paused = p;
      pause.textContent = p ? "Resume" : "Pause";
      if (p) {
        pending.text = `Paused after epoch ${epoch ?? series.epoch.at(-1) ?? 0}.`;
        schedule(true);
      }
    },
    /** The worker has sent nothing for `seconds` while it should be running. */
    showQuiet(seconds) {
      quiet.textContent = `No word from the training worker for ${Math.round(seconds)} s: an epoch may take this long, or your code's training loops forever. Stop ends the run (a worker that does not answer is replaced).`;
      quiet.hidden = false;
    },
    showError(message) {
      quiet.hidden = true;
      error.hidden = false;
      error.textContent = message;
      setBusy(false);
    },
    /** A training event from the worker (see engine/protocol.js TrainingPhase): recorded now, written at the next frame. */
    update(d) {
      state = d.phase;
      counters.events++;
      if (d.workers) pending.workers = d.workers;
      if (!quiet.hidden) quiet.hidden = true;
      if (d.phase === P.BUILDING) {
        pending.progress = { max: d.epochs, value: 0 };
        pending.text = `Loading ${d.dataset} and compiling the training graph…`;
        schedule(true);
        return;
      }
      if (d.phase === P.ERROR) {
        pending.progress = { max: d.epochs, value: 0 };
        pending.text = "Training failed.";
        schedule(true);
        this.showError(d.message);
        return;
      }
      if (d.phase === P.RUNNING || d.phase === P.PAUSED) {
        pending.progress = { max: d.epochs, value: d.epoch ?? 0 };
        // The planner's prediction: with the first event (the built-in trainer), or with the
        // first epoch's (a model of the editor's code, planned as its first step compiled it).
        if (d.prediction) {
          prediction = d.prediction;
          pending.stats = d;
          if (prediction.error) predictionNote.textContent = `The planner could not plan this training step: ${prediction.error}`;
        }
        if (!d.epoch) {
          pending.text = `Epoch 0 / ${d.epochs} · ${d.params?.toLocaleString("en") ?? "?"} parameters, compiled in ${(d.buildSeconds ?? 0).toFixed(1)} s`;
          schedule(true);
          return;
        }
        const eta = (d.elapsedSeconds / d.epoch) * (d.epochs - d.epoch);
        pending.text =
          paused && d.phase === P.PAUSED
            ? `Paused after epoch ${d.epoch}.`
            : `Epoch ${d.epoch} / ${d.epochs} · step ${d.steps} (${d.stepsPerEpoch} per epoch) · loss ${d.loss.toFixed(4)} · ${d.epochSeconds.toFixed(2)} s/epoch · ETA ${duration(eta)}`;
        series.epoch.push(d.epoch);
        series.loss.push(d.loss);
        series.train.push(d.evaluated ? d.acc.train : null);
        series.val.push(d.evaluated ? d.acc.val : null);
        series.test.push(d.evaluated ? d.acc.test : null);
        const pct = (v) => (d.evaluated ? (v * 100).toFixed(1) : "");
        logRows.push([d.epoch, d.loss.toFixed(4), pct(d.acc?.train), pct(d.acc?.val), pct(d.acc?.test), d.epochSeconds.toFixed(2)]);
        pending.charts = true;
        pending.stats = d;
        download.disabled = false;
        schedule(d.phase === P.PAUSED);
        return;
      }
      if (d.phase === P.DONE || d.phase === P.STOPPED) {
        setBusy(false);
        paused = false;
        pause.textContent = "Pause";
        const last = series.epoch.at(-1) ?? 0;
        pending.text =
          d.phase === P.DONE
            ? `Done: ${last} epochs in ${duration(d.elapsedSeconds)}${d.acc ? ` · final test accuracy ${(d.acc.test * 100).toFixed(1)} %` : ""}`
            : `Stopped after epoch ${last}${d.acc ? ` · test accuracy ${(d.acc.test * 100).toFixed(1)} %` : ""}`;
        if (d.acc) {
          pending.stats = d;
          // A run stopped between evaluations is evaluated once more: show that point too.
          const i = series.epoch.length - 1;
          if (i >= 0 && series.test[i] === null) {
            series.train[i] = d.acc.train;
            series.val[i] = d.acc.val;
            series.test[i] = d.acc.test;
            pending.charts = true;
          }
        }
        schedule(true);
        download.disabled = last === 0;
      }
    },
    get state() {
      return state;
    },
    /** What the view has written so far (frames, chart updates, events received). */
    get counters() {
      return { ...counters };
    },
    resize(width) {
      // Two charts side by side: the panel's padding (32), the gap (12), each box's padding and border (14).
      const w = Math.max(300, Math.floor((width - 32 - 12 - 28) / 2));
      lossChart.setSize({ width: w, height: 220 });
      accChart.setSize({ width: w, height: 220 });
      // Fixed box sizes (the boxes are strictly contained): chart, its header line, padding, border.
      for (const box of [lossBox, accBox]) Object.assign(box.style, { width: `${w + 14}px`, height: `${220 + 26 + 14}px` });
      if (!series.epoch.length) {
        // Draw the axes once now, while nothing else runs: uPlot's first draw with data
        // measures fonts and lays out its axes, which would otherwise land in an epoch's update.
        lossChart.setData([[0, 1], [null, null]]);
        accChart.setData([[0, 1], [null, null], [null, null], [null, null]]);
      }
    },
  };
}
