"""The thread pool of independent units of analysis work: order, errors, worker counts."""

from __future__ import annotations

import threading
import time

import pytest

from uaprobe.analysis.compute.workers import ordered_map, worker_count


def test_results_keep_the_order_of_the_items_whatever_finishes_first():
    def unit(i: int) -> tuple[int, str]:
        time.sleep(0.02 * (5 - i))  # the first items finish last
        return i * i, threading.current_thread().name

    for workers in (1, 2, 3):
        got = ordered_map(unit, range(6), workers=workers)
        assert [r for r, _ in got] == [0, 1, 4, 9, 16, 25]
    threads = {name for _, name in ordered_map(unit, range(6), workers=2)}
    assert len(threads) == 2  # two units at once


def test_an_error_in_a_unit_is_raised_to_the_caller():
    def unit(i: int) -> int:
        if i == 3:
            raise KeyError("unit 3")
        return i

    with pytest.raises(KeyError, match="unit 3"):
        ordered_map(unit, range(5), workers=2)


def test_worker_counts():
    assert ordered_map(str, [], workers=2) == []
    assert worker_count() >= 1
    with pytest.raises(ValueError, match="at least 1"):
        ordered_map(str, [1], workers=0)


_ANALYZE_SCRIPT = """
import hashlib, json, sys, tempfile
from pathlib import Path
import numba
sys.path.insert(0, sys.argv[1])
from synthetic_h5 import write_synthetic_h5
from uaprobe.analysis.run.pipeline import analyze_model
from uaprobe.config import AnalysisParams, BinsParams
from uaprobe.extraction.store import read_embeddings
params = AnalysisParams(bootstrap_resamples=200, permutations=200, bins=BinsParams(k=(3, 5), partitions=20, ci_k=4))
with tempfile.TemporaryDirectory() as tmp:
    emb = read_embeddings(write_synthetic_h5(Path(tmp) / "x.h5", pairs_per_category=(30, 25, 28, 27), n_layers=4,
                                             hidden=24, seed=3))
for threads in (1, 2, 3):
    numba.set_num_threads(threads)
    out = analyze_model(emb, params=params, model_id="synthetic")
    text = json.dumps(out.results, sort_keys=True, default=str) + json.dumps(out.metrics, sort_keys=True, default=str)
    print(threads, hashlib.sha256(text.encode()).hexdigest())
"""


def test_the_whole_analysis_gives_the_same_bytes_on_one_two_and_three_threads():
    # the worker pool (Option B's layers, the Gram matrices, the bootstrap products) and the
    # compiled kernels all follow numba's thread count
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, NUMBA_NUM_THREADS="3", OPENBLAS_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", _ANALYZE_SCRIPT, str(Path(__file__).resolve().parent)], env=env,
                         capture_output=True, text=True, check=True)
    lines = [line.split() for line in run.stdout.splitlines() if line]
    assert [t for t, _ in lines] == ["1", "2", "3"]
    assert len({h for _, h in lines}) == 1
