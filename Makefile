# Two entry points: `make demo` (the main job) and `make test` (the suite).
# Both build the virtual environment first; every target is idempotent.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_PIN := torch==2.13.0

.PHONY: install demo test lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '.[test]'
	@sh tools/ensure_apt.sh dot graphviz "graphviz renders the graphs"
	@touch $(STAMP)

demo: install
	$(PY) -m specledger demo

# The tests' models are tiny: one intra-op thread is faster, and far faster on a busy machine.
test: install
	@sh tools/ensure_apt.sh dot graphviz "graphviz renders the graphs"
	@sh tools/ensure_apt.sh chromium chromium "the HTML report's browser test" optional
	$(VENV)/bin/ruff check .
	OMP_NUM_THREADS=1 $(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) out specledger.db specledger.db-wal specledger.db-shm
