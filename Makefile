# The two commands of the README, and a few helpers. Both set themselves up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PROFILE ?= cpu
# local worker processes, or slurm: the tasks as a Slurm job array (docs/scale_out.md)
EXECUTOR ?= local

.PHONY: reproduce test test-floats test-slow lint format bench clean-cache lock lab prove-version pin-run-keys

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install when the package metadata or the lock changes; every version comes from the lock.
$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -c constraints.txt -e ".[dev]"
	touch $@

## make lock: rewrite constraints.txt from the venv (after a dependency change; torch without +cpu)
lock: $(VENV)/.installed
	{ echo "# pip constraints: the versions every install uses (make, .ci/run, environment.yml)."; \
	  echo "# Regenerate with: make lock"; \
	  $(BIN)/pip freeze --exclude-editable | grep -v '^psnlib' | sed -E 's/^(torch==[^+]*)\+.*/\1/'; \
	} > constraints.txt

## make reproduce: run every notebook with papermill at PROFILE (default cpu), writing figures/;
## EXECUTOR=slurm computes the tasks as a Slurm job array; BUDGET=SECONDS or UNTIL=HH:MM starts
## no task that would not end in time (a sitting shorter than the round: commit results/ after)
reproduce: $(VENV)/.installed
	$(BIN)/python -m psnlib.replication.reproduce --profile $(PROFILE) --executor $(EXECUTOR) \
	  $(if $(BUDGET),--budget $(BUDGET)) $(if $(UNTIL),--until $(UNTIL))

## make prove-version KIND=run: after a change that moved KIND's code digest (tests/test_versions.py
## names it), re-compute its cheapest committed record at PROFILE on this code and pin the digest
## if every result field is bit-exact (psnlib.replication.compute.proof); without KIND, every moved kind
prove-version: $(VENV)/.installed
	$(BIN)/python -m psnlib.replication.compute.proof --profile $(PROFILE) $(if $(KIND),--kind $(KIND))

## make pin-run-keys: after a deliberate change of the plan (an arm, a seed, a setting a key covers),
## pin every planned run key of the cpu and smoke profiles (tests/test_run_keys.py checks them)
pin-run-keys: $(VENV)/.installed
	$(BIN)/python -c "import json; from psnlib.replication.plan.schedule import planned_runs; \
	  keys = {p: sorted(planned_runs(p)['run']) for p in ('cpu', 'smoke')}; \
	  print(json.dumps(keys, indent=1))" > tests/data/planned_run_keys.json

## make lab: JupyterLab on notebooks/, running them with this venv's Python (kernel "Python 3")
lab: $(VENV)/.installed
	$(BIN)/jupyter lab --notebook-dir=notebooks

## make test: lint, then the fast and notebook tiers of the test suite
test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -m "not slow"

## make test-floats: the tests that compare floats of two code paths, at PyTorch's two other CPU
## kernel levels (their summation orders are another CPU's); .ci/run runs it after `make test`
test-floats: $(VENV)/.installed
	for level in default avx2; do ATEN_CPU_CAPABILITY=$$level $(BIN)/pytest -q -m "floats and not slow" || exit 1; done

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
