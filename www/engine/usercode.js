// Runs the editor's code as an ES module inside the worker, and finds where in it an
// error happened.
//
// The convention (README "Writing a model in the editor"): the module imports what it
// needs from "ipu-playground" and `export default`s either
//   - an object { model, inputs, training?, optimizer?, loss? }: `model` an nn.Module,
//     `inputs` the example inputs [{ name, shape, dtype? }] it is traced with, `training`
//     to plan it as poptorch.trainingModel (its forward returns the loss); or
//   - a function ({ options, ipus }) => that object (sync or async), to build the
//     model from the page's options panel; or
//   - { revgnn: { layers, hidden, … } }: the built-in RevGNN trainer's configuration
//     (until the PopTorch-style API brings nn.SAGEConv and datasets into the editor).
// The default export is the one hook: when `poptorch.trainingModel(...)` arrives, its
// result becomes one more accepted shape here, in normalize().
//
// The code is parsed with acorn first, so a syntax error has its exact line and column
// (a dynamic import() of a broken module says neither). `from "ipu-playground"` is then
// rewritten to the served package URL, in place, so line numbers stay the editor's, and
// the module is imported from a blob: URL. The tracer records `<blob id>:<line>` for each
// op; sources() turns that into `model.js:<line>`.
import { parse } from "./vendor/acorn.mjs";
import { ErrorKind, USER_FILE, makeError } from "./protocol.js";

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
 * Turns the default export into { kind: "trace", model, inputs, training, optimizer, loss } or
 * { kind: "revgnn", config }. `optimizer` (the state the training plan holds) is one of
 * OPTIMIZERS, SGD without momentum by default as in PopTorch; `loss` the index of the
 * forward's output that is the loss (default: its one scalar output).
 */
export async function normalize(exports, ctx) {
  if (!("default" in exports)) {
    throw makeError(ErrorKind.MODEL, "The code must `export default` the model: { model, inputs }, a function returning it, or { revgnn: {…} }");
  }
  let value = exports.default;
  if (typeof value === "function" && !isModule(value)) value = await value(ctx);
  if (value && typeof value === "object" && value.revgnn && typeof value.revgnn === "object") {
    return { kind: "revgnn", config: { ...value.revgnn } };
  }
  if (!value || typeof value !== "object" || !isModule(value.model)) {
    throw makeError(ErrorKind.MODEL, "The default export must give { model, inputs }: `model` an nn.Module (an object with a forward method)");
  }
  if (!Array.isArray(value.inputs) || value.inputs.length === 0) {
    throw makeError(ErrorKind.MODEL, "The default export must give `inputs`: the example inputs, e.g. [{ name: \"x\", shape: [8, 16] }]");
  }
  const optimizer = value.optimizer ?? "sgd";
  if (!OPTIMIZERS.includes(optimizer)) {
    throw makeError(ErrorKind.MODEL, `\`optimizer\` must be one of ${OPTIMIZERS.map((o) => `"${o}"`).join(", ")}, got ${safeString(optimizer)}`);
  }
  if (value.loss !== undefined && !(Number.isInteger(value.loss) && value.loss >= 0)) {
    throw makeError(ErrorKind.MODEL, `\`loss\` must be the index of the forward's output that is the loss (0, 1, …), got ${safeString(value.loss)}`);
  }
  return { kind: "trace", model: value.model, inputs: value.inputs, training: Boolean(value.training), optimizer, loss: value.loss ?? null };
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
  // The tracer names the op's source as "(model.js:12)"; use it when the stack has no frame.
  if (where.line === undefined) {
    const m = new RegExp(`${USER_FILE.replace(".", "\\.")}:(\\d+)`).exec(message);
    if (m) where.line = Number(m[1]);
  }
  const prefix = name && name !== "Error" && !message.startsWith(name) ? `${name}: ` : "";
  return makeError(ErrorKind.MODEL, prefix + message, { ...where, fatal: err instanceof WebAssembly.RuntimeError });
}

function safeString(v) {
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}
