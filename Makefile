# Lakestream developer tasks. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
MOTO_PORT ?= 5055
ARCH ?= arm64
REGION ?= us-east-1
FUNCTIONS := msk-ingest s3-log-ingest maintenance refine
# x86_64 builds with plain cargo; arm64 cross-compiles with zig (from the cargo-lambda wheel) and
# needs the aarch64-unknown-linux-gnu std (`rustup target add aarch64-unknown-linux-gnu`).
ifeq ($(ARCH),x86_64)
LAMBDA_TARGET := --x86-64 --compiler cargo
else
LAMBDA_TARGET := --arm64
endif
SAM := AWS_DEFAULT_REGION=$(REGION) SAM_CLI_TELEMETRY=0 $(VENV)/bin/sam
export CARGO_TERM_COLOR ?= never

# One feature set for clippy, tests and the debug binaries (so delta-rs is compiled once): the
# CLI with `sql` (DataFusion). The Lambda functions are built on their own (`-p`, below) and
# never link DataFusion; `make no-datafusion` checks that.
FEATURES := --features lakestream-cli/sql
FUNCTION_PACKAGES := $(addprefix -p ,$(FUNCTIONS))

TEST_ENV = LAKESTREAM_TEST_S3_ENDPOINT=http://127.0.0.1:$(MOTO_PORT) LAKESTREAM_REQUIRE_S3=1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
	MOTO_PORT=$(MOTO_PORT) LAKESTREAM_BIN=$(CURDIR)/target/debug/lakestream

.PHONY: help demo test check fmt clippy no-datafusion validate build package deploy bench bench-compare bench-refine bench-upsert bench-logs fuzz chaos venv moto-start moto-stop clean

help: ## List targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

demo: ## Run the seed pipeline on a local lake (./lake)
	cargo run --bin lakestream -- demo

$(VENV)/.installed: tests/requirements.txt requirements-deploy.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt -r requirements-deploy.txt
	touch $@

venv: $(VENV)/.installed ## Python tools: moto, deltalake, pyarrow, pytest, cargo-lambda, sam, cfn-lint

moto-start: venv ## Start the S3/SQS emulator on 127.0.0.1:$(MOTO_PORT)
	MOTO_PORT=$(MOTO_PORT) scripts/moto.sh start

moto-stop: ## Stop the emulator started by moto-start
	MOTO_PORT=$(MOTO_PORT) scripts/moto.sh stop

test: moto-start ## All tests: Rust (filesystem + S3 emulator) and the independent-reader suite
	$(TEST_ENV) cargo test --workspace $(FEATURES)
	cargo build --workspace --bins $(FEATURES)
	$(TEST_ENV) $(VENV)/bin/pytest -q tests/e2e
	$(TEST_ENV) $(VENV)/bin/pytest -q tests/chaos
	$(TEST_ENV) $(VENV)/bin/pytest -q tests/security
	$(TEST_ENV) tests/lambda-runtime.sh

check: fmt clippy no-datafusion ## fmt --check, clippy -D warnings, no DataFusion in functions

fmt:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets $(FEATURES) -- -D warnings

no-datafusion: ## Prove the functions do not link DataFusion, as `make build` builds them (and in built bootstraps)
	@if cargo tree $(FUNCTION_PACKAGES) -e normal --prefix none | grep -qi '^datafusion'; then \
	  echo "a function links DataFusion:"; cargo tree $(FUNCTION_PACKAGES) -e normal -i datafusion; exit 1; fi
	@echo "functions ($(FUNCTIONS)), built together: no DataFusion"
	@for f in $(FUNCTIONS); do b=target/lambda/$$f/bootstrap; \
	  if [ -f $$b ]; then if grep -qa 'datafusion' $$b; then echo "$$b contains DataFusion"; exit 1; else echo "$$b: no DataFusion"; fi; fi; \
	done

validate: venv ## cfn-lint, sam validate (with and without --lint), the offline deploy contract and its tests
	$(VENV)/bin/cfn-lint template.yaml
	$(SAM) validate --lint
	$(SAM) validate
	$(VENV)/bin/python scripts/template_contract.py
	$(VENV)/bin/python scripts/template_contract.py --param MskPollerMode=Provisioned --param LogIngestMode=drain
	$(VENV)/bin/pytest -q tests/deploy

build: venv ## cargo lambda release build of every function (ARCH=arm64|x86_64), prints sizes
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cargo lambda build --release $(LAMBDA_TARGET) $(FUNCTION_PACKAGES)
	@$(MAKE) --no-print-directory no-datafusion
	@for f in $(FUNCTIONS); do ls -l target/lambda/$$f/bootstrap | awk -v f=$$f '{printf "%-14s bootstrap %6.1f MB\n", f, $$5/1048576}'; done

package: venv ## Zip each function (target/lambda/<fn>/bootstrap.zip) for any deploy tool
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cargo lambda build --release $(LAMBDA_TARGET) --output-format zip $(FUNCTION_PACKAGES)
	@ls -l target/lambda/*/bootstrap.zip

deploy: venv ## sam build + deploy for ARCH (guided the first time; refuses a samconfig.toml of another ARCH; DEPLOY.md)
	$(VENV)/bin/python scripts/template_contract.py samconfig --arch $(ARCH)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(SAM) build --beta-features --parameter-overrides Architecture=$(ARCH)
	@if [ -f samconfig.toml ]; then $(SAM) deploy; else $(SAM) deploy --guided --parameter-overrides Architecture=$(ARCH); fi

bench: ## Decode+write throughput on 1M generated orders (release build, one core)
	cargo bench -p lakestream-core --bench ingest_throughput --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench ingest_throughput

bench-compare: moto-start ## Every peer side by side in one run, one table (BENCH_SIZE=quick|full, BENCH_REPEAT=3; not in CI)
	cargo bench -p lakestream-core --no-run
	MOTO_PORT=$(MOTO_PORT) $(VENV)/bin/python scripts/bench_compare.py

bench-refine: ## Curated interval join on one day of generated data: once, and after every batch (one core)
	cargo bench -p lakestream-core --bench refine_join --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench refine_join -- 5000 240 once
	taskset -c 0 cargo bench -p lakestream-core --bench refine_join -- 5000 240 incremental

bench-upsert: venv ## Upsert 100k keys into 10M rows (two shapes) vs Python deltalake MERGE, one core (not in CI)
	cargo build --release --bin lakestream
	$(VENV)/bin/python scripts/bench_upsert.py

bench-logs: ## Access-log parse -> Arrow vs Rust regex vs Python re (Athena pattern), one core
	cargo bench -p lakestream-core --bench access_log_parse --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench access_log_parse

chaos: moto-start ## The fault/crash/concurrency suite, longer (CHAOS_SCALE=5) with a random seed
	cargo build --bin lakestream
	$(TEST_ENV) CHAOS_SEED=$${CHAOS_SEED:-$$RANDOM$$RANDOM} CHAOS_SCALE=$${CHAOS_SCALE:-5} $(VENV)/bin/pytest -q tests/chaos

fuzz: ## Fuzz every parser for FUZZ_SECONDS each (default 600; nightly + cargo-fuzz)
	scripts/fuzz.sh

clean:
	cargo clean; rm -rf lake $(VENV)
