# The two commands a new machine needs: `make demo` and `make test`. Each creates .venv when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The locks pin every package with its hashes for CPython 3.11 on Linux x86_64 (ADR 0013): requirements.lock is what
# the production image installs, requirements-dev.lock adds the embedded PostgreSQL and the dev tools.
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-unknown-linux-gnu --quiet \
	--custom-compile-command "make lock"

.PHONY: demo test lint bench clean install lock chromium promtool

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# The first run installs every pinned package (a few minutes): pip prints each one as it goes, so the wait is visible.
$(STAMP): pyproject.toml requirements-dev.lock | $(BIN)/python
	@echo "Installing the pinned dependencies into $(VENV) (first run, or after the locks change; pip lists each package as it goes)"
	$(BIN)/python -m pip install --progress-bar on --require-hashes -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@echo "Installed: $$($(BIN)/python -m pip list --format=freeze | wc -l) packages"
	touch $(STAMP)

# After changing dependencies in pyproject.toml: re-pin (existing pins are kept unless they no longer fit).
lock: | $(BIN)/python
	test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet "uv>=0.8"
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o requirements-dev.lock

install: $(STAMP)

# The story end to end, then the Close Board left running with an open close to visit (Ctrl-C stops).
demo: $(STAMP)
	$(BIN)/countersign demo --serve

# The board's browser tests (tests/board) drive Debian's chromium through Playwright; installed here when missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "chromium is missing and make is not root: run 'sudo apt-get install -y chromium', then make test again" >&2; \
	    exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }; \
	}

# The alert rules in deploy/prometheus are checked and unit-tested by promtool (Debian's prometheus package brings it).
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" -ne 0 ]; then \
	    echo "promtool is missing and make is not root: run 'sudo apt-get install -y prometheus', then make test again" >&2; \
	    exit 1; \
	  fi; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
	    || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus; }; \
	}

test: $(STAMP) chromium promtool
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest -q -n 2 --dist worksteal

bench: $(STAMP)
	$(BIN)/python bench/bench_reconcile_1m.py

clean:
	rm -rf $(VENV) .countersign .pytest_cache .mypy_cache .ruff_cache
