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

.PHONY: help venv install install-test up down test faults fault-tools browser-tools console check protos bench bench-compare pipeline clean-venv

help:
	@echo "make up        start a local cluster (etcd, 3 metadata, 3 storage, 1 gateway) and run a demo"
	@echo "make down      stop the local cluster"
	@echo "make test      make check, then every test under tests/ but the long fault matrix (what CI runs)"
	@echo "make faults    the whole fault matrix (tests/fault, long_fault included; root, ~40 min)"
	@echo "make check     ruff, ruff format, mypy, import-linter, proto freshness"
	@echo "make protos    regenerate src/riverlog/v1 from proto/"
	@echo "make bench     run every bench/*_bench.py and print its figures"
	@echo "make bench-compare BASE=<rev>  quick benchmarks of HEAD against <rev>, as ratios"
	@echo "make console   the web console on http://127.0.0.1:8080 for the local cluster ('make up' first)"
	@echo "make pipeline  the Spark example (page views per minute) on the local cluster ('make up' first)"

$(PY):
	$(SYSTEM_PYTHON) -m venv $(VENV)

venv: $(PY)

$(STAMP): pyproject.toml setup.py | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml setup.py | $(PY)
	$(PY) -m pip install --quiet -e '.[test,spark,console]'
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

# pytest exits 5 when it collected no test: that is a failure here, not a pass. The long fault
# matrix (marker long_fault) is left out; `make faults` runs it. PYTEST_ARGS come last, so a
# -m there replaces this one.
test: $(STAMP_TEST) fault-tools browser-tools
	$(MAKE) --no-print-directory check
	@rc=0; $(BIN)/pytest tests -m "not long_fault" $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$rc

# The whole fault matrix: tests/fault with long_fault (network namespaces, iptables, clock
# steps, full log dirs: needs root). FAULT_ARGS e.g. "-k slow-all" or "-x".
FAULT_ARGS ?=
faults: $(STAMP_TEST) fault-tools
	@rc=0; $(BIN)/pytest tests/fault -m fault -p no:cacheprovider $(FAULT_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit $$rc

# What the network fault tests need from the system: iproute2 (ip netns) and iptables, from
# Debian's packages. Installed when missing and we are root with apt-get; otherwise those tests
# skip and say why.
fault-tools:
	@if command -v iptables-restore >/dev/null && command -v ip >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing iproute2 and iptables for the network fault tests"; \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables >/dev/null; } || \
		echo "note: installing iproute2/iptables failed: network fault tests will skip"; \
	else \
		echo "note: no iptables/iproute2 and cannot install them: network fault tests will skip"; \
	fi

# What the web console's browser tests (tests/integration/console) need from the system:
# Debian's chromium and its chromedriver, driven by selenium. Installed when missing and we are
# root with apt-get; otherwise those tests skip and say why. `install-test` never needs apt.
browser-tools:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium and chromium-driver for the web console's browser tests"; \
		{ DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
		echo "note: installing chromium failed: the web console's browser tests will skip"; \
	else \
		echo "note: no chromium/chromedriver and cannot install them: browser tests will skip"; \
	fi

protos: $(PY)
	PYTHON=$(PY) ./scripts/gen-protos.sh

bench: $(STAMP)
	@shopt -s nullglob; files=(bench/*_bench.py); \
	if [ $${#files[@]} -eq 0 ]; then echo "no bench/*_bench.py" >&2; exit 1; fi; \
	for f in "$${files[@]}"; do \
		if [ "$$f" = bench/soak_bench.py ]; then echo "== $$f: skipped (30 minutes; run it alone)"; continue; fi; \
		echo "== $$f"; $(PY) "$$f"; done

# HEAD against BASE (any git revision) on the quick in-process benchmarks, in clean worktrees;
# COMPARE_ARGS e.g. "--repeat 3" or --bench "fetch_bench.py --mb 20 --rounds 1".
COMPARE_ARGS ?=
bench-compare: $(STAMP)
	@if [ -z "$(BASE)" ]; then echo "usage: make bench-compare BASE=<rev>" >&2; exit 2; fi
	$(PY) bench/compare.py $(BASE) $(COMPARE_ARGS)

# The web console (decision 0034) for the local cluster; CONSOLE_ARGS e.g. "--port 9000".
CONSOLE_ARGS ?=
console: $(STAMP_TEST)
	$(RIVERLOG) console $(CONSOLE_ARGS)

# The Spark example pipeline (spark/examples/pageviews.py) in local mode against the local
# cluster; PIPELINE_ARGS e.g. "--events 50000 --master spark://host:7077".
PIPELINE_ARGS ?=
pipeline: $(STAMP_TEST)
	$(PY) -m riverlog.spark.examples.pageviews $(PIPELINE_ARGS)

clean-venv:
	rm -rf $(VENV)
