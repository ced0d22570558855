# Set-up and entry points.  Everything the project needs is installed into .venv by these targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/quick

.PHONY: install reproduce reproduce-full test test-slow lint bench clean

$(BIN)/attnphase: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dask]'
	touch $(BIN)/attnphase

install: $(BIN)/attnphase

# The main job: a quick reproduction of the study with figures and a report (under 5 minutes on 2 cores).
reproduce: install
	$(BIN)/attnphase reproduce --out $(OUT) --quick

# The full study (d = 1000, the study's grids): hours; resumes from its store when rerun.
reproduce-full: install
	$(BIN)/attnphase reproduce --out results/full

lint: install
	$(BIN)/ruff check src tests benchmarks

test: install lint
	$(BIN)/pytest -q

test-slow: install
	$(BIN)/pytest -q -m slow

bench: install
	$(BIN)/python benchmarks/theory.py
	$(BIN)/python benchmarks/simulation.py
	$(BIN)/python benchmarks/transition.py

clean:
	rm -rf $(VENV) results .pytest_cache .ruff_cache
