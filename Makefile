# Lakestream developer tasks. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV ?= .venv
MOTO_PORT ?= 5055
export CARGO_TERM_COLOR ?= never

TEST_ENV = LAKESTREAM_TEST_S3_ENDPOINT=http://127.0.0.1:$(MOTO_PORT) LAKESTREAM_REQUIRE_S3=1 \
	AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 \
	MOTO_PORT=$(MOTO_PORT) LAKESTREAM_BIN=$(CURDIR)/target/debug/lakestream

.PHONY: help demo test check fmt clippy no-datafusion bench bench-logs venv moto-start moto-stop clean

help: ## List targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-14s %s\n", $$1, $$2}'

demo: ## Run the seed pipeline on a local lake (./lake)
	cargo run --bin lakestream -- demo

$(VENV)/.installed: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.installed ## Python tools for the tests (moto, deltalake, pyarrow, pytest)

moto-start: venv ## Start the S3/SQS emulator on 127.0.0.1:$(MOTO_PORT)
	MOTO_PORT=$(MOTO_PORT) scripts/moto.sh start

moto-stop: ## Stop the emulator started by moto-start
	MOTO_PORT=$(MOTO_PORT) scripts/moto.sh stop

test: moto-start ## All tests: Rust (filesystem + S3 emulator) and the independent-reader suite
	$(TEST_ENV) cargo test --workspace
	cargo build --workspace --bins
	$(TEST_ENV) $(VENV)/bin/pytest -q tests/e2e

check: fmt clippy no-datafusion ## fmt --check, clippy -D warnings, no DataFusion in functions

fmt:
	cargo fmt --all -- --check

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

no-datafusion: ## Prove the ingest functions do not link DataFusion
	@for f in msk-ingest s3-log-ingest; do \
	  if cargo tree -p $$f -e normal | grep -qi datafusion; then echo "$$f links DataFusion"; exit 1; else echo "$$f: no DataFusion"; fi; \
	done

bench: ## Decode+write throughput on 1M generated orders (release build, one core)
	cargo bench -p lakestream-core --bench ingest_throughput --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench ingest_throughput

bench-logs: ## Access-log parse -> Arrow vs Rust regex vs Python re (Athena pattern), one core
	cargo bench -p lakestream-core --bench access_log_parse --no-run
	taskset -c 0 cargo bench -p lakestream-core --bench access_log_parse

clean:
	cargo clean; rm -rf lake $(VENV)
