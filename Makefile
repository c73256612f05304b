# Podway: every target creates the virtual environment first when it is missing.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PODWAY := $(VENV)/bin/podway
UV := python3 -m uv
DATA_DIR ?= .podway
MSG ?= change

.DEFAULT_GOAL := help
.PHONY: help install demo test test-fast lint typecheck bench up down compose-up migrate revision soak clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv || python3 -m pip install --quiet --user uv
	$(UV) sync --frozen --compile-bytecode
	@touch $@

COMPILED_CORE := $(VENV)/podway-compiled/stamp.json
$(COMPILED_CORE): $(VENV)/.installed $(wildcard libs/core/scheduling/*.py) deploy/compile_core.py
	$(PY) deploy/compile_core.py

# Bytecode is written ahead: on a host that sets PYTHONDONTWRITEBYTECODE (the machine images here do), Python
# compiles every module again in every process, and a service takes 2.5 s of CPU to start instead of 1.
BYTECODE = $(PY) -m compileall -q -j 0 libs services bench tests deploy

install: $(VENV)/.installed $(COMPILED_CORE) ## create the virtual environment from the lock file, compile the scheduling core
	@$(BYTECODE)

demo: install ## run the whole stack on embedded defaults and show every capability, each step checked; writes report.html
	$(PODWAY) demo --report report.html

TEST_WORKERS ?= 4
test: install ## the import rules, then the test suite on $(TEST_WORKERS) workers (PostgreSQL tests use PODWAY_TEST_DATABASE_URL or 127.0.0.1:5432/test)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal --durations=25

FAST_WORKERS ?= 2
test-fast: install ## the unit tests only (under a minute on 2 cores): the loop while editing
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(FAST_WORKERS) --dist worksteal tests/unit

lint: install ## ruff and the import rules
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: install ## mypy (strict on libs/core and libs/events)
	$(VENV)/bin/mypy libs services bench

bench: install ## run every benchmark, one JSON object per line
	$(PODWAY) bench all -o json

SOAK_JOBS ?= 2000
SOAK_REQUESTS ?= 5000
SOAK_NATS_CLUSTER ?= 0
soak: install ## the full chaos run: gang Jobs and inference under every fault (PostgreSQL failover too), 5 rounds; JSON figures (not CI); SOAK_NATS_CLUSTER=3 on a 3-node NATS cluster
	$(PY) -m tests.chaos.harness --jobs $(SOAK_JOBS) --requests $(SOAK_REQUESTS) --postgres-failover --nats-cluster $(SOAK_NATS_CLUSTER)

up: install ## start the stack in the background (podway up)
	$(PODWAY) up --data-dir $(DATA_DIR) --detach

down: install ## stop the stack (podway down)
	$(PODWAY) down --data-dir $(DATA_DIR)

compose-up: ## run the same topology on NATS and PostgreSQL containers
	docker compose up --build

migrate: install ## upgrade the database to the latest revision (PODWAY_DATABASE_URL)
	$(PODWAY) migrate

revision: install ## create a new Alembic revision: make revision MSG="add x"
	$(PODWAY) migrate --revision "$(MSG)"

clean: ## remove the virtual environment and local data
	rm -rf $(VENV) $(DATA_DIR)
