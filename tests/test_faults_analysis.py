"""Numerical edge cases of the analyses: a constant vector, zero variance in preference, bootstrap
resamples with no variance. Each gives NaN with a reason (``null`` + ``nan_reasons`` in the results
files), never a crash and never a silent 0.

The analyses' own tests cover Pearson's undefined cases one by one, a dropped degenerate resample,
the all-degenerate interval and a constant preference through the analyze stage; the tests here
check that the reasons reach *every* derived statistic, that degenerate resamples are left out of
an interval rather than counted as r = 0, and that a layer whose states are all the same vector goes
through the analyze stage end to end.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from synthetic_h5 import write_synthetic_h5
from uaprobe.analysis.category import validation
from uaprobe.analysis.geometry import anisotropy
from uaprobe.analysis.inference import groupstats, stats
from uaprobe.analysis.inference.groupstats import Resampling
from uaprobe.schema import missing
from uaprobe.schema.missing import Missing, take_reasons

REPO = Path(__file__).resolve().parents[1]
CATEGORIES = ["numeric", "nonnumeric", "tech", "lifestyle", "business", "science"]


def _draws(n: int, *, seed: int = 0, resamples: int = 400, permutations: int = 200) -> Resampling:
    return Resampling.draw(np.random.default_rng(seed), n=n, resamples=resamples, permutations=permutations)


def _all_nan_with_reasons(values: np.ndarray, reasons: np.ndarray) -> None:
    values = np.asarray(values, dtype=float)
    assert np.isnan(values).all(), values
    assert all(str(r) for r in np.ravel(reasons)), reasons


@pytest.mark.parametrize("constant", ["ua", "preference"])
def test_a_constant_vector_makes_every_statistic_nan_with_a_reason(constant: str) -> None:
    """Rows: a normal layer, and a layer (or a preference) that is the same for all six categories."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6))
    y = rng.standard_normal(6)
    if constant == "ua":
        x[1] = 0.02
    else:
        y[:] = -0.4
    gs = groupstats.group_stats(x=x, y=y, draws=_draws(6), level=0.95)
    rows = [1] if constant == "ua" else [0, 1]
    expected = "UA is constant" if constant == "ua" else "preference is constant"
    for row in rows:
        assert gs.pearson.reason[row] == expected
        _all_nan_with_reasons(gs.pearson.r[row], gs.pearson.reason[row])
        _all_nan_with_reasons(gs.pearson.p[row], gs.pearson.reason[row])
        _all_nan_with_reasons(gs.spearman.r[row], gs.spearman.reason[row])
        _all_nan_with_reasons([gs.bootstrap.low[row], gs.bootstrap.high[row]], gs.bootstrap.reason[row])
        _all_nan_with_reasons([gs.fisher_low[row], gs.fisher_high[row]], gs.fisher_reason[row])
        _all_nan_with_reasons(gs.permutation_p[row], gs.permutation_reason[row])
        assert gs.bootstrap.reason[row] == expected and gs.fisher_reason[row] == expected
    if constant == "ua":  # the other row is unaffected
        assert np.isfinite(gs.pearson.r[0]) and gs.pearson.reason[0] == ""
        assert np.isfinite(gs.bootstrap.low[0]) and np.isfinite(gs.permutation_p[0])
    loo = groupstats.leave_one_out(x=x, y=y, r=gs.pearson.r, names=CATEGORIES)
    row = rows[-1]
    assert np.isnan(loo.r[row]).all() and loo.driver[row] == -1 and np.isnan(loo.max_shift[row])
    assert all(reason.startswith(f"with {name} left out: ") for reason, name in zip(loo.reason[row], CATEGORIES))


def test_leaving_out_the_one_category_that_differs_leaves_a_constant() -> None:
    """Five categories share a preference; leaving out the sixth makes the rest constant."""
    x = np.array([[0.1, 0.3, -0.2, 0.05, 0.2, -0.1]])
    y = np.array([0.5, 0.5, 0.5, 0.5, 0.5, -1.0])
    r = stats.pearson(x, y).r
    assert np.isfinite(r[0])
    loo = groupstats.leave_one_out(x=x, y=y, r=r, names=CATEGORIES)
    assert np.isnan(loo.r[0, 5]) and loo.reason[0, 5] == "with science left out: preference is constant"
    assert np.isfinite(loo.r[0, :5]).all()


def test_resamples_without_variance_are_left_out_of_the_interval_not_counted_as_zero() -> None:
    """Three categories: many bootstrap resamples repeat one category and have no r. The interval is
    the percentile interval of the resamples that have one; a 0 in their place would shift it."""
    x = np.array([[0.1, 0.2, 0.4]])
    y = np.array([1.0, 2.0, 3.5])
    draws = _draws(3, resamples=2000)
    rb = stats.bootstrap_pearson(x, y, draws.counts)[0]
    defined = np.isfinite(rb)
    assert 0 < defined.sum() < rb.size  # some resamples have no variance
    iv = stats.bootstrap_r_interval(x, y, draws.counts, level=0.9, r_reason=np.array([""], dtype=object))
    assert iv.valid[0] == defined.sum() and iv.reason[0] == ""
    assert iv.low[0] == pytest.approx(np.percentile(rb[defined], 5.0))
    assert iv.high[0] == pytest.approx(np.percentile(rb[defined], 95.0))
    with_zeros = np.percentile(np.where(defined, rb, 0.0), 5.0)
    assert iv.low[0] != pytest.approx(with_zeros)


def test_bootstrap_of_a_constant_mean_is_a_point_not_nan() -> None:
    """The CI of a mean over identical values is [v, v]: defined, with every resample valid."""
    draws = _draws(6, resamples=300)
    means = stats.bootstrap_mean(np.full((1, 6), 0.25), draws.counts)
    lo, hi, valid = stats.percentile_interval(means, level=0.95)
    assert lo[0] == pytest.approx(0.25) and hi[0] == pytest.approx(0.25) and valid[0] == 300


def test_global_statistics_of_a_constant_ua_have_reasons() -> None:
    draws = _draws(6)
    glob = validation.global_stats(ua=np.full(6, 0.01), mean_preference=np.linspace(-1, 1, 6), counts=draws.counts,
                                   level=0.95, aligned_r=0.5, inverted_r=-0.3)
    assert math.isnan(glob.r) and glob.r_reason == "UA is constant" and glob.label is None
    table = validation.CategoryTable(n_pairs=np.full(6, 3), u_a=np.full(6, 0.51), u_b=np.full(6, 0.5),
                                     ua=np.full(6, 0.01), mean_preference=np.linspace(-1, 1, 6),
                                     pct_prefer_a=np.full(6, 50.0), aligned=np.zeros(6, dtype=bool))
    variant = validation.validation_variant(table=table, glob=glob, categories=CATEGORIES, level=0.95)
    assert variant.global_.r == Missing("UA is constant") and variant.global_.label == Missing("UA is constant")


def test_cohens_d_of_a_constant_ua_is_nan_with_a_reason_not_a_silent_number() -> None:
    """The seed's mean / (std + 1e-10) would give mean * 1e10 (or 0) for a constant UA."""
    for ua in (np.full(6, 0.01), np.zeros(6)):
        glob = validation.global_stats(ua=ua, mean_preference=np.linspace(-1, 1, 6), counts=_draws(6).counts,
                                       level=0.95, aligned_r=0.5, inverted_r=-0.3)
        assert math.isnan(glob.cohens_d)
        table = validation.CategoryTable(n_pairs=np.full(6, 3), u_a=ua + 0.5, u_b=np.full(6, 0.5), ua=ua,
                                         mean_preference=np.linspace(-1, 1, 6), pct_prefer_a=np.full(6, 50.0),
                                         aligned=np.zeros(6, dtype=bool))
        variant = validation.validation_variant(table=table, glob=glob, categories=CATEGORIES, level=0.95)
        assert isinstance(variant.global_.cohens_d, Missing) and variant.global_.cohens_d.reason


def test_anisotropy_of_identical_token_states_is_nan_with_a_reason_not_a_floor_artifact() -> None:
    """Zero covariance: the seed's eigenvalue floor would report lambda1/sum = 1/D and effective rank = D."""
    x = np.random.default_rng(0).standard_normal((3, 10, 8))
    x[1] = x[1, 0]  # layer 1: every token state is the same vector
    prof = anisotropy.anisotropy_profile(x, spectrum_top=4)
    assert np.isfinite(prof.lambda1_ratio[[0, 2]]).all() and np.isfinite(prof.effective_rank[[0, 2]]).all()
    for values in (prof.lambda1_ratio, prof.effective_rank, prof.eigenvalue_variance, prof.spectrum,
                   *prof.var_top.values()):
        assert np.isnan(values[1]).all()
    assert prof.spectrum_reason[1] and prof.spectrum_reason[0] == "" == prof.spectrum_reason[2]
    assert np.isfinite(prof.mean_cos_to_mean[1])  # identical non-zero vectors: cosine 1 to their mean


def test_a_nan_without_a_reason_cannot_reach_a_results_file() -> None:
    with pytest.raises(ValueError, match="x/1: missing value without a reason"):
        take_reasons({"x": missing.series([1.0, float("nan")])})
    with pytest.raises(ValueError, match="a/y: missing value without a reason"):
        take_reasons({"a": {"y": missing.value(float("inf"))}})
    doc = {"z": missing.series([1.0, float("nan")], ["", "fewer than 3 points"])}
    assert take_reasons(doc) == {"z/1": "fewer than 3 points"} and doc == {"z": [1.0, None]}


def _analyze_stage():
    spec = importlib.util.spec_from_file_location("uaprobe_stage_analyze", REPO / "stages" / "analyze.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_a_layer_of_identical_states_goes_through_the_analyze_stage(tmp_path: Path) -> None:
    """Layer 2 of every pooling is one vector for every statement: U_A = U_B = 1, UA = 0 in every
    category, a constant. The stage finishes; that layer's r is null with the reason, the others are
    numbers."""
    h5 = write_synthetic_h5(tmp_path / "flat.h5", pairs_per_category=(6, 5, 7, 6), n_layers=4, hidden=12, seed=5)
    with h5py.File(h5, "r+") as fh:
        for name in ("mean", "last", "first"):
            data = fh[f"pooled/{name}"][()]
            data[:, 2, :] = data[0, 2, :]
            fh[f"pooled/{name}"][...] = data
    params = {
        "models": ["flat"],
        "catalog": {"flat": {"display": "Flat", "source": "local", "location": "/nowhere/flat"}},
        "analysis": {"seed": 1, "bootstrap_resamples": 200, "permutations": 100,
                     "bins": {"k": [3, 4], "partitions": 8, "ci_k": 4}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    out = tmp_path / "out"
    code = _analyze_stage().main(["--model", "flat", "--params", str(tmp_path / "params.yaml"), "--embeddings",
                                  str(h5), "--results", str(out / "results"), "--metrics", str(out / "metrics"),
                                  "--plots", str(out / "plots")])
    assert code == 0
    text = (out / "results" / "flat" / "layerwise.json").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    layerwise = json.loads(text)
    r = layerwise["poolings"]["mean"]["pearson_r"]
    assert r[2] is None and all(v is not None for i, v in enumerate(r) if i != 2)
    assert layerwise["nan_reasons"]["poolings/mean/pearson_r/2"] == "UA is constant"
