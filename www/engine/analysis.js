// The analysis of the editor's code, in the engine worker (engine/worker.js): the code run
// with a poptorch.Options made from the panel, its model traced and planned, what it printed
// and the options it set itself. Also what the training side shares: the data and package
// URLs, the panel's options, a call's inputs.
import * as pkg from "../pkg/ipu_playground.js";
import { ErrorKind, makeError, USER_FILE, PYTHON_FILE, Language } from "./protocol.js";
import { importModule, normalize, describe, userSources } from "./usercode.js";
import { loadPython } from "./python.js";
import { loadEngine } from "./load.js";
import { DATASETS, checkName, fetchPlanetoid } from "./datasets.js";
import { fieldOfDiagnostic } from "../options.js";

export const PACKAGE_URL = new URL("./package.js", import.meta.url).href;
export const DATA_URL = new URL("../data/", import.meta.url);
const PYODIDE_URL = new URL("./vendor/pyodide/", import.meta.url);
const PYTHON_URL = new URL("../python/", import.meta.url);

let python = null;

/**
 * Pyodide with the shipped Python, loaded on the first Python request (engine/python.js);
 * the worker starts it as such a request arrives, while the package's wasm still loads.
 */
export function pythonEngine() {
  python ??= (async () => {
    const [{ loadPyodide }, pkgForCode] = await Promise.all([import(new URL("pyodide.mjs", PYODIDE_URL).href), import(PACKAGE_URL)]);
    return loadPython({
      loadPyodide,
      indexURL: PYODIDE_URL.href,
      pkg: pkgForCode,
      pkgReady: loadEngine(),
      readSource: async (file) => {
        const res = await fetch(new URL(file, PYTHON_URL));
        if (!res.ok) throw new Error(`fetch python/${file}: HTTP ${res.status}`);
        return res.text();
      },
    });
  })();
  python.catch(() => (python = null));
  return python;
}

/**
 * The editor's code run as its language says: a JavaScript module imported (its exports),
 * or Python run in Pyodide with the page's context `ctx` (its `model`, `inputs`, `train` as a
 * default export's object would give them). Resolves { exports, url, file }: `url` the blob
 * of a JavaScript module (revoke it when done), `file` the name its ops' sources carry.
 */
export async function importCode(code, language, ctx) {
  if (language === Language.PYTHON) {
    // Code that loads a Planetoid dataset gets the Training view's one, fetched while Pyodide
    // loads (else the code would ask for it, and run again once it is here).
    const early = /\bPlanetoid\b/.test(code) ? fetchPlanetoid(ctx.dataset, DATA_URL).catch(() => null) : null;
    let engine;
    try {
      engine = await pythonEngine();
    } catch (e) {
      throw makeError(ErrorKind.ENGINE, `loading Python (Pyodide) failed: ${e?.message ?? e}`);
    }
    const files = await early;
    if (files) engine.provide(ctx.dataset, files);
    const exports = await engine.run(code, ctx, (name) => fetchPlanetoid(name, DATA_URL));
    return { exports, url: null, file: PYTHON_FILE };
  }
  const { exports, url } = await importModule(code, PACKAGE_URL);
  return { exports, url, file: USER_FILE };
}

/**
 * The planner of a plain module's trace, of RevGNN's and of the trainer's step: `plan(model,
 * options, settings)` of the package (crate/src/api/plan.rs). A wrapped model is planned by its
 * own `model.plan(..., { throwOnInvalid: false })` (planWrapped) instead. `options` is a
 * `poptorch.Options` (the panel's, made once by panelOptions) or the planner's Options JSON;
 * `settings` `{training, loss, optimizer, microBatchSize}`. A configuration PopTorch rejects
 * is a plan with `valid: false`; a throw means there was nothing to plan (e.g. training asked of
 * a model without a scalar loss).
 */
export function makePlan(traced, options, settings) {
  return pkg.plan(traced, options, settings);
}

// ---------------------------------------------------------------- analysis of user code

/** demoModel("revgnn"), with an error about a hyper-parameter (its `err.option`, the config key) marked at the line that sets it. */
function revgnnTrace(code, config) {
  try {
    return pkg.demoModel("revgnn", config);
  } catch (e) {
    const line = typeof e?.option === "string" ? lineOfKey(code, e.option) : undefined;
    throw makeError(ErrorKind.MODEL, `RevGNN: ${e?.message ?? String(e)}`, line ? { line } : {});
  }
}

/** The line of `key:` in the user's code (1-based), or undefined. */
function lineOfKey(code, key) {
  // `key:` in a JavaScript object, else `key = …` at the start of a line (Python's module level).
  const lines = code.split("\n");
  let i = lines.findIndex((l) => new RegExp(`\\b${key}\\s*:`).test(l));
  if (i < 0) i = lines.findIndex((l) => new RegExp(`^${key}\\s*=(?!=)`).test(l));
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

// ---------------------------------------------------------------- the options, and code that sets them

/** The panel's Options JSON as a `poptorch.Options` for the user's code, or an OPTION error at its field. */
export function panelOptions(json) {
  try {
    return pkg.poptorch.Options.fromJSON(json);
  } catch (e) {
    // The core's own JSON error already says "Invalid options: …"; a check's refusal does not.
    const message = e?.code === "options_json" ? e.message : `Invalid options: ${e?.message ?? String(e)}`;
    throw makeError(ErrorKind.OPTION, message, { field: fieldOfDiagnostic(e) ?? "options" });
  }
}

/**
 * The panel's fields as values of an Options JSON (to compare what the code planned with what
 * the panel holds), and the call in the code that sets each (to find its line).
 */
const FIELDS = {
  strategy: { get: (o) => JSON.stringify(o.executionStrategy ?? null), setter: /\bsetExecutionStrategy\s*\(/ },
  replicationFactor: { get: (o) => o.replicationFactor, setter: /\.replicationFactor\s*\(/ },
  autoRound: { get: (o) => o.autoRoundNumIPUs, setter: /\.autoRoundNumIPUs\s*\(/ },
  gradientAccumulation: { get: (o) => o.Training?.gradientAccumulation, setter: /\.gradientAccumulation\s*\(/ },
  deviceIterations: { get: (o) => o.deviceIterations, setter: /\.deviceIterations\s*\(/ },
  automaticLossScaling: { get: (o) => o.Training?.automaticLossScaling, setter: /\.setAutomaticLossScaling\s*\(/ },
  ipuGeneration: { get: (o) => o.ipuGeneration, setter: /\.ipuGeneration\s*\(/ },
  "loc-activation": { get: (o) => JSON.stringify(o.TensorLocations?.activation ?? null), setter: /\.setActivationLocation\s*\(/ },
  "loc-weight": { get: (o) => JSON.stringify(o.TensorLocations?.weight ?? null), setter: /\.setWeightLocation\s*\(/ },
  "loc-optimizer": { get: (o) => JSON.stringify(o.TensorLocations?.optimizer ?? null), setter: /\.setOptimizerLocation\s*\(/ },
  "loc-accumulator": { get: (o) => JSON.stringify(o.TensorLocations?.accumulator ?? null), setter: /\.setAccumulatorLocation\s*\(/ },
};

/** The line (1-based) of the first line of `code` matching `re`, or undefined. */
function lineMatching(code, re) {
  const i = code.split("\n").findIndex((l) => re.test(l) && !/^\s*(\/\/|#)/.test(l));
  return i >= 0 ? i + 1 : undefined;
}

/**
 * The options the model is planned with that differ from the panel's: the code set them (it
 * runs after the page built `options` from the panel, or built its own poptorch.Options), so
 * they win. [{ field, value, line }], `value` as the plan's Options JSON has it.
 */
function optionsFromCode(panel, planned, code) {
  const out = [];
  for (const [field, { get, setter }] of Object.entries(FIELDS)) {
    if (get(panel) === get(planned)) continue;
    const v = get(planned);
    out.push({ field, value: typeof v === "string" && v.startsWith("{") ? JSON.parse(v) : v, line: lineMatching(code, setter) });
  }
  return out;
}

/** Values in all the inputs of one call the page makes up with values, at most (zeros; a plan's dense inputs are shape-only). */
const MAX_CALL_VALUES = 64 * 2 ** 20;

const isSparse = (spec) => spec.layout === "csr";
/** An input the code gave with its values (a host tensor or CSR matrix, e.g. a loader's batch): passed as it is. */
const hasValues = (spec) => (isSparse(spec) ? spec.indptr !== undefined : spec.data !== undefined);

/** A CSR matrix of `shape` with `nnz` entries spread over its rows (zeros; a valid pattern). */
function madeUpCsr(name, [rows, cols], nnz) {
  const indptr = new Int32Array(rows + 1);
  const indices = new Int32Array(nnz);
  for (let r = 0; r < rows; r++) {
    indptr[r + 1] = Math.floor(((r + 1) * nnz) / rows);
    for (let k = indptr[r]; k < indptr[r + 1]; k++) indices[k] = k - indptr[r];
  }
  return { name, layout: "csr", shape: [rows, cols], indptr, indices, values: new Float32Array(nnz) };
}

/**
 * The inputs of one call for the example `inputs`: those given with values as they are (the
 * call's, combined batch); for a shape alone, zeros of one micro-batch × `factor` (the wrapped
 * model's `combinedBatchFactor`: what poptorch.DataLoader would combine), or a made-up CSR
 * pattern of `nnz` entries. With
 * `shapeOnly` (a plan, which reads only types), a dense shape stays a shape: `{ name, shape,
 * dtype }` of the combined batch, no values made.
 */
export function callInputs(inputs, factor, code, { shapeOnly = false } = {}) {
  const partsOf = factor > 1 && inputs.some((spec) => isSparse(spec) && hasValues(spec));
  let total = 0;
  const tooBig = (n) => {
    total += n;
    if (total > MAX_CALL_VALUES) {
      throw makeError(
        ErrorKind.MODEL,
        `The example inputs of one call (a micro-batch × ${factor}: device iterations × replicas × gradient accumulation) would hold more than ${MAX_CALL_VALUES} values: use a smaller micro-batch`,
        { line: lineOfKey(code, "inputs") },
      );
    }
  };
  return inputs.map((spec, i) => {
    const name = spec.name ?? `input${i}`;
    // A sparse matrix cannot be cut into micro-batches: with several, the example's values
    // come as parts (the call's input as an array, one per micro-batch: a graph part per
    // replica), every valued input alike.
    if (hasValues(spec)) return partsOf ? Array.from({ length: factor }, () => ({ ...spec, name })) : { ...spec, name };
    if (isSparse(spec)) {
      const [rows, cols] = spec.shape;
      const nnz = spec.nnz ?? 0;
      if (spec.shape.length !== 2 || !Number.isInteger(nnz) || nnz < 0 || nnz > rows * cols) {
        throw makeError(ErrorKind.MODEL, `\`inputs[${i}]\`: a csr input has shape [rows, cols] and 0 ≤ nnz ≤ rows × cols entries`, { line: lineOfKey(code, "inputs") });
      }
      tooBig(rows + 1 + 2 * nnz);
      return madeUpCsr(name, spec.shape, nnz);
    }
    const shape = [...spec.shape];
    if (shape.length && factor > 1) shape[0] *= factor;
    const dtype = spec.dtype ?? "float32";
    if (shapeOnly) return { name, shape, dtype };
    const n = shape.reduce((a, b) => a * b, 1);
    tooBig(n);
    const data = dtype === "int32" ? new Int32Array(n) : dtype === "bool" ? new Uint8Array(n) : new Float32Array(n);
    return { name, shape, dtype, data };
  });
}

/** A plain module's example inputs as `trace()` takes them: shapes, dtypes and names (`input<i>` unless given). */
function traceSpecs(inputs) {
  return inputs.map((t, i) => {
    const name = t.name ?? `input${i}`;
    if (isSparse(t)) return { name, shape: t.shape, layout: "csr", nnz: t.indices?.length ?? t.nnz };
    const dtype = t.dtype ?? (t.data instanceof Int32Array ? "int32" : t.data instanceof Uint8Array ? "bool" : "float32");
    return { name, shape: [...t.shape], dtype };
  });
}

// ---------------------------------------------------------------- the console of the user's code

const MAX_LOG_LINES = 200;
const MAX_LOG_CHARS = 500;

function show(v) {
  if (typeof v === "string") return v;
  const arr = (a) => `[${Array.from(a.slice(0, 16)).join(", ")}${a.length > 16 ? `, … (${a.length})` : ""}]`;
  if (ArrayBuffer.isView(v)) return arr(v);
  if (v instanceof Error) return `${v.name}: ${v.message}`;
  if (v && typeof v === "object") {
    try {
      return JSON.stringify(v, (_, x) => (ArrayBuffer.isView(x) ? arr(x) : typeof x === "bigint" ? String(x) : x));
    } catch {
      return String(v);
    }
  }
  return String(v);
}

/**
 * Runs `fn` recording what the user's code prints meanwhile: resolves { value, lines }
 * (lines: [{ level, text }]); a failure is rethrown with the lines as its `console`.
 */
async function withConsole(fn) {
  const lines = [];
  const saved = {};
  for (const level of ["log", "info", "debug", "warn", "error"]) {
    saved[level] = console[level];
    console[level] = (...args) => {
      if (lines.length < MAX_LOG_LINES) lines.push({ level, text: args.map(show).join(" ").slice(0, MAX_LOG_CHARS) });
    };
  }
  try {
    return { value: await fn(), lines };
  } catch (e) {
    const info = e && typeof e === "object" && "kind" in e && !(e instanceof Error) ? e : describe(e, null);
    info.console = lines;
    throw info;
  } finally {
    Object.assign(console, saved);
  }
}

// ---------------------------------------------------------------- analysis

/**
 * What the user's code gets beside `options` (README "Writing a model in the editor"): the
 * IPUs in the system, the float16 switch, the data folder, and what `extra` adds. `dataset`
 * and `half` are getters that record being read (`read.dataset`, `read.half`).
 */
export function codeContext({ options, ipus, half, dataset, ...extra }) {
  const read = { dataset: false, half: false };
  const getter = (key, value) => ({
    enumerable: true,
    get: () => {
      read[key] = true;
      return value;
    },
  });
  const ctx = Object.freeze(
    Object.defineProperties({ options, ipus, dataUrl: DATA_URL.href, ...extra }, { dataset: getter("dataset", dataset), half: getter("half", Boolean(half)) }),
  );
  return { ctx, read };
}

/** The wrapped model of the last analysis, for the export (`exportPython`); null when that
 * analysis failed or had no `poptorch` wrapper. */
let lastWrapped = null;

/** The weights are exported beside the code up to this many bytes (BERT-Large's are not). */
export const WEIGHTS_EXPORT_LIMIT = 512 * 2 ** 20;

/**
 * The last analysed wrapped model as a Python file (`target` "poptorch" or "pytorch",
 * crate/src/export) and its weights as the safetensors file the code loads beside it.
 */
export function exportPython({ target }) {
  if (!lastWrapped) {
    throw makeError(ErrorKind.MODEL, "Nothing to export: the code's default export has no model wrapped by poptorch.trainingModel or inferenceModel (or its last analysis failed).");
  }
  const { model, name } = lastWrapped;
  const stem = target === "pytorch" ? `${name}_pytorch` : `${name}_poptorch`;
  const code = model.toPython({ target, name });
  const bytes = (model.tracedModel?.parameters ?? []).reduce((n, [, shape]) => n + 4 * shape.reduce((a, b) => a * b, 1), 0);
  const small = bytes <= WEIGHTS_EXPORT_LIMIT;
  return {
    code,
    filename: `${stem}.py`,
    weights: small ? model.safetensors() : null,
    weightsFilename: `${name}.safetensors`,
    note: small ? null : `The weights (${Math.round(bytes / 2 ** 20)} MiB) are not exported: the code starts from a random initialisation without ${name}.safetensors.`,
  };
}

/**
 * Where an analysis's time went: [phase, ms] in order, each phase's milliseconds since the
 * last mark (the status line's title shows them). Two `performance.now()` calls a phase.
 */
function phaseClock() {
  let last = performance.now();
  const phases = [];
  return {
    phases,
    mark(name) {
      const now = performance.now();
      phases.push([name, Math.round(now - last)]);
      last = now;
    },
  };
}

export async function analyse({ code, language = Language.JAVASCRIPT, options, ipus = 1, half = false, dataset = "PubMed" }) {
  const t0 = performance.now();
  const clock = phaseClock();
  lastWrapped = null;
  if (typeof code !== "string") throw makeError(ErrorKind.MODEL, "no code to run");
  const opts = panelOptions(options);
  const panel = opts.toJSON();
  // An analysis that read `dataset` (the Training view's choice) is redone when it changes.
  const { ctx, read } = codeContext({ options: opts, ipus, half, dataset });
  const { value: result, lines } = await withConsole(async () => {
    const { exports, url, file } = await importCode(code, language, ctx);
    clock.mark("import");
    try {
      return await analyseModule(code, exports, url, ctx, panel, dataset, file, clock);
    } catch (e) {
      throw half ? e : withHalfHint(e);
    } finally {
      URL.revokeObjectURL(url);
    }
  });
  result.console = lines;
  if (read.dataset) result.dataset = dataset;
  if (half && !read.half) {
    result.checks.push({
      level: "warning",
      code: "half_unread",
      field: "half",
      message: "The float16 switch is on, but your code does not read `half`: the model is planned in the dtypes it traces. (PopTorch has no float16 option: a model is made float16 with model.half().)",
      fix: "Take `half` in your default export ({ options, half }) and, when it is set, call model.half() and give float16 inputs; or turn the switch off.",
      node: null,
    });
  }
  result.ms = performance.now() - t0;
  result.phases = clock.phases;
  return result;
}

/** PopTorch's refusal of automatic loss scaling on a float32 model (told by its code), with the page's way out. */
function withHalfHint(e) {
  if (e?.code === "automatic_loss_scaling_without_fp16" && typeof e.message === "string") {
    e.message += " Automatic loss scaling needs a float16 model: turn on float16 (model.half()) in the options panel, or turn loss scaling off.";
    e.field = fieldOfDiagnostic(e);
  }
  return e;
}

/** The line of the poptorch wrapper call in the code (where an error of the wrapped model is shown). */
function wrapperLine(code, training) {
  return lineMatching(code, training ? /\btrainingModel\s*\(/ : /\binferenceModel\s*\(/) ?? lineMatching(code, /\b(trainingModel|inferenceModel)\s*\(/);
}

/** A wrapped model's error from the page's own calls: at its line in the code if the stack has one, else where it belongs. */
function wrappedError(e, url, code, training) {
  const info = describe(e, url);
  if (info.line === undefined) {
    // The call's inputs do not fit what was compiled, or do not divide into micro-batches.
    const shapes = info.code === "input_mismatch" || info.code === "batch_dimension";
    info.line = (shapes ? lineOfKey(code, "inputs") : undefined) ?? wrapperLine(code, training);
  }
  return info;
}

/**
 * A model wrapped by poptorch.trainingModel / inferenceModel: the wrapper is the one judge.
 * `model.plan(...call, { throwOnInvalid: false })` on the combined batch is the plan the views
 * draw, the one the wrapper would compile (its trace, the loss PopTorch finds, its optimizer's
 * state per parameter group, its options), with PopTorch's refusals as errors tied to nodes
 * and option fields. What it cannot plan (inputs that do not fit, no loss, …) it throws: an
 * error of the code, at its line.
 */
function planWrapped(spec, code, url, clock) {
  const model = spec.model;
  let training;
  let planned;
  let factor;
  let optimizer;
  try {
    training = model.training;
    planned = model.options;
    factor = model.combinedBatchFactor;
    optimizer = model.optimizerType;
  } catch (e) {
    throw describe(e, url);
  }
  const call = callInputs(spec.inputs, factor, code, { shapeOnly: true });
  let plan;
  let traced;
  try {
    plan = model.plan(...call, { throwOnInvalid: false });
    clock.mark("trace and plan");
    // Without the regions' bodies (no view reads them; the printed text shows them).
    traced = model.getTracedModel({ regions: false });
    clock.mark("traced model");
  } catch (e) {
    throw wrappedError(e, url, code, training);
  }
  const name = model.model?.constructor?.name ?? "Model";
  lastWrapped = { model, name: name.replace(/[^A-Za-z0-9_]/g, "_").toLowerCase() || "model" };
  const shapes = call.map((i) => (Array.isArray(i) ? `${i[0].name} [${i[0].shape.join("×")}] × ${i.length} parts` : `${i.name} [${i.shape.join("×")}]`)).join(", ");
  const title = `poptorch.${training ? "trainingModel" : "inferenceModel"}(${name}${training ? `, ${optimizer}` : ""}) called with ${shapes}${factor > 1 ? ` (${factor} micro-batches)` : ""}`;
  return { traced, title, settings: { training }, plan, planned };
}

/** The module's \`export const revgnn = { layers, hidden, … }\` (the trainer's configuration), or null. */
function trainingConfig(exports) {
  const c = exports.revgnn;
  return c && typeof c === "object" && !Array.isArray(c) ? { ...c } : null;
}

async function analyseModule(code, exports, url, ctx, panel, dataset, file, clock) {
  const spec = await normalize(exports, ctx, (v) => v instanceof pkg.poptorch.PoplarExecutor).catch((e) => {
    const info = describe(e, url);
    // An error about one key of the default export carries it (usercode.js normalize).
    if (info.line === undefined && info.key) info.line = lineOfKey(code, info.key);
    throw info;
  });
  clock.mark("model code");
  let traced;
  let title;
  let settings;
  let plan = null;
  let planned = panel; // the Options JSON the model is planned with (to compare with the panel's)
  const checks = [];
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
    clock.mark("trace");
    title = `RevGNN on ${dataset}: ${c.layers ?? 7} layers × ${c.hidden ?? 160} channels, ${c.groups ?? 2} groups (whole-graph pass)`;
    // The whole-graph pass of the evaluation: every node is one sample.
    settings = { training: false, microBatchSize: d.nodes };
  } else if (spec.kind === "poptorch") {
    ({ traced, title, settings, plan, planned } = planWrapped(spec, code, url, clock));
  } else {
    try {
      traced = pkg.trace(spec.model, traceSpecs(spec.inputs), { training: spec.training });
    } catch (e) {
      throw describe(e, url);
    }
    clock.mark("trace");
    title = `${spec.model.constructor?.name ?? "Model"} on ${spec.inputs.map((i) => `${i.name ?? "input"} [${(i.shape ?? []).join("×")}]`).join(", ")}`;
    settings = spec.training ? { training: true, loss: lossOutput(traced.graph, spec.loss, code), optimizer: spec.optimizer } : { training: false };
    // The code may have set options on `options` itself.
    planned = ctx.options.toJSON();
  }
  // The tracer records the blob's id as the file: show the editor's name. A `call` node's
  // `region` (its forward and inverse subgraphs as JSON) is dropped: no view reads it, the
  // printed text shows it, and at 1,000 reversible layers it is 17 MB of the 20 MB graph the
  // worker would copy to the main thread (a wrapped model's trace comes without it,
  // planWrapped).
  for (const n of traced.graph.nodes) {
    if (n.meta?.source) n.meta.source = userSources(n.meta.source, url);
    if (n.region !== undefined) delete n.region;
  }
  const text = userSources(traced.text, url);
  clock.mark("sources");
  if (!plan) {
    try {
      // The panel's poptorch.Options, as the code left it: parsed once, by panelOptions.
      plan = makePlan(traced, ctx.options, settings);
    } catch (e) {
      throw makeError(ErrorKind.MODEL, `The planner could not plan this model: ${userSources(e?.message ?? String(e), url)}`, { line: settings.training ? lineOfKey(code, "training") : undefined });
    }
  }
  if (spec.kind !== "poptorch") clock.mark("plan");
  for (const list of [plan.errors ?? [], plan.warnings ?? []]) for (const d of list) d.message = userSources(d.message, url);
  if (plan.ipusReserved > ctx.ipus) {
    checks.push({
      level: "error",
      code: "not_enough_ipus",
      field: "ipus",
      message: `The plan reserves ${plan.ipusReserved} IPUs (${plan.ipusPerReplica} per replica × ${plan.replicas} replica${plan.replicas === 1 ? "" : "s"}), but the system has ${ctx.ipus}.`,
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
    // The configuration the Training view trains: the old { revgnn } export, or a named
    // \`export const revgnn = {…}\` next to a model written in the editor.
    revgnn: spec.kind === "revgnn" ? spec.config : trainingConfig(exports),
    dataset: spec.kind === "revgnn" ? dataset : null,
    training: settings.training,
    optimizer: settings.optimizer ?? null,
    plan,
    checks,
    optionsFromCode: spec.kind === "revgnn" ? [] : optionsFromCode(panel, planned, code),
    // The default export says how to train the model (`train`): the Training view runs it.
    trainable: Boolean(spec.train),
    file,
    // A wrapped model can be exported as Python (Request.EXPORT).
    exportable: spec.kind === "poptorch",
  };
}
