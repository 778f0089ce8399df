# Riverlog developer tasks. `make help` lists them.
#
# The virtualenv is .venv (created with python3 -m venv when missing); installs are redone only
# when pyproject.toml changes (stamp files in .venv). CI runs `bash .ci/run`, which is `make test`.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

SYSTEM_PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
RIVERLOG := $(BIN)/riverlog
STAMP := $(VENV)/.riverlog-installed
STAMP_TEST := $(VENV)/.riverlog-installed-test
PYTEST_ARGS ?=
DEMO_TOPIC ?= demo
UP_ARGS ?=

.PHONY: help venv install install-test up down test check protos bench pipeline clean-venv

help:
	@echo "make up        start a local cluster (etcd, 3 metadata, 3 storage, 1 gateway) and run a demo"
	@echo "make down      stop the local cluster"
	@echo "make test      make check, then every test under tests/ (what CI runs)"
	@echo "make check     ruff, ruff format, mypy, import-linter, proto freshness"
	@echo "make protos    regenerate src/riverlog/v1 from proto/"
	@echo "make bench     run every bench/*_bench.py and print its figures"
	@echo "make pipeline  the Spark example (page views per minute) on the local cluster ('make up' first)"

$(PY):
	$(SYSTEM_PYTHON) -m venv $(VENV)

venv: $(PY)

$(STAMP): pyproject.toml setup.py | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml setup.py | $(PY)
	$(PY) -m pip install --quiet -e '.[test,spark]'
	touch $@ $(STAMP)

install: $(STAMP)

install-test: $(STAMP_TEST)

# A local cluster in $RIVERLOG_HOME (default ~/.riverlog), then a produce/consume round trip.
up: $(STAMP)
	@if $(RIVERLOG) cluster status >/dev/null 2>&1; then \
		echo "a local cluster is already running:"; \
	else \
		$(RIVERLOG) cluster up $(UP_ARGS); \
	fi
	@$(RIVERLOG) cluster status
	@echo
	@echo "== topic $(DEMO_TOPIC)"
	$(RIVERLOG) topics create $(DEMO_TOPIC) --partitions 3 --replication-factor 3 --if-not-exists
	@echo "== produce three records (key:value)"
	printf 'user-1:hello\nuser-2:riverlog\nuser-1:goodbye\n' \
		| $(RIVERLOG) produce $(DEMO_TOPIC) --key-separator : --acks all
	@echo "== consume them back"
	$(RIVERLOG) consume $(DEMO_TOPIC) --from-beginning --print-key --key-separator :
	@echo
	@echo "The cluster keeps running: riverlog --help, then 'make down' to stop it."

down:
	@if [ -x $(RIVERLOG) ]; then $(RIVERLOG) cluster down; else echo "no $(RIVERLOG): nothing to stop"; fi

check: $(STAMP_TEST)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy src/riverlog
	$(BIN)/lint-imports
	$(BIN)/pytest -q -p no:cacheprovider tests/unit/test_protos_fresh.py

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
test: $(STAMP_TEST)
	$(MAKE) --no-print-directory check
	@rc=0; $(BIN)/pytest tests $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$rc

protos: $(PY)
	PYTHON=$(PY) ./scripts/gen-protos.sh

bench: $(STAMP)
	@shopt -s nullglob; files=(bench/*_bench.py); \
	if [ $${#files[@]} -eq 0 ]; then echo "no bench/*_bench.py" >&2; exit 1; fi; \
	for f in "$${files[@]}"; do echo "== $$f"; $(PY) "$$f"; done

# The Spark example pipeline (spark/examples/pageviews.py) in local mode against the local
# cluster; PIPELINE_ARGS e.g. "--events 50000 --master spark://host:7077".
PIPELINE_ARGS ?=
pipeline: $(STAMP_TEST)
	$(PY) -m riverlog.spark.examples.pageviews $(PIPELINE_ARGS)

clean-venv:
	rm -rf $(VENV)
