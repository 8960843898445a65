# The two commands a new machine needs: `make demo` and `make test`. Each creates .venv when it is missing.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/countersign demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy --strict policy synthetic audit cards engine/grounding.py engine/specialists
	$(BIN)/mypy engine callbacks bot countersign
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/bench_reconcile_1m.py

clean:
	rm -rf $(VENV) .countersign .pytest_cache .mypy_cache .ruff_cache
