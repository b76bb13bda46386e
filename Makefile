# hvinstall — the two commands are `make demo` and `make test`.
SHELL := /bin/bash
NODE  ?= node
TSC   := node_modules/.bin/tsc
VITEST := node_modules/.bin/vitest

.PHONY: all deps build generate typecheck test test-unit test-integration demo e2e iso bench mutation clean

all: build

deps:
	@bash .ci/install-deps.sh

# Generated code (precompiled schema validators) comes before tsc; the generators need node_modules.
generate: deps
	@$(NODE) scripts/generate.mjs

# hvpxe's sendfile addon (pxe/zero-copy-send.ts): C against Node's own N-API headers, no node-gyp.
NODE_INCLUDE = $(shell $(NODE) -p "require('path').resolve(process.execPath, '../../include/node')")
ZERO_COPY_ADDON := dist/pxe/native/zero-copy-send.node
$(ZERO_COPY_ADDON): pxe/native/zero-copy-send.c | deps
	@test -f "$(NODE_INCLUDE)/node_api.h" || { echo "build: Node's headers are not in $(NODE_INCLUDE) (install the Node.js that ships them)" >&2; exit 2; }
	@mkdir -p $(dir $@)
	@$(CC) -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -pthread -I"$(NODE_INCLUDE)" -o $@.tmp $< && mv $@.tmp $@

build: generate $(ZERO_COPY_ADDON)
	@$(TSC) -p tsconfig.json
	@$(NODE) scripts/write-share.mjs
	@chmod +x bin/hvinstall bin/hvagent bin/hvpxe
	@$(NODE) dist/agent/payload/build-cli.js

typecheck: generate
	@$(TSC) -p tsconfig.test.json

# The build's tsc and the tests' type-check each keep one CPU busy for half a minute: side by side.
# Unit files are CPU-bound: one worker per CPU, sharing a module cache (vitest.config.ts), the
# files that mock a module apart. Integration files mostly wait on disks, daemons and
# guests: vitest.config.ts runs three at a time.
UNIT_TESTS = VITEST_MAX_FORKS=$$(nproc) $(VITEST) run --project unit --no-isolate && \
	VITEST_MAX_FORKS=$$(nproc) $(VITEST) run --project unit-mocks --passWithNoTests

test:
	@$(MAKE) --no-print-directory -j2 build typecheck
	@$(UNIT_TESTS)
	@if [ "$$(id -u)" = 0 ]; then $(VITEST) run --project integration; \
	 else echo "integration tests need root: run 'sudo make test-integration'" >&2; exit 2; fi

test-unit: build
	@$(UNIT_TESTS)

test-integration: build
	@$(VITEST) run --project integration

demo: build
	@bash examples/demo.sh

e2e: build
	@bash test/e2e/run.sh

# The hybrid BIOS/UEFI live ISO and the PXE artifacts, in out/ (docs/iso.md). ISO_ARGS: more options.
ISO_OUT ?= out
iso: build
	@$(NODE) dist/iso-build/live/cli.js --out $(ISO_OUT) $(ISO_ARGS)

bench: build
	@$(NODE) bench/run.mjs

# Mutation testing (docs/testing.md): long and CPU-bound, so niced and not part of `make test`.
# One scope per run (config, config-spellings, disk, redact-safe-path, pxe, agent); `make mutation SCOPE=disk` runs one.
# Incremental: a re-run tests only the mutants whose code or covering tests changed since the last
# (reports/mutation/<scope>-incremental.json); MUTATION_ARGS=--force re-tests every mutant.
MUTATION_SCOPES ?= $(or $(SCOPE),redact-safe-path disk config config-spellings pxe agent)
mutation: build
	@for s in $(MUTATION_SCOPES); do \
	  echo "== mutation scope $$s"; \
	  HV_MUTATION_SCOPE=$$s HV_FUZZ_SEED=20261201 HV_FUZZ_SCALE=0.05 nice -n 19 node_modules/.bin/stryker run stryker.config.mjs \
	    --incremental --incrementalFile reports/mutation/$$s-incremental.json $(MUTATION_ARGS) || exit $$?; \
	done

clean:
	rm -rf dist build
