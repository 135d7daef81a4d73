#!/usr/bin/env node
// After wasm-pack: checks the generated package.json and fills in what wasm-pack leaves out.
//
//   node scripts/fix-pkg.mjs OUT_DIR web|nodejs
//
// Fails loudly if an entry point it names is missing; adds every generated file to
// `files` (wasm-pack has missed snippets/ in the past), `engines` (wasm SIMD needs
// Node 16.4+; we test on 20) and `keywords`.
import fs from "node:fs";
import path from "node:path";

const [outDir, target] = process.argv.slice(2);
if (!outDir || !["web", "nodejs"].includes(target)) {
  console.error("usage: fix-pkg.mjs OUT_DIR web|nodejs");
  process.exit(2);
}
const file = path.join(outDir, "package.json");
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
const problems = [];

if (pkg.name !== "ipu-playground") problems.push(`name is "${pkg.name}", expected "ipu-playground"`);
if (!/^\d+\.\d+\.\d+/.test(pkg.version ?? "")) problems.push(`version "${pkg.version}" is not semver`);
for (const key of ["main", "module", "types"]) {
  if (pkg[key] && !fs.existsSync(path.join(outDir, pkg[key]))) problems.push(`${key} names ${pkg[key]}, which was not generated`);
}
if (!pkg.main && !pkg.module) problems.push("neither main nor module is set");
if (!pkg.types) problems.push("types is not set");

// Every generated file a user needs, top level and snippets/.
const generated = fs
  .readdirSync(outDir)
  .filter((f) => !f.startsWith(".") && f !== "package.json" && !/^readme|^license/i.test(f));
pkg.files = [...new Set([...(pkg.files ?? []), ...generated])].sort();

pkg.keywords = [...new Set([...(pkg.keywords ?? []), "wasm", "webassembly", "ipu", "graphcore", "gnn", "tracer"])];
if (target === "nodejs") pkg.engines = { node: ">=18", ...(pkg.engines ?? {}) };

if (problems.length) {
  console.error(`fix-pkg: ${file}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
// The `nn` namespace PyTorch users expect (`class Net extends nn.Module`): wasm-bindgen
// exports classes only at the top level, so the namespace object is appended here, to the
// JS glue and to its type declarations, naming the same classes.
const NN = ["Module", "Linear", "LayerNorm", "Dropout", "ReLU", "GELU", "Embedding", "Sequential", "ModuleList"];
const entry = path.join(outDir, pkg.main ?? pkg.module);
const dts = path.join(outDir, pkg.types);
const glue = fs.readFileSync(entry, "utf8");
const types = fs.readFileSync(dts, "utf8");
for (const name of NN) {
  if (!new RegExp(`class ${name}\\b`).test(glue)) problems.push(`${entry} defines no class ${name} for nn.${name}`);
}
if (problems.length) {
  console.error(`fix-pkg: ${file}:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
if (!glue.includes("/* nn namespace */")) {
  const members = NN.map((n) => `${n}: ${target === "nodejs" ? `exports.${n}` : n}`).join(", ");
  const line = target === "nodejs" ? `exports.nn = Object.freeze({ ${members} });` : `export const nn = Object.freeze({ ${members} });`;
  fs.writeFileSync(entry, `${glue}\n/* nn namespace */\n${line}\n`);
  const decl = NN.map((n) => `${n}: typeof ${n}`).join("; ");
  fs.writeFileSync(dts, `${types}\n/** PyTorch-style namespace: \`class Net extends nn.Module\`. */\nexport declare const nn: { ${decl} };\n`);
}
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
console.log(`fix-pkg: ${file}: ${pkg.name}@${pkg.version}, ${pkg.main ?? pkg.module}, files: ${pkg.files.join(" ")}`);
