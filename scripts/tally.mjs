#!/usr/bin/env node
// Test tallies for scripts/test.sh.
//
//   node scripts/tally.mjs count KIND OUTPUT_FILE EXIT_CODE NAME >> TALLY_FILE
//       Reads one step's output, prints one tab-separated line:
//       NAME  PASSED  FAILED  SKIPPED  NOTE
//       KIND: cargo  (cargo test / wasm-bindgen-test-runner "test result:" lines)
//             node   (node --test TAP summary: "# pass N", "# fail N", "# cancelled N")
//             check  (a single check such as clippy or fmt: exit 0 = 1 passed, else 1 failed)
//             build  (a build step: counts only when it fails)
//       A step that exits non-zero without a counted failure, or that prints no counts at
//       all, counts as one failure: a crash never reads as zero.
//   node scripts/tally.mjs sum TALLY_FILE
//       Prints a per-step table and the closing line "N passed, N failed[, N skipped]";
//       exits 1 if anything failed, or if no test was counted at all (only builds, or nothing).

import fs from "node:fs";

function readOr(file, fallback = "") {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return fallback;
  }
}

// Strips ANSI colour codes, which cargo and wasm-bindgen-test-runner may print.
const plain = (text) => text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");

export function countCargo(text) {
  let passed = 0, failed = 0, skipped = 0, seen = 0;
  const re = /test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed(?:; (\d+) ignored)?/g;
  for (const m of plain(text).matchAll(re)) {
    seen++;
    passed += Number(m[1]);
    failed += Number(m[2]);
    skipped += Number(m[3] ?? 0);
  }
  return { passed, failed, skipped, seen: seen > 0 };
}

export function countNodeTap(text) {
  const t = plain(text);
  // The run's summary comes last; output a test printed itself (TAP "# ..." diagnostics)
  // comes before it, so the last line of each kind wins.
  const grab = (key) => {
    const all = [...t.matchAll(new RegExp(`^# ${key} (\\d+)$`, "gm"))];
    return all.length ? { total: Number(all[all.length - 1][1]), seen: true } : { total: 0, seen: false };
  };
  const pass = grab("pass"), fail = grab("fail"), cancelled = grab("cancelled");
  const skippedN = grab("skipped").total + grab("todo").total;
  return {
    passed: pass.total,
    failed: fail.total + cancelled.total,
    skipped: skippedN,
    seen: pass.seen && fail.seen,
  };
}

export function tally(kind, text, rc) {
  let r;
  if (kind === "cargo") r = countCargo(text);
  else if (kind === "node") r = countNodeTap(text);
  else if (kind === "check") r = rc === 0 ? { passed: 1, failed: 0, skipped: 0, seen: true } : { passed: 0, failed: 1, skipped: 0, seen: true, note: `exit code ${rc}` };
  else if (kind === "build") r = rc === 0 ? { passed: 0, failed: 0, skipped: 0, seen: true, note: "built" } : { passed: 0, failed: 1, skipped: 0, seen: true, note: `build failed, exit code ${rc}` };
  else throw new Error(`unknown kind ${kind}`);
  if (!r.seen) {
    r.failed += 1;
    r.note = `printed no test counts (exit code ${rc}): counted as 1 failure`;
  } else if (rc !== 0 && r.failed === 0) {
    r.failed = 1;
    r.note = `exit code ${rc} with no failing test counted: counted as 1 failure`;
  }
  return r;
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === "count") {
    const [kind, file, rcText, ...nameParts] = rest;
    const rc = Number(rcText);
    const r = tally(kind, readOr(file), Number.isInteger(rc) ? rc : 1);
    const name = nameParts.join(" ").replace(/\t/g, " ");
    process.stdout.write([name, r.passed, r.failed, r.skipped, r.note ?? ""].join("\t") + "\n");
    return 0;
  }
  if (cmd === "sum") {
    const lines = readOr(rest[0]).split("\n").filter(Boolean);
    let passed = 0, failed = 0, skipped = 0;
    const width = Math.max(10, ...lines.map((l) => l.split("\t")[0].length));
    console.log("");
    console.log("Summary");
    for (const line of lines) {
      const [name, p, f, s, note] = line.split("\t");
      passed += Number(p);
      failed += Number(f);
      skipped += Number(s);
      const mark = Number(f) > 0 ? "FAIL" : "ok  ";
      const extra = Number(s) > 0 ? `, ${s} skipped` : "";
      const counts = note === "built" ? "built" : `${p} passed, ${f} failed${extra}${note ? `  (${note})` : ""}`;
      console.log(`  ${mark} ${name.padEnd(width)}  ${counts}`);
    }
    if (passed + failed === 0) {
      // Nothing ran at all, or only builds: a run that tested nothing is not a pass.
      failed += 1;
      console.log("  FAIL no test was run or counted");
    }
    console.log("");
    console.log(`${passed} passed, ${failed} failed` + (skipped > 0 ? `, ${skipped} skipped` : ""));
    return failed > 0 ? 1 : 0;
  }
  console.error("usage: tally.mjs count KIND FILE RC NAME | tally.mjs sum TALLY_FILE");
  return 2;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(main(process.argv.slice(2)));
