"""The specification curve: every r against scipy, each exact p against an enumeration or scipy's
permutation test, and the joint test on data with a known answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from uaprobe.analysis.category import curve_stats, speccurve
from synthetic_h5 import results_header
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.schema.specs import Power
from uaprobe.config import AnalysisParams, PrimaryParams
from uaprobe.errors import UAProbeError

CATS = ["c0", "c1", "c2", "c3", "c4", "c5"]


def test_every_r_under_every_relabelling_matches_scipy():
    rng = np.random.default_rng(3)
    ua, pref = rng.standard_normal((4, 6)), rng.standard_normal((2, 6))
    st = curve_stats.curve_r(ua, pref)
    orders = curve_stats.all_orders(6)
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
    st = curve_stats.curve_r(ua, pref)
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
    st = curve_stats.curve_r(ua, np.array([3.0 * u - 1.0, 0.5 * u + 2.0]))
    for r_perm in (st.r_perm.reshape(720, -1), st.r_perm[..., 0].reshape(720, -1)):
        t = curve_stats.joint_test(r_perm)
        assert t.median_r == pytest.approx(1.0) and t.share_positive == 1.0
        assert t.median_p == pytest.approx(1 / 720)
        assert 1 / 720 <= t.share_p <= 1.0
    # a decreasing function: r = -1 everywhere, the same p (two-sided)
    t = curve_stats.joint_test(curve_stats.curve_r(ua, np.array([-np.exp(u / 4)])).r_perm.reshape(720, -1))
    assert t.median_r < -0.9 and t.median_p == pytest.approx(1 / 720)


def test_joint_p_is_not_small_when_the_preference_is_independent():
    ps, shares = [], []
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        ua = rng.standard_normal((1, 6)) + 0.3 * rng.standard_normal((30, 6))  # correlated specifications, like layers
        t = curve_stats.joint_test(curve_stats.curve_r(ua, rng.standard_normal((2, 6))).r_perm.reshape(720, -1))
        ps.append(t.median_p)
        shares.append(t.share_p)
    for p in (np.array(ps), np.array(shares)):
        assert (p >= 1 / 720).all() and (p <= 1).all()
        assert 0.3 < p.mean() < 0.7  # about uniform under the null
        assert (p <= 0.05).mean() <= 0.2


POLICIES = {"default": "special", "sink_excluded": "sink_excluded"}


class CurveFile(dict):
    """``specification_curve.json`` as its file holds it (every missing value None, its reasons under
    ``nan_reasons``); ``record``: the record it was written from."""

    record: speccurve.SpecificationCurve


def _results(ua, pref, *, categories=CATS, **kw):
    """curve_results with the keys every results file starts with (the power left empty: tests/test_power.py)."""
    representations = next(iter(next(iter(ua.values())).values()))  # of the first policy and pooling
    n_layers = next(iter(representations.values())).shape[0] - 1
    return speccurve.curve_results(ua, pref, categories=categories, policy_names=POLICIES,
                                   header=results_header(n_layers=n_layers, params=AnalysisParams()),
                                   power=Power.model_construct(), **kw)


def _file(rec) -> CurveFile:
    body = CurveFile(document(rec))
    body["nan_reasons"] = take_reasons(body)
    body.record = rec
    return body


def _curve(ua, pref, *, depth=1.0, statistic="median_r", left_out="c0", alpha=0.05, level=0.95):
    """The curve's file and record."""
    return _file(_results(ua, pref, primary=PrimaryParams(depth=depth, statistic=statistic, left_out=left_out),
                          alpha=alpha, level=level, seed=0, permutations=200))


def test_curve_results_sorted_parallel_columns():
    rng = np.random.default_rng(9)
    n_layers = 2
    ua = {pol: {p: {k: rng.standard_normal((n_layers + 1, 6)) for k in ("raw", "zscore")} for p in ("mean", "last")}
          for pol in ("default", "sink_excluded")}
    ua["default"]["mean"]["raw"][1] = 0.25  # a constant UA: r undefined, with a reason
    pref = {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)}
    body = _curve(ua, pref)
    n = 2 * 2 * 2 * 3 * 2 * 7
    assert body["n_specs"] == n and all(len(v) == n for v in body["specs"].values())
    r = [x for x in body["specs"]["r"] if x is not None]
    assert r == sorted(r) and len(r) == n - 2 * 7
    assert body["specs"]["r"][-1] is None and body["nan_reasons"][f"specs/r/{n - 1}"]
    assert body["choices"]["policy"] == ["special", "sink_excluded"]
    assert all(body["specs"]["distinct"])  # no two random rows are identical
    # one specification against a direct computation
    s = body["specs"]
    i = next(i for i in range(n) if s["left_out"][i] == "c2" and s["nll"][i] == "sum" and s["pooling"][i] == "last"
             and s["policy"][i] == "sink_excluded" and s["representation"][i] == "zscore" and s["layer"][i] == 2)
    keep = [0, 1, 3, 4, 5]
    assert s["r"][i] == pytest.approx(sps.pearsonr(ua["sink_excluded"]["last"]["zscore"][2, keep],
                                                   pref["sum"][keep])[0], abs=1e-12)
    assert s["permutation_count"][i] == 120
    j = body["joint"]
    # the primary universe: the mean NLL only (pooling x policy x representation)
    assert j["declared"]["n_specs"] == 2 * 2 * 2 and j["declared"]["layers"] == [2]
    assert j["declared"]["nll"] == ["mean"] and j["declared"]["poolings"] == ["mean", "last"]
    assert j["every_layer"]["n_specs"] == 2 * 2 * 2 * 3 - 1  # the constant UA row: undefined
    assert j["full_universe"]["n_specs"] == 2 * 2 * 2 * 2 and j["full_universe"]["nll"] == ["mean", "sum"]
    assert j["other_nll"]["n_specs"] == 2 * 2 * 2 and j["other_nll"]["nll"] == ["sum"]
    assert j["other_poolings"]["n_specs"] == 0 and j["other_poolings"]["median_r"] is None  # no first pooling here
    assert j["without_category"]["left_out"] == "c0" and j["without_category"]["relabellings"] == 120
    assert j["layer_zero"]["layers"] == [0]
    assert body["primary"]["test"] == "declared" and body["primary"]["statistic"] == "median_r"
    assert speccurve.curve_metrics(body.record).primary_p == j["declared"]["median_p"]


def _direct_joint(ua_rows, pref_rows, keep):
    """Median r over every (UA row, preference row) and its exact two-sided p, by enumerating every
    order of the kept categories' own preferences with scipy."""
    ua_rows, pref_rows = ua_rows[:, keep], pref_rows[:, keep]

    def med(prefs):
        return np.median([sps.pearsonr(u, q)[0] for u in ua_rows for q in prefs])

    observed = med(pref_rows)
    null = [med(pref_rows[:, list(o)]) for o in itertools.permutations(range(len(keep)))]
    return observed, np.mean(np.abs(null) >= abs(observed) - 1e-12)


def _universe_ua(rng, n_layers=3):
    return {pol: {p: {k: rng.standard_normal((n_layers + 1, 6)) for k in ("raw", "zscore")} for p in ("mean", "last")}
            for pol in ("default", "sink_excluded")}


def test_declared_and_without_category_joint_tests_match_an_enumeration():
    rng = np.random.default_rng(21)
    ua = _universe_ua(rng)
    pref = {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)}
    body = _curve(ua, pref, depth=2 / 3, left_out="c3")
    rows = np.array([ua[pol][p][k][2] for p in ("mean", "last") for pol in ua for k in ("raw", "zscore")])
    prefs = np.array([pref["mean"], pref["sum"]])
    med, p = _direct_joint(rows, prefs[:1], list(range(6)))  # the primary universe: the mean NLL
    d = body["joint"]["declared"]
    assert d["layers"] == [2] and d["median_r"] == pytest.approx(med, abs=1e-12)
    assert d["median_p"] == pytest.approx(p, abs=1e-12)
    med, p = _direct_joint(rows, prefs, list(range(6)))  # every NLL: the full universe, a comparison
    f = body["joint"]["full_universe"]
    assert f["median_r"] == pytest.approx(med, abs=1e-12) and f["median_p"] == pytest.approx(p, abs=1e-12)
    med, p = _direct_joint(rows, prefs[1:], list(range(6)))
    o = body["joint"]["other_nll"]
    assert o["median_r"] == pytest.approx(med, abs=1e-12) and o["median_p"] == pytest.approx(p, abs=1e-12)
    med, p = _direct_joint(rows, prefs[:1], [0, 1, 2, 4, 5])
    w = body["joint"]["without_category"]
    assert w["median_r"] == pytest.approx(med, abs=1e-12) and w["median_p"] == pytest.approx(p, abs=1e-12)
    assert body["primary"]["p"] == d["median_p"] and body["primary"]["p_floor"] == pytest.approx(1 / 720)
    # the secondary family: Holm as written out by hand
    tests = body["secondary"]["tests"]
    assert [(t["test"], t["statistic"]) for t in tests] == [
        ("declared", "share_positive"), ("every_layer", "median_r"), ("every_layer", "share_positive"),
        ("without_category", "median_r"), ("without_category", "share_positive")]
    raw = np.array([t["p"] for t in tests])
    order = np.argsort(raw, kind="stable")
    adjusted = np.empty(5)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (5 - rank) * raw[i]))
        adjusted[i] = running
    np.testing.assert_allclose([t["holm_p"] for t in tests], adjusted, rtol=0, atol=1e-12)
    # layer 0 beside the declared layer, and the summed NLL's sign, against scipy
    lz, ns = body["layer_zero"], body["nll_sign"]
    for i in range(len(lz["r"])):
        pol = next(k for k, v in POLICIES.items() if v == lz["policy"][i])
        u = ua[pol][lz["pooling"][i]][lz["representation"][i]]
        assert lz["r"][i] == pytest.approx(sps.pearsonr(u[2], pref[lz["nll"][i]])[0], abs=1e-12)
        assert lz["r_layer_zero"][i] == pytest.approx(sps.pearsonr(u[0], pref[lz["nll"][i]])[0], abs=1e-12)
    for i in range(len(ns["r_mean"])):
        pol = next(k for k, v in POLICIES.items() if v == ns["policy"][i])
        u = ua[pol][ns["pooling"][i]][ns["representation"][i]][2]
        rm, rs = sps.pearsonr(u, pref["mean"])[0], sps.pearsonr(u, pref["sum"])[0]
        assert ns["r_mean"][i] == pytest.approx(rm, abs=1e-12) and ns["r_sum"][i] == pytest.approx(rs, abs=1e-12)
        assert ns["sign_changes"][i] == (rm * rs < 0)
    assert ns["n_sign_changes"] == sum(ns["sign_changes"])
    metrics = speccurve.curve_metrics(body.record)
    assert metrics.nll_sign_changes == ns["n_sign_changes"] and metrics.nll_rows == 2 * 2 * 2


def test_planted_duplicates_are_merged_and_a_planted_effect_reaches_the_floor():
    rng = np.random.default_rng(4)
    u = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])  # no relabelling reaches |r| = 1, with or without c0
    ua = _universe_ua(rng)
    for pol in ua:
        for p in ua[pol]:
            for k in ua[pol][p]:
                ua[pol][p][k][3] = rng.uniform(0.5, 2.0) * u + rng.standard_normal()  # the last layer: r = 1
    for k in ("raw", "zscore"):  # the same states under both policies, one pooling, every layer
        ua["sink_excluded"]["last"][k] = ua["default"]["last"][k].copy()
    pref = {"mean": 3.0 * u - 1.0, "sum": 0.5 * u + 2.0}
    body = _curve(ua, pref, left_out="c0")
    uni = body["universe"]
    assert uni["n_listed"] == 2 * 2 * 2 and uni["n_merged"] == 2 and uni["n_distinct"] == 6
    assert uni["axes"]["layer"]["options"] == [3] and set(uni["axes"]) == {"pooling", "policy", "representation",
                                                                           "nll", "layer"}
    assert len(uni["merged"]) == 2 and uni["axes"]["nll"]["options"] == ["mean"]
    assert uni["robustness_checks"]["nll"]["options"] == ["sum"] and uni["robustness_checks"]["nll"]["test"] == "other_nll"
    for g in uni["merged"]:
        assert g["kept"]["policy"] == "special" and g["kept"]["pooling"] == "last"
        assert [m["policy"] for m in g["merged"]] == ["sink_excluded"]
        assert {k: v for k, v in g["merged"][0].items() if k != "policy"} == {
            k: v for k, v in g["kept"].items() if k != "policy"}
    j = body["joint"]
    assert j["declared"]["n_specs"] == 6 and j["declared"]["n_merged"] == 2
    assert j["every_layer"]["n_merged"] == 2 * 4 and j["every_layer"]["n_specs"] == 2 * 2 * 2 * 4 - 8
    assert j["full_universe"]["n_specs"] == 12 and j["full_universe"]["n_merged"] == 4
    assert body["specs"]["distinct"].count(False) == 2 * 4 * 2 * 7
    # the planted effect: the smallest p each test can give
    assert body["primary"]["estimate"] == pytest.approx(1.0) and body["primary"]["p"] == pytest.approx(1 / 720)
    assert body["primary"]["at_floor"] is True
    w = j["without_category"]
    assert w["median_r"] == pytest.approx(1.0) and w["median_p"] == pytest.approx(1 / 120)
    assert w["p_floor"] == pytest.approx(1 / 120)
    assert speccurve.curve_metrics(body.record).without_category_p == pytest.approx(1 / 120)


def test_unknown_left_out_category_names_the_key():
    rng = np.random.default_rng(1)
    with pytest.raises(UAProbeError, match=r"analysis\.primary\.left_out.*ground_truth_numeric"):
        _curve(_universe_ua(rng), {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)},
               left_out="ground_truth_numeric")


def test_first_identical_is_bitwise():
    rows = np.array([[1.0, 2.0], [1.0, np.nextafter(2.0, 3.0)], [1.0, 2.0], [0.0, 1.0], [-0.0, 1.0], [0.0, 1.0]])
    assert curve_stats.first_identical(rows).tolist() == [0, 1, 0, 3, 4, 3]  # one ulp apart: not the same
    assert curve_stats.distinct_subset(rows, np.array([2, 3, 5, 4])).tolist() == [2, 3, 4]


def test_permutation_floors_of_the_layerwise_test():
    from uaprobe.analysis.run.policy_run import permutation_floors

    assert permutation_floors(mode="exact", count=720, n_tests=31) == pytest.approx(
        {"permutation_p_floor": 1 / 720, "permutation_holm_floor": 31 / 720})
    assert permutation_floors(mode="random", count=999, n_tests=2000) == pytest.approx(
        {"permutation_p_floor": 1 / 1000, "permutation_holm_floor": 1.0})


def _direct_band(ua_rows, pref_rows, level):
    """Every relabelling of the categories' preferences applied to every (UA row, preference row) at once,
    each relabelled curve sorted, then the central quantiles per rank: with scipy's r."""
    curves = [np.sort([sps.pearsonr(u, q[list(o)])[0] for u in ua_rows for q in pref_rows])
              for o in itertools.permutations(range(ua_rows.shape[1]))]
    return np.quantile(np.array(curves), [(1 - level) / 2, (1 + level) / 2], axis=0)


def test_null_band_matches_a_sort_and_quantile_of_every_relabelled_curve():
    rng = np.random.default_rng(5)
    ua, pref = rng.standard_normal((3, 5)), rng.standard_normal((2, 5))
    r_perm = curve_stats.curve_r(ua, pref).r_perm[..., 0]
    low, high = curve_stats.null_band(r_perm.reshape(r_perm.shape[0], -1), 0.9)
    d_low, d_high = _direct_band(ua, pref, 0.9)
    np.testing.assert_allclose(low, d_low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(high, d_high, rtol=0, atol=1e-12)
    assert low.shape == (6,) and np.all(np.diff(low) >= 0) and np.all(low <= high)


def test_null_band_of_one_specification_is_symmetric_and_undefined_r_is_left_out():
    # y = 0..5 is its own mirror image up to an order: the r of every order is as often -r
    y = np.arange(6.0)
    r_perm = curve_stats.curve_r(np.array([[0.0, 1.0, 3.0, 2.0, 7.0, 5.0], [1.0] * 6]), y[None, :]).r_perm[:, :, 0, 0]
    low, high = curve_stats.null_band(r_perm, 0.95)
    assert low.shape == (1,)  # the constant UA row has no r and no band
    np.testing.assert_allclose(low, -high, rtol=0, atol=1e-12)
    assert high[0] > 0.5


def test_declared_and_curve_null_bands_match_an_enumeration():
    rng = np.random.default_rng(21)
    ua = _universe_ua(rng)
    pref = {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)}
    body = _curve(ua, pref, depth=2 / 3, left_out="c3", level=0.9)
    rows = np.array([ua[pol][p][k][2] for p in ("mean", "last") for pol in ua for k in ("raw", "zscore")])
    band = body["joint"]["declared"]["null_band"]
    d_low, d_high = _direct_band(rows, np.array([pref["mean"]]), 0.9)
    assert band["level"] == 0.9
    np.testing.assert_allclose(band["low"], d_low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(band["high"], d_high, rtol=0, atol=1e-12)
    # the figure's band: every distinct specification (every layer and left-out option)
    distinct = np.array(body["specs"]["distinct"])
    assert len(body["null_band"]["low"]) == distinct.sum() == body["n_specs"]
    assert all(len(j["null_band"]["low"]) == j["n_specs"] for j in body["joint"].values())
    # the share below alpha counts each distinct specification once, from its own exact p
    ps = [p for p, d, out in zip(body["specs"]["permutation_p"], distinct, body["specs"]["left_out"])
          if d and p is not None and out is None]
    below = body["below_alpha"]
    assert below["n_specs"] == len(ps) and below["n_below"] == sum(p <= below["alpha"] for p in ps)
    assert below["share"] == pytest.approx(below["n_below"] / below["n_specs"])


def test_relabelled_p_is_each_specifications_exact_p_under_every_relabelling():
    rng = np.random.default_rng(8)
    ua = rng.standard_normal((4, 6))
    pref = rng.standard_normal((1, 6))
    st = curve_stats.curve_r(ua, pref)
    for j in (0,):  # every category: the 720 relabellings are its own orders
        r_perm = st.r_perm[:, :, 0, j]
        p = curve_stats.relabelled_p(r_perm)
        np.testing.assert_allclose(p[0], st.spec_p[:, 0, j], rtol=0, atol=1e-15)
        for pi in (5, 300):  # written out: the share of relabellings at least as extreme as relabelling pi
            want = [(np.abs(r_perm[:, s]) >= np.abs(r_perm[pi, s]) - 1e-12).mean() for s in range(4)]
            np.testing.assert_allclose(p[pi], want, rtol=0, atol=1e-15)


def test_below_alpha_against_its_null_over_the_relabellings():
    rng = np.random.default_rng(9)
    u = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])
    noise = np.stack([curve_stats.curve_r(rng.standard_normal((1, 6)), rng.standard_normal((1, 6))).r_perm[:, 0, 0, 0]
                      for _ in range(3)], axis=1)
    planted = curve_stats.curve_r(np.stack([u + 0.1 * rng.standard_normal(6) for _ in range(3)]),
                                (2 * u)[None]).r_perm[:, :, 0, 0]
    out = curve_stats.below_alpha(np.column_stack([planted, noise, np.full(720, np.nan)]), 0.05)
    p = curve_stats.relabelled_p(np.column_stack([planted, noise]))
    share = (p <= 0.05).mean(axis=1)
    assert out.n_specs == 6 and out.relabellings == 720
    assert out.n_below == int((p[0] <= 0.05).sum()) >= 3  # the planted ones
    assert out.null_mean_share == pytest.approx(share.mean()) and out.null_mean_share <= 0.05 + 1e-12
    assert out.null_p == pytest.approx((share >= share[0] - 1e-12).mean()) and out.null_p < 0.05


def test_a_planted_effect_lies_above_its_null_band():
    rng = np.random.default_rng(4)
    u = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])
    ua = _universe_ua(rng)
    for pol in ua:
        for p in ua[pol]:
            for k in ua[pol][p]:
                ua[pol][p][k][3] = rng.uniform(0.5, 2.0) * u + rng.standard_normal()  # the last layer: r = 1
    body = _curve(ua, {"mean": 3.0 * u - 1.0, "sum": 0.5 * u + 2.0})
    d = body["joint"]["declared"]
    assert np.all(np.array(d["null_band"]["high"]) < 0.99)  # no relabelling but the identity reaches r = 1
    assert d["median_r"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------
# Beyond the exact bound: a seeded Monte Carlo permutation test


def test_the_orders_are_exact_up_to_eight_categories_and_random_beyond():
    rng = np.random.default_rng(0)
    orders, mode = curve_stats.relabellings(8, rng=rng, permutations=50)
    assert mode == "exact" and orders.shape == (40320, 8) and len({tuple(o) for o in orders}) == 40320
    orders, mode = curve_stats.relabellings(9, rng=rng, permutations=50)
    assert mode == "monte_carlo" and orders.shape == (51, 9)
    assert (orders[0] == np.arange(9)).all()  # the identity first: p = (b + 1) / (m + 1)
    assert all(sorted(o) == list(range(9)) for o in orders)
    again, _ = curve_stats.relabellings(9, rng=np.random.default_rng(0), permutations=50)
    first, _ = curve_stats.relabellings(9, rng=np.random.default_rng(0), permutations=50)
    assert (again == first).all()  # seeded: the same orders on every run
    with pytest.raises(ValueError, match="exact bound"):
        curve_stats.relabellings(9, rng=None, permutations=0)


def test_monte_carlo_p_is_b_plus_one_over_m_plus_one_and_near_the_exact_p():
    rng = np.random.default_rng(3)
    n, m = 9, 4000
    ua = rng.standard_normal((1, n))
    pref = (0.6 * ua[0] + rng.standard_normal(n))[None, :]
    st = curve_stats.curve_r(ua, pref, rng=np.random.default_rng(11), permutations=m)
    assert st.mode == "monte_carlo" and st.spec_modes[0] == "monte_carlo" and st.spec_orders[0] == m + 1
    assert st.spec_modes[1:] == ("exact",) * n and (st.spec_orders[1:] == 40320).all()  # 8 kept: exact
    # the same draws, directly: r of every drawn order, b of them at least as extreme as the observed r
    orders, _ = curve_stats.relabellings(n, rng=np.random.default_rng(11), permutations=m)
    r_obs = sps.pearsonr(ua[0], pref[0]).statistic
    r_draws = np.array([sps.pearsonr(ua[0], pref[0][o]).statistic for o in orders[1:]])
    b = int((np.abs(r_draws) >= abs(r_obs) - 1e-12).sum())
    np.testing.assert_allclose(st.spec_p[0, 0, 0], (b + 1) / (m + 1), rtol=0, atol=1e-15)
    np.testing.assert_allclose(st.r_perm[1:, 0, 0, 0], r_draws, atol=1e-12)
    # within Monte Carlo error of the exact p over all 9! orders
    every = np.array(list(itertools.permutations(range(n))))
    exact = float((np.abs(curve_stats._normalised(pref[0][every]) @ curve_stats._normalised(ua[0]))
                   >= abs(r_obs) - 1e-12).mean())
    assert abs(st.spec_p[0, 0, 0] - exact) < 4 * np.sqrt(exact * (1 - exact) / m) + 1 / m


@pytest.mark.parametrize("n_cat", [9, 12, 20])
def test_the_curve_runs_at_any_number_of_categories_and_records_its_resolution(n_cat: int) -> None:
    rng = np.random.default_rng(n_cat)
    n_layers, m = 3, 300
    cats = [f"c{i}" for i in range(n_cat)]
    ua = {pol: {p: {k: rng.standard_normal((n_layers + 1, n_cat)) for k in ("raw", "zscore")} for p in ("mean", "last")}
          for pol in ("default", "sink_excluded")}
    pref = {"mean": rng.standard_normal(n_cat), "sum": rng.standard_normal(n_cat)}

    def run() -> dict:
        return _file(_results(ua, pref, categories=cats, primary=PrimaryParams(left_out="c1"), alpha=0.05,
                              level=0.95, seed=7, permutations=m))

    body = run()
    assert body["mode"] == "monte_carlo" and body["relabellings"] == m + 1
    assert body["primary"]["mode"] == "monte_carlo" and body["primary"]["p_floor"] == pytest.approx(1 / (m + 1))
    # with one category left out, nine categories keep eight: exact again
    without = body["joint"]["without_category"]
    assert (without["mode"], without["relabellings"]) == (("exact", 40320) if n_cat == 9 else ("monte_carlo", m + 1))
    assert 1 / (m + 1) <= body["primary"]["p"] <= 1
    assert set(body["specs"]["permutation_mode"]) == ({"exact", "monte_carlo"} if n_cat == 9 else {"monte_carlo"})
    assert run() == body  # seeded: the same results


def test_first_token_pooling_is_a_robustness_check_outside_the_primary_universe():
    rng = np.random.default_rng(31)
    ua = {pol: {p: {k: rng.standard_normal((3, 6)) for k in ("raw", "zscore")} for p in ("mean", "last", "first")}
          for pol in ("default", "sink_excluded")}
    pref = {"mean": rng.standard_normal(6), "sum": rng.standard_normal(6)}
    body = _curve(ua, pref)
    j = body["joint"]
    assert j["declared"]["poolings"] == ["mean", "last"] and j["declared"]["n_specs"] == 2 * 2 * 2
    assert j["other_poolings"]["poolings"] == ["first"] and j["other_poolings"]["n_specs"] == 2 * 2
    assert j["full_universe"]["n_specs"] == 3 * 2 * 2 * 2
    rows = np.array([ua[pol]["first"][k][2] for pol in ua for k in ("raw", "zscore")])
    med, p = _direct_joint(rows, np.array([pref["mean"]]), list(range(6)))
    assert j["other_poolings"]["median_r"] == pytest.approx(med, abs=1e-12)
    assert j["other_poolings"]["median_p"] == pytest.approx(p, abs=1e-12)
    assert body["universe"]["robustness_checks"]["pooling"]["options"] == ["first"]
    assert body["universe"]["axes"]["pooling"]["options"] == ["mean", "last"]


def test_a_primary_option_the_curve_lacks_names_the_key():
    rng = np.random.default_rng(1)
    with pytest.raises(UAProbeError, match=r"analysis\.primary\.nll"):
        _results(_universe_ua(rng), {"mean": rng.standard_normal(6)},
                 primary=PrimaryParams(left_out="c0", nll="sum"), alpha=0.05, level=0.95, seed=0, permutations=100)
