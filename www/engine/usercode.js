// Runs the editor's code as an ES module inside the worker, and finds where in it an
// error happened.
//
// The convention (README "Writing a model in the editor"): the module imports what it
// needs from "ipu-playground" and `export default`s, or returns from a default-exported
// function `({ options, ipus, half, … }) => …` (sync or async; `options` a `poptorch.Options`
// built from the page's options panel, `ipus` the IPUs in the system, `half` its float16
// switch; analysis.js codeContext says the rest):
//   - { model, inputs }: `model` what `poptorch.trainingModel(net, options, optimizer)` or
//     `poptorch.inferenceModel(net, options)` returned, `inputs` one micro-batch's example
//     inputs [{ name, shape, dtype? }] (as `batch_size` in poptorch.DataLoader): the page
//     plans the wrapped model with `model.plan(...)` on the combined batch its options give;
//   - { model, inputs, training?, optimizer?, loss? } with `model` a plain nn.Module (traced
//     with `inputs` and planned with `plan()`, as `training` says); or
//   - { revgnn: { layers, hidden, … } }: the built-in RevGNN trainer's configuration.
//
// The code is parsed with acorn first, so a syntax error has its exact line and column
// (a dynamic import() of a broken module says neither). `from "ipu-playground"` is then
// rewritten to the served package URL, in place, so line numbers stay the editor's, and
// the module is imported from a blob: URL. The tracer records `<blob id>:<line>` for each
// op; sources() turns that into `model.js:<line>`.
import { parse } from "./vendor/acorn.mjs";
import { ErrorKind, USER_FILE, PYTHON_FILE, makeError } from "./protocol.js";
import { pythonTraceback } from "./python.js";

export const PACKAGE = "ipu-playground";

/** Parses `code`; throws an ErrorKind.SYNTAX error with line/column when it does not parse. */
export function checkSyntax(code) {
  try {
    return parse(code, { ecmaVersion: "latest", sourceType: "module", locations: true });
  } catch (err) {
    if (err instanceof SyntaxError && err.loc) {
      const message = err.message.replace(/\s*\(\d+:\d+\)$/, "");
      throw makeError(ErrorKind.SYNTAX, `Syntax error: ${message}`, { line: err.loc.line, column: err.loc.column + 1 });
    }
    throw err;
  }
}

/** The code with every import of "ipu-playground" pointing at `packageUrl` (same lines). */
export function rewriteImports(code, ast, packageUrl) {
  const edits = [];
  const visit = (node) => {
    if (!node || typeof node.type !== "string") return;
    if ((node.type === "ImportDeclaration" || node.type === "ExportNamedDeclaration" || node.type === "ExportAllDeclaration") && node.source) {
      edits.push(node.source);
    } else if (node.type === "ImportExpression" && node.source?.type === "Literal") {
      edits.push(node.source);
    }
    for (const key of Object.keys(node)) {
      const v = node[key];
      if (Array.isArray(v)) v.forEach(visit);
      else if (v && typeof v === "object" && key !== "loc") visit(v);
    }
  };
  visit(ast);
  let out = code;
  for (const lit of edits.sort((a, b) => b.start - a.start)) {
    if (lit.value !== PACKAGE) {
      throw makeError(ErrorKind.MODEL, `Only "${PACKAGE}" can be imported here, not "${lit.value}"`, {
        line: lit.loc.start.line,
        column: lit.loc.start.column + 1,
      });
    }
    out = out.slice(0, lit.start) + JSON.stringify(packageUrl) + out.slice(lit.end);
  }
  return out;
}

/** Imports `code` as a module; resolves { exports, url } (revoke the url when done). */
export async function importModule(code, packageUrl) {
  const ast = checkSyntax(code);
  const source = rewriteImports(code, ast, packageUrl);
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  try {
    return { exports: await import(url), url };
  } catch (err) {
    URL.revokeObjectURL(url);
    throw describe(err, url);
  }
}

const OPTIMIZERS = ["sgd", "sgdMomentum", "adam", "adamW"];

/**
 * Turns the default export into one of
 *   { kind: "poptorch", model, inputs }   (model: a poptorch.PoplarExecutor),
 *   { kind: "trace", model, inputs, training, optimizer, loss }   (a plain nn.Module), or
 *   { kind: "revgnn", config }.
 * For a plain module `optimizer` (the state the training plan holds) is one of OPTIMIZERS,
 * SGD without momentum by default as in PopTorch; `loss` the index of the forward's output
 * that is the loss (default: its one scalar output). `isExecutor(v)` says whether `v` is a
 * wrapped model (the package's PoplarExecutor). An error about one key of the export carries
 * it as `key` ("inputs", "optimizer", "loss", "training"), for the line that sets it.
 */
export async function normalize(exports, ctx, isExecutor = () => false) {
  if (!("default" in exports)) {
    throw makeError(
      ErrorKind.MODEL,
      "The code must `export default` the model: { model: poptorch.trainingModel(…) or poptorch.inferenceModel(…), inputs }, a function ({ options, ipus }) => returning it, or { revgnn: {…} }",
    );
  }
  let value = exports.default;
  if (typeof value === "function" && !isModule(value)) value = await value(ctx);
  if (value && typeof value === "object" && value.revgnn && typeof value.revgnn === "object") {
    return { kind: "revgnn", config: { ...value.revgnn } };
  }
  const wrapped = value && typeof value === "object" && isExecutor(value.model);
  if (!value || typeof value !== "object" || !(wrapped || isModule(value.model))) {
    throw makeError(
      ErrorKind.MODEL,
      "The default export must give { model, inputs }: `model` a poptorch.trainingModel(…) or poptorch.inferenceModel(…), or an nn.Module (an object with a forward method)",
    );
  }
  if (!Array.isArray(value.inputs) || (!wrapped && value.inputs.length === 0)) {
    throw makeError(ErrorKind.MODEL, "The default export must give `inputs`: one micro-batch's example inputs, e.g. [{ name: \"x\", shape: [8, 16] }]", { key: "inputs" });
  }
  value.inputs.forEach(checkInput);
  if (wrapped) {
    for (const key of ["training", "optimizer", "loss"]) {
      if (key in value) {
        throw makeError(
          ErrorKind.MODEL,
          `\`${key}\` is for a plain nn.Module: a wrapped model has its own (poptorch.trainingModel(net, options, optimizer) trains, its forward returns the loss; poptorch.inferenceModel does not)`,
          { key },
        );
      }
    }
    return { kind: "poptorch", model: value.model, inputs: value.inputs, train: checkTrain(value.train) };
  }
  const optimizer = value.optimizer ?? "sgd";
  if (!OPTIMIZERS.includes(optimizer)) {
    throw makeError(ErrorKind.MODEL, `\`optimizer\` must be one of ${OPTIMIZERS.map((o) => `"${o}"`).join(", ")}, got ${safeString(optimizer)}`, { key: "optimizer" });
  }
  if (value.loss !== undefined && !(Number.isInteger(value.loss) && value.loss >= 0)) {
    throw makeError(ErrorKind.MODEL, `\`loss\` must be the index of the forward's output that is the loss (0, 1, …), got ${safeString(value.loss)}`, { key: "loss" });
  }
  return { kind: "trace", model: value.model, inputs: value.inputs, training: Boolean(value.training), optimizer, loss: value.loss ?? null };
}

/**
 * What the Training view runs, if the code says: { parts, step(part), evaluate() }. `parts` is
 * iterable (each `for … of` over it one epoch: a loader), `step(part)` trains on one and
 * returns its loss (a number; null or undefined to skip the part), `evaluate()` returns
 * { train, val, test } accuracies.
 */
function checkTrain(train) {
  if (train === undefined || train === null) return null;
  const ok = typeof train === "object" && train.parts && typeof train.parts[Symbol.iterator] === "function" && typeof train.step === "function" && typeof train.evaluate === "function";
  if (!ok) {
    throw makeError(ErrorKind.MODEL, "`train` must be { parts, step(part), evaluate() }: `parts` iterable (one epoch of parts, e.g. a loaders.RandomNodeLoader), `step` returning the part's loss, `evaluate` returning { train, val, test }");
  }
  return train;
}

const DTYPES = ["float32", "float16", "int32", "bool"];

/**
 * An example input: { name?, shape: [whole numbers], dtype? } (one micro-batch; its values are
 * made up), { name?, shape: [rows, cols], layout: "csr", nnz } (a sparse matrix), or a value
 * with its data (a host tensor { shape, data }, a CSR matrix { layout: "csr", shape, indptr,
 * indices, values }), passed to the model as it is.
 */
function checkInput(spec, i) {
  const bad = (what) => {
    throw makeError(ErrorKind.MODEL, `\`inputs[${i}]\` ${what}, got ${describeInput(spec)}`, { key: "inputs" });
  };
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) bad("must be { name, shape, dtype? } or a host tensor");
  if (!Array.isArray(spec.shape) || !spec.shape.every((d) => Number.isInteger(d) && d >= 0)) bad("must have a `shape` of whole numbers");
  if (spec.name !== undefined && typeof spec.name !== "string") bad("has a `name` that is not a string");
  if (spec.layout !== undefined && spec.layout !== "csr") bad('has a `layout` that is not "csr"');
  if (spec.dtype !== undefined && !DTYPES.includes(spec.dtype)) bad(`has a \`dtype\` that is not one of ${DTYPES.map((d) => `"${d}"`).join(", ")}`);
}

/** An input for a message: its keys and shape, not its (possibly large) values. */
function describeInput(spec) {
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) return safeString(spec);
  return `{ ${Object.keys(spec).map((k) => (k === "shape" || k === "name" || k === "dtype" || k === "layout" ? `${k}: ${safeString(spec[k])}` : k)).join(", ")} }`;
}

function isModule(v) {
  return v !== null && typeof v === "object" && typeof v.forward === "function";
}

/** The editor line of the first stack frame in the user's module, if any. */
export function locate(err, url) {
  const stack = typeof err?.stack === "string" ? err.stack : "";
  if (!url) return {};
  for (const line of stack.split("\n")) {
    const at = line.indexOf(url);
    if (at < 0) continue;
    const m = /^:(\d+):(\d+)/.exec(line.slice(at + url.length));
    if (m) return { line: Number(m[1]), column: Number(m[2]) };
  }
  return {};
}

/** `err.source` ("<blob id>:12", the package's field) as an editor line, when it is the user's module (or Python file). */
function sourceLine(err, url) {
  const source = err instanceof Error && typeof err.source === "string" ? err.source : "";
  const cut = source.lastIndexOf(":");
  const line = Number(source.slice(cut + 1));
  const file = source.slice(0, cut);
  return cut > 0 && (file === blobId(url) || file === PYTHON_FILE) && Number.isInteger(line) && line > 0 ? { line } : {};
}

/** The blob's id as the tracer records it (the last path segment of the URL). */
export function blobId(url) {
  return url ? url.slice(url.lastIndexOf("/") + 1) : "";
}

/** `<blob id>:12` → `model.js:12`, everywhere in `text`. */
export function userSources(text, url) {
  const id = blobId(url);
  return id ? String(text).split(id).join(USER_FILE) : String(text);
}

/** A thrown value from the user's code or the tracer, as a protocol error with a line. */
export function describe(err, url) {
  if (err && typeof err === "object" && "kind" in err && "message" in err && !(err instanceof Error)) return err;
  const name = err instanceof Error ? err.name : "";
  let message = err instanceof Error ? err.message || name : typeof err === "string" ? err : safeString(err);
  message = userSources(message, url);
  const where = locate(err, url);
  const tb = pythonTraceback(message);
  if (tb) {
    message = tb.message;
    where.line = tb.line;
  }
  // An error about a traced op names the op's call as `err.source` ("<blob id>:12"); use it
  // when the stack has no frame in the user's module.
  if (where.line === undefined) Object.assign(where, sourceLine(err, url));
  const prefix = name && name !== "Error" && name !== "PythonError" && !message.startsWith(name) ? `${name}: ` : "";
  return makeError(ErrorKind.MODEL, prefix + message, { ...where, ...engineFields(err), fatal: err instanceof WebAssembly.RuntimeError });
}

/**
 * What the package's errors say in fields (crate/src/api/args.rs): the stable `code` of a
 * plan's diagnostic, the `option` it is about and its `fix`; the layer that raised it, the
 * package's `err.kind`, as `engineKind` (`kind` is the page's own, protocol.js ErrorKind).
 */
function engineFields(err) {
  const out = {};
  if (!(err instanceof Error)) return out;
  for (const [from, to] of [["code", "code"], ["option", "option"], ["fix", "fix"], ["kind", "engineKind"]]) {
    if (typeof err[from] === "string") out[to] = err[from];
  }
  return out;
}

function safeString(v) {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}
