// The package's TypeScript declarations: a TypeScript consumer (tests/consumer/ts/consumer.ts,
// every namespace and main export) type-checks with tsc --noEmit (typescript pinned in
// tests/package.json; the declarations themselves are checked, skipLibCheck is off), calls the
// types must reject are rejected (ts/bad.ts), and every runtime export is declared.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { REPO } from "./helpers.mjs";

const CONSUMER = path.join(REPO, "tests", "consumer");
const TSC = path.join(REPO, "tests", "node_modules", "typescript", "bin", "tsc");
const DTS = path.join(CONSUMER, "node_modules", "ipu-playground", "ipu_playground.d.ts");

function tsc(project) {
  assert.ok(fs.existsSync(TSC), `typescript is not installed in tests/node_modules: run scripts/install.sh`);
  const r = spawnSync(process.execPath, [TSC, "--noEmit", "--pretty", "false", "-p", project], { cwd: CONSUMER, encoding: "utf8" });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

describe("TypeScript declarations", () => {
  test("a TypeScript consumer of every namespace type-checks against the installed package", () => {
    const { code, out } = tsc("tsconfig.json");
    assert.equal(code, 0, out);
  });

  test("calls of the wrong types are rejected", () => {
    const { code, out } = tsc("tsconfig.bad.json");
    assert.notEqual(code, 0);
    const errors = out.split("\n").filter((l) => l.startsWith("ts/bad.ts("));
    const lines = errors.map((l) => Number(l.match(/^ts\/bad\.ts\((\d+),/)[1]));
    assert.deepEqual(lines, [4, 5, 6, 7, 8], out);
    assert.match(out, /'"everything"' is not assignable to parameter of type 'OutputMode'/);
  });

  test("every runtime export and namespace member is declared", () => {
    const dts = fs.readFileSync(DTS, "utf8");
    const api = createRequire(path.join(CONSUMER, "package.json"))("ipu-playground");
    const declared = (name) => new RegExp(`export (declare )?(function|class|const) ${name}\\b`).test(dts);
    const missing = Object.keys(api).filter((k) => !k.startsWith("__wbg") && !declared(k));
    assert.deepEqual(missing, []);
    for (const ns of ["nn", "poptorch"]) {
      // One line (nn), or up to a line that closes it (poptorch).
      const block = (dts.match(new RegExp(`export declare const ${ns}: \\{([^\\n]*)\\};`)) ??
        dts.match(new RegExp(`export declare const ${ns}: \\{\\n([\\s\\S]*?)\\n\\};`)))[1];
      for (const key of Object.keys(api[ns])) assert.match(block, new RegExp(`\\b${key}:`), `${ns}.${key} is declared`);
    }
    for (const key of Object.keys(api.poptorch.optim)) assert.match(dts, new RegExp(`\\b${key}: typeof Poptorch`), `poptorch.optim.${key}`);
  });
});
