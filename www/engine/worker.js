// The engine: a module Web Worker holding the wasm package. The page's main thread never
// loads WebAssembly; it talks to this file through engine/client.js, with the messages
// defined in engine/protocol.js. The page runs two of these: one analyses the editor's
// code (and can be terminated and replaced when that code loops forever), one trains.
import * as pkg from "../pkg/ipu_playground.js";
import { loadEngine } from "./load.js";
import { Request, Event, ErrorKind, TrainingPhase, reply, failure, event, makeError, USER_FILE } from "./protocol.js";
import { importModule, normalize, describe, userSources } from "./usercode.js";
import { DATASETS, checkName, fetchPlanetoid } from "./datasets.js";

const PACKAGE_URL = new URL("../pkg/ipu_playground.js", import.meta.url).href;
const DATA_URL = new URL("../data/", import.meta.url);

/**
 * The planner: `plan(model, options, settings)` of the package (crate/src/api/plan.rs), the one
 * hook between the analysis and the planner. `options` is the planner's Options JSON as the
 * options panel holds it; `settings` `{training, loss, optimizer, microBatchSize}`. A
 * configuration PopTorch rejects is a plan with `valid: false`; a throw means there was
 * nothing to plan (e.g. training asked of a model without a scalar loss).
 */
function makePlan(traced, options, settings) {
  return pkg.plan(traced, options, settings);
}

// ---------------------------------------------------------------- analysis of user code

/** demoModel("revgnn"), with an error about a hyper-parameter marked at the line that sets it. */
function revgnnTrace(code, config) {
  try {
    return pkg.demoModel("revgnn", config);
  } catch (e) {
    const message = e?.message ?? String(e);
    const key = ["layers", "hidden", "groups", "dropout", "seed"].find((k) => new RegExp(`\\b${k}\\b`, "i").test(message) && lineOfKey(code, k));
    throw makeError(ErrorKind.MODEL, `RevGNN: ${message}`, key ? { line: lineOfKey(code, key) } : {});
  }
}

/** The line of `key:` in the user's code (1-based), or undefined. */
function lineOfKey(code, key) {
  const i = code.split("\n").findIndex((l) => new RegExp(`\\b${key}\\s*:`).test(l));
  return i >= 0 ? i + 1 : undefined;
}

/** Which output of `graph` is the loss: `loss` if given, else its one float scalar output. */
function lossOutput(graph, loss, code) {
  const scalars = graph.outputs
    .map((v, i) => ({ i, ty: graph.values[v] }))
    .filter(({ ty }) => ty && ty.shape.length === 0 && (ty.dtype === "float32" || ty.dtype === "float16"))
    .map(({ i }) => i);
  const line = lineOfKey(code, "training");
  if (loss !== null) {
    if (loss >= graph.outputs.length) {
      throw makeError(ErrorKind.MODEL, `\`loss: ${loss}\` names output ${loss}, but forward returns ${graph.outputs.length} output${graph.outputs.length === 1 ? "" : "s"}`, { line: lineOfKey(code, "loss") });
    }
    return loss;
  }
  if (scalars.length === 1) return scalars[0];
  if (scalars.length === 0) {
    throw makeError(ErrorKind.MODEL, "training: true, but forward returns no loss: a training model (poptorch.trainingModel) returns its loss, a float scalar, e.g. `return [out, out.crossEntropy(labels)]` or `out.mean()`", { line });
  }
  throw makeError(ErrorKind.MODEL, `forward returns ${scalars.length} scalar outputs (${scalars.join(", ")}): say which one is the loss with \`loss: <index>\` next to \`training: true\``, { line });
}

async function analyse({ code, options, ipus = 1, dataset = "PubMed" }) {
  const t0 = performance.now();
  if (typeof code !== "string") throw makeError(ErrorKind.MODEL, "no code to run");
  const ctx = Object.freeze({ options: structuredClone(options), ipus });
  const { exports, url } = await importModule(code, PACKAGE_URL);
  try {
    const spec = await normalize(exports, ctx).catch((e) => {
      const info = describe(e, url);
      for (const key of ["optimizer", "loss"]) if (info.line === undefined && new RegExp(`\`${key}\``).test(info.message)) info.line = lineOfKey(code, key);
      throw info;
    });
    let traced;
    let title;
    let settings;
    if (spec.kind === "revgnn") {
      checkName(dataset);
      const d = DATASETS[dataset];
      const c = spec.config;
      traced = revgnnTrace(code, {
        layers: c.layers ?? 7,
        hidden: c.hidden ?? 160,
        groups: c.groups ?? 2,
        dropout: c.dropout ?? 0.5,
        inChannels: d.features,
        outChannels: d.classes,
        nodes: d.nodes,
        edges: d.edges + d.nodes,
        featureNnz: d.featureNnz,
        training: false,
        seed: c.seed ?? 0,
      });
      title = `RevGNN on ${dataset}: ${c.layers ?? 7} layers × ${c.hidden ?? 160} channels, ${c.groups ?? 2} groups (whole-graph pass)`;
      // The whole-graph pass of the evaluation: every node is one sample.
      settings = { training: false, microBatchSize: d.nodes };
    } else {
      try {
        traced = pkg.trace(spec.model, spec.inputs, { training: spec.training });
      } catch (e) {
        throw describe(e, url);
      }
      title = `${spec.model.constructor?.name ?? "Model"} on ${spec.inputs.map((i) => `${i.name ?? "input"} [${(i.shape ?? []).join("×")}]`).join(", ")}`;
      settings = spec.training ? { training: true, loss: lossOutput(traced.graph, spec.loss, code), optimizer: spec.optimizer } : { training: false };
    }
    // The tracer records the blob's id as the file: show the editor's name.
    for (const n of traced.graph.nodes) {
      if (n.meta?.source) n.meta.source = userSources(n.meta.source, url);
    }
    const text = userSources(traced.text, url);
    let plan;
    try {
      plan = makePlan(traced, options, settings);
    } catch (e) {
      throw makeError(ErrorKind.MODEL, `The planner could not plan this model: ${userSources(e?.message ?? String(e), url)}`, { line: settings.training ? lineOfKey(code, "training") : undefined });
    }
    const checks = [];
    if (plan.ipusReserved > ipus) {
      checks.push({
        level: "error",
        code: "not_enough_ipus",
        message: `The plan reserves ${plan.ipusReserved} IPUs (${plan.ipusPerReplica} per replica × ${plan.replicas} replica${plan.replicas === 1 ? "" : "s"}), but the system has ${ipus}.`,
        fix: `Set "IPUs in the system" to ${plan.ipusReserved} or more, or use fewer IPUs or replicas.`,
        node: null,
      });
    }
    return {
      kind: spec.kind,
      title,
      text,
      graph: traced.graph,
      parameters: traced.parameters ?? [],
      revgnn: spec.kind === "revgnn" ? spec.config : null,
      dataset: spec.kind === "revgnn" ? dataset : null,
      training: settings.training,
      optimizer: settings.optimizer ?? null,
      plan,
      checks,
      file: USER_FILE,
      ms: performance.now() - t0,
      // Each edit's module stays loaded (with the parameters its model holds in wasm
      // memory, which never shrinks); the page replaces the worker when this grows large.
      wasmBytes: (await ready).memory?.buffer.byteLength ?? 0,
    };
  } finally {
    URL.revokeObjectURL(url);
  }
}

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
  try {
    const p = makePlan(trainer, {}, {});
    const m = p.memory.ipus[0];
    return { livePeakBytes: m.livePeakBytes, peakBytes: m.peakBytes, capacityBytes: p.memory.capacityBytes, fits: p.fits, generation: p.generation.chip, steps: p.numNodes };
  } catch (e) {
    return { error: e?.message ?? String(e) };
  }
}

async function train({ dataset, config = {}, epochs }) {
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
    const files = await fetchPlanetoid(dataset, DATA_URL);
    const cfg = { ...config, epochs };
    delete cfg.dataset;
    const t0 = performance.now();
    let trainer;
    try {
      trainer = new pkg.RevGnnTrainer(dataset, files, cfg);
    } catch (e) {
      throw makeError(ErrorKind.MODEL, `The trainer refused the configuration: ${e.message}`);
    }
    run.trainer = trainer;
    run.dataset = dataset;
    const buildSeconds = (performance.now() - t0) / 1000;
    const prediction = predict(trainer);
    const evalEvery = epochs <= 50 ? 1 : Math.ceil(epochs / 50);
    let steps = 0;
    let acc = null;
    let peakBytes = 0;
    let saved = 0;
    const t1 = performance.now();
    run.state = TrainingPhase.RUNNING;
    send(TrainingPhase.RUNNING, { epoch: 0, steps: 0, params: trainer.numParams, buildSeconds, prediction });
    for (let e = 1; e <= epochs; e++) {
      // Yield between epochs, so pause and stop requests are read.
      await wait(0);
      while (run.resume && !run.stop) {
        settleParked();
        await run.resume.promise;
      }
      if (run.stop) break;
      const s = performance.now();
      const r = trainer.trainEpoch();
      const epochSeconds = (performance.now() - s) / 1000;
      steps += r.steps;
      peakBytes = Math.max(peakBytes, r.peakBytes);
      saved = Math.max(saved, r.savedForBackward);
      let evalSeconds = 0;
      if (e === 1 || e % evalEvery === 0 || e === epochs) {
        await wait(0);
        const s2 = performance.now();
        acc = trainer.evaluate();
        evalSeconds = (performance.now() - s2) / 1000;
      }
      run.epoch = e;
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
      });
    }
    run.state = run.stop ? TrainingPhase.STOPPED : TrainingPhase.DONE;
    run.resume = null;
    settleParked();
    if (run.stop && steps > 0) acc = trainer.evaluate(); // the accuracy where it stopped
    send(run.state, { epoch: null, acc, peakBytes, savedForBackward: saved, elapsedSeconds: (performance.now() - t1) / 1000 });
    return { state: run.state, acc };
  } catch (e) {
    run.state = TrainingPhase.ERROR;
    run.resume = null;
    settleParked();
    const info = e && typeof e === "object" && "kind" in e && !(e instanceof Error) ? e : makeError(ErrorKind.MODEL, e?.message ?? String(e));
    send(TrainingPhase.ERROR, { message: info.message, kind: info.kind });
    throw info;
  }
}

/** Pauses between epochs; answers once the running epoch has finished and been reported. */
async function pause() {
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

function resume() {
  const r = run.resume;
  run.resume = null;
  r?.resolve();
  return { paused: false };
}

function stop() {
  run.stop = true;
  resume();
  return { stopping: true };
}

function weights() {
  if (!run.trainer) throw makeError(ErrorKind.MODEL, "No trained model yet: train first");
  const bytes = run.trainer.safetensors();
  return {
    bytes,
    names: run.trainer.pygParameterNames(),
    filename: `revgnn-${run.dataset.toLowerCase()}.safetensors`,
  };
}

// ---------------------------------------------------------------- dispatch

const HANDLERS = {
  [Request.HELLO]: async () => ({ version: pkg.version(), simd: (await ready).simd }),
  [Request.ANALYSE]: analyse,
  [Request.TRAIN]: train,
  [Request.PAUSE]: pause,
  [Request.RESUME]: resume,
  [Request.STOP]: stop,
  [Request.WEIGHTS]: weights,
};

const ready = loadEngine();
ready.then(
  ({ simd }) => self.postMessage(event(Event.READY, { version: pkg.version(), simd })),
  (err) => self.postMessage(event(Event.FAILED, { message: `loading the wasm failed: ${err?.message ?? err}` })),
);

self.onmessage = async ({ data }) => {
  const { seq, type, args } = data ?? {};
  try {
    await ready;
    const fn = Object.hasOwn(HANDLERS, type) ? HANDLERS[type] : null;
    if (!fn) throw makeError(ErrorKind.ENGINE, `unknown request "${type}"`);
    const result = await fn(args ?? {});
    const transfer = result?.bytes instanceof Uint8Array ? [result.bytes.buffer] : [];
    self.postMessage(...reply(seq, result, transfer));
  } catch (err) {
    const info = err && typeof err === "object" && "kind" in err && !(err instanceof Error) ? err : describe(err, null);
    self.postMessage(failure(seq, info));
  }
};
