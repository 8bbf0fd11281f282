# The stable interface for people and CI. Every target installs what it needs and caches it.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
UV_VERSION := 0.13.8
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/durable-kafka
UV := $(CACHE)/tools/uv-$(UV_VERSION)/bin/uv
VENV := .venv
PY := $(VENV)/bin/python
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: help run up down status cluster-up cluster-down faults fuzz upgrades hostile model test conformance conformance-workers clients bench bench-smoke lint typecheck docs reference deps venv clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run: venv  ## start the local Kafka if needed, then serve the adapter on 127.0.0.1:4437 (foreground)
	$(PY) -m devstack up kafka
	exec $(VENV)/bin/durable-kafka serve

up: venv  ## the same stack in the background; returns when /readyz answers 200
	$(PY) -m devstack up kafka adapter

down: venv  ## stop the background adapter, Kafka and MinIO (idempotent)
	$(PY) -m devstack down adapter kafka minio

cluster-up: venv  ## three Kafka brokers (KRaft, 3 voters) on 127.0.0.1:19092,19192,19292
	$(PY) -m devstack up cluster
	@echo "use: DURABLE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292 DURABLE_KAFKA_REPLICATION_FACTOR=3 DURABLE_KAFKA_MIN_INSYNC_REPLICAS=2"

cluster-down: venv  ## stop the three brokers of cluster-up (their data stays in .data/cluster)
	$(PY) -m devstack down cluster

faults: deps  ## the long fault suite on its own 3-broker cluster and MinIO (SEED=n, ONLY="leader_kill ...", KEEP=dir, WORKERS=n)
	$(PY) -m tests.faults --seed $(or $(SEED),1) $(if $(ONLY),--only $(ONLY)) $(if $(KEEP),--keep $(KEEP)) $(if $(WORKERS),--workers $(WORKERS))

fuzz: deps  ## schemathesis on every operation of /openapi.json, 200 examples each (FUZZ_EXAMPLES=n)
	FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),200) $(PY) -m pytest tests/integration/test_fuzz.py -p no:randomly -o timeout=3600

hostile: deps  ## hostile inputs at full size against one instance (ulimit -n 4096) on a broker of its own; prints the longest /healthz stall (BOOTSTRAP=host:port reuses a broker)
	$(PY) -m tests.hostile $(if $(BOOTSTRAP),--bootstrap $(BOOTSTRAP))

# The protocol's model-based test, longer than the bounded run `make test` makes of it: random
# sequences from the seed, shrunk on failure (tests/model/test_protocol_model.py).
model: deps  ## the protocol's model-based test on two instances, longer (SEED=s EXAMPLES=n STEPS=n RESTARTS=n)
	MODEL_SEED=$(or $(SEED),1) MODEL_EXAMPLES=$(or $(EXAMPLES),50) MODEL_STEPS=$(or $(STEPS),50) \
	MODEL_RESTARTS=$(or $(RESTARTS),2) MODEL_TIMEOUT_S=0 \
	$(PY) -m pytest tests/model/test_protocol_model.py tests/model/test_secret_files_model.py \
	-p no:randomly -k as_the_protocol_model \
	--hypothesis-seed=$(or $(SEED),1)

status: venv  ## which local services answer
	$(PY) -m devstack status

# Test files run side by side on TEST_WORKERS processes (each starts its own broker and S3
# server; tests/conftest.py hands out whole files and keeps a costly session service's tests
# together). TEST_WORKERS=1: one plain pytest process.
TEST_WORKERS ?= 2
PYTEST_PROCESSES = $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

test: lint typecheck docs deps  ## everything CI runs: ruff, mypy, then unit, integration and conformance tests
	$(PY) -m pytest $(PYTEST_PROCESSES) --ignore=tests/upgrades

upgrades: deps  ## a rolling upgrade from the previous record format level under load (minutes: builds that release's worktree and venv once)
	$(PY) -m pytest tests/upgrades -p no:randomly

conformance: deps  ## the protocol's conformance suite against an adapter on a fresh test broker
	$(PY) -m pytest tests/conformance -s -k one_worker

conformance-workers: deps  ## the same against `serve --workers 2` over SASL_SSL, only the documented ACLs granted (`make test` runs both)
	$(PY) -m pytest tests/conformance -s -k two_workers

clients: deps  ## the official Python client's own integration tests and the TypeScript client's public API against an adapter on a fresh test broker
	$(PY) -m pytest tests/clients -s

bench: venv conformance/node_modules/.installed  ## benchmarks vs the Node reference, raw Kafka and the Python floors, as ratios (~25 min; BENCH_ARGS=...)
	$(PY) -m bench.suite $(BENCH_ARGS)

bench-smoke: venv conformance/node_modules/.installed  ## the same harness at tiny sizes (~1.5 min warm)
	$(PY) -m bench.suite --smoke $(BENCH_ARGS)

lint: venv  ## ruff format check and lint
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

typecheck: venv  ## mypy --strict on the packages and the tests
	$(VENV)/bin/mypy

docs: venv  ## build the docs site (MkDocs, --strict: a broken link or anchor fails) into .data/site
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

reference: venv  ## write docs/reference/ again from the code (settings, routes, errors, metrics)
	$(PY) -m devstack.reference

deps: venv conformance/node_modules/.installed  ## Kafka, MinIO, Chromium, nginx, Spark's connectors, Helm, promtool, Jaeger, the suite
	$(PY) -m devstack fetch kafka minio chromium nginx spark helm promtool jaeger clients

conformance/node_modules/.installed: conformance/package.json conformance/package-lock.json
	cd conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $@

venv: $(VENV)/.synced

$(VENV)/.synced: pyproject.toml uv.lock $(UV)
	$(UV) sync --frozen --all-extras --python $(PYTHON)
	touch $@

$(UV):
	$(PYTHON) -m venv $(CACHE)/tools/uv-$(UV_VERSION)
	$(CACHE)/tools/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

clean:  ## remove the virtualenv and local data (.data); caches under ~/.cache stay
	rm -rf $(VENV) .data .mypy_cache .ruff_cache .pytest_cache
