"""The mixed model against statsmodels fitted directly and against a planted slope; the length-matched
analyses against a direct computation on the kept pairs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from uaprobe.analysis.category import power
from uaprobe.analysis.geometry import uniformity
from uaprobe.analysis.inference import controls
from uaprobe.analysis.pairs import mixed
from uaprobe.analysis.run import length_matched
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.config import AnalysisParams, LengthMatchedParams, PrimaryParams


def _grouped(seed: int, slope: float, n_per: int = 40, n_groups: int = 6):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_groups), n_per)
    x = rng.normal(size=g.size)
    lengths = rng.integers(4, 20, size=(g.size, 2)).astype(float)
    y = (slope * (x - x.mean()) / x.std() + rng.normal(size=n_groups)[g] + 0.05 * (lengths[:, 1] - lengths[:, 0])
         + 0.1 * rng.normal(size=n_groups)[g] * x + rng.normal(size=g.size))
    return g, x, lengths, y


def test_fit_slope_is_statsmodels_mixedlm_with_a_random_slope():
    import statsmodels.api as sm
    g, x, lengths, y = _grouped(1, 0.4)
    got = mixed.fit_slope(y, x, lengths, g, level=0.95)
    z = (x - x.mean()) / x.std()
    res = sm.MixedLM(y, np.column_stack([np.ones_like(z), z, lengths]), groups=g,
                     exog_re=np.column_stack([np.ones_like(z), z])).fit(reml=True, method=got["method"])
    assert got["converged"] and got["slope"] == pytest.approx(res.fe_params[1], rel=1e-7)
    assert got["se"] == pytest.approx(res.bse_fe[1], rel=1e-7)
    assert got["p"] == pytest.approx(2 * sps.norm.sf(abs(res.fe_params[1] / res.bse_fe[1])), rel=1e-6)
    assert got["low"] == pytest.approx(res.fe_params[1] - 1.959963984540054 * res.bse_fe[1], rel=1e-6)


def test_a_planted_slope_is_found_and_no_slope_is_not():
    g, x, lengths, y = _grouped(2, 0.5)
    found = mixed.fit_slope(y, x, lengths, g, level=0.95)
    assert found["low"] < 0.5 < found["high"] and found["p"] < 0.001
    g, x, lengths, y = _grouped(3, 0.0)
    none = mixed.fit_slope(y, x, lengths, g, level=0.95)
    assert none["low"] < 0.0 < none["high"]
    constant = mixed.fit_slope(y, np.ones_like(x), lengths, g, level=0.95)
    assert not constant["converged"] and np.isnan(constant["slope"])


def test_mixed_results_rows_and_reasons():
    g, x, lengths, y = _grouped(4, 0.3, n_per=20, n_groups=4)
    values = {"default": {"mean": {"a": np.stack([x, x]), "b": np.stack([np.ones_like(x)] * 2)}}}
    body = document(mixed.mixed_results(values, lengths={"default": lengths}, preference=y, category_of_pair=g,
                                        layer=1, level=0.9, alpha=0.05))
    reasons = take_reasons(body)
    t = body["tests"]
    assert t["metric"] == ["a", "b"] and t["converged"] == [True, False] and body["n_groups"] == 4
    assert t["slope"][0] == pytest.approx(mixed.fit_slope(y, x, lengths, g, level=0.9)["slope"])
    assert t["slope"][1] is None and "constant" in reasons["tests/slope/1"]


def test_matched_pairs_are_those_within_the_token_difference():
    n = np.array([5, 6, 5, 8, 3, 3])
    got = length_matched.matched(n, row_a=np.array([0, 2, 4]), row_b=np.array([1, 3, 5]), max_difference=1)
    assert got.tolist() == [True, False, True]


def _inputs(seed: int = 0, n_per: int = 12, n_cat: int = 4, dim: int = 6, n_layers: int = 2):
    rng = np.random.default_rng(seed)
    n_pairs = n_per * n_cat
    cat = np.repeat(np.arange(n_cat), n_per)
    row_a, row_b = np.arange(0, 2 * n_pairs, 2), np.arange(1, 2 * n_pairs, 2)
    n_content = rng.integers(4, 9, size=2 * n_pairs)
    states = {"default": {p: rng.normal(size=(2 * n_pairs, n_layers + 1, dim)) for p in ("mean", "last")}}
    states["sink_excluded"] = {p: v + 0.1 for p, v in states["default"].items()}
    values = {key: {p: {m: rng.normal(size=(n_layers + 1, n_pairs)) for m in ("m1", "m2")} for p in ("mean", "last")}
              for key in states}
    pref = rng.normal(size=n_pairs)
    return dict(states=states, values=values, n_content={"default": n_content, "sink_excluded": n_content - 1},
                policy_names={"default": "special", "sink_excluded": "sink_excluded"}, row_a=row_a, row_b=row_b,
                category_of_pair=cat, categories=[f"c{i}" for i in range(n_cat)], preference=pref,
                metrics=("m1", "m2"))


def test_length_matched_results_against_a_direct_computation_on_the_kept_pairs():
    inp = _inputs()
    params = AnalysisParams(permutations=199, primary=PrimaryParams(left_out="c0"),
                            length_matched=LengthMatchedParams(max_token_difference=1))
    body = document(length_matched.length_matched_results(**inp, params=params))
    n = inp["n_content"]["default"]
    keep = np.abs(n[inp["row_b"]] - n[inp["row_a"]]) <= 1
    cat = inp["category_of_pair"]
    assert body["n_pairs"] == keep.sum() and body["pairs_per_category"] == np.bincount(cat[keep], minlength=4).tolist()
    assert body["layer"] == 2 and set(body["category"]["poolings"]) == {"mean", "last"}
    x = inp["states"]["default"]["mean"][:, 2]
    ua = [uniformity.uniformity(x[inp["row_a"][keep & (cat == c)]]) - uniformity.uniformity(
        x[inp["row_b"][keep & (cat == c)]]) for c in range(4)]
    pref = [inp["preference"][keep & (cat == c)].mean() for c in range(4)]
    got = body["category"]["poolings"]["mean"]
    np.testing.assert_allclose(got["ua"], ua, rtol=1e-12)
    assert got["r"] == pytest.approx(sps.pearsonr(ua, pref)[0], abs=1e-12)
    assert got["permutation_p"] == pytest.approx(power.exact_p(np.array(ua), np.array(pref)[None, :])[0])
    fam = body["pair"]["family"]
    t = fam["tests"]
    assert len(t["metric"]) == 2 * 2 * 2
    i = next(i for i in range(8) if t["policy"][i] == "sink_excluded" and t["pooling"][i] == "last"
             and t["metric"][i] == "m2")
    v = inp["values"]["sink_excluded"]["last"]["m2"][2, keep]
    nc = inp["n_content"]["sink_excluded"].astype(float)
    cov = np.column_stack([controls.category_indicators(cat, 4), nc[inp["row_a"]], nc[inp["row_b"]]])[keep]
    assert t["partial_r"][i] == pytest.approx(controls.partial_r(v, inp["preference"][keep], cov).r, abs=1e-12)
    assert fam["n_tests"] <= 8 and all(p is None or 1 / 200 <= p <= 1 for p in t["maxt_p"])


def test_a_category_with_fewer_than_two_matched_pairs_drops_out_with_a_reason():
    inp = _inputs(seed=3)
    n = inp["n_content"]["default"]
    n[inp["row_b"][:12]] = n[inp["row_a"][:12]] + 5  # category c0: no pair matched
    params = AnalysisParams(permutations=99, primary=PrimaryParams(left_out="c0"))
    body = document(length_matched.length_matched_results(**inp, params=params))
    reasons = take_reasons(body)
    got = body["category"]["poolings"]["mean"]
    assert got["ua"][0] is None and got["n_categories"] == 3 and got["orders"] == 6
    assert "fewer than two" in reasons["category/poolings/mean/ua/0"]
    assert body["pairs_per_category"][0] == 0


