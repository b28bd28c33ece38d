"""Two-stage cluster bootstrap (uaprobe.analysis.inference.clusterboot): the weighted r against a direct
computation on the expanded resample, the structure of the draws, and intervals on data with a
known clustering."""

from __future__ import annotations

import numpy as np
import pytest

from uaprobe.analysis.inference import clusterboot, stats
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons


def test_weighted_pearson_is_the_r_of_the_expanded_resample():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 20)), rng.normal(size=20)
    counts = rng.integers(0, 4, size=(7, 20)).astype(float)  # totals differ between resamples
    got = clusterboot.weighted_pearson(x, y, counts)
    for b in range(7):
        idx = np.repeat(np.arange(20), counts[b].astype(int))
        for m in range(3):
            assert got[m, b] == pytest.approx(np.corrcoef(x[m, idx], y[idx])[0, 1], abs=1e-12)
    ones = clusterboot.weighted_pearson(x, y, np.ones((1, 20)))[:, 0]
    np.testing.assert_allclose(ones, [np.corrcoef(row, y)[0, 1] for row in x], rtol=0, atol=1e-12)
    # a resample holding one point: no variance, undefined
    one = np.zeros((1, 20))
    one[0, 3] = 5.0
    assert np.isnan(clusterboot.weighted_pearson(x, y, one)).all()


def test_each_resample_holds_whole_categories_resampled_within():
    cat = np.repeat([0, 1, 2, 3], [5, 3, 6, 4])
    d = clusterboot.cluster_bootstrap(np.random.default_rng(1), category_of_pair=cat, resamples=500)
    sizes = np.bincount(cat)
    assert d.counts.shape == (500, cat.size)
    for b in range(500):
        per_cat = np.array([d.counts[b, cat == c].sum() for c in range(4)])
        times = per_cat / sizes
        assert np.allclose(times, np.round(times))  # each drawn category contributes its own size
        assert times.sum() == 4 and (times > 0).sum() == d.distinct[b]
    # every category is drawn about 1/C of the time, and the pairs within it uniformly
    assert abs(d.counts[:, cat == 1].sum() / (500 * 4 * 3) - 0.25) < 0.03
    again = clusterboot.cluster_bootstrap(np.random.default_rng(1), category_of_pair=cat, resamples=500)
    np.testing.assert_array_equal(again.counts, d.counts)


def _pair_interval(x, y, resamples, rng):
    counts = stats.resample_counts(stats.bootstrap_indices(rng, n=y.size, resamples=resamples), n=y.size)
    lo, hi, _ = stats.percentile_interval(stats.bootstrap_pearson(x[None], y, counts), level=0.95)
    return lo[0], hi[0]


def test_a_correlation_carried_by_six_categories_gets_a_wide_interval():
    rng = np.random.default_rng(2)
    cat = np.repeat(np.arange(6), 40)
    offset = rng.normal(size=6)[cat] * 2.0
    x, y = offset + rng.normal(size=cat.size), offset + rng.normal(size=cat.size)  # r from the categories only
    d = clusterboot.cluster_bootstrap(np.random.default_rng(3), category_of_pair=cat, resamples=2000)
    ci = clusterboot.cluster_interval(x[None], y, d, level=0.95)
    lo, hi = ci.low[0], ci.high[0]
    p_lo, p_hi = _pair_interval(x, y, 2000, np.random.default_rng(4))
    assert p_hi - p_lo < 0.25 and hi - lo > 3 * (p_hi - p_lo)
    assert lo < p_lo


def test_without_clustering_the_interval_is_the_pair_bootstraps_widened_by_the_second_stage():
    rng = np.random.default_rng(5)
    cat = np.repeat(np.arange(6), 40)
    x = rng.normal(size=cat.size)
    y = 0.5 * x + rng.normal(size=cat.size)
    d = clusterboot.cluster_bootstrap(np.random.default_rng(6), category_of_pair=cat, resamples=2000)
    ci = clusterboot.cluster_interval(x[None], y, d, level=0.95)
    p_lo, p_hi = _pair_interval(x, y, 2000, np.random.default_rng(7))
    # both stages with replacement count the within-category variance twice, less its 1/C share at the
    # first stage: variance x (2 - 1/C), width x sqrt(11/6) ~ 1.35 for C = 6 -- conservative, never narrower
    assert 1.0 < (ci.high[0] - ci.low[0]) / (p_hi - p_lo) < 1.7


def test_undefined_rows_have_a_reason():
    cat = np.repeat(np.arange(3), 5)
    rng = np.random.default_rng(8)
    x = np.stack([rng.normal(size=15), np.full(15, 2.0), np.r_[np.nan, rng.normal(size=14)]])
    ci = document(clusterboot.cluster_interval(x, rng.normal(size=15), clusterboot.cluster_bootstrap(
        rng, category_of_pair=cat, resamples=50), level=0.9))
    reasons = take_reasons(ci)
    assert ci["low"][0] is not None and ci["low"][1] is None and ci["high"][2] is None
    assert "variance" in reasons["low/1"] and "finite" in reasons["high/2"]


def test_phase_intervals_are_percentiles_of_the_resampled_phase_means():
    rng = np.random.default_rng(9)
    cat = np.repeat(np.arange(4), 10)
    x, y = rng.normal(size=(5, 40)), rng.normal(size=40)
    d = clusterboot.cluster_bootstrap(np.random.default_rng(10), category_of_pair=cat, resamples=300)
    got = document(clusterboot.phase_intervals(x, y, d, phases={"early": (0, 1), "late": (3, 4), "none": ()},
                                               level=0.9))
    reasons = take_reasons(got)
    rb = np.array([[np.corrcoef(x[v, np.repeat(np.arange(40), d.counts[b].astype(int))],
                                y[np.repeat(np.arange(40), d.counts[b].astype(int))])[0, 1] for b in range(300)]
                   for v in range(5)])
    for name, layers in (("early", [0, 1]), ("late", [3, 4])):
        means = rb[layers].mean(axis=0)
        means = means[np.isfinite(means)]
        assert got[name]["low"] == pytest.approx(np.percentile(means, 5), abs=1e-12)
        assert got[name]["high"] == pytest.approx(np.percentile(means, 95), abs=1e-12)
    assert got["none"]["low"] is None and reasons["none/low"] == "the phase has no layer"
