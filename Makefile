# hvinstall — the two commands are `make demo` and `make test`.
SHELL := /bin/bash
NODE  ?= node
TSC   := node_modules/.bin/tsc
VITEST := node_modules/.bin/vitest

.PHONY: all deps build generate typecheck test test-unit test-integration demo e2e bench clean

all: build

deps:
	@bash .ci/install-deps.sh

# Generated code (precompiled schema validators) comes before tsc.
generate:
	@$(NODE) scripts/generate.mjs

build: deps generate
	@$(TSC) -p tsconfig.json
	@chmod +x bin/hvinstall bin/hvagent bin/hvpxe
	@$(NODE) dist/agent/payload/build-cli.js

typecheck: generate
	@$(TSC) -p tsconfig.test.json

test: build typecheck
	@$(VITEST) run --project unit
	@if [ "$$(id -u)" = 0 ]; then $(VITEST) run --project integration; \
	 else echo "integration tests need root: run 'sudo make test-integration'" >&2; exit 2; fi

test-unit: build
	@$(VITEST) run --project unit

test-integration: build
	@$(VITEST) run --project integration

demo: build
	@bash examples/demo.sh

e2e: build
	@bash test/e2e/run.sh

bench: build
	@$(NODE) bench/run.mjs

clean:
	rm -rf dist build
