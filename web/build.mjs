#!/usr/bin/env node
// Builds the page's static assets from the npm packages pinned in web/package-lock.json
// (nothing is fetched at run time; run `npm ci` in web/ first, as scripts/install.sh does):
//
//   www/dist/main.js, main.css   the main thread: www/main.js, its views and charts, with
//                                CodeMirror 6 and uPlot, bundled and minified by esbuild
//   www/dist/THIRD-PARTY-LICENSES.txt   the licences of the bundled npm packages
//   www/engine/vendor/acorn.mjs  acorn's ES module build, imported by the engine worker to
//                                check the editor's code (served as is, not bundled: the
//                                worker and the user's code must share one package URL)
//   www/engine/vendor/pyodide/   the pyodide package's runtime (its ES module, the wasm, the
//                                standard library, the lock file), served as is: the worker
//                                loads it on the first Python request (engine/python.js)
//
//   node web/build.mjs [--dev]   (--dev: no minification, inline source maps)
import { build } from "esbuild";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const WEB = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(WEB, "..");
const WWW = path.join(ROOT, "www");
const dev = process.argv.includes("--dev");

const t0 = Date.now();
fs.rmSync(path.join(WWW, "dist"), { recursive: true, force: true });
const result = await build({
  entryPoints: [path.join(WWW, "main.js")],
  outdir: path.join(WWW, "dist"),
  bundle: true,
  format: "esm",
  target: ["chrome111", "firefox115", "safari16.4"],
  minify: !dev,
  sourcemap: dev ? "inline" : false,
  nodePaths: [path.join(WEB, "node_modules")],
  legalComments: "none",
  metafile: true,
  logLevel: "warning",
});
// The licences of every npm package in the bundle, next to it (they ask to travel with copies).
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) packages.add(m[1]);
}
// A package's own dependencies may be inlined in its dist (dagre's carries graphlib): theirs too.
for (const name of packages) {
  const { dependencies = {} } = JSON.parse(fs.readFileSync(path.join(WEB, "node_modules", name, "package.json"), "utf8"));
  for (const dep of Object.keys(dependencies)) if (fs.existsSync(path.join(WEB, "node_modules", dep, "package.json"))) packages.add(dep);
}
const notices = [...packages].sort().map((name) => {
  const dir = path.join(WEB, "node_modules", name);
  const file = fs.readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const { version } = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  return `${name}@${version}\n\n${file ? fs.readFileSync(path.join(dir, file), "utf8").trim() : "(no licence file)"}\n`;
});
fs.writeFileSync(path.join(WWW, "dist", "THIRD-PARTY-LICENSES.txt"), notices.join("\n" + "-".repeat(72) + "\n\n"));
const vendor = path.join(WWW, "engine", "vendor");
fs.mkdirSync(vendor, { recursive: true });
fs.copyFileSync(path.join(WEB, "node_modules", "acorn", "dist", "acorn.mjs"), path.join(vendor, "acorn.mjs"));
fs.copyFileSync(path.join(WEB, "node_modules", "acorn", "LICENSE"), path.join(vendor, "acorn.LICENSE"));
// Pyodide: only what loadPyodide fetches (no wheels: the page's Python is the standard
// library and www/python), and its licence.
const PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "package.json"];
const pyodide = path.join(vendor, "pyodide");
fs.rmSync(pyodide, { recursive: true, force: true });
fs.mkdirSync(pyodide, { recursive: true });
for (const f of PYODIDE_FILES) fs.copyFileSync(path.join(WEB, "node_modules", "pyodide", f), path.join(pyodide, f));
const pyodideLicence = fs.readdirSync(path.join(WEB, "node_modules", "pyodide")).find((f) => /^licen[cs]e/i.test(f));
if (pyodideLicence) fs.copyFileSync(path.join(WEB, "node_modules", "pyodide", pyodideLicence), path.join(pyodide, "LICENSE"));
const sizes = Object.entries(result.metafile.outputs)
  .filter(([f]) => !f.endsWith(".LEGAL.txt"))
  .map(([f, o]) => `${path.relative(ROOT, f)} ${(o.bytes / 1024).toFixed(0)} KiB`);
console.log(`build-page: ${sizes.join(", ")}, www/engine/vendor/acorn.mjs, www/engine/vendor/pyodide/ (${Date.now() - t0} ms)`);
