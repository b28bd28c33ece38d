"""The specification curve: every r against scipy, each exact p against an enumeration or scipy's
permutation test, and the joint test on data with a known answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from uaprobe.analysis import speccurve
from uaprobe.analysis.nan_reasons import NanReasons

CATS = ["c0", "c1", "c2", "c3", "c4", "c5"]


def test_every_r_under_every_relabelling_matches_scipy():
    rng = np.random.default_rng(3)
    ua, pref = rng.standard_normal((4, 6)), rng.standard_normal((2, 6))
    st = speccurve.curve_r(ua, pref)
    orders = speccurve.all_orders(6)
    assert orders.shape == (720, 6) and (orders[0] == np.arange(6)).all()
    np.testing.assert_array_equal(st.r, st.r_perm[0])
    for pi in (0, 17, 719):
        permuted = pref[:, orders[pi]]
        for s, k in itertools.product(range(4), range(2)):
            assert st.r_perm[pi, s, k, 0] == pytest.approx(sps.pearsonr(ua[s], permuted[k])[0], abs=1e-12)
            for c in range(6):  # left out: the kept categories' UA with the permuted preference of the same ones
                keep = [i for i in range(6) if i != c]
                assert st.r_perm[pi, s, k, 1 + c] == pytest.approx(
                    sps.pearsonr(ua[s, keep], permuted[k, keep])[0], abs=1e-12)


def test_per_spec_p_matches_scipy_and_an_enumeration():
    rng = np.random.default_rng(5)
    ua, pref = rng.standard_normal((3, 6)), rng.standard_normal((1, 6))
    st = speccurve.curve_r(ua, pref)
    assert list(st.spec_orders) == [720] + [120] * 6
    for s in range(3):
        res = sps.permutation_test((ua[s],), lambda x: abs(sps.pearsonr(x, pref[0])[0]),
                                   permutation_type="pairings", n_resamples=np.inf, alternative="greater")
        assert st.spec_p[s, 0, 0] == pytest.approx(res.pvalue, abs=1e-12)
        for c in range(6):
            keep = [i for i in range(6) if i != c]
            r0 = abs(sps.pearsonr(ua[s, keep], pref[0, keep])[0])
            hits = sum(abs(sps.pearsonr(ua[s, keep], pref[0, keep][list(o)])[0]) >= r0 - 1e-12
                       for o in itertools.permutations(range(5)))
            assert st.spec_p[s, 0, 1 + c] == pytest.approx(hits / 120, abs=1e-15)


def test_joint_p_is_the_smallest_possible_when_the_preference_follows_ua():
    u = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])  # no 5 or 6 of them symmetric: no relabelling reaches |r| = 1
    rng = np.random.default_rng(0)
    ua = rng.uniform(0.5, 2.0, (20, 1)) * u + rng.standard_normal((20, 1))  # every specification: r = 1
    st = speccurve.curve_r(ua, np.array([3.0 * u - 1.0, 0.5 * u + 2.0]))
    for r_perm in (st.r_perm.reshape(720, -1), st.r_perm[..., 0].reshape(720, -1)):
        t = speccurve.joint_test(r_perm)
        assert t.median_r == pytest.approx(1.0) and t.share_positive == 1.0
        assert t.median_p == pytest.approx(1 / 720)
        assert 1 / 720 <= t.share_p <= 1.0
    # a decreasing function: r = -1 everywhere, the same p (two-sided)
    t = speccurve.joint_test(speccurve.curve_r(ua, np.array([-np.exp(u / 4)])).r_perm.reshape(720, -1))
    assert t.median_r < -0.9 and t.median_p == pytest.approx(1 / 720)


def test_joint_p_is_not_small_when_the_preference_is_independent():
    ps, shares = [], []
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        ua = rng.standard_normal((1, 6)) + 0.3 * rng.standard_normal((30, 6))  # correlated specifications, like layers
        t = speccurve.joint_test(speccurve.curve_r(ua, rng.standard_normal((2, 6))).r_perm.reshape(720, -1))
        ps.append(t.median_p)
        shares.append(t.share_p)
    for p in (np.array(ps), np.array(shares)):
        assert (p >= 1 / 720).all() and (p <= 1).all()
        assert 0.3 < p.mean() < 0.7  # about uniform under the null
        assert (p <= 0.05).mean() <= 0.2


def test_curve_results_sorted_parallel_columns():
    rng = np.random.default_rng(9)
    n_layers = 2
    ua = {pol: {p: {k: rng.standard_normal((n_layers + 1, 6)) for k in ("raw", "zscore")} for p in ("mean", "last")}
          for pol in ("default", "sink_excluded")}
    ua["default"]["mean"]["raw"][1] = 0.25  # a constant UA: r undefined, with a reason
    pref = {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)}
    rec = NanReasons()
    body = speccurve.curve_results(ua, pref, categories=CATS, policy_names={"default": "special",
                                                                              "sink_excluded": "sink_excluded"},
                                   rec=rec)
    n = 2 * 2 * 2 * 3 * 2 * 7
    assert body["n_specs"] == n and all(len(v) == n for v in body["specs"].values())
    r = [x for x in body["specs"]["r"] if x is not None]
    assert r == sorted(r) and len(r) == n - 2 * 7
    assert body["specs"]["r"][-1] is None and rec.reasons[f"specs/r/{n - 1}"]
    assert body["choices"]["policy"] == ["special", "sink_excluded"]
    # one specification against a direct computation
    s = body["specs"]
    i = next(i for i in range(n) if s["left_out"][i] == "c2" and s["nll"][i] == "sum" and s["pooling"][i] == "last"
             and s["policy"][i] == "sink_excluded" and s["representation"][i] == "zscore" and s["layer"][i] == 2)
    keep = [0, 1, 3, 4, 5]
    assert s["r"][i] == pytest.approx(sps.pearsonr(ua["sink_excluded"]["last"]["zscore"][2, keep],
                                                   pref["sum"][keep])[0], abs=1e-12)
    assert s["permutation_count"][i] == 120
    assert body["joint"]["all"]["n_specs"] == n - 14 and body["joint"]["no_left_out"]["n_specs"] == (n - 14) // 7
    assert speccurve.curve_metrics(body)["median_r"] == body["joint"]["all"]["median_r"]
