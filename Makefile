# Lakestream developer tasks. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
MOTO_PORT ?= 5055
LAMBDA_PORT ?= 9455
# pytest-xdist workers of `make test-py` (e2e, chaos): the suites wait on the emulator and on
# lakestream processes, so two workers on CI's two cores halve the wall time (every test has its
# own lake). tests/security runs alone: some of its tests check that nothing at all was written
# to the emulator's bucket outside their lake, which another test running beside them would.
PYTEST_WORKERS ?= 2
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
# The packaging check (`make package-check`, in `make test` and CI): the same one `cargo lambda
# build` of the four functions as `make build`, but in the dev profile (no LTO, no optimisation:
# minutes, not the release build's quarter hour; its build scripts and proc macros are shared with
# the test build) for this machine's own triple, into its own directory so a release `make
# package` is never mixed up with it. tests/lambda-runtime.sh runs these bootstraps.
HOST_TRIPLE := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
CHECK_LAMBDA_DIR := target/lambda-check

TEST_ENV = LAKESTREAM_TEST_S3_ENDPOINT=http://127.0.0.1:$(MOTO_PORT) LAKESTREAM_REQUIRE_S3=1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
	MOTO_PORT=$(MOTO_PORT) LAKESTREAM_BIN=$(CURDIR)/target/debug/lakestream

.PHONY: help demo test test-steps lint-build test-rust test-py package-check lambda-check check fmt clippy no-datafusion validate build package deploy bench bench-compare bench-fresh bench-hostile bench-refine bench-upsert bench-gold bench-logs fuzz chaos venv moto-start moto-stop clean

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

# `make test` is these steps in this order; .ci/run runs the same list (`make test-steps`), one
# timed step each, so CI always runs the README's test command and nothing else.
TEST_STEPS := moto-start test-rust test-py package-check lambda-check
test-steps: ## Print the steps `make test` runs (read by .ci/run)
	@echo $(TEST_STEPS)

test: $(TEST_STEPS) ## All tests: Rust, the Python suites (independent reader, chaos, hostile inputs), the packaged functions under a Lambda Runtime API

# clippy -D warnings while building every target the tests need (`cargo clippy` does the same:
# clippy-driver as RUSTC_WORKSPACE_WRAPPER, which lints the workspace crates and compiles them).
# CI runs this in place of `make clippy` with the two variables exported for the whole run, so the
# dependencies are compiled once for the tests instead of a second time in check mode for clippy
# (with DataFusion, the larger half of `make clippy`'s time). Any cargo command run without them
# afterwards recompiles the workspace crates (not the dependencies).
CLIPPY_WRAPPER := RUSTC_WORKSPACE_WRAPPER=$(shell command -v clippy-driver) CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
lint-build: ## clippy -D warnings on every target while building them for the tests (CI's clippy; see .ci/run)
	$(CLIPPY_WRAPPER) cargo test --workspace --all-targets --no-run $(FEATURES)

# Every debug build says `--workspace $(FEATURES)`: `cargo build --bin X` or `-p X` alone resolves
# features for that package only and recompiles delta-rs, the AWS SDK and arrow in another variant.
test-rust: moto-start ## cargo test (filesystem + S3 emulator) and the debug binaries the Python suites run
	$(TEST_ENV) cargo test --workspace $(FEATURES)
	cargo build --workspace --bins $(FEATURES)

test-py: moto-start ## The Python suites against target/debug/lakestream (needs test-rust's build)
	$(TEST_ENV) $(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) tests/e2e
	$(TEST_ENV) $(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) tests/chaos
	$(TEST_ENV) $(VENV)/bin/pytest -q tests/security

package-check: venv ## CI's packaging check: one dev-profile `cargo lambda build` of every function (host triple), no DataFusion in them
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cargo lambda build --compiler cargo --target $(HOST_TRIPLE) --lambda-dir $(CHECK_LAMBDA_DIR) $(FUNCTION_PACKAGES)
	@$(MAKE) --no-print-directory no-datafusion LAMBDA_DIRS=$(CHECK_LAMBDA_DIR)

lambda-check: moto-start package-check ## The packaged bootstraps under a local Lambda Runtime API (tests/lambda-runtime.sh)
	cargo build --workspace --bins $(FEATURES)
	$(TEST_ENV) LAMBDA_PORT=$(LAMBDA_PORT) LAMBDA_DIR=$(CHECK_LAMBDA_DIR) tests/lambda-runtime.sh

check: fmt clippy no-datafusion ## fmt --check, clippy -D warnings, no DataFusion in functions

fmt:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets $(FEATURES) -- -D warnings

LAMBDA_DIRS ?= target/lambda $(CHECK_LAMBDA_DIR)
no-datafusion: ## Prove the functions do not link DataFusion, as `make build` builds them (and in built bootstraps)
	@if cargo tree $(FUNCTION_PACKAGES) -e normal --prefix none | grep -qi '^datafusion'; then \
	  echo "a function links DataFusion:"; cargo tree $(FUNCTION_PACKAGES) -e normal -i datafusion; exit 1; fi
	@echo "functions ($(FUNCTIONS)), built together: no DataFusion"
	@for d in $(LAMBDA_DIRS); do for f in $(FUNCTIONS); do b=$$d/$$f/bootstrap; \
	  if [ -f $$b ]; then if grep -qa 'datafusion' $$b; then echo "$$b contains DataFusion"; exit 1; \
	  else ls -l $$b | awk -v b=$$b '{printf "%-36s %6.1f MB, no DataFusion\n", b, $$5/1048576}'; fi; fi; \
	done; done

validate: venv ## cfn-lint, sam validate (with and without --lint), the offline deploy contract and its tests
	$(VENV)/bin/cfn-lint template.yaml
	$(SAM) validate --lint
	$(SAM) validate
	$(VENV)/bin/python scripts/template_contract.py
	$(VENV)/bin/python scripts/template_contract.py --param MskPollerMode=Provisioned --param LogIngestMode=drain
	$(VENV)/bin/python scripts/template_contract.py --param CdcLandingBucketName=lakestream-landing
	$(VENV)/bin/python scripts/template_contract.py --param CdcLandingBucketName=lakestream-landing --param CdcLandingPrefixes=dms/erp/,files/crm/ --param LakeKmsKeyArn=arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000 --param CdcLandingKmsKeyArn=arn:aws:kms:us-east-1:123456789012:key/11111111-1111-1111-1111-111111111111
	$(VENV)/bin/pytest -q tests/deploy

build: venv ## cargo lambda release build of every function (ARCH=arm64|x86_64), prints sizes
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cargo lambda build --release $(LAMBDA_TARGET) $(FUNCTION_PACKAGES)
	@$(MAKE) --no-print-directory no-datafusion
	@for f in $(FUNCTIONS); do ls -l target/lambda/$$f/bootstrap | awk -v f=$$f '{printf "%-14s bootstrap %6.1f MB\n", f, $$5/1048576}'; done

package: venv ## Zip each function (target/lambda/<fn>/bootstrap.zip) for any deploy tool; every zip must be <= 12 MB
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cargo lambda build --release $(LAMBDA_TARGET) --output-format zip $(FUNCTION_PACKAGES)
	@for f in $(FUNCTIONS); do z=target/lambda/$$f/bootstrap.zip; s=$$(stat -c %s $$z); \
	  awk -v f=$$f -v s=$$s 'BEGIN {printf "%-14s bootstrap.zip %5.1f MB\n", f, s/1048576}'; \
	  [ $$s -le 12582912 ] || { echo "$$z is over 12 MB"; exit 1; }; done

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

bench-fresh: moto-start ## End-to-end freshness (record -> readable, per layer) and monthly cost, N=1 and 70 tables, the real functions (BENCH_SIZE=quick|full; not in CI)
	MOTO_PORT=$(MOTO_PORT) $(VENV)/bin/python scripts/bench_fresh.py

bench-hostile: venv ## Peak memory of the CLI under issue 38's hostile CDC inputs (Parquet bombs, 80,000-column records; not in CI)
	cargo build -q -p lakestream-cli $(FEATURES)
	$(VENV)/bin/python scripts/bench_hostile.py

bench-memory: venv ## Peak RSS of the largest refine runs (CDC apply of 1.5 M rows per max_mib_per_run chunk) and of a 6 MB MSK batch, to size RefineMemory / MskIngestMemory (release CLI; not in CI)
	cargo build -q --release --bin lakestream
	$(VENV)/bin/python scripts/bench_memory.py

bench-refine: ## Curated interval join on one day of generated data: once, and after every batch (one core)
	cargo bench -p lakestream-core --bench refine_join --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench refine_join -- 5000 240 once
	taskset -c 0 cargo bench -p lakestream-core --bench refine_join -- 5000 240 incremental

bench-upsert: venv ## Upsert 100k keys into 10M rows (two shapes) vs Python deltalake MERGE, one core (not in CI)
	cargo build --release --bin lakestream
	$(VENV)/bin/python scripts/bench_upsert.py

bench-gold: venv ## Incremental gold run (+1 day) vs DataFusion recomputing over 1M and 10M rows, one core (not in CI)
	$(VENV)/bin/python scripts/bench_gold.py

bench-logs: ## Access-log parse -> Arrow vs Rust regex vs Python re (Athena pattern), one core
	cargo bench -p lakestream-core --bench access_log_parse --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench access_log_parse

chaos: moto-start ## The fault/crash/concurrency suite, longer (CHAOS_SCALE=5) with a random seed
	cargo build --workspace --bins $(FEATURES)
	$(TEST_ENV) CHAOS_SEED=$${CHAOS_SEED:-$$RANDOM$$RANDOM} CHAOS_SCALE=$${CHAOS_SCALE:-5} $(VENV)/bin/pytest -q tests/chaos

fuzz: ## Fuzz every parser for FUZZ_SECONDS each (default 600; nightly + cargo-fuzz)
	scripts/fuzz.sh

clean:
	cargo clean; rm -rf lake $(VENV)
