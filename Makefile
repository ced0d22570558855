# Set-up and entry points.  Everything the project needs is installed into .venv by these targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= results/quick
# The project's own environment pins the CPU build of PyTorch (the library itself accepts any recent torch).
# The wheel on disk is used when it is there; otherwise pip takes it from the PyTorch CPU index.
TORCH_VERSION ?= 2.13.0
TORCH_WHEEL_DIR ?= /opt/wheels
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install reproduce reproduce-full test test-slow check-light-install lint docs bench clean

$(BIN)/attnphase: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@wheel=$$(ls $(TORCH_WHEEL_DIR)/torch-$(TORCH_VERSION)+cpu-*.whl 2>/dev/null | head -n 1); \
	if [ -n "$$wheel" ] && $(BIN)/pip install --quiet "$$wheel"; then \
		echo "torch $(TORCH_VERSION) from $$wheel"; \
	else \
		echo "torch $(TORCH_VERSION) (CPU) from $(TORCH_CPU_INDEX)"; \
		$(BIN)/pip install --quiet "torch==$(TORCH_VERSION)" --index-url $(TORCH_CPU_INDEX); \
	fi
	$(BIN)/pip install --quiet -e '.[experiments,dask,docs,test]'
	touch $(BIN)/attnphase

install: $(BIN)/attnphase

# The main job: a quick reproduction of the study with figures and a report (about 2 minutes on 2 cores, README).
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

# `pip install attnphase` without extras, in a clean virtual environment: the theory runs, and the commands
# that need PyTorch name the extra to install (about 2 minutes: it installs numpy, scipy, numba, ...).
check-light-install: install
	$(BIN)/pytest -q -m install tests/test_install.py

# The documentation site (docs/ -> site/), warnings are errors: a broken reference fails the build.
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

bench: install
	$(BIN)/python benchmarks/theory.py
	$(BIN)/python benchmarks/simulation.py
	$(BIN)/python benchmarks/transition.py
	$(BIN)/python benchmarks/continued_evaluations.py
	$(BIN)/python benchmarks/channel_l2r1.py

clean:
	rm -rf $(VENV) results site .pytest_cache .ruff_cache
