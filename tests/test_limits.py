"""Values a file or a machine cannot take (:mod:`uaprobe.analysis.run.limits`): ``abtt_k`` at the states' rank,
resampling counts beyond the memory. The stage refusing them is tested in test_stage_faults.py."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from synthetic_h5 import CATEGORIES, write_synthetic_h5
from uaprobe.analysis.compute import workers
from uaprobe.analysis.run import limits, pipeline
from uaprobe.analysis.geometry import representation as reps
from uaprobe.analysis.run.pipeline import analyze_model
from uaprobe.config import AnalysisParams, BinsParams, RobustnessParams
from uaprobe.errors import ConfigError
from uaprobe.extraction.store import read_embeddings


@pytest.mark.parametrize("n,d", [(12, 5), (6, 9)])
def test_abtt_refuses_as_many_directions_as_the_rank_bound(n: int, d: int) -> None:
    """min(N - 1, D) directions of the centred states span everything: removing them leaves rounding noise,
    so the library refuses it instead of clamping; one fewer leaves a real residual."""
    x = np.random.default_rng(0).standard_normal((n, 2, d))
    bound = min(n - 1, d)
    with pytest.raises(ValueError, match=rf"k = {bound} .* rank at most {bound}"):
        reps.transform(x, "abtt", k=bound)
    with pytest.raises(ValueError, match="k must be in"):
        reps.abtt_and_shares(x[:, 0], k=bound + 100, tops=(1,))
    kept = reps.transform(x, "abtt", k=bound - 1)
    xc = x[:, 0] - x[:, 0].mean(axis=0)
    assert np.linalg.norm(kept[:, 0]) > 1e-3 * np.linalg.norm(xc)
    sizes = limits.Sizes(statements=n, layers=2, hidden=d, categories=6)
    assert limits.abtt_bound(sizes) == bound
    limits.check_abtt(AnalysisParams(abtt_k=bound - 1), sizes, source="f.h5")
    with pytest.raises(ConfigError, match=rf"analysis\.abtt_k: got {bound}, expected an integer from 1 to {bound - 1} "
                                          r"for f\.h5"):
        limits.check_abtt(AnalysisParams(abtt_k=bound), sizes, source="f.h5")


def test_the_memory_check_names_the_largest_count_and_a_value_that_fits() -> None:
    sizes = limits.Sizes(statements=460, layers=31, hidden=576, categories=6)
    params = AnalysisParams(bootstrap_resamples=10**9)
    needs = limits.memory_needs(params, sizes)
    # the bootstrap's (B, n) multiplicities and indices and (rows, B) correlations, directly
    assert needs["analysis.bootstrap_resamples"] == 8 * 10**9 * (8 * 230 + 24 * 31)
    available = 16 * 2**30
    with pytest.raises(ConfigError) as caught:
        limits.check_memory(params, sizes, available=available, source="x.h5")
    message = str(caught.value)
    gib = needs["analysis.bootstrap_resamples"] / 2**30
    assert message.startswith(f"analysis.bootstrap_resamples: got 1,000,000,000, which needs about {gib:,.1f} GiB")
    assert "230 pairs, 31 layers" in message and "16.0 GiB available" in message
    fit = int(message.rsplit("analysis.bootstrap_resamples=", 1)[1].rstrip("`)"))
    limits.check_memory(params.model_copy(update={"bootstrap_resamples": fit}), sizes, available=available, source="x")
    with pytest.raises(ConfigError):
        limits.check_memory(params.model_copy(update={"bootstrap_resamples": int(fit * 1.01) + 1}), sizes,
                            available=available, source="x")
    limits.check_memory(params, sizes, available=None, source="x.h5")  # unknown memory: nothing refused
    limits.check_memory(AnalysisParams(), sizes, available=available, source="x.h5")  # the defaults fit


def test_available_memory_is_the_least_of_the_system_the_container_and_the_process_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  8000000 kB\nMemAvailable:    3000000 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "memory.max").write_text("2147483648\n")
    (cgroup / "memory.current").write_text("1073741824\n")
    monkeypatch.setattr(limits, "_address_space_room", lambda: None)
    assert limits.available_memory(meminfo, cgroup) == 2**30
    (cgroup / "memory.max").write_text("max\n")
    assert limits.available_memory(meminfo, cgroup) == 3000000 * 1024
    monkeypatch.setattr(limits, "_address_space_room", lambda: 5 * 2**20)
    assert limits.available_memory(meminfo, cgroup) == 5 * 2**20
    monkeypatch.setattr(limits, "_address_space_room", lambda: None)
    assert limits.available_memory(tmp_path / "absent", tmp_path / "absent") is None


def _traced_peak(emb: object, params: AnalysisParams, source: str) -> int:
    tracemalloc.start()
    try:
        analyze_model(emb, params=params, model_id="m", display="M", source=source)  # type: ignore[arg-type]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("key,large,tight", [("bootstrap_resamples", 20_100, True), ("permutations", 20_100, True),
                                             ("bins.partitions", 1_505, False)])
def test_the_estimate_bounds_the_memory_the_analysis_takes(tmp_path: Path, key: str, large: int, tight: bool,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The peak the analysis' allocations reach grows with a count by no more than the estimate says (and,
    where the count's arrays outgrow the rest of the run at a test's size, by more than a quarter of it: the
    estimate is not a blanket refusal; the partitions' arrays stay below the run's own peak here, or the
    test would take minutes). The analysis runs on one thread here: with several, which arrays are alive at
    the peak depends on how the threads happen to interleave, and so would the difference of two peaks."""
    monkeypatch.setattr(workers, "worker_count", lambda: 1)
    monkeypatch.setattr(pipeline, "BESIDE_WORKERS", 1)
    h5 = write_synthetic_h5(tmp_path / "m.h5", pairs_per_category=(16, 16, 16, 16, 16, 16), n_layers=4, hidden=16,
                            category_names=CATEGORIES)
    emb = read_embeddings(h5)
    small = AnalysisParams(bootstrap_resamples=100, permutations=100, bins=BinsParams(k=(3,), partitions=5, ci_k=3),
                           robustness=RobustnessParams(lexical_seeds=1, null_partitions=10, anisotropy_bootstrap=5))
    large_params = (small.model_copy(update={"bins": small.bins.model_copy(update={"partitions": large})})
                    if key == "bins.partitions" else small.model_copy(update={key: large}))
    sizes = limits.sizes_of(emb)
    needs = [limits.memory_needs(p, sizes)[f"analysis.{key}"] for p in (small, large_params)]
    grown = _traced_peak(emb, large_params, str(h5)) - _traced_peak(emb, small, str(h5))
    assert grown <= needs[1] - needs[0], (grown, needs)
    assert not tight or grown > (needs[1] - needs[0]) / 4, (grown, needs)
