# ableaudit: `make audit` runs the embedded default audit, `make test` runs every test.
# Both create the virtual environment first when it is missing.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 120
export DBT_PROFILES_DIR := $(CURDIR)
export DBT_SEND_ANONYMOUS_USAGE_STATS := false

BI_VENV ?= .venv-bi

.PHONY: audit test test-long build lint deploy worker clean bi-clients

$(BIN)/.installed: requirements.lock requirements-nodeps.lock requirements-scale.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q -r requirements-scale.lock
	$(BIN)/pip install -q --no-deps -r requirements-nodeps.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# --first-look 2: rates of two queries within minutes, then the whole audit (README: its time)
audit: $(BIN)/.installed
	$(BIN)/ableaudit audit --config configs/default.yaml --first-look 2

# Two pytest-xdist workers by default, a file's tests on one worker (tests/conftest.py);
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: $(BIN)/.installed $(BI_VENV)/.installed node_modules/.package-lock.json
	$(BIN)/pytest -n $(TEST_WORKERS)

# The long checks the default run leaves out (tests marked `long`: a benchmark script run end
# to end). They use the same fixtures; run them before changing a benchmark.
test-long: $(BIN)/.installed $(BI_VENV)/.installed node_modules/.package-lock.json
	$(BIN)/pytest -m long

# DuckDB 1.x clients (CLI, Python, SQLAlchemy + duckdb-engine) in a venv of their own:
# tests/functional/test_bi_clients.py opens the published copy with them, as BI tools would.
$(BI_VENV)/.installed: requirements-bi.lock
	test -x $(BI_VENV)/bin/python || $(PYTHON) -m venv $(BI_VENV)
	$(BI_VENV)/bin/pip install -q --no-deps -r requirements-bi.lock
	touch $@

bi-clients: $(BI_VENV)/.installed

# axe-core and playwright-core for the report's browser test (tests/functional/test_report_browser.py)
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

build: $(BIN)/.installed
	$(BIN)/ableaudit build

lint: $(BIN)/.installed
	$(BIN)/dbt parse --target ci >/dev/null
	$(BIN)/sqlfluff lint models tests/dbt
	$(BIN)/ruff check ableaudit flows python_models bench tests
	$(BIN)/ruff format --check ableaudit flows python_models bench tests

# Deployments: a process work pool, the `audit` deployment, and a worker serving it.
deploy: $(BIN)/.installed
	$(BIN)/prefect work-pool create ableaudit --type process --overwrite
	ABLEAUDIT_ROOT=$(CURDIR) $(BIN)/prefect --no-prompt deploy --all

worker: $(BIN)/.installed
	ABLEAUDIT_ROOT=$(CURDIR) $(BIN)/prefect worker start --pool ableaudit

clean:
	rm -rf warehouse target logs .prefect
