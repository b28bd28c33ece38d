"""The exact category-level test's simulated power: the exact p against an enumeration with scipy, the power
against a direct loop, and known answers (the test's size under no correlation, full power near r = 1)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from uaprobe.analysis.category import curve_stats, power
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.config import PowerParams


def _direct_p(x, y):
    r0 = abs(sps.pearsonr(x, y)[0])
    orders = list(itertools.permutations(range(len(x))))
    return sum(abs(sps.pearsonr(x, y[list(o)])[0]) >= r0 - 1e-12 for o in orders) / len(orders)


def test_exact_p_matches_an_enumeration():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(6)
    y = rng.standard_normal((5, 6))
    np.testing.assert_allclose(power.exact_p(x, y), [_direct_p(x, row) for row in y], rtol=0, atol=1e-15)
    x5 = x[:5]
    np.testing.assert_allclose(power.exact_p(x5, y[:, :5]), [_direct_p(x5, row[:5]) for row in y], rtol=0, atol=1e-15)


def test_simulated_power_matches_a_direct_loop():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(5)
    noise = rng.standard_normal((40, 5))
    got, med = power.simulated_power(x, [0.3, 0.8], noise=noise, alpha=0.05)
    z = (x - x.mean()) / x.std()
    for i, rho in enumerate((0.3, 0.8)):
        ys = rho * z + math.sqrt(1 - rho ** 2) * noise
        assert got[i] == pytest.approx(np.mean([_direct_p(x, y) <= 0.05 for y in ys]), abs=1e-15)
        assert med[i] == pytest.approx(np.median([sps.pearsonr(x, y)[0] for y in ys]), abs=1e-12)


def test_size_under_no_correlation_and_power_near_one():
    x = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])
    noise = np.random.default_rng(7).standard_normal((2000, 6))
    size, _ = power.simulated_power(x, [0.0], noise=noise, alpha=0.05)
    assert size[0] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 2000)  # an exact test keeps its level
    high, _ = power.simulated_power(x, [0.999], noise=noise, alpha=0.05)
    assert high[0] > 0.95


def test_one_outlying_category_costs_power():
    noise = np.random.default_rng(9).standard_normal((1000, 6))
    spread = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])
    outlier = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 5.0])
    even, _ = power.simulated_power(spread, [0.8], noise=noise, alpha=0.05)
    lone, _ = power.simulated_power(outlier, [0.8], noise=noise, alpha=0.05)
    assert lone[0] < even[0]


def test_power_results_floor_mde_and_the_left_out_set():
    x = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])
    y = x[::-1].copy()
    params = PowerParams(planted=(0.5, 0.9), draws=300, target=0.5, grid_step=0.1)
    out = document(power.power_results(x, y, categories=list("abcdef"), left_out="c", specification={"layer": 3},
                                       params=params, alpha=0.05, rng=np.random.default_rng(0), permutations=100,
                                       universe=x[None, :]))
    take_reasons(out)
    every, without = out["sets"]
    assert every["mode"] == without["mode"] == "exact"  # 6! within the exact bound: no drawn orders
    assert every["n_categories"] == 6 and every["orders"] == 720 and without["orders"] == 120
    assert without["left_out"] == "c" and every["left_out"] is None
    assert every["p_floor"] == pytest.approx(1 / 720) and without["p_floor"] == pytest.approx(1 / 120)
    assert every["observed_r"] == pytest.approx(sps.pearsonr(x, y)[0], abs=1e-12)
    assert every["observed_p"] == pytest.approx(_direct_p(x, y), abs=1e-15)
    assert every["grid"] == pytest.approx([0.1 * i for i in range(10)])
    g = np.array(every["grid_power"])
    first = np.flatnonzero(g >= 0.5)
    assert every["mde"] == pytest.approx(every["grid"][first[0]])
    assert every["power"][0] <= every["power"][1]
    unreachable = document(power.power_results(x, y, categories=list("abcdef"), left_out="c", specification={},
                                               params=PowerParams(planted=(0.5,), draws=50, target=0.999, grid_step=0.5),
                                               alpha=0.001, rng=np.random.default_rng(0), permutations=100,
                                               universe=x[None, :]))
    assert take_reasons(unreachable)["sets/1/mde"] and unreachable["sets"][1]["mde"] is None


def test_a_constant_ua_has_no_power_and_says_why():
    out = document(power.power_set(np.ones(5), observed_y=np.arange(5.0), params=PowerParams(draws=20, grid_step=0.5),
                                   alpha=0.05, rng=np.random.default_rng(0), left_out=None,
                                   permutations=100))
    reasons = take_reasons(out)
    assert out["power"] == [None, None, None] and out["mde"] is None and out["p_floor"] is None
    assert "constant" in reasons["power/0"] and "constant" in reasons["mde"]


def test_beyond_the_exact_bound_the_power_is_simulated_with_the_monte_carlo_test():
    """Nine categories (9! orders, past the bound): the identity and m drawn orders, p = (b + 1) / (m + 1), the
    same orders for every simulated preference; the floor is 1 / (m + 1) for a UA without ties."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(9)
    y = 0.8 * x + 0.6 * rng.standard_normal(9)
    m = 400
    out = document(power.power_set(x, observed_y=y, params=PowerParams(planted=(0.0, 0.95), draws=200, grid_step=0.25),
                                   alpha=0.05, rng=np.random.default_rng(1), left_out=None, permutations=m))
    assert out["mode"] == "monte_carlo" and out["orders"] == m + 1
    assert out["p_floor"] == pytest.approx(1 / (m + 1))
    # the observed p, directly: the same drawn orders (the generator's first draw), b of them at least as extreme
    orders, _ = curve_stats.relabellings(9, rng=np.random.default_rng(1), permutations=m)
    r_obs = abs(sps.pearsonr(x, y)[0])
    b = sum(abs(sps.pearsonr(x, y[o])[0]) >= r_obs - 1e-12 for o in orders[1:])
    assert out["observed_p"] == pytest.approx((b + 1) / (m + 1), abs=1e-12)
    size, strong = out["power"]
    assert size < 0.15 and strong > 0.9  # near alpha under no correlation, high at a strong one


def _direct_median_p(xs, y):
    """The joint p of the median r over the rows of ``xs``, by enumerating every order with scipy."""
    def stat(v):
        return abs(np.median([sps.pearsonr(x, v)[0] for x in xs]))
    s0 = stat(y)
    orders = list(itertools.permutations(range(len(y))))
    return sum(stat(y[list(o)]) >= s0 - 1e-12 for o in orders) / len(orders)


def test_the_median_statistic_matches_an_enumeration_and_reduces_to_r_for_one_row():
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((3, 5))
    y = rng.standard_normal((4, 5))
    np.testing.assert_allclose(power.exact_p(xs, y), [_direct_median_p(xs, row) for row in y], rtol=0, atol=1e-15)
    np.testing.assert_allclose(power.exact_p(xs[:1], y), power.exact_p(xs[0], y), rtol=0, atol=1e-15)
    even = rng.standard_normal((4, 5))  # an even number of specifications: the mean of the middle two r
    np.testing.assert_allclose(power.exact_p(even, y), [_direct_median_p(even, row) for row in y], rtol=0, atol=1e-15)
    assert power.exact_p(xs, np.ones((1, 5)))[0] == 0.0  # a constant preference: r undefined, no order a hit
    assert power.statistic(xs, y[0]) == pytest.approx(np.median([sps.pearsonr(x, y[0])[0] for x in xs]), abs=1e-12)


def test_the_primary_power_is_the_joint_test_of_the_curve_with_planted_preferences():
    """The primary set's observed p is the specification curve's joint p of the median over the same rows; its
    power under no correlation stays near alpha and rises with the planted correlation; four copies of one
    specification give that specification's own test."""
    rng = np.random.default_rng(3)
    ref = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 11.0])
    universe = np.vstack([ref, ref + rng.standard_normal(6), 0.5 * ref + rng.standard_normal(6)])
    y = 0.6 * ref / ref.std() + rng.standard_normal(6)
    params = PowerParams(planted=(0.0, 0.5, 0.95), draws=400, target=0.5, grid_step=0.25)
    out = document(power.power_results(ref, y, categories=list("abcdef"), left_out="c", specification={}, params=params,
                                       alpha=0.05, rng=np.random.default_rng(0), permutations=100,
                                       universe=universe))
    prim = out["primary"]
    assert prim["n_specs"] == 3 and prim["statistic"] == "median_r"
    every, without = prim["sets"]
    curve = curve_stats.joint_test(curve_stats.curve_r(universe, y[None, :], left_out=False).r_perm[:, :, 0, 0])
    assert every["observed_r"] == pytest.approx(curve.median_r, abs=1e-12)
    assert every["observed_p"] == pytest.approx(curve.median_p, abs=1e-15)
    assert without["n_categories"] == 5 and without["orders"] == 120
    size, mid, strong = every["power"]
    assert size < 0.12 and size <= mid <= strong and strong > 0.5
    copies = document(power.power_results(ref, y, categories=list("abcdef"), left_out="c", specification={}, params=params,
                                          alpha=0.05, rng=np.random.default_rng(0), permutations=100,
                                          universe=np.vstack([ref] * 4)))
    single = copies["sets"][0]
    assert copies["primary"]["sets"][0]["observed_p"] == pytest.approx(single["observed_p"], abs=1e-15)
    assert copies["primary"]["sets"][0]["p_floor"] == pytest.approx(1 / 720, abs=1e-15)
