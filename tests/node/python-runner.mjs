// The page's Python (www/python through www/engine/python.js) in Node, on the `pyodide` npm
// package and the given package instance: what the Python tests share.
import fs from "node:fs";
import path from "node:path";
import { loadPyodide } from "pyodide";
import { REPO } from "./helpers.mjs";

const { loadPython } = await import(path.join(REPO, "www", "engine", "python.js"));

/** A Pyodide running the shim over `pkg` (`run(code, context, files)`), as the worker loads it. */
export function loadTestPython(pkg) {
  return loadPython({
    loadPyodide,
    indexURL: path.join(REPO, "tests", "node_modules", "pyodide") + path.sep,
    pkg,
    readSource: (f) => fs.readFileSync(path.join(REPO, "www", "python", f), "utf8"),
  });
}
