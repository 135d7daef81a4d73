// Training view: RevGNN trained in its own worker (engine/worker.js), with a progress bar
// (epoch, steps, ETA), live loss and accuracy charts (uPlot), pause / resume / stop, the
// final test accuracy, the measured activation peak and the trained weights as safetensors.
import uPlot from "uplot";
import { h, stat } from "./dom.js";
import { bytes } from "../charts/svg.js";
import { DATASET_NAMES } from "../state.js";
import { TrainingPhase as P } from "../engine/protocol.js";

function lineChart(root, title, series, yLabel) {
  // No cursor and no live legend: each update is one canvas redraw, no DOM reads.
  const opts = {
    width: 420,
    height: 220,
    scales: { x: { time: false } },
    axes: [{ label: "epoch", size: 40, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, { label: yLabel, size: 56 }],
    legend: { show: false },
    cursor: { show: false },
    series: [{ label: "epoch" }, ...series.map(([label, stroke]) => ({ label, stroke, width: 2, points: { show: false }, spanGaps: true }))],
  };
  root.append(
    h("div", { class: "chart-head" }, [
      h("span", { class: "chart-title", text: title }),
      ...series.map(([label, stroke]) => h("span", { class: "chart-key", style: `--c: ${stroke}`, text: label })),
    ]),
  );
  return new uPlot(opts, [[], ...series.map(() => [])], root);
}

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
  const start = h("button", { type: "button", id: "train-start", class: "primary", text: "Train" });
  const pause = h("button", { type: "button", id: "train-pause", text: "Pause", disabled: true });
  const stop = h("button", { type: "button", id: "train-stop", text: "Stop", disabled: true });
  const download = h("button", { type: "button", id: "train-download", text: "Download weights (.safetensors)", disabled: true });
  const config = h("p", { class: "muted", id: "train-config" });
  const progress = h("progress", { id: "train-progress", max: 1, value: 0, "aria-label": "Training progress" });
  const progressText = h("p", { class: "progress-text", id: "train-progress-text", role: "status", "aria-live": "polite", text: "Not started." });
  const error = h("div", { class: "error", id: "train-error", role: "alert", hidden: true });
  const stats = h("div", { class: "stats", id: "train-stats" });
  const predictionNote = h("p", { class: "muted", id: "train-prediction" });
  const charts = h("div", { class: "train-charts" });
  const logBody = h("tbody");
  const log = h("details", { class: "printed" }, [
    h("summary", { text: "Epoch log" }),
    h("table", { class: "table", id: "train-log" }, [
      h("thead", {}, [h("tr", {}, ["epoch", "loss", "train", "val", "test", "seconds"].map((t) => h("th", { text: t, scope: "col" })))]),
      logBody,
    ]),
  ]);
  const logRows = [];
  const logRow = (cells) => h("tr", {}, cells.map((t) => h("td", { text: String(t) })));
  log.addEventListener("toggle", () => {
    if (log.open) logBody.replaceChildren(...logRows.map(logRow));
    else logBody.replaceChildren();
  });
  root.append(
    h("form", { class: "train-controls", novalidate: true, onsubmit: (e) => e.preventDefault() }, [
      h("div", { class: "field" }, [h("label", { for: "train-dataset", text: "Dataset" }), dataset]),
      h("div", { class: "field narrow" }, [h("label", { for: "train-epochs", text: "Epochs" }), epochs]),
      h("div", { class: "buttons" }, [start, pause, stop, download]),
    ]),
    config,
    h("div", { class: "progress" }, [progress, progressText]),
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
  const times = [];

  const setBusy = (running) => {
    start.disabled = running;
    pause.disabled = !running;
    stop.disabled = !running;
    dataset.disabled = running;
    epochs.disabled = running;
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
    times.length = 0;
    lossChart.setData([[], []]);
    accChart.setData([[], [], [], []]);
    logBody.replaceChildren();
    logRows.length = 0;
    stats.replaceChildren();
    prediction = null;
    predictionNote.textContent = "";
    download.disabled = true;
    setBusy(true);
    paused = false;
    pause.textContent = "Pause";
    onStart({ dataset: dataset.value, epochs: n });
  });
  pause.addEventListener("click", () => (paused ? onResume() : onPause()));
  stop.addEventListener("click", () => onStop());
  download.addEventListener("click", () => onDownload());
  dataset.addEventListener("change", () => onSettings({ dataset: dataset.value }));
  epochs.addEventListener("change", () => {
    const n = Number(epochs.value);
    if (Number.isInteger(n) && n >= 1 && n <= 10000) onSettings({ epochs: n });
  });

  let prediction = null;

  function statsFor(d) {
    const items = [];
    if (d.acc) items.push(stat("test accuracy", `${(d.acc.test * 100).toFixed(1)} %`, "test-acc"), stat("val accuracy", `${(d.acc.val * 100).toFixed(1)} %`));
    if (d.peakBytes) items.push(stat("activation peak (measured)", bytes(d.peakBytes), "peak"));
    if (prediction?.livePeakBytes !== undefined) {
      items.push(stat("activation peak (planner's prediction)", bytes(prediction.livePeakBytes), "predicted"));
      if (d.peakBytes) {
        const ratio = prediction.livePeakBytes / d.peakBytes;
        items.push(stat("predicted ÷ measured", ratio.toFixed(3), Math.abs(ratio - 1) < 0.05 ? "ok ratio" : "ratio"));
      }
      items.push(stat(`whole ${prediction.generation} IPU at its peak`, `${bytes(prediction.peakBytes)} of ${bytes(prediction.capacityBytes)}`, prediction.fits ? "ok" : "bad"));
    } else if (prediction?.error) {
      items.push(stat("planner's prediction", "could not plan", "bad"));
    }
    if (d.savedForBackward) items.push(stat("kept for backward", bytes(d.savedForBackward)));
    return items;
  }

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
      if (p) progressText.textContent = `Paused after epoch ${epoch ?? series.epoch.at(-1) ?? 0}.`;
    },
    showError(message) {
      error.hidden = false;
      error.textContent = message;
      setBusy(false);
    },
    /** A training event from the worker (see engine/protocol.js TrainingPhase). */
    update(d) {
      state = d.phase;
      progress.max = d.epochs;
      if (d.phase === P.BUILDING) {
        progress.value = 0;
        progressText.textContent = `Loading ${d.dataset} and compiling the training graph…`;
        return;
      }
      if (d.phase === P.ERROR) {
        progress.value = 0;
        progressText.textContent = "Training failed.";
        this.showError(d.message);
        return;
      }
      if (d.phase === P.RUNNING || d.phase === P.PAUSED) {
        progress.value = d.epoch ?? 0;
        if (!d.epoch) {
          if (d.prediction) {
            prediction = d.prediction;
            stats.replaceChildren(...statsFor(d));
            if (prediction.error) predictionNote.textContent = `The planner could not plan this training step: ${prediction.error}`;
          }
          progressText.textContent = `Epoch 0 / ${d.epochs} · ${d.params?.toLocaleString("en") ?? "?"} parameters, compiled in ${(d.buildSeconds ?? 0).toFixed(1)} s`;
          return;
        }
        times.push(d.epochSeconds + (d.evalSeconds ?? 0));
        const mean = d.elapsedSeconds / d.epoch;
        const eta = mean * (d.epochs - d.epoch);
        progressText.textContent = `Epoch ${d.epoch} / ${d.epochs} · step ${d.steps} (${d.stepsPerEpoch} per epoch) · loss ${d.loss.toFixed(4)} · ${d.epochSeconds.toFixed(2)} s/epoch · ETA ${duration(eta)}`;
        series.epoch.push(d.epoch);
        series.loss.push(d.loss);
        series.train.push(d.evaluated ? d.acc.train : null);
        series.val.push(d.evaluated ? d.acc.val : null);
        series.test.push(d.evaluated ? d.acc.test : null);
        const pct = (v) => (d.evaluated ? (v * 100).toFixed(1) : "");
        logRows.push([d.epoch, d.loss.toFixed(4), pct(d.acc?.train), pct(d.acc?.val), pct(d.acc?.test), d.epochSeconds.toFixed(2)]);
        // Rows are added to the page only while the log is open: a row added to a closed
        // <details> still costs a layout of the whole page.
        if (log.open) logBody.append(logRow(logRows.at(-1)));
        lossChart.setData([series.epoch, series.loss]);
        accChart.setData([series.epoch, series.train, series.val, series.test]);
        stats.replaceChildren(...statsFor(d));
        download.disabled = false;
        if (paused && d.phase === P.PAUSED) progressText.textContent = `Paused after epoch ${d.epoch}.`;
        return;
      }
      if (d.phase === P.DONE || d.phase === P.STOPPED) {
        setBusy(false);
        paused = false;
        pause.textContent = "Pause";
        const last = series.epoch.at(-1) ?? 0;
        progressText.textContent =
          d.phase === P.DONE
            ? `Done: ${last} epochs in ${duration(d.elapsedSeconds)}${d.acc ? ` · final test accuracy ${(d.acc.test * 100).toFixed(1)} %` : ""}`
            : `Stopped after epoch ${last}${d.acc ? ` · test accuracy ${(d.acc.test * 100).toFixed(1)} %` : ""}`;
        if (d.acc) {
          stats.replaceChildren(...statsFor(d));
          // A run stopped between evaluations is evaluated once more: show that point too.
          const i = series.epoch.length - 1;
          if (i >= 0 && series.test[i] === null) {
            series.train[i] = d.acc.train;
            series.val[i] = d.acc.val;
            series.test[i] = d.acc.test;
            accChart.setData([series.epoch, series.train, series.val, series.test]);
          }
        }
        download.disabled = last === 0;
      }
    },
    get state() {
      return state;
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
