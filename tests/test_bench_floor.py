"""bench/floor.py: the operation counts of the analyze computation's floor against direct counts."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import floor  # noqa: E402  (bench/floor.py)

from uaprobe.analysis import bins  # noqa: E402

RATES = floor.Rates(gemm=2e10, add=1e10, draw=1e8)


def direct_pairs(labels: np.ndarray) -> int:
    """Pairs i < j in the same group, by enumeration."""
    return sum(1 for i, j in itertools.combinations(range(labels.size), 2) if labels[i] == labels[j])


def tiny(**changes) -> floor.Shape:
    base = dict(n_pairs=12, dim=5, n_layers=2, category_sizes=(5, 4, 3), tokens_per_statement=3.0, aniso_tokens=4,
                vocabulary=9, bins_k=(2, 3), bins_partitions=4, ci_k=3, null_partitions=6, resamples=7,
                permutations=8, lexical_seeds=2, aniso_resamples=3)
    base.update(changes)
    return floor.Shape(**base)


def test_pairs_within_and_balanced_sizes_match_the_partitions_of_the_bins_module():
    rng = np.random.default_rng(0)
    for n, k in ((12, 3), (13, 4), (7, 7)):
        labels = bins.partitions(rng, scheme="balanced", n=n, k=k, count=3)
        for row in labels:
            assert sorted(np.bincount(row, minlength=k).tolist()) == sorted(floor.balanced_sizes(n, k))
            assert floor.pairs_within(floor.balanced_sizes(n, k)) == direct_pairs(row)


def test_randint_pairs_is_the_mean_over_every_labelling():
    for n, k in ((4, 2), (5, 3)):
        counts = [direct_pairs(np.array(lab)) for lab in itertools.product(range(k), repeat=n)]
        assert floor.randint_pairs(n, k) == pytest.approx(np.mean(counts), rel=1e-12)


def test_gram_macs_counts_the_upper_triangle_and_diagonal():
    n, d = 6, 4
    direct = sum(d for i in range(n) for j in range(i, n))
    assert floor.gram_macs(n, d) == direct


def test_group_sum_adds_vector_form_counts_every_coordinate_of_both_sides():
    n, d, g = 10, 3, 4
    _, vec = floor.group_sum_adds(0, n, d, g)
    direct = 2 * n * d + 2 * g * d  # members' coordinates added, then each group's two squared norms
    assert vec == direct


def test_bootstrap_ops_counts_the_products():
    ops = floor.bootstrap_ops(n=5, rows=3, resamples=7, permutations=11)
    direct_gemm = 7 * 5 * 3 * 3 + 2 * 7 * 5 + 3 * 5 * 11
    assert ops.gemm == direct_gemm
    assert ops.add == pytest.approx(3 * 7 * np.log2(7) + 3 * 11)


def test_components_gram_matrices_are_counted_once_for_every_layer_view():
    s = tiny()
    ops = floor.components(s, RATES)
    per_view = sum(s.dim for i in range(s.n_pairs) for j in range(i, s.n_pairs))
    layers = s.policies * s.poolings * s.layers * 2 * per_view
    gram = ops["Gram matrices (shared)"].gemm
    # the layers' matrices (the kNN needs them), plus the prenorm view's only where they are cheaper
    assert gram in (layers, layers + s.policies * s.poolings * 2 * per_view,
                    layers + s.policies * 2 * per_view, layers + (s.policies * s.poolings - s.policies) * 2 * per_view)
    assert not any(o.gemm for name, o in ops.items() if name in ("random bins", "size-matched null"))


def test_bins_take_the_cheaper_form_per_view():
    # wide views: the Gram sums win (the Gram matrices are paid by the kNN anyway)
    s = tiny(dim=10_000)
    ops = floor.components(s, RATES)
    n = s.n_pairs
    gram_form = sum(s.bins_partitions * (floor.randint_pairs(n, k) + floor.pairs_within(floor.balanced_sizes(n, k)))
                    for k in s.bins_k) + 2 * s.schemes * floor.pairs_within(floor.balanced_sizes(n, s.ci_k)) \
        + n * (n - 1) / 2
    runs = s.policies * s.poolings
    # layer views in the Gram form; the prenorm view too (the GEMM of 10^4 coordinates is cheaper than its sums)
    assert ops["random bins"].add == pytest.approx(runs * s.views * gram_form)
    # narrow views and many points: the unit vectors win
    s = tiny(dim=1, n_pairs=40, category_sizes=(20, 20))
    ops = floor.components(s, RATES)
    vec = sum(2 * s.bins_partitions * (2 * s.n_pairs * s.dim + 2 * k * s.dim) for k in s.bins_k) \
        + 2 * s.schemes * s.n_pairs * s.dim
    assert ops["random bins"].add == pytest.approx(runs * s.views * vec)


def test_the_null_runs_on_the_mean_pooling_of_each_policy_only():
    s = tiny(dim=10_000)
    ops = floor.components(s, RATES)
    per_view = s.null_partitions * floor.pairs_within(s.category_sizes)
    assert ops["size-matched null"].add == pytest.approx(s.policies * s.views * per_view)


def test_knn_offers_every_distance_to_its_row():
    s = tiny()
    ops = floor.components(s, RATES)
    n = s.n_pairs
    offers = sum(1 for i in range(n) for j in range(n))  # each distance (i, j) offered to row i
    assert ops["Option B kNN, metrics"].add == pytest.approx(
        s.policies * s.poolings * s.layers * 2 * (offers + 6 * n * s.dim))


def test_draws_are_counted_once_whatever_the_policies():
    one, two = floor.components(tiny(policies=1), RATES), floor.components(tiny(policies=2), RATES)
    assert one["random draws (shared)"] == two["random draws (shared)"]
    assert two["random bins"].add == pytest.approx(2 * one["random bins"].add)


def test_floor_grows_quadratically_in_the_pairs_at_large_n():
    shape = dict(dim=576, n_layers=30, tokens_per_statement=10.0, aniso_tokens=200, vocabulary=2000)
    small = floor.components(floor.Shape(n_pairs=2300, category_sizes=(400,) * 5 + (300,), **shape), RATES)
    large = floor.components(floor.Shape(n_pairs=4600, category_sizes=(800,) * 5 + (600,), **shape), RATES)
    g_small, g_large = small["Gram matrices (shared)"].gemm, large["Gram matrices (shared)"].gemm
    assert 3.9 < g_large / g_small < 4.1


def test_shape_defaults_are_the_analysis_settings_of_params_yaml():
    from uaprobe.config import load_params

    analysis = load_params(floor.PARAMS).analysis
    sizes = dict(n_pairs=12, dim=5, n_layers=2, category_sizes=(5, 4, 3), tokens_per_statement=3.0, aniso_tokens=4,
                 vocabulary=9)
    s = floor.Shape(**sizes)
    assert s == floor.Shape.of(**sizes, params=analysis)
    assert (s.bins_k, s.bins_partitions, s.ci_k) == (analysis.bins.k, analysis.bins.partitions, analysis.bins.ci_k)
    assert (s.resamples, s.permutations) == (analysis.bootstrap_resamples, analysis.permutations)
    r = analysis.robustness
    assert (s.null_partitions, s.lexical_seeds, s.aniso_resamples) == (r.null_partitions, r.lexical_seeds,
                                                                       r.anisotropy_bootstrap)
    assert floor.Shape(**sizes, permutations=7).permutations == 7


def test_ops_arithmetic_and_seconds():
    a = floor.Ops(gemm=2e10, add=1e10, draw=1e8)
    assert (a + a).seconds(RATES) == pytest.approx(6.0)
    assert (2 * a) == (a + a)
    assert floor.seconds({"x": a}, RATES) == {"x": pytest.approx(3.0)}


def test_component_clock_attributes_nested_time_exclusively(monkeypatch):
    import timing  # bench/timing.py

    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def wait(seconds: float) -> None:
        now[0] += seconds

    clock = timing.ComponentClock()
    inner = clock._wrap(lambda: wait(2.0), "inner")
    outer = clock._wrap(lambda: (wait(1.0), inner(), wait(4.0)), "outer")
    skipped = clock._wrap(lambda: wait(8.0), lambda: None)
    outer()
    skipped()
    assert clock.seconds == {"outer": 5.0, "inner": 2.0}


def test_component_clock_times_every_component_of_an_analysis(tmp_path):
    import timing  # bench/timing.py

    from synthetic_h5 import write_synthetic_h5
    from uaprobe.analysis import option_b
    from uaprobe.analysis.pipeline import analyze_model
    from uaprobe.config import AnalysisParams, BinsParams, RobustnessParams
    from uaprobe.extraction.store import read_embeddings

    emb = read_embeddings(write_synthetic_h5(tmp_path / "s.h5", n_layers=2))
    params = AnalysisParams(bootstrap_resamples=50, permutations=50, bins=BinsParams(k=(3,), partitions=3, ci_k=3),
                            robustness=RobustnessParams(lexical_seeds=1, null_partitions=5, anisotropy_bootstrap=3))
    pair_metrics = option_b.pair_metrics
    clock = timing.ComponentClock()
    with clock.patched():
        analyze_model(emb, params=params, model_id="s")
    assert option_b.pair_metrics is pair_metrics  # restored
    assert set(clock.seconds) == {"categories, pair scores", "random bins", "size-matched null", "lexical baseline",
                                  "bootstrap, permutation tests", "Option B kNN, metrics", "anisotropy"}


def test_component_clock_fails_loudly_where_a_target_is_gone_or_never_called(monkeypatch):
    import timing  # bench/timing.py

    from uaprobe.analysis import option_b

    pair_metrics = option_b.pair_metrics
    with pytest.raises(RuntimeError, match=r"option_b\.pair_metrics, .* never called .*update ComponentClock"):
        with timing.ComponentClock().patched():
            pass  # nothing runs: every target is missed
    assert option_b.pair_metrics is pair_metrics  # restored before the error
    monkeypatch.delattr(option_b, "pair_metrics")
    with pytest.raises(RuntimeError, match=r"option_b\.pair_metrics is not a function"):
        with timing.ComponentClock().patched():
            pass
