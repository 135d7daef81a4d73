// The Training view's controller: the training worker (engine/worker.js through
// engine/client.js), what it trains (the editor's model when its last analysis gave a
// `train`, else RevGNN as the code's `revgnn` or the preset configures it), Start, Pause,
// Resume and Stop (a worker that does not stop in time, or says nothing for long, is said
// quiet and replaced), and the trained weights' download. main.js makes one and tells it
// about each analysis.
import { EngineClient, EngineError } from "./engine/client.js";
import { Request, Event, ErrorKind, TrainingPhase } from "./engine/protocol.js";
import { createTrainingView } from "./views/training.js";

/**
 * `panel` the view's element; `params` the page's URL parameters (`stop-grace`, `quiet` in
 * ms, for tests); `store` the page's state; `analysis()` the last analysis that traced;
 * `codeRun(state)` what the engine runs the editor's code with.
 */
export function createTrainingController({ panel, params, store, analysis, codeRun }) {
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
    language: () => store.get().language,
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
    return Boolean(analysis()?.trainable) && document.body.dataset.analysis !== "error";
  }

  function trainingConfig() {
    if (revgnnConfig) return revgnnConfig;
    // Not on the RevGNN preset: train the preset's defaults.
    return { layers: 7, hidden: 160, groups: 2, dropout: 0.5, lr: 0.003, parts: 10, seed: 0 };
  }

  function updateTrainingConfig() {
    if (trainsCode()) {
      training.setConfig(
        `Trains the model of your code: ${analysis().title.replace(/ called with.*/, "")}, one step per part of its \`train.parts\`, ` +
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

  const training = createTrainingView(panel, {
    onStart: ({ dataset, epochs, workers }) => {
      store.set({ train: { dataset, epochs } });
      const s = store.get();
      const code = trainsCode() ? codeRun(s) : {};
      epochMs = 0;
      watchQuiet(TrainingPhase.BUILDING);
      trainer.call(Request.TRAIN, { dataset, epochs, workers, config: trainingConfig(), ...code }).catch((err) => {
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

  return {
    setSettings: (s) => training.setSettings(s),
    updateConfig: updateTrainingConfig,
    /** The RevGNN configuration the code exports (null: none), after an analysis or a preset. */
    setRevgnnConfig(config) {
      revgnnConfig = config;
      updateTrainingConfig();
    },
    /** The view is shown: sized, and the training engine's wasm loaded now, so that Train
     * starts at once (and its compilation, which keeps both cores busy for a moment, is not in
     * the middle of a run). A failure is reported when Train is pressed. */
    shown() {
      training.resize(panel.clientWidth);
      trainer.start().catch(() => {});
    },
    resize: () => training.resize(panel.clientWidth),
  };
}
