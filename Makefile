# gpuaas-infra — every target installs what it needs first (tools/setup.sh is idempotent).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
ENV   ?= local
STACK ?= local
NODES ?= auto
PYTEST_ARGS ?=
# make test: pytest-xdist workers (most of the suite waits on CLI runs and simulated time, not the CPU), one test
# file per worker at a time (--dist loadfile): a file's tests share module state and session fixtures (the lab);
# in the collection's order, longest files first (tests/conftest.py; xdist's own reorder puts many-test files first).
# Not loadgroup: pytest-xdist 3.8's xdist_group suffix is lost on pytest 9 (it sets Item._nodeid; pytest 9 reads _id).
# Three workers on two cores: with two, the suite kept 1.1-1.3 cores busy on average (run5: 44 CPU-minutes in
# 35 wall-minutes), the rest of the time waiting on simulated time and process start-up.
TEST_WORKERS ?= 3

.PHONY: setup demo test validate bench lint help
help:
	@echo "make demo        run the local stack against the embedded simulators (NODES=auto|nspawn|fast: real nspawn nodes where possible)"
	@echo "make test        run the whole test suite"
	@echo "make validate ENV=<env>  validate an environment and print its summary"
	@echo "make bench       run the benchmarks (figures + ratios vs. a baseline)"
	@echo "make lint        ruff + mypy"

setup:
	@./tools/setup.sh

demo: setup
	@$(PY) -m tools.demo --stack $(STACK) --nodes $(NODES)

test: setup
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

validate: setup
	@$(PY) -m environments validate $(ENV)

bench: setup
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b; done

lint: setup
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy environments providers components clients simulators preview_note ci_lint lab cli tools

# Per-area targets (ci-lint, lab, ...) live beside their owners.
-include mk/*.mk
