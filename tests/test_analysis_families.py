"""Each analysis family against the seeds' loop code, a known answer, or planted structure."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

import seed_reference as seed
from synthetic_h5 import results_header
from uaprobe.analysis.category import bins, layerwise, validation
from uaprobe.analysis.geometry import anisotropy
from uaprobe.analysis.inference import curves
from uaprobe.analysis.pairs import centroid_score
from uaprobe.analysis.panel import scaling
from uaprobe.analysis.pairs.pair_table import pair_table, pooling_cosines
from uaprobe.schema.document import document
from uaprobe.schema.missing import Missing, take_reasons
from uaprobe.analysis.inference.stats import bootstrap_indices, resample_counts
from uaprobe.analysis.geometry.uniformity import Cosines
from uaprobe.config import AnalysisParams, BinsParams
from uaprobe.errors import ConfigError, UAProbeError

# The original study's published Pythia-6.9B final-layer table: category -> (UA, mean preference).
PYTHIA_69B = {
    "ground_truth_numeric": (-0.2108890414, 1.6618022442),
    "ground_truth_nonnumeric": (0.0181418657, 0.4707467198),
    "tech_philosophy": (-0.0205382109, 0.2405420685),
    "lifestyle": (0.0157670379, -0.0662454414),
    "business": (0.0303651094, -0.0328846407),
    "scientific_facts": (-0.0169598460, 0.9903108915),
}


def small_params(**kw) -> AnalysisParams:
    base = dict(bootstrap_resamples=400, permutations=400, bins=BinsParams(k=(3, 5), partitions=15, ci_k=4))
    base.update(kw)
    return AnalysisParams(**base)


# ------------------------------------------------------------------------------------ seed 003


def test_known_answer_pythia_69b_final_layer():
    ua = np.array([v[0] for v in PYTHIA_69B.values()])
    pref = np.array([v[1] for v in PYTHIA_69B.values()])
    counts = resample_counts(bootstrap_indices(np.random.default_rng(0), n=6, resamples=2000), n=6)
    g = validation.global_stats(ua=ua, mean_preference=pref, counts=counts, level=0.95, aligned_r=0.5, inverted_r=-0.3)
    assert g.r == pytest.approx(-0.8736180, abs=5e-8)
    assert g.mean_ua == pytest.approx(-0.0306855, abs=5e-8)
    assert g.std_ua == pytest.approx(0.0826980, abs=5e-8)
    assert g.cohens_d == pytest.approx(-0.3710549, abs=5e-8)
    assert g.label == "INVERTED"
    assert g.ci_low < g.mean_ua < g.ci_high
    ref = seed.validation_global(ua, pref)
    assert (g.mean_ua, g.std_ua, g.cohens_d, g.r) == pytest.approx(
        (ref["mean_asymmetry"], ref["std_asymmetry"], ref["cohens_d"], ref["ua_output_correlation"]))


def test_known_answer_aligned_flags():
    ua = np.array([v[0] for v in PYTHIA_69B.values()])
    pref = np.array([v[1] for v in PYTHIA_69B.values()])
    flags = validation.aligned_flags(ua=ua, preference=pref, neutral_ua=0.02, neutral_preference=0.1)
    # seed 003: same sign, or |UA| < 0.02 and |pref| < 0.1
    expected = [(u > 0 and p > 0) or (u < 0 and p < 0) or (abs(u) < 0.02 and abs(p) < 0.1) for u, p in zip(ua, pref)]
    assert flags.tolist() == expected == [False, True, False, True, False, False]


def test_cohens_d_of_a_constant_ua_is_nan_with_a_reason():
    counts = resample_counts(bootstrap_indices(np.random.default_rng(0), n=6, resamples=50), n=6)
    g = validation.global_stats(ua=np.full(6, 0.01), mean_preference=np.arange(6.0), counts=counts, level=0.95,
                                aligned_r=0.5, inverted_r=-0.3)
    assert np.isnan(g.cohens_d) and np.isnan(g.r)
    tab = validation.category_table(u_a=np.full(6, 0.5), u_b=np.full(6, 0.49), preference=np.arange(6.0),
                                    category_of_pair=np.arange(6), n_categories=6, neutral_ua=0.02,
                                    neutral_preference=0.1)
    out = validation.validation_variant(table=tab, glob=g, categories=list("abcdef"), level=0.95)
    assert isinstance(out.global_.cohens_d, Missing) and "std 0" in out.global_.cohens_d.reason


def test_validation_labels_follow_the_thresholds():
    assert validation.interpretation(0.6, aligned_r=0.5, inverted_r=-0.3) == "ALIGNED"
    assert validation.interpretation(0.5, aligned_r=0.5, inverted_r=-0.3) == "DECOUPLED"
    assert validation.interpretation(-0.31, aligned_r=0.5, inverted_r=-0.3) == "INVERTED"
    assert validation.interpretation(float("nan"), aligned_r=0.5, inverted_r=-0.3) is None


def test_category_table_matches_direct_computation():
    rng = np.random.default_rng(3)
    cat = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])
    pref = rng.standard_normal(9)
    tab = validation.category_table(u_a=np.array([0.5, 0.4, 0.3]), u_b=np.array([0.45, 0.5, 0.3]), preference=pref,
                                    category_of_pair=cat, n_categories=3, neutral_ua=0.02, neutral_preference=0.1)
    for c in range(3):
        assert tab.mean_preference[c] == pytest.approx(pref[cat == c].mean())
        assert tab.pct_prefer_a[c] == pytest.approx(100 * np.mean(pref[cat == c] > 0))
    assert tab.n_pairs.tolist() == [3, 2, 4]
    assert tab.ua == pytest.approx([0.05, -0.1, 0.0])


def test_bootstrap_ci_of_the_mean_agrees_with_the_seed_in_distribution():
    ua = np.array([v[0] for v in PYTHIA_69B.values()])
    counts = resample_counts(bootstrap_indices(np.random.default_rng(1), n=6, resamples=20_000), n=6)
    g = validation.global_stats(ua=ua, mean_preference=np.arange(6.0), counts=counts, level=0.95, aligned_r=0.5,
                                inverted_r=-0.3)
    lo, hi = seed.bootstrap_ci_mean(ua, 20_000, 0.95, np.random.RandomState(42))
    assert g.ci_low == pytest.approx(lo, abs=3e-3) and g.ci_high == pytest.approx(hi, abs=3e-3)


# ------------------------------------------------------------------------------------ seed 000


COSINE_FORMS = ("gram", "vectors")


def cosines(a: np.ndarray, b: np.ndarray, form: str | None = None) -> Cosines:
    """Cosines of per-layer arrays (L, n, D) of the two sides."""
    return Cosines(np.swapaxes(a, 0, 1), np.swapaxes(b, 0, 1), form=form)


def _table_and_cosines(rng, pairs=(5, 4, 6, 5), layers=4, d=10, form=None):
    n_rows = 2 * sum(pairs)
    cat = np.repeat([f"c{i}" for i in range(len(pairs))], [2 * p for p in pairs])
    pair = np.repeat(np.arange(sum(pairs)), 2)
    side = np.tile([0, 1], sum(pairs))
    nll = rng.uniform(1, 3, n_rows)
    table = pair_table(category=cat, pair=pair, side=side, nll_mean=nll, nll_sum=nll * 5,
                       n_tokens=np.full(n_rows, 5))
    pooled = rng.standard_normal((n_rows, layers + 1, d)) + 0.5
    prenorm = rng.standard_normal((n_rows, d))
    return table, pooled, prenorm, pooling_cosines(pooled=pooled, prenorm=prenorm, table=table,
                                                   form=form)


@pytest.mark.parametrize("form", COSINE_FORMS)
def test_layerwise_matches_the_seed_loop(form):
    rng = np.random.default_rng(11)
    table, pooled, prenorm, grams = _table_and_cosines(rng, form=form)
    pref = table.preference("mean")
    cu = layerwise.category_uniformity(grams, category_of_pair=table.category_of_pair, n_categories=4)
    params = small_params()
    mean_pref = np.bincount(table.category_of_pair, weights=pref) / table.pairs_per_category
    res, draws = layerwise.analyze_layerwise(uniformity={"mean": cu}, mean_preference=mean_pref,
                                             categories=list(table.categories), params=params,
                                             rng=np.random.default_rng(0))
    assert draws.mode == "exact"
    names = [table.categories[c] for c in table.category_of_pair]
    for layer in range(pooled.shape[1]):
        ref = seed.layer_correlations(pooled[table.row_a, layer], pooled[table.row_b, layer], pref, names,
                                      list(table.categories))
        assert cu.ua[layer] == pytest.approx(ref["category_uas"], abs=1e-12)
        assert mean_pref == pytest.approx(ref["category_prefs"])
        assert res["mean"].stats.pearson.r[layer] == pytest.approx(ref["correlation"], abs=1e-10)
        assert res["mean"].stats.pearson.p[layer] == pytest.approx(ref["p_value"], rel=1e-8)
    ref = seed.layer_correlations(prenorm[table.row_a], prenorm[table.row_b], pref, names, list(table.categories))
    assert res["mean"].stats.pearson.r[-1] == pytest.approx(ref["correlation"], abs=1e-10)
    assert res["mean"].holm_p.shape == (pooled.shape[1],)


def test_layerwise_results_report_sign_changes_peaks_and_nan_reasons():
    rng = np.random.default_rng(2)
    table, pooled, prenorm, grams = _table_and_cosines(rng, layers=8)
    cu = layerwise.category_uniformity(grams, category_of_pair=table.category_of_pair, n_categories=4)
    const = layerwise.CategoryUniformity(u_a=np.full_like(cu.u_a, 0.5), u_b=np.full_like(cu.u_b, 0.25))
    res, _ = layerwise.analyze_layerwise(uniformity={"mean": cu, "last": const}, mean_preference=np.arange(4.0),
                                         categories=list(table.categories), params=small_params(),
                                         rng=np.random.default_rng(0))
    out = document(layerwise.layerwise_results(res, categories=list(table.categories), n_layers=8,
                                               params=small_params()))
    reasons = take_reasons(out)
    r = np.array(out["mean"]["pearson_r"])
    assert out["mean"]["sign_changes"] == document(curves.sign_change_records(r, layers=list(range(9)), n_layers=8))
    assert out["mean"]["peak_positive"]["layer"] == int(np.argmax(r))
    assert out["mean"]["peak_negative"]["r"] == pytest.approx(r.min())
    assert all(v is None for v in out["last"]["pearson_r"])
    assert reasons["last/pearson_r/0"] == "UA is constant"
    assert out["last"]["peak_positive"]["layer"] is None
    assert "last/peak_positive/layer" in reasons
    seed_view = seed.scaling_summary({layer: r[layer] for layer in curves.seed_layers(8)}, 8)
    assert [(s["layer_before"], s["layer_after"]) for s in out["mean"]["seed_layers_sign_changes"]] == \
        [(s["layer_before"], s["layer_after"]) for s in seed_view["sign_changes"]]


# ------------------------------------------------------------------------------------ seed 002


def test_balanced_partitions_have_sizes_within_one():
    labels = bins.partitions(np.random.default_rng(0), scheme="balanced", n=23, k=5, count=40)
    for row in labels:
        sizes = np.bincount(row, minlength=5)
        assert sizes.sum() == 23 and sizes.max() - sizes.min() <= 1
    assert len({tuple(r) for r in labels}) > 1


@pytest.mark.parametrize("form", COSINE_FORMS)
def test_bins_summary_matches_the_seed_loop_on_the_same_partitions(form):
    rng = np.random.default_rng(5)
    n, d, layers = 40, 12, 3
    emb_a = rng.standard_normal((layers, n, d)) + 0.4
    emb_b = rng.standard_normal((layers, n, d)) + 0.4
    pref = rng.standard_normal(n)
    for scheme, k in (("randint", 6), ("randint", 15), ("balanced", 7)):
        labels = bins.partitions(np.random.default_rng(1), scheme=scheme, n=n, k=k, count=25)
        got = bins.summarize_partitions(cosines=cosines(emb_a, emb_b, form), preference=pref,
                                       labels=labels, k=k)
        for layer in range(layers):
            ref = seed.analyze_with_k_bins(emb_a[layer], emb_b[layer], pref, k, 25, assignments=labels)
            assert got.n_valid[layer] == ref["n_valid"]
            assert got.r_mean[layer] == pytest.approx(ref["r_mean"], abs=1e-10)
            assert got.r_std[layer] == pytest.approx(ref["r_std"], abs=1e-10)
            assert got.p_mean[layer] == pytest.approx(ref["p_mean"], abs=1e-10)


@pytest.mark.parametrize("form", COSINE_FORMS)
def test_ci_partition_matches_the_seed_bootstrap_in_distribution(form):
    rng = np.random.default_rng(8)
    n, d = 60, 10
    emb_a = rng.standard_normal((1, n, d)) + 0.3
    emb_b = rng.standard_normal((1, n, d)) + 0.3
    pref = rng.standard_normal(n)
    labels = bins.partitions(np.random.default_rng(2), scheme="randint", n=n, k=8, count=1)[0]
    params = small_params(bootstrap_resamples=4000)
    ci = bins.ci_partition(cosines=cosines(emb_a, emb_b, form), preference=pref, labels=labels, k=8,
                           params=params, rng=np.random.default_rng(3))
    x = np.array([seed.uniformity_score(emb_a[0][labels == b]) - seed.uniformity_score(emb_b[0][labels == b])
                  for b in ci.bin_ids])
    y = np.array([pref[labels == b].mean() for b in ci.bin_ids])
    r, lo, hi, p = seed.bootstrap_correlation(x, y, 4000, 0.95, np.random.RandomState(0))
    assert ci.stats.pearson.r[0] == pytest.approx(r, abs=1e-10)
    assert ci.stats.pearson.p[0] == pytest.approx(p, rel=1e-8)
    assert ci.stats.bootstrap.low[0] == pytest.approx(lo, abs=0.05)
    assert ci.stats.bootstrap.high[0] == pytest.approx(hi, abs=0.05)


def test_ci_partition_with_too_few_usable_bins_is_nan_with_reasons():
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((2, 8, 5))
    labels = np.array([0, 0, 0, 0, 0, 1, 2, 3])  # one bin of 5, three singletons
    ci = bins.ci_partition(cosines=cosines(emb, emb[::-1]), preference=rng.standard_normal(8), labels=labels,
                           k=4, params=small_params(), rng=np.random.default_rng(1))
    assert ci.bin_ids.tolist() == [0]
    assert np.isnan(ci.stats.pearson.r).all() and ci.stats.pearson.reason[0] == "fewer than 3 points"
    assert np.isnan(ci.stats.bootstrap.low).all() and ci.stats.bootstrap.reason[0] == "fewer than 3 points"
    ci = bins.ci_partition(cosines=cosines(emb, emb), preference=np.arange(8.0), labels=np.arange(8), k=8,
                           params=small_params(), rng=np.random.default_rng(1))  # no bin has two pairs
    assert ci.bin_ids.tolist() == [] and np.isnan(ci.stats.bootstrap.high).all()
    assert ci.stats.pearson.reason[0] == "fewer than 3 points"


def test_too_many_bins_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"analysis\.bins\.k"):
        bins.check_bins(small_params(bins=BinsParams(k=(3, 30), partitions=2, ci_k=4)), n_pairs=40)
    with pytest.raises(ConfigError, match=r"analysis\.bins\.ci_k"):
        bins.check_bins(small_params(bins=BinsParams(k=(3,), partitions=2, ci_k=21)), n_pairs=40)
    bins.check_bins(small_params(bins=BinsParams(k=(20,), partitions=2, ci_k=20)), n_pairs=40)


def test_change_labels_are_the_seeds():
    assert bins.change_labels(before_excludes=np.array([False, True, True, False]),
                              after_excludes=np.array([True, False, True, False])) == \
        ["NOW SIGNIFICANT", "Lost significance", "No change", "No change"]


# ------------------------------------------------------------------------------------ pair level


def test_centroid_cosines_match_direct_computation():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 12, 7)) + 0.2
    cat = np.array([0] * 5 + [1] * 7)
    x[1, 3] = 0.0  # a zero statement: its cosine is undefined
    got = centroid_score.centroid_cosines(cosines(x, x).units["a"], category_of_pair=cat, n_categories=2)
    for layer in range(2):
        u = x[layer] / (np.linalg.norm(x[layer], axis=1, keepdims=True) + 1e-10)
        for i in range(12):
            if layer == 1 and i == 3:
                assert np.isnan(got[layer, i])
                continue
            centroid = u[cat == cat[i]].mean(axis=0)
            expected = u[i] @ centroid / (np.linalg.norm(u[i]) * np.linalg.norm(centroid))
            assert got[layer, i] == pytest.approx(expected, abs=1e-12)


def test_centroid_cosines_a_chunk_at_a_time_are_the_same_bytes():
    """The per-statement dot products and norms, taken a chunk of statements at a time, equal the
    whole-array einsum and norms bit for bit (a count of statements that is not a multiple of the chunk)."""
    from uaprobe.analysis.geometry.uniformity import UNIT_CHUNK_ROWS
    rng = np.random.default_rng(3)
    n = 2 * UNIT_CHUNK_ROWS + 7
    units = rng.standard_normal((n, 4, 33))
    cat = rng.integers(0, 5, n)
    sums = np.einsum("nc,nvd->cvd", np.eye(5)[cat], units)
    own = np.einsum("nvd,nvd->vn", units, sums[cat])
    norms = np.linalg.norm(sums, axis=-1).T[:, cat] * np.linalg.norm(units, axis=-1).T
    want = own / norms
    got = centroid_score.centroid_cosines(units, category_of_pair=cat, n_categories=5)
    assert np.array_equal(got, want)
    assert got.strides == want.strides  # the layout too: the bootstrap's sums over the scores follow it


def test_pair_level_planted_score_predicts_preference():
    # each pair's A statement leans towards its category direction in proportion to its preference
    rng = np.random.default_rng(4)
    n, d = 60, 40
    cat = np.repeat([0, 1, 2], 20)
    pref = rng.standard_normal(n)
    direction = np.eye(d)[cat]
    w = 1.0 + 0.5 * np.tanh(pref)
    a = w[:, None] * direction + rng.standard_normal((n, d)) * 0.1
    b = direction + rng.standard_normal((n, d)) * 0.1
    scores = centroid_score.pair_scores(cosines(a[None], b[None]), category_of_pair=cat, n_categories=3)
    res, draws = centroid_score.analyze_centroid_scores(scores={"mean": np.vstack([scores, scores])}, preference=pref,
                                             params=small_params(), rng=np.random.default_rng(0))
    assert draws.mode == "random"
    assert res["mean"].stats.pearson.r[0] > 0.5
    assert res["mean"].stats.bootstrap.low[0] > 0
    assert res["mean"].stats.permutation_p[0] == pytest.approx(1 / 401)


# ------------------------------------------------------------------------------------ seed 004


def test_anisotropy_profile_matches_the_seed_eigendecomposition():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 30, 20)) * np.linspace(3, 0.1, 20) + 1.0  # n > D and low rank below
    x[2, :, :] = rng.standard_normal((30, 20)) @ np.diag(np.r_[np.ones(5), np.zeros(15)]) + 0.5
    prof = anisotropy.anisotropy_profile(x, spectrum_top=100)
    for layer in range(3):
        ref = seed.compute_anisotropy_metrics(x[layer])
        assert prof.lambda1_ratio[layer] == pytest.approx(ref["intrinsic_dim_ratio"], rel=1e-10)
        assert prof.eigenvalue_variance[layer] == pytest.approx(ref["eigenvalue_variance"], rel=1e-9)
        assert prof.effective_rank[layer] == pytest.approx(ref["effective_rank"], rel=1e-6)
        assert prof.mean_cos_to_mean[layer] == pytest.approx(ref["avg_cos_sim_to_mean"], rel=1e-12)
        for k in (1, 10, 50):
            assert prof.var_top[k][layer] == pytest.approx(ref[f"var_top{k}"], rel=1e-9)
        assert prof.spectrum[layer] == pytest.approx(ref["eigenvalues"], rel=1e-8, abs=1e-9)
    assert prof.spectrum.shape == (3, 20)


def test_anisotropy_spectrum_with_fewer_tokens_than_dimensions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 50)) + 2.0
    lam = anisotropy.covariance_spectrum(x)[0]
    ref = np.maximum(np.sort(np.linalg.eigvalsh(np.cov(x[0].T)))[::-1], 1e-10)
    assert lam[:7] == pytest.approx(ref[:7], rel=1e-9)
    assert (lam[7:] == 1e-10).all()


def test_anisotropy_zero_mean_is_nan_with_a_reason_not_zero():
    x = np.array([[[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]])
    prof = anisotropy.anisotropy_profile(x, spectrum_top=5)
    assert np.isnan(prof.mean_cos_to_mean[0]) and prof.mean_cos_reason[0]


def test_anisotropy_of_identical_token_states_is_nan_with_a_reason():
    x = np.random.default_rng(0).standard_normal((4, 10, 8))
    x[1] = x[1, 0]
    prof = anisotropy.anisotropy_profile(x, spectrum_top=4)
    assert np.isnan(prof.lambda1_ratio[1]) and np.isnan(prof.effective_rank[1]) and np.isnan(prof.spectrum[1]).all()
    assert np.isfinite(prof.lambda1_ratio[[0, 2, 3]]).all() and np.isfinite(prof.mean_cos_to_mean[1])
    out, reasons = _anisotropy_file(prof, n_layers=3, n_tokens=10, n_prompts=2, sign_changes=[])
    assert out["lambda1_ratio"][1] is None and "zero covariance" in reasons["lambda1_ratio/1"]
    assert out["l_star"] != 1


def _anisotropy_file(prof, *, n_layers, n_tokens, n_prompts, sign_changes, **kw):
    """anisotropy.json of ``prof`` as the file holds it, and its reasons."""
    rec = anisotropy.anisotropy_results(profile=prof, header=results_header(n_layers=n_layers, params=small_params()), n_layers=n_layers, token_selection="all",
                                        n_tokens=n_tokens, n_prompts=n_prompts, hidden_size=8,
                                        sign_changes=sign_changes, tolerance=0.01, **kw)
    out = document(rec)
    return out, take_reasons(out)


def test_anisotropy_without_an_l_star_says_why_at_every_dependent_key():
    x = np.ones((3, 6, 4))  # every layer's token states the same vector: lambda1/sum undefined everywhere
    prof = anisotropy.anisotropy_profile(x, spectrum_top=2)
    calls = []
    out, reasons = _anisotropy_file(prof, n_layers=2, n_tokens=6, n_prompts=2, alpha=0.05,
                                    bootstrap=lambda *a: calls.append(a),
                                    sign_changes=[{"layer_before": 0, "layer_after": 1, "r_before": 0.3,
                                                   "r_after": -0.1, "midpoint_depth_pct": 25.0}])
    assert out["l_star"] is None and out["l_star_ties"] == [] and not calls and "l_star_bootstrap" not in out
    assert set(out["bell_curve"]) == {"is_bell_curve"} and out["bell_curve"]["is_bell_curve"] is None
    corr = out["correlation_sign_changes"]
    assert corr["sign_changes"][0]["layer_after"] == 1 and corr["sign_changes"][0]["distance"] is None
    for key in ("correlation_sign_changes/sign_changes/0/distance", "l_star", "l_star_depth_pct", "l_star_value", "bell_curve/is_bell_curve",
                "correlation_sign_changes/distance_to_last_inversion", "correlation_sign_changes/distance_to_nearest"):
        assert reasons[key] == anisotropy.NO_L_STAR, key


def test_token_selection_follows_the_pooling_policy():
    states = np.arange(4 * 2 * 3, dtype=np.float32).reshape(4, 2, 3)
    special = np.array([True, False, False, True])
    content, name = anisotropy.select_tokens(states=states, special=special, pooling_drop="special")
    assert name == "content" and content.shape == (2, 2, 3)
    every, name = anisotropy.select_tokens(states=states, special=special, pooling_drop="first")
    assert name == "all" and every.shape == (2, 4, 3)


def test_bell_curve_and_l_star_match_the_seed():
    rng = np.random.default_rng(1)
    layers = 12
    amp = 0.3 + 3 * np.exp(-0.5 * ((np.arange(layers + 1) - 4) / 2.0) ** 2)
    z = rng.standard_normal(40)
    x = rng.standard_normal((layers + 1, 40, 16)) * 0.5
    x[:, :, 0] += amp[:, None] * z[None, :]
    prof = anisotropy.anisotropy_profile(x, spectrum_top=10)
    changes = [{"layer_before": 6, "layer_after": 7, "r_before": 0.4, "r_after": -0.2, "midpoint_depth_pct": 54.0}]
    boot = anisotropy.LStarBootstrap(resamples=1, counts=[0] * (layers + 1), share_at_l_star=1.0, share_in_ties=1.0,
                                     mode=4)
    calls = []
    out, _ = _anisotropy_file(prof, n_layers=layers, n_tokens=40, n_prompts=4, sign_changes=changes, alpha=0.05,
                              bootstrap=lambda l_star, ties: calls.append((l_star, ties)) or boot)
    assert calls == [(4, out["l_star_ties"])] and out["l_star_bootstrap"]["mode"] == 4
    assert out["l_star"] == 4 == int(np.argmax(prof.lambda1_ratio))
    ref = seed.analyze_bell_curve(list(prof.lambda1_ratio), 4)
    assert out["bell_curve"]["before"]["slope"] == pytest.approx(ref["phase1_slope"])
    assert out["bell_curve"]["after"]["slope"] == pytest.approx(ref["phase2_slope"])
    assert out["bell_curve"]["is_bell_curve"] is bool(ref["is_bell_curve"]) is True
    assert out["bell_curve"]["is_bell_curve_significant"] is bool(ref["phase1_p"] < 0.05 and ref["phase2_p"] < 0.05)
    assert out["correlation_sign_changes"]["distance_to_last_inversion"] == 4 - 7


# ------------------------------------------------------------------------------------ seed 001


def test_scaling_summary_matches_the_seed():
    rng = np.random.default_rng(12)
    model_curves = []
    refs = {}
    for mid, n_layers in (("m1", 24), ("m2", 24), ("m3", 32), ("m4", 36)):
        r = np.sin(np.linspace(0, 3, n_layers + 1) + rng.uniform(0, 1)) * 0.8
        model_curves.append(scaling.ModelCurve(model_id=mid, display=mid, params_millions=None, n_layers=n_layers, r=r))
        refs[mid] = seed.scaling_summary({layer: r[layer] for layer in curves.seed_layers(n_layers)}, n_layers)
    out = document(scaling.scaling_view({"mean": model_curves}, seed_view=True, stable_depth_std=10.0))["mean"]
    take_reasons(out)
    for mid, ref in refs.items():
        m = out["models"][mid]
        assert m["peak_positive"]["layer"] == ref["max_pos_layer"]
        assert m["peak_positive"]["depth_pct"] == pytest.approx(ref["max_pos_pct"])
        assert m["peak_negative"]["r"] == pytest.approx(ref["max_neg_r"])
        assert m["final_r"] == pytest.approx(ref["final_r"])
        assert [s["midpoint_depth_pct"] for s in m["sign_changes"]] == \
            pytest.approx([s["midpoint_pct"] for s in ref["sign_changes"]])
    pcts = [refs[m]["max_pos_pct"] for m in refs]
    assert out["summary"]["peak_positive_depth_mean"] == pytest.approx(np.mean(pcts))
    assert out["summary"]["peak_positive_depth_std"] == pytest.approx(np.std(pcts))
    assert out["summary"]["stable"] is bool(np.std(pcts) < 10)


def test_scaling_with_one_model_has_no_verdict():
    c = scaling.ModelCurve(model_id="m", display="m", params_millions=1.0, n_layers=4, r=np.array([.1, .2, -.1, .3, .0]))
    out = document(scaling.scaling_view({"mean": [c]}, seed_view=False, stable_depth_std=10.0))
    assert "mean/summary/stable" in take_reasons(out)
    assert out["mean"]["summary"]["stable"] is None


# ------------------------------------------------------------------------------------ inputs


def test_pair_table_rejects_a_pair_without_b():
    with pytest.raises(UAProbeError, match="pair 1"):
        pair_table(category=np.array(["a"] * 4), pair=np.array([0, 0, 1, 1]), side=np.array([0, 1, 0, 0]),
                   nll_mean=np.ones(4), nll_sum=np.ones(4), n_tokens=np.ones(4), source="x.h5")


def test_pair_table_orders_categories_by_first_appearance_and_computes_preferences():
    t = pair_table(category=np.array(["z", "z", "a", "a", "z", "z"]), pair=np.array([0, 0, 1, 1, 2, 2]),
                   side=np.array([1, 0, 0, 1, 0, 1]), nll_mean=np.array([3.0, 1.0, 2.0, 2.5, 1.0, 1.5]),
                   nll_sum=np.array([30.0, 10.0, 20.0, 25.0, 10.0, 15.0]), n_tokens=np.full(6, 10))
    assert t.categories == ("z", "a")
    assert t.category_of_pair.tolist() == [0, 1, 0]
    assert t.preference("mean").tolist() == [2.0, 0.5, 0.5]
    assert t.preference("sum").tolist() == [20.0, 5.0, 5.0]
    assert sps.pearsonr(t.preference("mean"), t.preference("sum"))[0] == pytest.approx(1.0)


def test_the_preference_per_character_is_the_summed_nll_over_each_statement_s_characters() -> None:
    """Per pair NLL_sum(B) / chars(B) - NLL_sum(A) / chars(A), averaged per category, written out as a loop."""
    from uaprobe.analysis.category.robustness import per_character
    rng = np.random.default_rng(3)
    cat = np.array(["x", "x", "y", "y", "x", "x", "y", "y"])
    pair = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    side = np.array([1, 0, 0, 1, 0, 1, 1, 0])  # A and B in either order
    nll_sum = rng.uniform(5, 40, 8)
    chars = rng.integers(10, 80, 8)
    table = pair_table(category=cat, pair=pair, side=side, nll_mean=nll_sum / 5, nll_sum=nll_sum,
                       n_tokens=np.full(8, 5))
    expected = {}
    for p in range(4):
        rows = np.flatnonzero(pair == p)
        a, b = rows[side[rows] == 0][0], rows[side[rows] == 1][0]
        expected.setdefault(cat[a], []).append(nll_sum[b] / chars[b] - nll_sum[a] / chars[a])
    got = per_character(table, chars)
    np.testing.assert_allclose(got, [np.mean(expected[c]) for c in table.categories], rtol=1e-12)
