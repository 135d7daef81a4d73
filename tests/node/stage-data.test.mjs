// Tests for scripts/stage-data.sh: copy from shared/, download, checksum, and the
// message when the data cannot be had.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { REPO, startServer } from "./helpers.mjs";

const SCRIPT = path.join(REPO, "scripts", "stage-data.sh");
const SHARED_RAW = path.join(REPO, "..", "shared", "data", "planetoid", "raw");
const EXTS = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"];
const CORA = EXTS.map((e) => `ind.cora.${e}`);
const haveShared = CORA.every((f) => fs.existsSync(path.join(SHARED_RAW, f)));

const SUMS = Object.fromEntries(
  fs.readFileSync(path.join(REPO, "scripts", "planetoid.sha256"), "utf8")
    .trim().split("\n").map((l) => l.split(/\s+/)).map(([sum, name]) => [name, sum]),
);
const sha256 = (file) => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");

function stage(env) {
  const r = spawnSync("bash", [SCRIPT], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("stage-data.sh", () => {
  let tmp;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "stage-data-"));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  test("lists a sha256 for all 24 Planetoid files", () => {
    for (const ds of ["cora", "citeseer", "pubmed"]) {
      for (const e of EXTS) assert.match(SUMS[`ind.${ds}.${e}`] ?? "", /^[0-9a-f]{64}$/, `ind.${ds}.${e}`);
    }
  });

  test("copies the files from shared/, checks them, and leaves good copies alone", { skip: !haveShared && "no ../shared/data/planetoid/raw" }, () => {
    const dest = path.join(tmp, "copy");
    const first = stage({ PLANETOID_SRC: SHARED_RAW, PLANETOID_URL: "http://127.0.0.1:9", DATA_DIR: dest, DATASETS: "cora" });
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /0 already there, 8 copied, 0 downloaded/);
    for (const f of CORA) assert.equal(sha256(path.join(dest, f)), SUMS[f], f);
    const again = stage({ PLANETOID_SRC: SHARED_RAW, DATA_DIR: dest, DATASETS: "cora" });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /8 already there, 0 copied, 0 downloaded/);
    // A damaged copy is replaced.
    fs.writeFileSync(path.join(dest, "ind.cora.y"), "damaged");
    const fix = stage({ PLANETOID_SRC: SHARED_RAW, DATA_DIR: dest, DATASETS: "cora" });
    assert.equal(fix.code, 0, fix.stderr);
    assert.match(fix.stdout, /7 already there, 1 copied/);
    assert.equal(sha256(path.join(dest, "ind.cora.y")), SUMS["ind.cora.y"]);
  });

  test("downloads what shared/ lacks", { skip: !haveShared && "no ../shared/data/planetoid/raw" }, async () => {
    // A local server stands in for the download site.
    const server = await startServer({ args: ["--root", SHARED_RAW, "--quiet"] });
    try {
      const dest = path.join(tmp, "download");
      const r = stage({ PLANETOID_SRC: path.join(tmp, "absent"), PLANETOID_URL: server.url, DATA_DIR: dest, DATASETS: "cora" });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /0 copied, 8 downloaded/);
      for (const f of CORA) assert.equal(sha256(path.join(dest, f)), SUMS[f], f);
      assert.deepEqual(fs.readdirSync(dest).filter((f) => f.startsWith(".")), [], "no partial files left");
    } finally {
      await server.stop();
    }
  });

  test("refuses files whose checksum is wrong", () => {
    const src = path.join(tmp, "bad-src");
    fs.mkdirSync(src, { recursive: true });
    for (const f of CORA) fs.writeFileSync(path.join(src, f), "not the real file");
    const dest = path.join(tmp, "bad-dest");
    const r = stage({ PLANETOID_SRC: src, PLANETOID_URL: "http://127.0.0.1:9", DATA_DIR: dest, DATASETS: "cora" });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /ind\.cora\.x from .* has sha256 [0-9a-f]{64}, expected/);
    assert.deepEqual(fs.readdirSync(dest), [], "nothing bad lands in data/");
  });

  test("when neither source works it says how to provide the data and exits non-zero", () => {
    const dest = path.join(tmp, "none");
    const r = stage({ PLANETOID_SRC: path.join(tmp, "absent"), PLANETOID_URL: "http://127.0.0.1:9/planetoid", DATA_DIR: dest });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /24 Planetoid file\(s\) could not be staged/);
    assert.match(r.stderr, /ind\.pubmed\.allx/);
    assert.match(r.stderr, /ind\.<name>\.\{x,tx,allx,y,ty,ally,graph,test\.index\}/);
    assert.ok(r.stderr.includes(`into ${dest}/`), r.stderr);
    assert.match(r.stderr, /PLANETOID_SRC=/);
  });
});
