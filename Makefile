# The two commands: `make demo` (the main job, offline, writes a report) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MIRROR := $(abspath ../shared/mirror)
export CULTURE_PROBE_MIRROR ?= $(if $(wildcard $(MIRROR)),$(MIRROR),)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: test demo install lint bench docs notebooks clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch is pinned exactly: any other spec pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=15

demo: $(STAMP)
	$(BIN)/python -m culture_probe.demo --out runs/demo

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py

docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# Re-execute notebooks/*.ipynb and store their outputs (tests/test_notebooks.py checks they are current);
# `make notebooks NOTEBOOKS="quickstart maps"` for some only.
notebooks: $(STAMP)
	$(BIN)/python tests/test_notebooks.py --update $(NOTEBOOKS)

clean:
	rm -rf $(VENV) runs site
