#!/usr/bin/env bash
# Builds the wasm package with wasm-pack, release mode (wasm-opt stays off: see Cargo.toml).
#
#   scripts/build-wasm.sh web      -> www/pkg/   ES module for the page (loaded by www/engine.js)
#   scripts/build-wasm.sh nodejs   -> pkg-node/  the npm package "ipu-playground" for Node
#
# Both share one cargo build (same profile and target); only the JS glue differs.
# `web` also builds the crate a second time with relaxed SIMD (fused multiply-adds; the
# page loads it where the browser validates it, see www/engine.js) into its own target
# dir, and keeps only its wasm, as www/pkg/ipu_playground_relaxed_bg.wasm: the JS glue of
# both builds must be the same, which is checked here. Node 20 lacks relaxed SIMD, so the
# npm package has the plain build only.
# `nodejs` also gets js/replica-core.mjs, js/replicas.mjs and js/replica-worker.mjs (replicas on
# worker_threads); `web` gets js/replica-core.mjs (the page's replica workers).
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
if [ "$1" = web ]; then
  relaxed_target=target/wasm-relaxed
  glue="$(mktemp -d)"
  trap 'rm -rf "$glue"' EXIT
  # RUSTFLAGS replaces .cargo/config.toml's wasm32 flags, so simd128 is named again.
  RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
    cargo build --quiet --lib --release --target wasm32-unknown-unknown --target-dir "$relaxed_target"
  wasm-bindgen --target web --out-dir "$glue" --out-name ipu_playground \
    "$relaxed_target/wasm32-unknown-unknown/release/ipu_playground.wasm"
  if ! cmp -s "$glue/ipu_playground.js" "$out/ipu_playground.js"; then
    echo "build-wasm: the relaxed-SIMD build's JS glue differs from the plain build's" >&2
    diff "$glue/ipu_playground.js" "$out/ipu_playground.js" | head -n 20 >&2
    exit 1
  fi
  cp "$glue/ipu_playground_bg.wasm" "$out/ipu_playground_relaxed_bg.wasm"
fi
if [ "$1" = nodejs ]; then
  # Replicas as parallel workers (worker_threads): the coordinator and the worker entry,
  # imported as ipu-playground/replicas.mjs (js/replicas.mjs says how).
  cp js/replica-core.mjs js/replicas.mjs js/replicas.d.mts js/replica-worker.mjs "$out/"
fi
if [ "$1" = web ]; then
  # The page's replica workers (www/engine/training.js) share the coordinator with Node.
  cp js/replica-core.mjs "$out/"
fi
node scripts/fix-pkg.mjs "$out" "$1"
