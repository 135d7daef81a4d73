# ipu-playground: the two commands a developer needs are `make playground` and `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

.PHONY: help install playground serve web-pkg page node-pkg data test bench check-export clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ printf "  make %-11s %s\n", $$1, $$2 }'

install: ## Install the tools the build and tests need (each step skipped when there)
	@scripts/install.sh

web-pkg: ## Build the wasm package for the page into www/pkg/
	scripts/build-wasm.sh web

page: ## Bundle the page (CodeMirror, uPlot, views) into www/dist/ with esbuild
	node web/build.mjs

node-pkg: ## Build the npm package "ipu-playground" for Node into pkg-node/
	scripts/build-wasm.sh nodejs

data: ## Stage the Planetoid raw files into data/
	scripts/stage-data.sh

playground: install web-pkg page ## Build everything and serve the page on http://127.0.0.1:8080 (PORT=… to change)
	@scripts/stage-data.sh || echo "make playground: serving without the Planetoid data (see the message above)"
	@node scripts/serve.mjs

serve: ## Serve www/ and data/ as they are, without building
	@node scripts/serve.mjs

# scripts/test.sh runs scripts/install.sh itself, as a counted step, so that the closing
# "N passed, N failed" line comes even when installing fails.
test: ## Install what is missing, run every test layer; ends with one "N passed, N failed" line
	@scripts/test.sh

# The benchmark harness plugs in here (scripts/bench.sh or a recipe of its own).
bench: install ## Run the benchmarks
	@if [ -x scripts/bench.sh ]; then scripts/bench.sh; else echo "make bench: no benchmarks yet (scripts/bench.sh)"; exit 2; fi

check-export: install ## Run the PyTorch exports of every preset and 50 random models under real PyTorch (not in make test)
	@scripts/check-export.sh

clean: ## Remove build outputs (keeps data/ and node_modules)
	rm -rf www/pkg www/dist www/engine/vendor pkg-node tests/consumer/node_modules
	cargo clean
