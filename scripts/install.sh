#!/usr/bin/env bash
# Installs every tool the build and the tests need, skipping each one already present.
# Safe to run again: a warm machine takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=$(sed -n 's/^wasm-bindgen *= *{[^}]*version *= *"=\([0-9.]*\)".*/\1/p; s/^wasm-bindgen *= *"=\([0-9.]*\)".*/\1/p' Cargo.toml | head -n1)
if [ -z "$WASM_BINDGEN_VERSION" ]; then
  echo "install: could not read the pinned wasm-bindgen version (\"=x.y.z\") from Cargo.toml" >&2
  exit 1
fi

# wasm-pack is only installed when missing; any recent version works.
WASM_PACK_VERSION=0.15.1

need_root() { if [ "$(id -u)" != 0 ]; then echo "sudo"; fi; }

command -v node >/dev/null 2>&1 || { echo "install: Node.js (20 or later) and npm are needed; install them first" >&2; exit 1; }
command -v cargo >/dev/null 2>&1 || { echo "install: cargo is needed; install Rust with rustup first" >&2; exit 1; }

# Chromium and its driver (Debian packages) for the wasm tests and the page tests.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "install: chromium + chromium-driver (apt)"
  $(need_root) apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $(need_root) apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# Rust pieces.
# Listed once into a variable: `rustup … | grep -q` under pipefail can fail on SIGPIPE when
# grep stops reading early, which would reinstall what is already there.
components="$(rustup component list --installed 2>/dev/null || true)"
grep -q '^clippy' <<<"$components" || rustup component add clippy
grep -q '^rustfmt' <<<"$components" || rustup component add rustfmt
targets="$(rustup target list --installed 2>/dev/null || true)"
grep -qx wasm32-unknown-unknown <<<"$targets" || rustup target add wasm32-unknown-unknown

if ! command -v wasm-bindgen >/dev/null 2>&1 || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  echo "install: wasm-bindgen-cli $WASM_BINDGEN_VERSION (cargo)"
  # Not --locked: the CLI's lock file names a yanked crate.
  cargo install -q wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi
if ! command -v wasm-pack >/dev/null 2>&1; then
  echo "install: wasm-pack (cargo)"
  cargo install -q wasm-pack --version "$WASM_PACK_VERSION" --locked
fi

# npm packages for the Node and browser tests (playwright-core drives Debian's chromium; it never downloads a browser).
# Reinstalled when the lock file is newer than what npm last installed.
if [ ! -f tests/node_modules/.package-lock.json ] || [ tests/package-lock.json -nt tests/node_modules/.package-lock.json ]; then
  echo "install: npm packages for tests/"
  (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
# Build-time npm packages of the page (esbuild, CodeMirror, uPlot, acorn; web/build.mjs bundles them).
if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  echo "install: npm packages for web/"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "install: ok"
