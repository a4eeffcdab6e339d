# The two commands of the README, and a few helpers. Both set themselves up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROFILE ?= cpu

.PHONY: reproduce test test-slow lint format bench clean-cache lab

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install when the package metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ".[dev]"
	touch $@

## make reproduce: run every notebook with papermill at PROFILE (default cpu), writing figures/
reproduce: $(VENV)/.installed
	$(BIN)/python -m psnlib.reproduce --profile $(PROFILE)

## make lab: JupyterLab on notebooks/, running them with this venv's Python (kernel "Python 3")
lab: $(VENV)/.installed
	$(BIN)/jupyter lab --notebook-dir=notebooks

## make test: lint, then the fast and notebook tiers of the test suite
test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m "not slow"

## make test-slow: everything, including multi-minute runs
test-slow: $(VENV)/.installed
	$(BIN)/pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(VENV)/.installed
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

clean-cache:
	rm -rf data/cache
