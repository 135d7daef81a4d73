#!/usr/bin/env bash
# Runs every test layer (`make test` calls it; it runs scripts/install.sh first) and ends with
# one line "N passed, N failed" summed over all of them. Exits non-zero if anything
# failed, including a step that crashed before printing its counts.
#
#   1. native:  cargo test (all targets, then doc tests), clippy (native and wasm32), fmt
#   2. wasm:    each tests/wasm_*.rs in headless Chromium (cargo test with
#               wasm-bindgen-test-runner, as wasm-pack test --headless --chrome runs it);
#               tests/wasm_worker.rs runs inside a dedicated Web Worker
#   3. node:    the npm package (wasm-pack --target nodejs) installed into tests/consumer
#               and imported as a user would; the static server's tests
#   4. browser: the page (its wasm package and its esbuild bundle built once) served by
#               scripts/serve.mjs, driven in Chromium by playwright-core
#
# ONLY=native,wasm,node,e2e runs a subset (for working on one layer).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
LOGS="$TARGET/test-logs"
rm -rf "$LOGS"
mkdir -p "$LOGS"
TALLY="$LOGS/tally.tsv"
: >"$TALLY"
ONLY="${ONLY:-native,wasm,node,e2e}"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
for layer in ${ONLY//,/ }; do
  case "$layer" in
    native | wasm | node | e2e) ;;
    *)
      echo "test.sh: unknown layer \"$layer\" in ONLY=$ONLY (layers: native,wasm,node,e2e)" >&2
      exit 2
      ;;
  esac
done

# Chromium/chromedriver for the wasm tests: Debian's, with the flags this sandbox needs.
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_WEBDRIVER_JSON="${WASM_BINDGEN_TEST_WEBDRIVER_JSON:-$ROOT/scripts/webdriver.json}"
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-180}"
export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export NO_COLOR=1

n=0
# step NAME KIND PARSE_FILE|- COMMAND...   (KIND: cargo | node | check | build, see tally.mjs)
step() {
  local name="$1" kind="$2" parse="$3"
  shift 3
  n=$((n + 1))
  local log
  log="$LOGS/$(printf '%02d' "$n")-$(echo "$name" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//').log"
  [ "$parse" = - ] && parse="$log"
  echo
  echo "==> $name"
  local t0=$SECONDS rc
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  node scripts/tally.mjs count "$kind" "$parse" "$rc" "$name ($((SECONDS - t0))s)" >>"$TALLY" ||
    printf '%s\t0\t1\t0\ttally failed\n' "$name" >>"$TALLY"
  tail -n1 "$TALLY" | awk -F'\t' '$5 == "built" { printf "<== %s: built\n", $1; next }
    { printf "<== %s: %s passed, %s failed%s\n", $1, $2, $3, ($5 != "" ? "  (" $5 ")" : "") }'
  return "$rc"
}

# node --test with a readable report on the console and TAP in a file for the tally.
node_tests() {
  local tap="$1"
  shift
  node --test --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tap" "$@"
}

START=$SECONDS

# The tools first (seconds when all are there). A step of its own, so that even a failed
# install ends in the closing "N passed, N failed" line, counted as a failure.
step "install tools (scripts/install.sh)" build - scripts/install.sh
# The Planetoid raw files: read by tests/planetoid.rs and embedded by tests/wasm_train.rs.
step "stage data (scripts/stage-data.sh)" build - scripts/stage-data.sh

if want native; then
  # --no-fail-fast: every test binary runs and is counted, even after one fails.
  step "cargo test" cargo - cargo test --all-targets --no-fail-fast
  step "cargo test --doc" cargo - cargo test --doc
  step "clippy (native)" check - cargo clippy --all-targets -- -D warnings
  step "clippy (wasm32)" check - cargo clippy --all-targets --target wasm32-unknown-unknown -- -D warnings
  step "cargo fmt --check" check - cargo fmt --check
fi

if want wasm; then
  # What `wasm-pack test --headless --chrome` does, minus its first step: wasm-pack always runs
  # `cargo build --tests` for wasm32 first, which builds every test target (the golden kernel
  # and Planetoid tests, the lib's unit tests), none of which runs in a browser. Here cargo
  # builds only the test it runs, and wasm-bindgen-test-runner (installed with wasm-bindgen-cli,
  # same version as the crate's wasm-bindgen) drives headless Chromium through chromedriver.
  # One run per file, so the summary has a line per file. Dev profile (with debug
  # assertions): a --release test build would share, and rebuild, the release artifacts of
  # the packages below, whose LTO settings differ. Without DWARF debug info, which no
  # browser uses for a stack trace (function names come from the wasm name section, kept
  # either way) and which made the test build several times slower.
  for f in tests/wasm_*.rs; do
    [ -e "$f" ] || continue
    t="$(basename "$f" .rs)"
    step "wasm test $t (headless chromium)" cargo - \
      env CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner WASM_BINDGEN_TEST_ONLY_WEB=1 \
      CARGO_PROFILE_DEV_DEBUG=false \
      cargo test --target wasm32-unknown-unknown --test "$t"
  done
  # The dense kernels again, built with relaxed SIMD as the page's fast build is (its own
  # target dir: RUSTFLAGS changes every artifact).
  step "wasm test wasm_kernels, relaxed SIMD (headless chromium)" cargo - \
    env CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner WASM_BINDGEN_TEST_ONLY_WEB=1 \
    CARGO_PROFILE_DEV_DEBUG=false EXPECT_RELAXED_SIMD=1 RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
    CARGO_TARGET_DIR=target/wasm-relaxed cargo test --target wasm32-unknown-unknown --test wasm_kernels
fi

if want node; then
  step "build npm package (pkg-node)" build - scripts/build-wasm.sh nodejs
  step "install it into tests/consumer" build - \
    bash -c 'cd tests/consumer && rm -rf node_modules && npm install --install-links --no-package-lock --no-audit --no-fund --loglevel=error'
  step "node tests (tests/node)" node "$LOGS/node.tap" node_tests "$LOGS/node.tap" tests/node/*.test.mjs
fi

if want e2e; then
  step "build web package (www/pkg)" build - scripts/build-wasm.sh web
  step "build page bundle (www/dist)" build - node web/build.mjs
  step "page tests in chromium (tests/e2e)" node "$LOGS/e2e.tap" node_tests "$LOGS/e2e.tap" tests/e2e/*.test.mjs
fi

echo
echo "make test took $((SECONDS - START))s; logs in ${LOGS#"$ROOT"/}/"
node scripts/tally.mjs sum "$TALLY"
