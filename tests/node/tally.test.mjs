// Tests for scripts/tally.mjs, which sums the counts of every test layer for `make test`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { tally, countCargo, countNodeTap } from "../../scripts/tally.mjs";
import { REPO } from "./helpers.mjs";

const CARGO_OUT = `
running 3 tests
test a ... ok
test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/x.rs
test result: \x1b[32mok\x1b[0m. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out
test result: FAILED. 4 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s
`;

const TAP_OUT = `TAP version 13
# Subtest: a
ok 1 - a
# pass 99
# tests 7
# suites 1
# pass 5
# fail 1
# cancelled 1
# skipped 2
# todo 0
# duration_ms 12.5
`;

test("sums cargo and wasm-bindgen-test-runner result lines", () => {
  assert.deepEqual(countCargo(CARGO_OUT), { passed: 7, failed: 2, skipped: 1, seen: true });
  assert.deepEqual(tally("cargo", CARGO_OUT, 101), { passed: 7, failed: 2, skipped: 1, seen: true });
});

test("reads the closing summary of node --test TAP, cancelled counting as failed", () => {
  assert.deepEqual(countNodeTap(TAP_OUT), { passed: 5, failed: 2, skipped: 2, seen: true });
});

test("a crash before any count is one failure, never zero", () => {
  const compileError = "error[E0425]: cannot find value `x`\nerror: could not compile `ipu-playground`\n";
  assert.deepEqual(
    [tally("cargo", compileError, 101).passed, tally("cargo", compileError, 101).failed],
    [0, 1],
  );
  assert.equal(tally("node", "", 1).failed, 1);
  assert.equal(tally("node", "", 0).failed, 1, "no counts at all is a failure even with exit 0");
  // Counts that say all passed, but the runner exited non-zero.
  assert.equal(tally("cargo", "test result: ok. 3 passed; 0 failed;", 1).failed, 1);
});

test("checks and builds", () => {
  assert.deepEqual([tally("check", "", 0).passed, tally("check", "", 0).failed], [1, 0]);
  assert.deepEqual([tally("check", "", 1).passed, tally("check", "", 1).failed], [0, 1]);
  assert.deepEqual([tally("build", "", 0).passed, tally("build", "", 0).failed], [0, 0]);
  assert.equal(tally("build", "", 2).failed, 1);
});

test("sum prints one closing line and exits non-zero on any failure", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tally-"));
  try {
    const file = path.join(dir, "t.tsv");
    const run = () => spawnSync(process.execPath, [path.join(REPO, "scripts", "tally.mjs"), "sum", file], { encoding: "utf8" });
    fs.writeFileSync(file, "cargo test\t10\t0\t1\t\nfmt\t1\t0\t0\t\nbuild\t0\t0\t0\tbuilt\n");
    let r = run();
    assert.equal(r.status, 0);
    assert.equal(r.stdout.trimEnd().split("\n").at(-1), "11 passed, 0 failed, 1 skipped");
    fs.appendFileSync(file, "clippy\t0\t1\t0\texit code 101\n");
    r = run();
    assert.equal(r.status, 1);
    assert.equal(r.stdout.trimEnd().split("\n").at(-1), "11 passed, 1 failed, 1 skipped");
    fs.writeFileSync(file, "");
    r = run();
    assert.equal(r.status, 1, "nothing ran at all");
    assert.equal(r.stdout.trimEnd().split("\n").at(-1), "0 passed, 1 failed");
    fs.writeFileSync(file, "install\t0\t0\t0\tbuilt\nbuild\t0\t0\t0\tbuilt\n");
    r = run();
    assert.equal(r.status, 1, "only builds, no test");
    assert.equal(r.stdout.trimEnd().split("\n").at(-1), "0 passed, 1 failed");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
