#!/usr/bin/env bash
# Builds the wasm package with wasm-pack, release mode (wasm-opt stays off: see Cargo.toml).
#
#   scripts/build-wasm.sh web      -> www/pkg/   ES module for the page (loaded by www/worker.js)
#   scripts/build-wasm.sh nodejs   -> pkg-node/  the npm package "ipu-playground" for Node
#
# Both share one cargo build (same profile and target); only the JS glue differs.
# scripts/fix-pkg.mjs then checks the generated package.json and fills in what is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
case "${1:-}" in
  web) out=www/pkg ;;
  nodejs) out=pkg-node ;;
  *)
    echo "usage: scripts/build-wasm.sh web|nodejs" >&2
    exit 2
    ;;
esac
# Start clean: a failed build must not leave an older package behind for the tests to pass on.
rm -rf "$out"
wasm-pack --log-level warn build --release --target "$1" --out-dir "$out" --out-name ipu_playground .
node scripts/fix-pkg.mjs "$out" "$1"
