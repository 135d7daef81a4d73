// The npm package, as a user gets it: built by `scripts/build-wasm.sh nodejs` into pkg-node/,
// installed into tests/consumer/ (packed, as from a registry: `npm install --install-links`)
// and imported by name there.
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { REPO } from "./helpers.mjs";

const PKG = path.join(REPO, "pkg-node");
const CONSUMER = path.join(REPO, "tests", "consumer");
const INSTALLED = path.join(CONSUMER, "node_modules", "ipu-playground");
const CRATE_VERSION = fs.readFileSync(path.join(REPO, "Cargo.toml"), "utf8").match(/^version\s*=\s*"([^"]+)"/m)[1];

describe("the npm package ipu-playground", () => {
  let api;
  before(async () => {
    assert.ok(fs.existsSync(path.join(PKG, "package.json")), "pkg-node/ is missing: build it with scripts/build-wasm.sh nodejs");
    assert.ok(fs.existsSync(INSTALLED), "not installed in tests/consumer: run npm install --install-links there");
    api = await import(pathToFileURL(path.join(CONSUMER, "index.mjs")).href);
  });

  test("has a sensible package.json", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(PKG, "package.json"), "utf8"));
    assert.equal(pkg.name, "ipu-playground");
    assert.equal(pkg.version, CRATE_VERSION);
    assert.ok(pkg.description?.length > 10, "description");
    assert.ok(pkg.license, "license");
    assert.equal(pkg.main, "ipu_playground.js");
    assert.equal(pkg.types, "ipu_playground.d.ts");
    for (const f of [pkg.main, pkg.types, "ipu_playground_bg.wasm"]) {
      assert.ok(fs.existsSync(path.join(PKG, f)), f);
      assert.ok(pkg.files.includes(f), `files lists ${f}`);
    }
    assert.ok(pkg.engines?.node, "engines.node");
    assert.ok(pkg.keywords?.includes("wasm"), "keywords");
  });

  test("packs the files a user needs and nothing else", () => {
    const [report] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--loglevel=error"], { cwd: PKG, encoding: "utf8" }));
    const files = report.files.map((f) => f.path).sort();
    for (const f of ["package.json", "README.md", "ipu_playground.js", "ipu_playground.d.ts", "ipu_playground_bg.wasm"]) {
      assert.ok(files.includes(f), `${f} in ${files}`);
    }
    assert.deepEqual(files.filter((f) => f.startsWith(".") || f.includes("/")), [], "no stray files");
  });

  test("is installed as a real copy (from the packed files, not a symlink)", () => {
    assert.equal(fs.lstatSync(INSTALLED).isSymbolicLink(), false);
    assert.ok(fs.statSync(path.join(INSTALLED, "ipu_playground_bg.wasm")).size > 1000);
  });

  test("declares its API in TypeScript", () => {
    const dts = fs.readFileSync(path.join(INSTALLED, "ipu_playground.d.ts"), "utf8");
    assert.match(dts, /export function version\(\): string;/);
    assert.match(dts, /export function traceMlp\(/);
    assert.match(dts, /export function defaultModel\(/);
  });

  test("the README and the .d.ts state the limits limits() reports", () => {
    const readme = fs.readFileSync(path.join(REPO, "README.md"), "utf8");
    const dts = fs.readFileSync(path.join(INSTALLED, "ipu_playground.d.ts"), "utf8");
    const flat = (o, prefix = "") =>
      Object.entries(o).flatMap(([k, v]) => (typeof v === "object" ? flat(v, `${prefix}${k}.`) : [[`${prefix}${k}`, v]]));
    const limits = flat(createRequire(path.join(CONSUMER, "package.json"))("ipu-playground").limits());
    assert.ok(limits.length >= 18, JSON.stringify(limits));
    for (const [key, value] of limits) {
      const row = readme.split("\n").find((l) => l.startsWith("|") && l.includes(`\`${key}\``));
      assert.ok(row, `README's limits table has no row for ${key}`);
      assert.match(row, new RegExp(`\\| ${value}\\b`), `README: ${key} = ${value}`);
      assert.ok(dts.includes(`\`${key}\` = ${value}:`), `.d.ts: ${key} = ${value}`);
    }
  });

  test("version() is the crate's version", () => {
    assert.equal(api.version(), CRATE_VERSION);
  });

  test("traceMlp traces an MLP into a printed graph and a JSON graph", () => {
    const model = api.traceMlp([4, 8, 2], 3);
    assert.equal(typeof model.text, "string");
    const lines = model.text.split("\n").filter((l) => l.trim());
    assert.equal(lines.filter((l) => /\blinear\b/.test(l)).length, 2, model.text);
    assert.equal(lines.filter((l) => /\brelu\b/.test(l)).length, 1, model.text);
    for (const name of ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]) {
      assert.ok(model.text.includes(`"${name}"`), `${name} in\n${model.text}`);
    }
    // One line per node, e.g. `  %3 = linear(%0, %1, %2) : f32[3,8]    # layers.0 | nn.rs:95`.
    assert.match(model.text, /^ +%\d+ = linear\(%\d+, %\d+, %\d+\) : f32\[3,8\] +# layers\.0 \| \w+\.rs:\d+$/m, model.text);
    assert.match(model.text, /^ +%\d+ = linear\(%\d+, %\d+, %\d+\) : f32\[3,2\] +# layers\.1 \| \w+\.rs:\d+$/m, model.text);
    assert.ok(Array.isArray(model.graph.nodes), "graph.nodes");
    assert.ok(model.graph.nodes.length >= 3, `only ${model.graph.nodes.length} nodes`);
    // A deeper model has a bigger graph.
    const deeper = api.traceMlp([4, 8, 8, 8, 2], 3);
    assert.ok(deeper.graph.nodes.length > model.graph.nodes.length);
    assert.equal(deeper.text.split("\n").filter((l) => /\blinear\b/.test(l)).length, 4, deeper.text);
  });

  test("defaultModel() is a traced model", () => {
    const model = api.defaultModel();
    assert.match(model.text, /linear/);
    assert.ok(model.graph.nodes.length > 0);
  });

  test("bad input throws an Error naming the cause, and the module keeps working", () => {
    const cases = [
      [[4], 3, /size/i],
      [[], 3, /size/i],
      [[4, 0, 2], 3, /size|zero|0/i],
      [[4, 2], 0, /batch/i],
    ];
    for (const [sizes, batch, cause] of cases) {
      assert.throws(() => api.traceMlp(sizes, batch), (err) => {
        assert.ok(err instanceof Error, `${JSON.stringify(sizes)}/${batch}: threw ${typeof err}: ${err}`);
        assert.match(err.message, cause);
        assert.doesNotMatch(err.message, /unreachable|panicked/);
        return true;
      });
    }
    assert.match(api.traceMlp([2, 2], 1).text, /linear/);
  });

  test("works from CommonJS too", () => {
    const require = createRequire(path.join(CONSUMER, "index.cjs"));
    const cjs = require("./index.cjs");
    assert.equal(cjs.version(), CRATE_VERSION);
    assert.match(cjs.traceMlp([3, 3], 1).text, /linear/);
  });

  test("runs in a user's script", () => {
    const r = spawnSync(process.execPath, ["index.mjs", "5,7,3", "2"], { cwd: CONSUMER, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^ipu-playground ${CRATE_VERSION.replace(/\./g, "\\.")}\n`));
    assert.match(r.stdout, /linear/);
    assert.match(r.stdout, /\n\d+ nodes\n$/);
  });
});
