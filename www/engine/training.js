// Training in the engine worker (engine/worker.js): the model of the editor's code (its
// default export's `train`) or the built-in RevGnnTrainer, epoch by epoch with pause, resume
// and stop between epochs, progress sent as events, the trained weights as safetensors.
import * as pkg from "../pkg/ipu_playground.js";
import { Event, ErrorKind, Language, Replica, TrainingPhase, MAX_TRAINING_WORKERS, event, makeError } from "./protocol.js";
import { ReplicaCoordinator, inProcessEndpoint, replicaRanges, replicaServer, workerError } from "../pkg/replica-core.mjs";
import { normalize, describe } from "./usercode.js";
import { checkName, fetchPlanetoid } from "./datasets.js";
import { safetensors } from "./safetensors.js";
import { loadEngine } from "./load.js";
import { STACK_SWITCHING } from "./python.js";
import { DATA_URL, makePlan, panelOptions, callInputs, codeContext, importCode } from "./analysis.js";

// ---------------------------------------------------------------- training

// resume: set while paused (its promise resolves on resume); parked: resolves once the loop
// has stopped between epochs, so a pause is answered only when no epoch is running.
const run = { trainer: null, state: "idle", resume: null, parked: null, stop: false, dataset: null, epoch: 0 };

function settleParked() {
  run.parked?.resolve();
  run.parked = null;
}

function wait(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * The planner's prediction for the training step the trainer runs (its own graph, planned on
 * one IPU): the activation peak the executor counts, and the IPU's whole peak.
 */
function predict(trainer) {
  return predictPlan(() => makePlan(trainer, {}, {}));
}

/** The built-in trainer (RevGnnTrainer) with `config`, as a training run's runner. */
async function trainerRunner(dataset, config, epochs) {
  const files = await fetchPlanetoid(dataset, DATA_URL);
  const cfg = { ...config, epochs };
  delete cfg.dataset;
  let trainer;
  try {
    trainer = new pkg.RevGnnTrainer(dataset, files, cfg);
  } catch (e) {
    throw makeError(ErrorKind.MODEL, `The trainer refused the configuration: ${e.message}`);
  }
  return {
    what: "RevGnnTrainer",
    numParams: trainer.numParams,
    prediction: () => predict(trainer),
    trainEpoch: () => trainer.trainEpoch(),
    evaluate: () => trainer.evaluate(),
    weights: () => ({ bytes: trainer.safetensors(), names: trainer.pygParameterNames() }),
    free: () => trainer.free?.(),
  };
}

/** A trained module's parameter name as PyG's RevGNN names it (GroupAddRev's groups are its `convs`). */
const pygName = (name) => name.replace(/\.blocks\.(\d+)\./g, ".convs.$1.");

/**
 * The editor's model as a training run's runner: its default export run with the Training
 * view's dataset and epochs, then the `train` it gives ({ parts, step, evaluate }), or null
 * when it gives none (the trainer's configuration is trained instead).
 */
async function codeRunner({ code, language, options, ipus, half, dataset, epochs, workers = 1 }) {
  const { ctx } = codeContext({ options: panelOptions(options), ipus, half, dataset, epochs });
  // A missing file is named, with the command that stages it, before the code fetches them
  // (a localhost download of the raw files; HEAD requests would do, but Chromium reports
  // them as aborted).
  await fetchPlanetoid(dataset, DATA_URL);
  const { exports, url } = await importCode(code, language, ctx);
  try {
    const spec = await normalize(exports, ctx, (v) => v instanceof pkg.poptorch.PoplarExecutor);
    if (spec.kind !== "poptorch" || !spec.train) return null;
    const model = spec.model;
    if (!model.training) throw makeError(ErrorKind.MODEL, "The code's `train` needs a poptorch.trainingModel");
    const net = model.model;
    const call = callInputs(spec.inputs, model.combinedBatchFactor, code);
    const replicas = await startReplicas(model, workers, { code, language, options, ipus, half, dataset, epochs });
    let prediction;
    const numParams = net.namedParameters().reduce((a, [, p]) => a + p.shape.reduce((x, y) => x * y, 1), 0);
    const { parts, step, evaluate } = spec.train;
    return {
      what: "your code",
      numParams,
      // The planner's plan of the model as it is compiled (the measured peak is the executor's
      // count of the same program, by ir::liveness).
      prediction: () => prediction ?? (prediction = predictPlan(() => model.plan(...call))),
      // With replica workers, model.call goes through them (a promise: the code's `step` awaits it).
      async trainEpoch(epoch) {
        let [total, count] = [0, 0];
        for (const part of parts) {
          const loss = await step(part);
          if (loss === null || loss === undefined) continue;
          if (typeof loss !== "number" || !Number.isFinite(loss)) {
            throw makeError(ErrorKind.MODEL, `Training stopped at epoch ${epoch}: \`step\` returned ${loss} (the loss must be a finite number; did training diverge?)`);
          }
          total += loss;
          count++;
        }
        const s = model.stats ?? {};
        return { steps: count, loss: total / Math.max(count, 1), peakBytes: s.peakBytes ?? 0, savedForBackward: s.savedForBackward ?? 0 };
      },
      workers: replicas.info,
      fingerprints: () => replicas.fingerprints(),
      evaluate: () => evaluate(),
      // The parameters under PyG's names (buffers aside), as the trainer's file has them.
      weights: (metadata) => {
        const params = new Set(net.namedParameters().map(([n]) => n));
        const entries = Object.entries(net.stateDict()).filter(([name]) => params.has(name));
        return { bytes: safetensors(entries.map(([n, t]) => [pygName(n), t]), metadata), names: entries.map(([n]) => pygName(n)) };
      },
      closeWorkers: () => replicas.close(),
      free: () => replicas.close(),
    };
  } catch (e) {
    throw e && typeof e === "object" && "kind" in e && !(e instanceof Error) ? e : describe(e, url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

/**
 * The replicas of training model `model` on `requested` workers: this worker runs the first
 * range itself (its module is the one evaluated and downloaded), Web Workers
 * (engine/replica-worker.js, each its own wasm instance running the same code) the others;
 * `model.call` then goes through them (pkg/replica-core.mjs, the coordinator Node's
 * ReplicaWorkers uses). One worker when asked for one, when the model has one replica, when
 * the page is not cross-origin isolated (no SharedArrayBuffer) or, for Python code, when the
 * browser lacks WebAssembly stack switching (the Python step waits for the workers with
 * Pyodide's run_sync; each replica worker loads its own Pyodide); `info` says which and why.
 */
async function startReplicas(model, requested, run) {
  const replicas = model.options.replicationFactor;
  const isolated = self.crossOriginIsolated === true && typeof SharedArrayBuffer === "function";
  const asked = Number.isInteger(requested) && requested >= 1 ? Math.min(requested, MAX_TRAINING_WORKERS) : 1;
  let count = Math.min(asked, replicas);
  let note = null;
  if (asked > 1 && !isolated) [count, note] = [1, "The page is not cross-origin isolated (no SharedArrayBuffer): training on one worker."];
  else if (asked > 1 && run.language === Language.PYTHON && !STACK_SWITCHING) [count, note] = [1, "Python code trains on one worker here: waiting for the replica workers from Python needs WebAssembly stack switching (JSPI), which this browser lacks."];
  else if (replicas > 1 && asked > replicas) note = `${replicas} replica${replicas > 1 ? "s" : ""} (the options' replicationFactor): ${count} worker${count > 1 ? "s" : ""}, each running at least one replica.`;
  const info = { count, isolated, note, replicas, stats: [] };
  const one = { info, fingerprints: async () => null, close: () => {} };
  if (count <= 1) return one;
  const ranges = replicaRanges(replicas, count);
  const subs = ranges.slice(1).map((range, i) => {
    const worker = new Worker(new URL("./replica-worker.js", import.meta.url), { type: "module", name: `replica ${i + 1}` });
    worker.postMessage({ type: Replica.INIT, ...run, range });
    return { worker, range };
  });
  const close = () => subs.forEach((s) => s.worker.terminate());
  try {
    // Each replica worker says it has built the model, or why not.
    await Promise.all(
      subs.map(
        ({ worker, range }, i) =>
          new Promise((resolve, reject) => {
            worker.onmessage = ({ data }) => (data?.type === Replica.READY ? resolve() : data?.error && reject(workerError(i + 1, range, data.error)));
            worker.onerror = (e) => reject(workerError(i + 1, range, new Error(e.message || "the replica worker failed to start")));
          }),
      ),
    );
  } catch (e) {
    close();
    throw makeError(ErrorKind.MODEL, `Starting the replica workers failed: ${e.message}`);
  }
  const { memory } = await loadEngine();
  const local = inProcessEndpoint((reply) => replicaServer(model, ranges[0], reply, { memoryBytes: () => memory?.buffer.byteLength ?? 0 }));
  const endpoints = [
    local,
    ...subs.map(({ worker }) => {
      let failure = () => {};
      worker.onerror = (e) => failure(new Error(e.message || "the replica worker failed"));
      return {
        post: (m) => worker.postMessage(m),
        onMessage: (fn) => (worker.onmessage = ({ data }) => fn(data)),
        onFailure: (fn) => (failure = fn),
        terminate: () => worker.terminate(),
      };
    }),
  ];
  const coordinator = new ReplicaCoordinator(endpoints, ranges);
  try {
    await coordinator.hello();
  } catch (e) {
    throw makeError(ErrorKind.MODEL, e.message);
  }
  info.stats = coordinator.workers;
  // The code's `model.call(...)` (and `model.run`) now run every replica on the workers.
  model.call = (...inputs) => coordinator.call(...inputs);
  model.run = model.call;
  return { info, fingerprints: () => coordinator.fingerprints(), close: () => coordinator.close() };
}

/** A plan's prediction for the Training view (IPU 0: the training step the executor runs). */
function predictPlan(makeIt) {
  try {
    const p = makeIt();
    const m = p.memory.ipus[0];
    return { livePeakBytes: m.livePeakBytes, peakBytes: m.peakBytes, capacityBytes: p.memory.capacityBytes, fits: p.fits, generation: p.generation.chip, steps: p.numNodes };
  } catch (e) {
    return { error: e?.message ?? String(e) };
  }
}

/**
 * Trains in this worker: the editor's model when `code` is given and its default export says
 * how (`train`), else the built-in RevGnnTrainer with `config`. Progress goes out as events.
 */
export async function train({ dataset, config = {}, epochs, code = null, language, options = {}, ipus = 1, half = false, workers = 1 }) {
  if (run.state === TrainingPhase.RUNNING || run.state === TrainingPhase.PAUSED || run.state === TrainingPhase.BUILDING) {
    throw makeError(ErrorKind.MODEL, "A training run is already going: stop it first");
  }
  checkName(dataset);
  if (!Number.isInteger(epochs) || epochs < 1 || epochs > 10000) {
    throw makeError(ErrorKind.OPTION, `Epochs must be a whole number from 1 to 10000, got ${JSON.stringify(epochs)}`, { field: "epochs" });
  }
  run.state = TrainingPhase.BUILDING;
  run.stop = false;
  run.resume = null;
  run.trainer?.free?.();
  run.trainer = null;
  const send = (phase, data = {}) => self.postMessage(event(Event.TRAINING, { phase, dataset, epochs, ...data }));
  try {
    send(TrainingPhase.BUILDING, { epoch: 0 });
    const t0 = performance.now();
    const runner = (typeof code === "string" ? await codeRunner({ code, language, options, ipus, half, dataset, epochs, workers }) : null) ?? (await trainerRunner(dataset, config, epochs));
    run.trainer = runner;
    run.dataset = dataset;
    const buildSeconds = (performance.now() - t0) / 1000;
    const evalEvery = epochs <= 50 ? 1 : Math.ceil(epochs / 50);
    let steps = 0;
    let acc = null;
    let peakBytes = 0;
    let saved = 0;
    let prediction = runner.what === "RevGnnTrainer" ? runner.prediction() : null;
    const t1 = performance.now();
    run.state = TrainingPhase.RUNNING;
    const workerInfo = () => (runner.workers ? { ...runner.workers, stats: runner.workers.stats.map((w) => ({ ...w })) } : undefined);
    send(TrainingPhase.RUNNING, { epoch: 0, steps: 0, params: runner.numParams, buildSeconds, prediction, trains: runner.what, workers: workerInfo() });
    for (let e = 1; e <= epochs; e++) {
      // Yield between epochs, so pause and stop requests are read.
      await wait(0);
      while (run.resume && !run.stop) {
        settleParked();
        await run.resume.promise;
      }
      if (run.stop) break;
      const s = performance.now();
      const r = await runner.trainEpoch(e);
      const epochSeconds = (performance.now() - s) / 1000;
      steps += r.steps;
      peakBytes = Math.max(peakBytes, r.peakBytes);
      saved = Math.max(saved, r.savedForBackward);
      let evalSeconds = 0;
      if (e === 1 || e % evalEvery === 0 || e === epochs) {
        await wait(0);
        const s2 = performance.now();
        acc = runner.evaluate();
        evalSeconds = (performance.now() - s2) / 1000;
      }
      run.epoch = e;
      // The code's model is compiled by its first step: its plan is the compiled one.
      const first = prediction === null ? (prediction = runner.prediction()) : undefined;
      send(run.resume ? TrainingPhase.PAUSED : TrainingPhase.RUNNING, {
        epoch: e,
        steps,
        stepsPerEpoch: r.steps,
        loss: r.loss,
        acc,
        evaluated: evalSeconds > 0,
        epochSeconds,
        evalSeconds,
        elapsedSeconds: (performance.now() - t1) / 1000,
        peakBytes,
        savedForBackward: saved,
        workers: workerInfo(),
        ...(first ? { prediction: first } : {}),
      });
    }
    run.state = run.stop ? TrainingPhase.STOPPED : TrainingPhase.DONE;
    run.resume = null;
    settleParked();
    if (run.stop && steps > 0) acc = runner.evaluate(); // the accuracy where it stopped
    // Each replica's weight fingerprint, from the worker running it: they are identical.
    const fingerprints = runner.fingerprints && steps > 0 ? await runner.fingerprints() : null;
    const w = workerInfo();
    send(run.state, { epoch: null, acc, peakBytes, savedForBackward: saved, elapsedSeconds: (performance.now() - t1) / 1000, workers: w && { ...w, fingerprints } });
    // The trained weights are this worker's too (it ran the first replicas): the others may go.
    runner.closeWorkers?.();
    return { state: run.state, acc };
  } catch (e) {
    run.trainer?.closeWorkers?.();
    run.state = TrainingPhase.ERROR;
    run.resume = null;
    settleParked();
    const info = e && typeof e === "object" && "kind" in e && !(e instanceof Error) ? e : makeError(ErrorKind.MODEL, e?.message ?? String(e));
    send(TrainingPhase.ERROR, { message: info.line ? `Line ${info.line}: ${info.message}` : info.message, kind: info.kind });
    throw info;
  }
}

/** Pauses between epochs; answers once the running epoch has finished and been reported. */
export async function pause() {
  if (run.state === TrainingPhase.RUNNING && !run.resume) {
    let resolve;
    const promise = new Promise((r) => (resolve = r));
    run.resume = { promise, resolve };
    let parked;
    const p = new Promise((r) => (parked = r));
    run.parked = { resolve: parked };
    await p;
  }
  return { paused: Boolean(run.resume), epoch: run.epoch };
}

export function resume() {
  const r = run.resume;
  run.resume = null;
  r?.resolve();
  return { paused: false };
}

export function stop() {
  run.stop = true;
  resume();
  return { stopping: true };
}

export function weights() {
  if (!run.trainer) throw makeError(ErrorKind.MODEL, "No trained model yet: train first");
  const { bytes, names } = run.trainer.weights({ format: "pt", dataset: run.dataset, epochs_trained: String(run.epoch) });
  return { bytes, names, filename: `revgnn-${run.dataset.toLowerCase()}.safetensors` };
}
