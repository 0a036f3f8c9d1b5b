# MemLineage developer commands. Each target creates .venv on a fresh clone and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SHARED_MODEL := $(abspath ../shared/models/all-MiniLM-L6-v2/onnx)

# Offline runs use the model files shipped beside the project when they are there; otherwise the default
# embedder reads chromadb's cache (~/.cache/chroma/onnx_models/...) and lets chromadb download it once.
ifneq ($(wildcard $(SHARED_MODEL)/model.onnx),)
export MEMLINEAGE_EMBEDDING_MODEL_DIR ?= $(SHARED_MODEL)
endif
export ANONYMIZED_TELEMETRY := False

.PHONY: install demo test test-fast test-reliability bench bench-readme lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[langchain,llamaindex,server,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/memlineage demo

# The documented test command runs the linters first: CI (.ci/run) fails on a lint or type error.
test: lint
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest tests/unit

test-reliability: $(STAMP)
	$(PY) -m pytest tests/integration -m slow

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[langchain,llamaindex,server,dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) benchmarks/run_all.py

# rewrite the README's generated benchmark block from benchmarks/results/ (after make bench or single scripts)
bench-readme: $(STAMP)
	$(PY) benchmarks/run_all.py --collect-only --readme README.md

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy core/memlineage memlineage_langchain memlineage_llamaindex
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache
