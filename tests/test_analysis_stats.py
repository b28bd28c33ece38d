"""Each vectorised statistic against scipy (or, where scipy has none, a direct, readable computation)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from uaprobe.analysis.inference import stats
from uaprobe.analysis.inference.groupstats import Resampling, group_stats, leave_one_out


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def test_pearson_matches_scipy_row_by_row(rng):
    x = rng.standard_normal((7, 12))
    y = rng.standard_normal(12)
    got = stats.pearson(x, y)
    for i in range(7):
        r, p = sps.pearsonr(x[i], y)
        assert got.r[i] == pytest.approx(r, abs=1e-12)
        assert got.p[i] == pytest.approx(p, rel=1e-9, abs=1e-14)
        assert got.reason[i] == ""
    assert (got.n == 12).all()


def test_pearson_with_mask_equals_pearson_of_the_selected_points(rng):
    x = rng.standard_normal((5, 20))
    y = rng.standard_normal((5, 20))
    mask = rng.random((5, 20)) < 0.6
    got = stats.pearson(x, y, mask=mask)
    for i in range(5):
        r, p = sps.pearsonr(x[i, mask[i]], y[i, mask[i]])
        assert got.r[i] == pytest.approx(r, abs=1e-12)
        assert got.p[i] == pytest.approx(p, rel=1e-9)


def test_pearson_undefined_cases_are_nan_with_reasons():
    x = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, np.nan, 4.0], [1.0, 2.0, 3.0, 4.0]])
    y = np.array([[1.0, 2.0, 3.0, 5.0], [2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 5.0], [1.0, 2.0, 3.0, 5.0]])
    mask = np.array([True, True, True, True])[None].repeat(4, 0)
    mask[3] = [True, True, False, False]
    got = stats.pearson(x, y, mask=mask, x_name="UA", y_name="preference")
    assert np.isnan(got.r).all() and np.isnan(got.p).all()
    assert list(got.reason) == ["UA is constant", "preference is constant", "non-finite input", "fewer than 3 points"]


def test_pearson_p_is_zero_for_perfect_correlation():
    got = stats.pearson(np.arange(5.0), 2 * np.arange(5.0) + 1)
    assert got.r == pytest.approx(1.0)
    assert got.p == pytest.approx(0.0, abs=1e-12)


def test_spearman_matches_scipy_with_ties(rng):
    x = rng.integers(0, 5, size=(4, 15)).astype(float)
    y = rng.standard_normal(15)
    got = stats.spearman(x, y)
    for i in range(4):
        res = sps.spearmanr(x[i], y)
        assert got.r[i] == pytest.approx(res.statistic, abs=1e-12)
        assert got.p[i] == pytest.approx(res.pvalue, rel=1e-9)


def test_average_ranks_match_scipy(rng):
    x = rng.integers(0, 6, size=(5, 30)).astype(float)
    assert np.array_equal(stats.average_ranks(x), sps.rankdata(x, axis=-1))
    y = rng.standard_normal(17)
    assert np.array_equal(stats.average_ranks(y), sps.rankdata(y))


def test_percentile_matches_numpy_and_ignores_nan(rng):
    v = rng.standard_normal((3, 101))
    v[1, ::7] = np.nan
    v[2] = np.nan
    for q in (2.5, 50.0, 97.5):
        got, valid = stats.percentile(v, q)
        assert got[0] == pytest.approx(np.percentile(v[0], q), abs=1e-15)
        assert got[1] == pytest.approx(np.percentile(v[1][np.isfinite(v[1])], q), abs=1e-15)
        assert np.isnan(got[2])
        assert valid.tolist() == [101, 101 - len(range(0, 101, 7)), 0]


def test_resample_counts_are_multiplicities(rng):
    idx = stats.bootstrap_indices(rng, n=6, resamples=50)
    counts = stats.resample_counts(idx, n=6)
    for b in range(50):
        assert counts[b].tolist() == np.bincount(idx[b], minlength=6).tolist()


def test_bootstrap_pearson_matches_a_loop(rng):
    x = rng.standard_normal((4, 9))
    y = rng.standard_normal(9)
    idx = stats.bootstrap_indices(rng, n=9, resamples=300)
    got = stats.bootstrap_pearson(x, y, stats.resample_counts(idx, n=9))
    for m in range(4):
        for b in range(300):
            xb, yb = x[m, idx[b]], y[idx[b]]
            if np.ptp(xb) == 0 or np.ptp(yb) == 0:
                assert np.isnan(got[m, b])
            else:
                assert got[m, b] == pytest.approx(np.corrcoef(xb, yb)[0, 1], abs=1e-10)


@pytest.mark.parametrize("k", [1, 2, 3, 9, 129])
def test_pearson_of_masked_broadcast_rows_against_each_rows_own_points(rng, k):
    """Masked and broadcast as the random bins call it, with constant, non-finite and NaN rows among
    them: each row's r is ``np.corrcoef`` of its selected points, or NaN with the reason."""
    x = rng.standard_normal((4, 7, k)) * 3.0 + 1.0
    y = rng.standard_normal((1, 7, k))
    mask = rng.random((1, 7, k)) > 0.2
    x[0, 0] = 2.5
    y[0, 1] = 1.0
    x[1, 2, 0] = np.nan
    y[0, 3, k - 1] = np.inf
    for xx, yy, mm in ((x, y, mask), (x, y, None), (x[2, 4], y[0, 4], None), (x, y[0], mask[0])):
        corr = stats.pearson(xx, yy, mask=mm)
        xb, yb = np.broadcast_arrays(np.asarray(xx, dtype=float), np.asarray(yy, dtype=float))
        w = np.ones(xb.shape, dtype=bool) if mm is None else np.broadcast_to(mm, xb.shape)
        assert np.shape(corr.r) == np.shape(corr.n) == xb.shape[:-1]
        for idx in np.ndindex(xb.shape[:-1]):
            xs, ys = xb[idx][w[idx]], yb[idx][w[idx]]
            assert corr.n[idx] == xs.size
            if xs.size < 3:
                want_reason = "fewer than 3 points"
            elif not (np.isfinite(xs).all() and np.isfinite(ys).all()):
                want_reason = "non-finite input"
            elif np.ptp(xs) == 0:
                want_reason = "x is constant"
            elif np.ptp(ys) == 0:
                want_reason = "y is constant"
            else:
                want_reason = ""
            assert corr.reason[idx] == want_reason
            if want_reason:
                assert np.isnan(corr.r[idx])
            else:
                np.testing.assert_allclose(corr.r[idx], np.corrcoef(xs, ys)[0, 1], rtol=1e-12, atol=1e-14)


def test_pearson_of_single_values_is_undefined_not_an_error():
    """0-d inputs are one point each: too few for an r."""
    corr = stats.pearson(1.0, 2.0)
    assert np.isnan(corr.r) and corr.n == 1 and corr.reason == "fewer than 3 points"


def test_bootstrap_pearson_is_the_bytes_of_its_array_expressions(rng):
    """The compiled pass from the count-weighted sums against the array expressions it replaces, with
    degenerate resamples (a point drawn every time) among them, and the same memory layout."""
    x = rng.standard_normal((5, 12)) + 3.0
    x[4] = x[4, 0]  # a constant row: every resample degenerate
    y = rng.standard_normal(12)
    idx = stats.bootstrap_indices(rng, n=12, resamples=400)
    idx[:7] = 3  # resamples of one point
    counts = stats.resample_counts(idx, n=12)
    n = 12
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    sx, sxx, sxy = counts @ xc.T, counts @ (xc * xc).T, counts @ (xc * yc).T
    sy, syy = (counts @ yc)[:, None], (counts @ (yc * yc))[:, None]
    vx, vy, cxy = sxx - sx * sx / n, syy - sy * sy / n, sxy - sx * sy / n
    ok = (vx > stats.DEGENERATE_RELATIVE_VARIANCE * (xc * xc).sum(axis=-1)[None, :]) \
        & (vy > stats.DEGENERATE_RELATIVE_VARIANCE * float((yc * yc).sum()))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(ok, np.clip(cxy / np.sqrt(vx * vy), -1.0, 1.0), np.nan).T
    got = stats.bootstrap_pearson(x, y, counts)
    assert np.array_equal(got, want, equal_nan=True) and got.strides == want.strides
    assert np.isnan(got[4]).all() and np.isnan(got[:, :7]).all() and np.isfinite(got[:4, 7:]).any()


def test_bootstrap_resample_without_variance_is_dropped_not_zero():
    x = np.array([[0.1, 0.2, 0.3]])
    y = np.array([1.0, 2.0, 4.0])
    idx = np.array([[0, 0, 0], [1, 1, 1], [0, 1, 2], [2, 2, 1]])
    rb = stats.bootstrap_pearson(x, y, stats.resample_counts(idx, n=3))
    assert np.isnan(rb[0, 0]) and np.isnan(rb[0, 1])
    assert np.isfinite(rb[0, 2]) and np.isfinite(rb[0, 3])
    iv = stats.bootstrap_r_interval(x, y, stats.resample_counts(idx, n=3), level=0.95,
                                    r_reason=np.array([""], dtype=object))
    assert iv.valid[0] == 2


def test_bootstrap_interval_all_degenerate_has_a_reason():
    x = np.array([[0.1, 0.2, 0.3]])
    y = np.array([1.0, 2.0, 4.0])
    idx = np.array([[0, 0, 0], [1, 1, 1]])
    iv = stats.bootstrap_r_interval(x, y, stats.resample_counts(idx, n=3), level=0.95,
                                    r_reason=np.array([""], dtype=object))
    assert np.isnan(iv.low[0]) and iv.valid[0] == 0
    assert "no bootstrap resample" in iv.reason[0]


def test_bootstrap_interval_matches_the_seed_on_the_same_indices(rng):
    x = rng.standard_normal(20)
    y = 0.5 * x + rng.standard_normal(20)
    idx = rng.integers(0, 20, size=(2000, 20))
    rs = [sps.pearsonr(x[i], y[i])[0] for i in idx]
    iv = stats.bootstrap_r_interval(x[None], y, stats.resample_counts(idx, n=20), level=0.9,
                                    r_reason=np.array([""], dtype=object))
    assert iv.low[0] == pytest.approx(np.percentile(rs, 5), abs=1e-10)
    assert iv.high[0] == pytest.approx(np.percentile(rs, 95), abs=1e-10)


def test_bootstrap_mean_matches_a_loop(rng):
    x = rng.standard_normal((2, 6))
    idx = stats.bootstrap_indices(rng, n=6, resamples=100)
    got = stats.bootstrap_mean(x, stats.resample_counts(idx, n=6))
    assert np.allclose(got, np.stack([[x[m, i].mean() for i in idx] for m in range(2)]), atol=1e-14)


def _scipy_exact_permutation_p(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """scipy's exact pairings test of |Pearson r|, every row of ``x`` (M, n) at once against ``y`` (n,)."""
    def abs_r(xp: np.ndarray, axis: int) -> np.ndarray:
        return np.abs(sps.pearsonr(xp, np.broadcast_to(y, xp.shape), axis=axis).statistic)

    res = sps.permutation_test((x,), abs_r, permutation_type="pairings", n_resamples=np.inf,
                               alternative="greater", vectorized=True, axis=-1)
    return res.pvalue


@pytest.mark.parametrize("n", [4, 5, 6])
def test_exact_permutation_p_equals_scipy_permutation_test(rng, n):
    x = rng.standard_normal((3, n))
    y = rng.standard_normal(n)
    orders, mode = stats.permutation_orders(rng, n=n, permutations=10_000)
    assert mode == "exact" and orders.shape == (math.factorial(n), n)
    got = stats.permutation_p(x, y, r=stats.pearson(x, y).r, orders=orders, mode=mode)
    assert np.array_equal(got, _scipy_exact_permutation_p(x, y))


def _exact_covariance_sum(x: Sequence[float], y: Sequence[float]) -> Fraction:
    """``sum((x - mean(x)) * y)``, n times the covariance of ``x`` and ``y``, with the floats taken as the
    exact rationals they hold: no rounding, so 0 means r is exactly 0."""
    xs = [Fraction(float(v)) for v in x]
    mean_x = sum(xs, Fraction(0)) / len(xs)
    return sum(((v - mean_x) * Fraction(float(w)) for v, w in zip(xs, y, strict=True)), Fraction(0))


def _exact_permutation_p(x: np.ndarray, y: np.ndarray) -> Fraction:
    """The exact two-sided permutation p of Pearson r of ``x`` (n,) and ``y`` (n,), in rational arithmetic:
    the share of all n! orders of ``y`` whose |r| is at least the observed |r|. Every order has the same
    sums of squares, so ``|r_perm| >= |r|`` is ``|S_perm| >= |S|`` (:func:`_exact_covariance_sum`): a tie
    is an equality of rationals, not a matter of rounding."""
    observed = abs(_exact_covariance_sum(x, y))
    orders = list(itertools.permutations(range(len(y))))
    hits = sum(abs(_exact_covariance_sum(x, [y[i] for i in order])) >= observed for order in orders)
    return Fraction(hits, len(orders))


def test_exact_permutation_p_with_tied_values_equals_an_exact_enumeration(rng):
    """Integer data: many orders give the same |r| exactly, and some rows have r exactly 0 (rows 0 and 1
    of the seeded draw, and one built so). The reference decides ties in exact arithmetic; scipy is
    compared only where r is away from 0, since its tie rule is relative to the observed statistic:
    at r = 0 the observed |r| is rounding noise (2.4e-17 on AVX-512 machines, 0 on others), and its p
    for those rows (0.85, 0.93 there) is the noise's, not the data's."""
    x = rng.integers(0, 3, size=(4, 6)).astype(float)
    x[:, 0], x[:, 1] = 0.0, 2.0  # no constant row
    y = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 5.0])
    x = np.vstack([x, [0.0, 2.0, 2.0, 0.0, 1.0, 1.0]])  # sum((x - mean x) * y) = 0: r is exactly 0
    orders, mode = stats.permutation_orders(rng, n=6, permutations=720)
    r = stats.pearson(x, y).r
    got = stats.permutation_p(x, y, r=r, orders=orders, mode=mode)
    assert mode == "exact"
    exact = [_exact_permutation_p(row, y) for row in x]
    assert got.tolist() == [float(p) for p in exact]
    zero = np.array([_exact_covariance_sum(row, y) == 0 for row in x])
    assert zero.tolist() == [True, True, False, False, True]
    assert (got[zero] == 1.0).all()  # every order's |r| is at least 0
    assert (got > 1 / 720).all()  # ties did count
    away = np.abs(r) > 1e-6
    assert away.tolist() == (~zero).tolist()
    assert np.array_equal(got[away], _scipy_exact_permutation_p(x[away], y))


def test_random_permutation_p_matches_scipy_pearsonr_over_the_orders(rng):
    x = rng.standard_normal((2, 30))
    y = 0.3 * x[0] + rng.standard_normal(30)
    orders, mode = stats.permutation_orders(rng, n=30, permutations=500)
    assert mode == "random"
    assert all(sorted(o) == list(range(30)) for o in orders)
    r = stats.pearson(x, y).r
    got = stats.permutation_p(x, y, r=r, orders=orders, mode=mode)
    r_perm = sps.pearsonr(np.broadcast_to(x[:, None, :], (2, 500, 30)), y[orders], axis=-1).statistic
    hits = (np.abs(r_perm) >= np.abs(r)[:, None] - stats.TIE_TOLERANCE).sum(axis=-1)
    assert np.allclose(got, (1 + hits) / 501, rtol=0, atol=1e-15)


@pytest.mark.parametrize("level", [0.9, 0.95])
def test_fisher_interval_equals_scipy_pearsonr_confidence_interval(rng, level):
    x = rng.standard_normal((6, 9))
    y = 0.4 * x + rng.standard_normal((6, 9))
    x[:, :4] = x[:, :4] * np.arange(1, 5)  # varied r
    res = sps.pearsonr(x, y, axis=-1)
    ref = res.confidence_interval(confidence_level=level)
    lo, hi, reason = stats.fisher_interval(r=res.statistic, n=np.full(6, 9), level=level)
    assert np.array_equal(lo, ref.low) and np.array_equal(hi, ref.high)
    assert (reason == "").all()
    row = sps.pearsonr(x[0, :5], y[0, :5])  # n = 5, one row
    lo, hi, _ = stats.fisher_interval(r=row.statistic, n=5, level=level)
    assert (lo, hi) == tuple(row.confidence_interval(confidence_level=level))


def test_fisher_interval_is_undefined_without_r_or_with_three_points():
    lo, hi, reason = stats.fisher_interval(r=np.array([np.nan, 0.5, 0.5]), n=np.array([10, 3, 4]), level=0.95)
    assert np.isnan(lo[:2]).all() and np.isnan(hi[:2]).all() and np.isfinite([lo[2], hi[2]]).all()
    assert reason.tolist() == ["r is undefined", "the Fisher-z interval needs at least 4 points", ""]


def _holm_reference(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def test_holm_matches_a_readable_procedure_and_bh_matches_scipy(rng):
    for _ in range(20):
        p = rng.random(rng.integers(1, 15)) ** 3
        assert np.allclose(stats.holm(p), _holm_reference(list(p)))
        assert np.array_equal(stats.benjamini_hochberg(p), sps.false_discovery_control(p, method="bh"))


def test_corrections_leave_nan_out_of_the_family():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    assert np.allclose(stats.holm(p)[[0, 2, 3]], _holm_reference([0.01, 0.04, 0.03]))
    assert np.array_equal(stats.benjamini_hochberg(p)[[0, 2, 3]], sps.false_discovery_control([0.01, 0.04, 0.03]))
    assert np.isnan(stats.holm(p)[1]) and np.isnan(stats.benjamini_hochberg(p)[1])
    assert np.isnan(stats.benjamini_hochberg(np.array([np.nan, np.nan]))).all()


def test_holm_rejections_match_the_step_down_rule():
    p = np.array([0.001, 0.03, 0.013, 0.5])
    # step-down at alpha 0.05: 0.001 <= 0.05/4, 0.013 <= 0.05/3, 0.03 > 0.05/2 -> stop
    assert (stats.holm(p) <= 0.05).tolist() == [True, False, True, False]


def test_sign_changes_and_peaks():
    r = np.array([0.2, -0.1, np.nan, -0.3, 0.4, 0.0, -0.2])
    assert stats.sign_changes(r) == [(0, 1), (3, 4)]
    assert stats.peak(r) == 4 and stats.peak(r, lowest=True) == 3
    assert stats.peak(np.array([np.nan, np.nan])) is None


def test_cohens_d_is_the_seeds():
    x = np.array([0.1, -0.2, 0.05])
    assert stats.cohens_d(x) == pytest.approx(x.mean() / (x.std() + 1e-10))


@pytest.mark.parametrize("n", [3, 9, 40])
def test_line_fit_equals_linregress(rng, n):
    y = np.cumsum(rng.standard_normal(n))
    fit = stats.line_fit(y)
    ref = sps.linregress(np.arange(n), y)
    assert (fit.slope, fit.intercept, fit.r, fit.p) == (ref.slope, ref.intercept, ref.rvalue, ref.pvalue)
    assert fit.n == n and fit.reason == {}


def test_line_fit_undefined_parts_have_reasons():
    short = stats.line_fit(np.array([1.0]))
    assert np.isnan(short.slope) and short.reason["slope"] == "fewer than 2 points"
    gap = stats.line_fit(np.array([1.0, np.nan, 2.0]))
    assert np.isnan(gap.intercept) and gap.reason["intercept"] == "non-finite input"
    flat = stats.line_fit(np.ones(4))
    assert flat.slope == 0.0 and flat.intercept == 1.0 and np.isnan(flat.r) and np.isnan(flat.p)
    assert flat.reason == {"r": "the values is constant", "p": "the values is constant"}
    two = stats.line_fit(np.array([1.0, 3.0]))
    assert (two.slope, two.intercept, two.r) == (2.0, 1.0, 1.0) and np.isnan(two.p)
    assert two.reason == {"p": "a p-value needs at least 3 points"}


def test_rng_for_is_reproducible_and_family_specific():
    a = stats.rng_for(seed=42, name="bins").random(3)
    b = stats.rng_for(seed=42, name="bins").random(3)
    c = stats.rng_for(seed=42, name="pairs").random(3)
    assert (a == b).all() and not (a == c).all()


def test_group_stats_and_leave_one_out(rng):
    x = rng.standard_normal((3, 6))
    y = rng.standard_normal(6)
    draws = Resampling.draw(np.random.default_rng(0), n=6, resamples=200, permutations=720)
    gs = group_stats(x=x, y=y, draws=draws, level=0.95)
    assert np.allclose(gs.pearson.r, [np.corrcoef(x[i], y)[0, 1] for i in range(3)])
    loo = leave_one_out(x=x, y=y, r=gs.pearson.r, names=list("abcdef"))
    for i in range(3):
        for j in range(6):
            keep = [k for k in range(6) if k != j]
            assert loo.r[i, j] == pytest.approx(np.corrcoef(x[i, keep], y[keep])[0, 1])
        shifts = np.abs(loo.r[i] - gs.pearson.r[i])
        assert loo.driver[i] == int(np.argmax(shifts))
        assert loo.max_shift[i] == pytest.approx(shifts.max())


def test_bootstrap_pearson_gives_the_same_bytes_on_any_number_of_workers(rng, monkeypatch):
    # its three products run as units on the worker threads, each placed by its index
    from uaprobe.analysis.compute import workers
    x = rng.normal(size=(7, 40))
    y = rng.normal(size=40)
    counts = stats.resample_counts(stats.bootstrap_indices(rng, n=40, resamples=500), n=40)
    digests = set()
    for count in (1, 2, 3):
        monkeypatch.setattr(workers, "worker_count", lambda count=count: count)
        digests.add(stats.bootstrap_pearson(x, y, counts).tobytes())
    assert len(digests) == 1
    r = stats.bootstrap_pearson(x, y, counts)
    w = counts[3]
    mx = (w * x[2]).sum() / 40
    my = (w * y).sum() / 40
    direct = (w * (x[2] - mx) * (y - my)).sum() / np.sqrt((w * (x[2] - mx) ** 2).sum() * (w * (y - my) ** 2).sum())
    assert r[2, 3] == pytest.approx(direct, abs=1e-12)


def test_tail_p_counts_by_hand_in_both_modes_and_leaves_undefined_draws_out() -> None:
    null = np.array([[0.2, -0.9, 0.9, np.nan, 0.5], [0.1, 0.1, 0.1, 0.1, 0.1], [np.nan] * 5])
    observed = np.array([-0.9, 0.0, 0.3])

    def by_hand(obs: float, draws: np.ndarray, exact: bool) -> float:
        valid = [d for d in draws if not math.isnan(d)]
        if math.isnan(obs) or not valid:
            return math.nan
        hits = sum(abs(d) >= abs(obs) - stats.TIE_TOLERANCE for d in valid)
        return hits / len(valid) if exact else (1 + hits) / (1 + len(valid))

    for mode in ("exact", "random"):
        got = stats.tail_p(observed, null, mode=mode)
        want = [by_hand(o, d, mode == "exact") for o, d in zip(observed, null)]
        np.testing.assert_array_equal(got, want)
    assert stats.tail_p(np.array([0.9]), null[:1], mode="exact")[0] == 2 / 4  # -0.9 and 0.9: ties count
    assert np.isnan(stats.tail_p(np.array([np.nan]), null[1:2], mode="random")[0])
    assert stats.p_floor(720, mode="exact") == 1 / 720 and stats.p_floor(999, mode="random") == 1 / 1000
    # the floor is the p of a statistic beyond every draw
    beyond = stats.tail_p(np.array([2.0]), np.full((1, 999), 0.5), mode="random")[0]
    assert beyond == stats.p_floor(999, mode="random")


def test_permutation_p_is_tail_p_of_the_permuted_r() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(3, 7)), rng.normal(size=7)
    orders = np.array(list(itertools.permutations(range(7)))[::37])
    r = stats.pearson(x, y[None, :]).r
    for mode in ("exact", "random"):
        np.testing.assert_array_equal(stats.permutation_p(x, y, r=r, orders=orders, mode=mode),
                                      stats.tail_p(r, stats.permuted_r(x, y, orders), mode=mode))
