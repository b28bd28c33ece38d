"""The models' primary joint p corrected across the panel (``results/panel.json``, key ``primary``)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose

from uaprobe.analysis.panel.compare import primary_across_models
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.schema.panel import PanelPairFamily, PanelPrimary


def _run(ps: dict[str, float | None], correction: str = "holm", alpha: float = 0.05) -> tuple[dict, dict[str, str]]:
    """The ``primary`` object as the panel file holds it, and its missing values' reasons."""
    body = document(primary_across_models(ps, statistic="median_r", correction=correction, alpha=alpha))
    return body, take_reasons(body)


def test_holm_across_two_models_matches_the_step_down_by_hand() -> None:
    body, _ = _run({"a": 0.049, "b": 0.39})
    # Holm with m = 2: the smaller p times 2, the larger times 1, made monotone
    assert_allclose(body["models"]["a"]["adjusted_p"], min(1.0, 2 * 0.049))
    assert_allclose(body["models"]["b"]["adjusted_p"], max(2 * 0.049, 0.39))
    assert body["models"]["a"]["p"] == 0.049
    assert body["models"]["a"]["reject"] is False  # 0.098 > 0.05: nominal only
    PanelPrimary.model_validate(body)


def test_bonferroni_and_a_rejection() -> None:
    body, _ = _run({"a": 0.01, "b": 0.6, "c": 0.02}, correction="bonferroni")
    assert_allclose([body["models"][m]["adjusted_p"] for m in "abc"], [0.03, 1.0, 0.06])
    assert [body["models"][m]["reject"] for m in "abc"] == [True, False, False]


def test_an_undefined_p_is_left_out_of_the_family_with_its_reason() -> None:
    body, reasons = _run({"a": 0.02, "b": None})
    assert_allclose(body["models"]["a"]["adjusted_p"], 0.02)  # a family of one
    assert body["models"]["b"]["adjusted_p"] is None and body["models"]["b"]["reject"] is None
    assert "models/b/adjusted_p" in reasons


def test_holm_matches_a_direct_computation_on_many_models() -> None:
    rng = np.random.default_rng(3)
    ps = rng.uniform(0, 0.2, size=5)
    body, _ = _run({str(i): float(p) for i, p in enumerate(ps)})
    order = np.argsort(ps)
    direct = np.empty(5)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (5 - rank) * ps[i]))
        direct[i] = running
    assert_allclose([body["models"][str(i)]["adjusted_p"] for i in range(5)], direct)


def test_unknown_correction_is_refused() -> None:
    with pytest.raises(ValueError, match="holm or bonferroni"):
        _run({"a": 0.1}, correction="fdr")


def _family(metric, pooling, p, r, same_as, floor=1 / 1000, degenerate=None, maxt=None, n_pairs=230, q=7):
    from uaprobe.schema.pairmodels import PairFamily
    n = len(p)
    degenerate = degenerate or [False] * n
    counted = sum(j == i and not d and v is not None for i, (j, d, v) in enumerate(zip(same_as, degenerate, p)))
    return PairFamily.model_validate({
        "layer": 3, "reported_pooling": "mean", "n_tests": counted, "n_merged": n - counted,
        "n_degenerate": sum(degenerate), "degenerate_vif": 10.0, "n_reject": 0, "n_maxt_reject": 0, "alpha": 0.05,
        "ci_level": 0.95, "p_floor": floor, "holm_floor": min(1.0, counted * floor),
        "tests": {"policy": ["default"] * n, "pooling": pooling, "metric": metric, "n": [n_pairs] * n,
                  "n_covariates": [q] * n, "partial_r": r,
                  "partial_r_low": [None] * n, "partial_r_high": [None] * n,
                  "permutation_p": p, "holm_p": p, "holm_reject": [False] * n, "maxt_p": maxt or [None] * n,
                  "maxt_reject": [None] * n, "degenerate": degenerate, "at_floor": [False] * n,
                  "reported": [x == "mean" for x in pooling], "same_as": same_as,
                  "vif": [1e12 if d else 1.0 for d in degenerate], "base_partial_r": [None] * n, "pearson_r": r}})


def test_the_pair_family_is_one_holm_family_over_every_model_and_family() -> None:
    from uaprobe.analysis.panel.compare import pair_family_across_models
    a = _family(["m1", "m2", "m1"], ["mean", "mean", "mean"], [0.001, 0.03, 0.001], [0.3, 0.1, 0.3],
                [0, 1, 0])  # the third row merged into the first
    b = _family(["m1", "m2"], ["last", "mean"], [0.004, None], [0.2, None], [0, 1])
    c = _family(["m1"], ["mean"], [0.04], [-0.2], [0])
    out = document(pair_family_across_models({"x": {"length": a, "lexical": b}, "y": {"length": c}}, alpha=0.05))
    take_reasons(out)
    p = np.array([0.001, 0.03, 0.004, 0.04])  # the counted, defined tests in order
    order = np.argsort(p)
    holm = np.empty(4)
    running = 0.0
    for rank, i in enumerate(order):  # the step-down written out
        running = max(running, min(1.0, (4 - rank) * p[i]))
        holm[i] = running
    assert out["n_tests"] == 4 and out["holm_floor"] == pytest.approx(4 / 1000)
    assert out["models"]["x"]["length"]["holm_p"] == pytest.approx([holm[0], holm[1], holm[0]])
    assert out["models"]["x"]["lexical"]["holm_p"][0] == pytest.approx(holm[2])
    assert out["models"]["x"]["lexical"]["holm_p"][1] is None  # undefined p: out of the family
    assert out["models"]["y"]["length"]["holm_p"] == pytest.approx([holm[3]])
    assert out["models"]["x"]["length"]["holm_reject"] == [True, False, True]
    assert out["models"]["x"]["length"]["n_reject"] == 1  # the merged row is not counted twice
    assert out["n_reject"] == sum(holm <= 0.05)
    PanelPairFamily.model_validate(out)  # what the compare stage writes passes its schema


def test_a_degenerate_test_stays_out_of_the_panel_family() -> None:
    from uaprobe.analysis.panel.compare import pair_family_across_models
    a = _family(["m1", "m2"], ["mean", "first"], [0.001, 0.0001], [0.3, 0.01], [0, 1], degenerate=[False, True])
    out = document(pair_family_across_models({"x": {"length": a}}, alpha=0.05))
    reasons = take_reasons(out)
    assert out["n_tests"] == 1 and out["n_degenerate"] == 1
    assert out["models"]["x"]["length"]["holm_p"] == [pytest.approx(0.001), None]
    assert "degenerate" in reasons["models/x/length/holm_p/1"]
    PanelPairFamily.model_validate(out)


def test_the_panel_max_t_is_each_family_s_max_t_times_the_families_that_test_anything() -> None:
    """Bonferroni across the model x family pairs: three families test something (an empty one does not count),
    so each max-T p is tripled, capped at 1; a merged row carries its twin's p but is counted once."""
    from uaprobe.analysis.panel.compare import pair_family_across_models
    a = _family(["m1", "m2", "m1"], ["mean"] * 3, [0.001, 0.03, 0.001], [0.3, 0.1, 0.3], [0, 1, 0],
                maxt=[0.002, 0.4, 0.002])
    b = _family(["m1"], ["last"], [0.004], [0.2], [0], maxt=[0.01])
    c = _family(["m1"], ["mean"], [0.02], [-0.2], [0], maxt=[0.02], n_pairs=180, q=12)
    empty = _family(["m1"], ["mean"], [None], [None], [0])
    out = document(pair_family_across_models({"x": {"length": a, "lexical": b}, "y": {"length": c, "lexical": empty}},
                                    alpha=0.05))
    take_reasons(out)
    assert out["n_families"] == 3
    assert out["models"]["x"]["length"]["maxt_p"] == pytest.approx([0.006, 1.0, 0.006])
    assert out["models"]["x"]["lexical"]["maxt_p"] == pytest.approx([0.03])
    assert out["models"]["y"]["length"]["maxt_p"] == pytest.approx([0.06])
    assert out["models"]["x"]["length"]["n_maxt_reject"] == 1 and out["n_maxt_reject"] == 2
    power = out["models"]["y"]["length"]["power"]
    assert (power["n"], power["n_covariates"]) == (180, 12)
    assert power["mde_panel"] > power["mde"] > 0
    PanelPairFamily.model_validate(out)


def test_the_minimum_detectable_partial_r_has_the_power_it_names() -> None:
    """The MDE's power is the target by the formula written out, and a simulation of partial correlations over
    that many pairs and covariates rejects at about that rate."""
    from scipy import stats as sps

    from uaprobe.analysis.inference.multiplicity import partial_r_mde, partial_r_power
    n, q, alpha = 120, 4, 0.01
    rho = partial_r_mde(n=n, n_covariates=q, alpha=alpha, power=0.8)
    z, d = sps.norm.ppf(1 - alpha / 2), n - q - 3
    direct = sps.norm.cdf(np.arctanh(rho) * np.sqrt(d) - z) + sps.norm.cdf(-np.arctanh(rho) * np.sqrt(d) - z)
    assert direct == pytest.approx(0.8, abs=1e-9)
    assert partial_r_power(rho, n=n, n_covariates=q, alpha=alpha) == pytest.approx(0.8, abs=1e-9)
    assert partial_r_mde(n=n, n_covariates=q, alpha=alpha / 10, power=0.8) > rho  # a stricter level needs more
    assert np.isnan(partial_r_mde(n=5, n_covariates=4, alpha=0.05, power=0.8))
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(2000):
        c = rng.standard_normal((n, q))
        x = c @ rng.standard_normal(q) + rng.standard_normal(n)
        ex = x - c @ np.linalg.lstsq(c, x, rcond=None)[0]  # the metric's part the covariates leave (population)
        y = c @ rng.standard_normal(q) + rho / np.sqrt(1 - rho ** 2) * ex / ex.std() + rng.standard_normal(n)
        basis = np.column_stack([np.ones(n), c])
        rx = x - basis @ np.linalg.lstsq(basis, x, rcond=None)[0]
        ry = y - basis @ np.linalg.lstsq(basis, y, rcond=None)[0]
        r = float(rx @ ry / np.sqrt((rx @ rx) * (ry @ ry)))
        hits.append(abs(np.arctanh(r)) * np.sqrt(d) >= z)
    assert np.mean(hits) == pytest.approx(0.8, abs=0.05)


def test_the_original_points_are_tested_as_the_panel_s() -> None:
    """r of the published points, its exact p by enumeration, r with each category left out; a malformed table is
    refused naming the file and the key."""
    import itertools

    from uaprobe.analysis.panel.compare import original_points
    from uaprobe.config import AnalysisParams, PowerParams
    from uaprobe.errors import ConfigError
    x = [-0.21, 0.018, -0.02, 0.016, 0.03, -0.017]
    y = [1.66, 0.47, 0.24, -0.07, -0.03, 0.99]
    table = {c: [a, b] for c, a, b in zip("abcdef", x, y)} | {"note": "text"}
    params = AnalysisParams(power=PowerParams(draws=50, grid_step=0.5))
    out = document(original_points(table, source="pub.json", params=params))
    r0 = sps_r(x, y)
    assert out["r"] == pytest.approx(r0, abs=1e-12) and out["categories"] == list("abcdef")
    hits = sum(abs(sps_r(x, [y[i] for i in o])) >= abs(r0) - 1e-12 for o in itertools.permutations(range(6)))
    assert out["p"] == pytest.approx(hits / 720, abs=1e-15) and out["orders"] == 720
    assert out["leave_one_out_r"][0] == pytest.approx(sps_r(x[1:], y[1:]), abs=1e-12)
    with pytest.raises(ConfigError, match=r"pub\.json: category_level\.final_table: .*'b'"):
        original_points({"a": [1, 2], "b": [1], "c": [0, 1]}, source="pub.json", params=params)
    with pytest.raises(ConfigError, match=r"pub\.json: category_level\.final_table: expected at least 3 categories"):
        original_points(None, source="pub.json", params=params)  # the key absent from the file


def sps_r(x, y):
    from scipy import stats as sps
    return float(sps.pearsonr(x, y)[0])
