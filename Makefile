# Two entry points: `make demo` (the main job) and `make test` (the suite).
# Both build the virtual environment first; every target is idempotent. The Makefile works
# from any directory (`make -f PATH/Makefile demo`): the environment lives in the checkout,
# the demo's ledger and graphs go to the directory make runs in.
ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
PYTHON ?= python3
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_PIN := torch==2.13.0

.PHONY: install demo test test-vllm test-builds llama llama-builds vllm lint clean

install: $(STAMP)

$(STAMP): $(ROOT)/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q -e '$(ROOT)[engine,llama,test]'
	@sh $(ROOT)/tools/ensure_apt.sh dot graphviz "graphviz renders the graphs"
	@touch $(STAMP)

demo: install
	$(PY) -m specledger demo

# llama.cpp's llama-server, built once from the pinned llama-cpp-python sdist into a cache
# outside git (tools/build_llama.sh; 10-16 minutes on 2 cores, then skipped).
llama: install
	@PYTHON=$(PY) sh $(ROOT)/tools/build_llama.sh

# The builds besides the default that the tests marked `builds` compare with it: 0.3.21,
# the newest before draft-mtp (tests/adapters/llama/conftest.py's PRE_MTP_BUILD; 10-16
# minutes on 2 cores, then skipped).
PRE_MTP_BUILD := 0.3.21
llama-builds: llama
	$(PY) -m specledger llama build $(PRE_MTP_BUILD)

# vLLM's CPU build in a virtual environment of its own, cached outside git
# (tools/install_vllm.sh; about 4 minutes, then skipped).
vllm:
	@PYTHON=$(PYTHON) sh $(ROOT)/tools/install_vllm.sh

# The tests' models are tiny: one intra-op thread is faster, and far faster on a busy machine.
# Two workers, a test file each at a time (a file's session fixtures, such as the
# differential test's reference answers, are built once): the suite in about half the time.
# The llama.cpp, PostgreSQL and headless-browser tests skip without their binaries when pytest
# runs alone; here they must run (tests/conftest.py starts a throwaway PostgreSQL server).
test: install llama
	@sh $(ROOT)/tools/ensure_apt.sh dot graphviz "graphviz renders the graphs"
	@sh $(ROOT)/tools/ensure_apt.sh chromium chromium "the HTML report's browser test"
	@sh $(ROOT)/tools/ensure_apt.sh pg_ctlcluster postgresql "the PostgreSQL ledger tests"
	cd $(ROOT) && $(VENV)/bin/ruff check .
	cd $(ROOT) && OMP_NUM_THREADS=1 SPECLEDGER_REQUIRE_LLAMA=1 SPECLEDGER_REQUIRE_POSTGRES=1 \
		SPECLEDGER_REQUIRE_BROWSER=1 $(PY) -m pytest -n 2 --dist loadfile -m "not vllm and not builds"

# The tests that run vLLM (marked `vllm`): its install and its servers' starts (1-2 minutes
# each) would take `make test` past 15 minutes cold, so they are a target of their own, which
# .ci/run also runs.
test-vllm: install llama vllm
	cd $(ROOT) && OMP_NUM_THREADS=1 SPECLEDGER_REQUIRE_LLAMA=1 SPECLEDGER_REQUIRE_VLLM=1 \
		$(PY) -m pytest -n 2 --dist loadfile -m vllm

# The tests that compare the default llama.cpp build with an older one (marked `builds`):
# building that one would take `make test` past 15 minutes cold, so they are a target of
# their own, which .ci/run also runs.
test-builds: install llama-builds
	cd $(ROOT) && OMP_NUM_THREADS=1 SPECLEDGER_REQUIRE_LLAMA=1 $(PY) -m pytest -m builds

lint: install
	cd $(ROOT) && $(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) $(ROOT)/out $(ROOT)/specledger.db $(ROOT)/specledger.db-wal \
		$(ROOT)/specledger.db-shm
