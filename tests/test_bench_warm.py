"""bench/warm.py: the benchmark's untimed run loads every kernel signature a larger analysis runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
TESTS = Path(__file__).resolve().parent

# In a fresh process (the kernels a process has loaded are process-wide): a small file is analysed
# by the warm-up (``full``) or by one analysis in the default form, then a larger one (past the 512
# pairs where the Gram kernel sums tile by tile) along every path of ``warm.every_path``: the
# cosines' default form, the unit-vector form and the Gram form in pieces; prints the kernel
# signatures the larger analysis loaded first.
SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [{bench!r}, {tests!r}]
    import warm
    from synthetic_h5 import write_synthetic_h5
    from uaprobe.analysis.pipeline import analyze_model
    from uaprobe.config import AnalysisParams, BinsParams, RobustnessParams
    from uaprobe.extraction.store import read_embeddings

    params = AnalysisParams(bootstrap_resamples=50, permutations=50, bins=BinsParams(k=(3, 5), partitions=3, ci_k=3),
                            robustness=RobustnessParams(lexical_seeds=1, null_partitions=5, anisotropy_bootstrap=3))
    small = read_embeddings(write_synthetic_h5({tmp!r} + "/small.h5", pairs_per_category=(3, 3, 3, 3), n_layers=2,
                                               hidden=8))
    big = read_embeddings(write_synthetic_h5({tmp!r} + "/big.h5", pairs_per_category=(150, 140, 160, 150),
                                             n_layers=2, hidden=8, seed=1))

    if {full!r}:
        warm.every_path(small, params)
    else:
        analyze_model(small, params=params, model_id="s")
    loaded = warm.signatures()
    warm.every_path(big, params)
    print(json.dumps({{"before": len(loaded), "late": sorted(n for n, _ in warm.signatures() - loaded)}}))
""")


def late_kernels(tmp_path: Path, *, full: bool) -> dict:
    script = SCRIPT.format(bench=str(BENCH), tests=str(TESTS), tmp=str(tmp_path), full=full)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_warm_up_loads_every_kernel_a_larger_analysis_runs(tmp_path):
    got = late_kernels(tmp_path, full=True)
    assert got["before"] > 0
    assert got["late"] == []


def test_without_the_warm_up_a_larger_analysis_loads_the_unit_vector_kernels_late(tmp_path):
    # what the check above guards against: one analysis of a small file, where the Gram form is always the
    # cheaper, never runs the unit-vector form's kernels
    got = late_kernels(tmp_path, full=False)
    assert {"uaprobe.analysis.kernels._pack_view", "uaprobe.analysis.kernels._view_squares"} <= set(got["late"])
