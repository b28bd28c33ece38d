"""Pair-level models (uaprobe.analysis.pairs.pairmodels): partial r with the lengths of both sides out,
Freedman-Lane permutation within categories, Holm across layers, the lexical baseline."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from uaprobe.analysis.inference import controls, multiplicity, stats
from uaprobe.analysis.pairs import freedman_lane, incremental, option_b, pairmodels
from synthetic_h5 import results_header
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.schema.pairmodels import LengthMatched, Mixed
from uaprobe.config import AnalysisParams, BinsParams, PrimaryParams, RobustnessParams
from uaprobe.errors import ConfigError


def small_params(**kw) -> AnalysisParams:
    return AnalysisParams(**{**dict(bootstrap_resamples=50, permutations=499,
                                    bins=BinsParams(k=(3, 5), partitions=5, ci_k=4),
                                    robustness=RobustnessParams(lexical_seeds=2)), **kw})


def design(n_per_cat: int = 40, n_cat: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Categories, lengths of A and B (n, 2) and a preference correlated with the lengths."""
    rng = np.random.default_rng(seed)
    cat = np.repeat(np.arange(n_cat), n_per_cat)
    lengths = rng.integers(3, 15, size=(cat.size, 2)).astype(float)
    pref = 0.3 * (lengths[:, 1] - lengths[:, 0]) + rng.normal(size=cat.size)
    return cat, lengths, pref


def residuals_loop(v: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Residuals of v on [1, z], one least-squares fit, written out."""
    design_matrix = np.column_stack([np.ones(len(v))] + [z[:, j] for j in range(z.shape[1])])
    coef = np.linalg.lstsq(design_matrix, v, rcond=None)[0]
    return np.array([v[i] - sum(design_matrix[i, j] * coef[j] for j in range(len(coef))) for i in range(len(v))])


def corr_loop(a: np.ndarray, b: np.ndarray) -> float:
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return num / np.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))


# ------------------------------------------------------------------------------- the statistic


def test_partial_r_is_the_correlation_of_residuals_on_both_lengths():
    cat, lengths, pref = design()
    rng = np.random.default_rng(1)
    x = np.stack([rng.normal(size=pref.size) + 0.2 * pref, lengths[:, 0] + rng.normal(size=pref.size)])
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=20)
    proj = freedman_lane.PermutedProjections(pref, lengths, orders)
    t = proj.test(x)
    for row, r in zip(x, t.r):
        assert r == pytest.approx(corr_loop(residuals_loop(row, lengths), residuals_loop(pref, lengths)), abs=1e-12)
    # the covariates are both counts, not only their difference: the sum matters too
    diff_only = controls.partial_r(x[1], pref, (lengths[:, 1] - lengths[:, 0])[:, None]).r
    assert abs(diff_only - t.r[1]) > 1e-3
    # the identity permutation gives the observed r back
    ident = freedman_lane.PermutedProjections(pref, lengths, np.arange(pref.size)[None, :])
    np.testing.assert_allclose(ident.permuted_r(x)[:, 0], t.r, atol=1e-12)


def test_covariate_basis_is_orthonormal_and_spans_the_intercept_and_lengths():
    _, lengths, _ = design()
    q = freedman_lane.covariate_basis(lengths)
    assert q.shape == (lengths.shape[0], 3)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    full = np.column_stack([np.ones(len(lengths)), lengths])
    np.testing.assert_allclose(q @ (q.T @ full), full, atol=1e-9)
    # a duplicated covariate adds no column
    assert freedman_lane.covariate_basis(np.column_stack([lengths, lengths[:, 0] * 2 + 1])).shape[1] == 3


# ---------------------------------------------------------------------------- the permutations


def test_within_category_permutations_keep_every_categorys_multiset_of_residuals():
    cat, lengths, pref = design(n_per_cat=15, n_cat=4)
    orders = freedman_lane.within_category_orders(np.random.default_rng(3), category_of_pair=cat, permutations=200)
    e = residuals_loop(np.random.default_rng(4).normal(size=pref.size), lengths)
    for o in orders:
        assert sorted(o) == list(range(cat.size))  # a permutation
        assert (cat[o] == cat).all()  # that stays in each category
        permuted = e[o]
        for c in range(4):
            assert sorted(permuted[cat == c]) == sorted(e[cat == c])
    assert (orders != np.arange(cat.size)).any(axis=1).mean() > 0.99  # it does permute
    # the same seed gives the same draws
    again = freedman_lane.within_category_orders(np.random.default_rng(3), category_of_pair=cat, permutations=200)
    assert np.array_equal(orders, again)


def test_permuted_r_of_few_rows_and_of_many_are_the_projections_of_the_permuted_residuals():
    """Few rows are permuted themselves, many project on the permuted columns (``w_perm``, the gather
    ``w.T[:, argsort(orders)]`` laid out (n, m B)): both give the partial r of every permuted residual,
    computed here one permutation at a time."""
    rng = np.random.default_rng(5)
    n = 37
    cat = rng.integers(0, 4, n)
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=23)
    cov = rng.standard_normal((n, 2))
    proj = freedman_lane.PermutedProjections(rng.standard_normal(n), cov, orders)
    want_w = np.ascontiguousarray(proj.w.T[:, np.argsort(orders, axis=1)].reshape(proj.m * 23, -1).T)
    assert np.array_equal(proj.w_perm, want_w)
    x = rng.standard_normal((proj.m + 3, n))
    many = proj.permuted_r(x)
    few = np.concatenate([proj.permuted_r(row[None, :]) for row in x])
    direct = np.empty_like(many)
    for i, row in enumerate(proj.residuals(x)):
        for b, order in enumerate(orders):
            e = row[order]
            left = e - proj.q @ (proj.q.T @ e)
            direct[i, b] = (left @ proj.ry) / np.sqrt((left @ left) * (proj.ry @ proj.ry))
    np.testing.assert_allclose(many, direct, rtol=0, atol=1e-12)
    np.testing.assert_allclose(few, direct, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="index the 37 rows"):
        freedman_lane.PermutedProjections(rng.standard_normal(n), cov, orders + 1)


def test_permutation_p_equals_a_brute_force_freedman_lane_loop():
    cat, lengths, pref = design(n_per_cat=8, n_cat=3, seed=5)
    rng = np.random.default_rng(6)
    x = np.stack([0.3 * pref + rng.normal(size=pref.size), rng.normal(size=pref.size),
                  lengths[:, 1] + rng.normal(size=pref.size)])
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=300)
    t = freedman_lane.PermutedProjections(pref, lengths, orders).test(x)
    for row, r, p in zip(x, t.r, t.p):
        e = residuals_loop(row, lengths)
        fitted = row - e
        hits = 0
        for o in orders:
            r_star = controls.partial_r(fitted + e[o], pref, lengths).r
            hits += abs(r_star) >= abs(r) - 1e-12
        assert p == pytest.approx((1 + hits) / (1 + len(orders)), abs=1e-15)


# ---------------------------------------------------------------------------- known answers


def test_a_metric_that_tracks_the_preference_beyond_length_has_a_tiny_p():
    cat, lengths, pref = design(n_per_cat=60, n_cat=4, seed=7)
    rng = np.random.default_rng(8)
    x = pref + rng.normal(scale=1.0, size=pref.size)  # noise independent of the lengths
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=999)
    t = freedman_lane.PermutedProjections(pref, lengths, orders).test(x[None])
    assert t.r[0] > 0.4
    assert t.p[0] == pytest.approx(1 / 1000)


def test_a_metric_of_length_alone_has_partial_r_near_zero_and_a_large_p():
    cat, lengths, pref = design(n_per_cat=60, n_cat=4, seed=9)
    rng = np.random.default_rng(10)
    x = 0.5 * lengths[:, 1] - 0.5 * lengths[:, 0] + rng.normal(scale=0.5, size=pref.size)
    assert controls.partial_r(x, pref, np.empty((pref.size, 0))).r > 0.4  # the confound is there
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=999)
    t = freedman_lane.PermutedProjections(pref, lengths, orders).test(x[None])
    assert abs(t.r[0]) < 0.1
    assert t.p[0] > 0.2


def test_a_category_offset_shared_with_the_preference_is_not_a_pair_level_association():
    rng = np.random.default_rng(11)
    cat = np.repeat(np.arange(6), 30)
    lengths = rng.integers(3, 15, size=(cat.size, 2)).astype(float)
    offset = np.linspace(-2, 2, 6)[cat]
    pref = offset + rng.normal(size=cat.size)
    x = offset + rng.normal(size=cat.size)  # shares only the categories' offsets with the preference
    within = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=999)
    free = freedman_lane.within_category_orders(rng, category_of_pair=np.zeros_like(cat), permutations=999)
    t_within = freedman_lane.PermutedProjections(pref, lengths, within).test(x[None])
    t_free = freedman_lane.PermutedProjections(pref, lengths, free).test(x[None])
    assert t_within.r[0] == t_free.r[0] and t_within.r[0] > 0.5
    assert t_free.p[0] < 0.01 and t_within.p[0] > 0.05


def test_with_category_fixed_effects_a_shared_category_offset_leaves_only_the_within_category_r():
    rng = np.random.default_rng(21)
    cat = np.repeat(np.arange(6), 30)
    lengths = rng.integers(3, 15, size=(cat.size, 2)).astype(float)
    offset = np.linspace(-2, 2, 6)[cat]
    noise = rng.normal(size=cat.size)
    pref = offset + noise
    x = offset + rng.normal(size=cat.size)  # shares only the categories' offsets with the preference
    fixed = controls.category_indicators(cat, 6)  # the pair models' fixed effects
    assert fixed.sum(axis=1).tolist() == [1.0] * cat.size and fixed[cat == 4, 4].all()
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=999)
    without = freedman_lane.PermutedProjections(pref, lengths, orders).test(x[None])
    within = freedman_lane.PermutedProjections(pref, np.column_stack([fixed, lengths]), orders).test(x[None])
    assert without.r[0] > 0.5  # between-category variation passes for a correlation
    # with the fixed effects: the correlation of residuals after each category's mean and the lengths (every
    # category's indicator: the same span)
    z = np.column_stack([(cat[:, None] == np.arange(6)[None, :]).astype(float), lengths])
    assert within.r[0] == pytest.approx(corr_loop(residuals_loop(x, z), residuals_loop(pref, z)), abs=1e-12)
    assert abs(within.r[0]) < 4 / np.sqrt(cat.size) and within.p[0] > 0.01
    # and a within-category association is kept
    y2 = offset + noise + 0.0
    x2 = rng.normal(size=cat.size) + 0.8 * noise
    t2 = freedman_lane.PermutedProjections(y2, np.column_stack([fixed, lengths]), orders).test(x2[None])
    assert t2.r[0] > 0.4 and t2.p[0] == pytest.approx(1 / 1000)


def test_vif_is_one_over_the_unexplained_share_and_flags_a_spanned_metric():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(200, 2))
    x = z[:, 0] + 0.5 * rng.normal(size=200)
    r2 = 1 - (residuals_loop(x, z) ** 2).sum() / ((x - x.mean()) ** 2).sum()
    assert incremental.vif(x, z) == pytest.approx(1 / (1 - r2))
    assert incremental.vif(rng.normal(size=200), z) < 1.1
    assert incremental.vif(2 * z[:, 1] - 3, z) == np.inf and np.isnan(incremental.vif(np.ones(200), z))


def test_a_metric_explained_by_the_lengths_is_missing_with_a_reason():
    cat, lengths, pref = design()
    orders = freedman_lane.within_category_orders(np.random.default_rng(0), category_of_pair=cat, permutations=50)
    t = freedman_lane.PermutedProjections(pref, lengths, orders).test(np.stack([2 * lengths[:, 0] - 1,
                                                                             np.full(pref.size, np.nan)]))
    assert np.isnan(t.r).all() and np.isnan(t.p).all()
    assert "covariates" in t.reason[0] and "non-finite" in t.reason[1]


# ------------------------------------------------------------------------------- the results


def file_of(record):
    """The JSON object a record is written as: its missing values null."""
    doc = document(record)
    take_reasons(doc)
    return doc


def run(inp, *, params, **kw):
    """pair_models.json of ``inp``, as its record and as the file holds it (the mixed models and the length-matched
    analyses, tested in test_mixed_length_matched.py, left empty)."""
    n_layers = next(iter(inp["policies"]["default"].pooled.values())).shape[1] - 1
    header = results_header(n_layers=n_layers, params=params)
    rec = pairmodels.pair_models_results(**inp, params=params, header=header, **kw,
                                         mixed_and_matched=lambda: (Mixed.model_construct(),
                                                                    LengthMatched.model_construct()))
    return rec, file_of(rec)



def synthetic_input(n_pairs: int = 36, n_layers: int = 3, dim: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = 2 * n_pairs
    cat = np.repeat(np.arange(3), n_pairs // 3)
    lengths = rng.integers(2, 9, size=n)
    offsets = np.concatenate([[0], np.cumsum(lengths + 1)])  # one special token first
    ids = rng.integers(0, 50, size=offsets[-1])
    special = np.zeros(offsets[-1], dtype=bool)
    special[offsets[:-1]] = True
    pooled = {p: rng.normal(size=(n, n_layers + 1, dim)) + rng.normal(size=(1, n_layers + 1, dim))
              for p in ("mean", "last")}
    row_a, row_b = np.arange(0, n, 2), np.arange(1, n, 2)
    pref = 0.2 * (lengths[row_b] - lengths[row_a]) + rng.normal(size=n_pairs)
    keep = pairmodels.pooled_token_mask(offsets, special, drop="special")
    pol = pairmodels.PolicyInput(name="special", pooled=pooled, n_content=lengths, lexical_keep=keep)
    return dict(policies={"default": pol}, row_a=row_a, row_b=row_b, category_of_pair=cat,
                categories=["ground_truth_numeric", "tech_philosophy", "business"], preference=pref, token_ids=ids,
                token_offsets=offsets)


def test_results_are_the_tests_of_each_metric_with_holm_across_layers():
    inp = synthetic_input()
    params = small_params(alpha=0.5)
    body_record, body = run(inp, seeds=[3, 4], params=params)
    assert body["n_pairs"] == 36 and body["pairs_per_category"] == [12, 12, 12]
    pol = body["policies"]["default"]
    assert set(pol["poolings"]) == {"mean", "last"} and set(pol["poolings"]["mean"]) == set(option_b.METRICS)
    # one metric and layer, recomputed from option_b and the same draws
    x = inp["policies"]["default"].pooled["last"]
    values = option_b.pair_metrics(x[inp["row_a"]], x[inp["row_b"]])["within_pair_sim"]
    orders = freedman_lane.within_category_orders(pairmodels.rng_for_pair_models(params),
                                               category_of_pair=inp["category_of_pair"], permutations=499)
    n = inp["policies"]["default"].n_content
    fixed = (inp["category_of_pair"][:, None] == np.arange(3)[None, :]).astype(float)  # category fixed effects
    z = np.column_stack([fixed, n[inp["row_a"]], n[inp["row_b"]]]).astype(float)
    t = freedman_lane.PermutedProjections(inp["preference"], z, orders).test(values)
    e = pol["poolings"]["last"]["within_pair_sim"]
    assert e["partial_r"] == pytest.approx(t.r.tolist(), abs=1e-12)
    assert e["permutation_p"] == pytest.approx(t.p.tolist(), abs=1e-15)
    for e in pol["poolings"]["mean"].values():
        holm = [min(1.0, max((4 - j) * sorted(e["permutation_p"])[j] for j in range(i + 1))) for i in range(4)]
        assert sorted(e["holm_p"]) == pytest.approx(holm)
        assert e["holm_reject"] == [p <= 0.5 for p in e["holm_p"]]
        assert e["holm_layers"] == [i for i, v in enumerate(e["holm_reject"]) if v]
        assert e["n_holm_layers"] == len(e["holm_layers"])
        assert e["partial_r_min"] == min(e["partial_r"]) and e["partial_r_max"] == max(e["partial_r"])
    # the lexical baseline: the metrics of controls.lexical_embeddings, per seed
    lex = pol["lexical_baseline"]
    assert lex["seeds"] == [3, 4] and lex["dim"] == 8
    emb = controls.lexical_embeddings(inp["token_ids"], inp["token_offsets"], pol_keep(inp), dim=8, seed=4)
    kd = option_b.pair_metrics(emb[inp["row_a"]][:, None], emb[inp["row_b"]][:, None])["knn_density_asymmetry"]
    t = freedman_lane.PermutedProjections(inp["preference"], z, orders).test(kd)
    m = lex["metrics"]["knn_density_asymmetry"]
    assert m["partial_r"][1] == pytest.approx(t.r[0], abs=1e-12) and m["permutation_p"][1] == pytest.approx(t.p[0])
    assert m["median_partial_r"] == pytest.approx(np.median(m["partial_r"]))
    assert m["any_seed_significant"] == any(p <= 0.5 for p in m["permutation_p"])
    # headline metrics and plot columns read the same numbers
    head = pairmodels.headline_metrics(body_record, pooling="mean")
    assert head["default"]["margin_asymmetry"].n_holm_layers == pol["poolings"]["mean"]["margin_asymmetry"][
        "n_holm_layers"]
    cols = pairmodels.plot_columns(body_record, base={"layer": [0, 1, 2, 3]})
    assert cols["centroid_asymmetry_mean"] == pol["poolings"]["mean"]["centroid_asymmetry"]["partial_r"]


def test_option_b_values_give_the_bytes_of_values_computed_here():
    inp = synthetic_input()
    params = small_params()
    pol = inp["policies"]["default"]
    ob = option_b.option_b_poolings(pooled=pol.pooled, row_a=inp["row_a"], row_b=inp["row_b"],
                                    preference=inp["preference"], n_content=pol.n_content, params=params)
    given = dict(inp, policies={"default": dataclasses.replace(pol, values=ob.values)})
    _, here = run(inp, seeds=[3], params=params)
    _, reused = run(given, seeds=[3], params=params)
    assert json.dumps(reused) == json.dumps(here)


def pol_keep(inp) -> np.ndarray:
    return inp["policies"]["default"].lexical_keep


def test_an_unknown_left_out_category_names_the_key():
    inp = synthetic_input()
    with pytest.raises(ConfigError, match=r"analysis\.primary\.left_out is 'lifestyle'.*ground_truth_numeric"):
        run(inp, seeds=[3], params=small_params(primary=PrimaryParams(left_out="lifestyle")))


def test_pooled_token_mask_follows_each_policy():
    offsets = np.array([0, 3, 5])
    special = np.array([True, False, False, False, True])
    assert pairmodels.pooled_token_mask(offsets, special, drop="special").tolist() == [False, True, True, True, False]
    assert pairmodels.pooled_token_mask(offsets, special, drop="first").tolist() == [False, True, True, False, True]
    assert pairmodels.pooled_token_mask(offsets, special, drop="sink_excluded").tolist() == [False, True, True,
                                                                                             False, False]
    with pytest.raises(ValueError):
        pairmodels.pooled_token_mask(offsets, special, drop="nope")


def test_analyze_model_writes_pair_models_for_both_policies(tmp_path):
    from synthetic_h5 import write_synthetic_h5
    from uaprobe.analysis.run.pipeline import analyze_model
    from uaprobe.extraction.store import read_embeddings
    from uaprobe.schema import results_text

    emb = read_embeddings(write_synthetic_h5(tmp_path / "s.h5", n_layers=4))
    out = analyze_model(emb, params=small_params(), model_id="s")
    body = out.results["pair_models"]
    assert set(body["policies"]) == {"default", "sink_excluded"}
    assert body["policies"]["sink_excluded"]["policy"] == "sink_excluded"
    assert all(len(e["partial_r"]) == 5 for e in body["policies"]["default"]["poolings"]["first"].values())
    results_text(body, kind="pair_models", shown="pair_models.json")  # the schema, with every null's reason
    results_text(out.metrics, kind="metrics", shown="metrics.json")
    assert set(out.metrics["pair_models"]) == {"default", "sink_excluded"}
    assert set(out.plots["pair_models"]) == {"layer", "depth_pct", *(f"{m}_mean{s}" for m in option_b.METRICS
                                                                     for s in ("", "_sink_excluded"))}


# ------------------------------------------------------------- one family, incremental models


def test_pooled_positions_follow_each_policy():
    offsets = np.array([0, 4, 6, 9])
    special = np.array([True, False, False, True, False, False, True, False, False])
    for drop, first, last in (("special", [1, 4, 7], [2, 5, 8]), ("sink_excluded", [1, 5, 7], [2, 5, 8]),
                              ("first", [0, 4, 6], [3, 5, 8])):
        keep = pairmodels.pooled_token_mask(offsets, special, drop=drop)
        at = incremental.pooled_positions(offsets, keep, drop=drop)
        assert at["first"].tolist() == first and at["last"].tolist() == last, drop
    none = incremental.pooled_positions(np.array([0, 1, 3]), np.array([False, True, True]), drop="special")
    assert none["first"].tolist() == [-1, 1] and none["last"].tolist() == [-1, 2]


def test_lexical_states_pool_the_baselines_token_vectors():
    inp = synthetic_input()
    keep = pol_keep(inp)
    ids, offsets = inp["token_ids"], inp["token_offsets"]
    st = incremental.lexical_states(ids, offsets, keep, drop="special", dim=8, seed=4)
    np.testing.assert_array_equal(st["mean"], controls.lexical_embeddings(ids, offsets, keep, dim=8, seed=4))
    # a token's vector is the mean of a one-token statement made of it (the baseline's own table)
    for i in (0, 5, 17):
        for pooling, pos in (("first", offsets[i] + 1), ("last", offsets[i + 1] - 1)):
            one = controls.lexical_embeddings(ids, offsets, np.arange(ids.size) == pos, dim=8, seed=4)[i]
            np.testing.assert_array_equal(st[pooling][i], one)


def test_incremental_results_are_partial_r_given_length_and_the_lexical_metric():
    inp = synthetic_input()
    params = small_params(alpha=0.5)
    body_record, body = run(inp, seeds=[3, 4], params=params)
    inc = body["incremental"]
    assert inc["seeds"] == [3, 4] and set(inc["policies"]["default"]["poolings"]) == {"mean", "last"}
    ra, rb, pref = inp["row_a"], inp["row_b"], inp["preference"]
    x = inp["policies"]["default"].pooled["last"]
    model = option_b.pair_metrics(x[ra], x[rb])["cross_centroid"]  # (V, n)
    lex = []
    for seed in (3, 4):
        e = incremental.lexical_states(inp["token_ids"], inp["token_offsets"], pol_keep(inp), drop="special", dim=8,
                                       seed=seed)["last"]
        lex.append(option_b.pair_metrics(e[ra][:, None], e[rb][:, None])["cross_centroid"][0])
    n = inp["policies"]["default"].n_content
    fixed = (inp["category_of_pair"][:, None] == np.arange(3)[None, :]).astype(float)
    base = np.column_stack([fixed, n[ra], n[rb]]).astype(float)
    z = np.column_stack([base, *lex])
    e = inc["policies"]["default"]["poolings"]["last"]["cross_centroid"]
    for layer in range(4):  # partial r written out: the correlation of the residuals on [1, Z]
        want = corr_loop(residuals_loop(model[layer], z), residuals_loop(pref, z))
        assert e["partial_r"][layer] == pytest.approx(want, abs=1e-10)
    orders = freedman_lane.within_category_orders(pairmodels.rng_for_pair_models(params),
                                               category_of_pair=inp["category_of_pair"], permutations=499)
    t = freedman_lane.PermutedProjections(pref, z, orders).test(model)
    assert e["permutation_p"] == pytest.approx(t.p.tolist(), abs=1e-15)
    # the family: every (policy, pooling, metric) at the last layer, Holm across all of them
    for fam, pol in ((body["family"], body["policies"]), (inc["family"], inc["policies"])):
        t = fam["tests"]
        assert fam["layer"] == 3 and fam["n_tests"] == 2 * 5 == len(t["metric"])
        assert t["reported"] == [p == "mean" for p in t["pooling"]]
        for i in range(fam["n_tests"]):
            entry = pol[t["policy"][i]]["poolings"][t["pooling"][i]][t["metric"][i]]
            assert t["partial_r"][i] == entry["partial_r"][3] and t["permutation_p"][i] == entry["permutation_p"][3]
        p = np.array(t["permutation_p"])
        holm = [min(1.0, max((10 - j) * np.sort(p)[j] for j in range(rank + 1))) for rank in range(10)]
        np.testing.assert_allclose(np.sort(t["holm_p"]), holm, rtol=0, atol=1e-15)
        assert fam["p_floor"] == 1 / 500 and fam["holm_floor"] == pytest.approx(10 / 500)
    # without the left-out category: the same tests over the other categories' pairs, their own draws
    wc = inc["without_category"]
    keep = inp["category_of_pair"] != 0
    assert wc["left_out"] == "ground_truth_numeric" and wc["n_pairs"] == int(keep.sum()) == 24
    orders = freedman_lane.within_category_orders(stats.rng_for(seed=params.seed, name=pairmodels.RNG_NAME_WITHOUT),
                                               category_of_pair=inp["category_of_pair"][keep], permutations=499)
    t = freedman_lane.PermutedProjections(pref[keep], z[keep], orders).test(model[3:, keep])
    i = next(i for i in range(10) if wc["family"]["tests"]["pooling"][i] == "last"
             and wc["family"]["tests"]["metric"][i] == "cross_centroid")
    assert wc["family"]["tests"]["partial_r"][i] == pytest.approx(t.r[0], abs=1e-12)
    assert wc["family"]["tests"]["permutation_p"][i] == pytest.approx(t.p[0], abs=1e-15)
    # its checks: the VIF on [1, base, lexical] and the partial r without the lexical columns, same pairs
    x3 = model[3, keep]
    fit = residuals_loop(x3, z[keep])
    assert wc["family"]["tests"]["vif"][i] == pytest.approx(((x3 - x3.mean()) ** 2).sum() / (fit ** 2).sum())
    assert wc["family"]["tests"]["base_partial_r"][i] == pytest.approx(
        corr_loop(residuals_loop(x3, base[keep]), residuals_loop(pref[keep], base[keep])), abs=1e-10)
    j = next(j for j in range(10) if inc["family"]["tests"]["pooling"][j] == "last"
             and inc["family"]["tests"]["metric"][j] == "cross_centroid")
    assert inc["family"]["tests"]["base_partial_r"][j] == body["family"]["tests"]["partial_r"][j]
    assert all(v is None for v in body["family"]["tests"]["base_partial_r"])
    # r without covariates over the family's own pairs
    assert wc["family"]["tests"]["pearson_r"][i] == pytest.approx(corr_loop(x3, pref[keep]), abs=1e-12)
    assert inc["family"]["tests"]["pearson_r"][j] == pytest.approx(corr_loop(model[3], pref), abs=1e-12)
    assert wc["family"]["n_tests"] == 10
    head = pairmodels.headline_metrics(body_record)["default"]["cross_centroid"]
    i = next(i for i in range(10) if inc["family"]["tests"]["pooling"][i] == "mean"
             and inc["family"]["tests"]["metric"][i] == "cross_centroid")
    assert head.incremental_partial_r == inc["family"]["tests"]["partial_r"][i]
    assert head.incremental_family_holm_p == inc["family"]["tests"]["holm_p"][i]
    assert head.incremental_without_category_holm_p == wc["family"]["tests"]["holm_p"][i]


def test_a_metric_that_is_its_lexical_metric_adds_nothing_and_one_beyond_it_reaches_the_floor():
    cat, lengths, _ = design(n_per_cat=60, n_cat=4, seed=12)
    rng = np.random.default_rng(13)
    lexical = rng.normal(size=(3, cat.size))  # three seeds of a lexical metric
    pref = lexical.mean(axis=0) + 0.2 * (lengths[:, 1] - lengths[:, 0]) + 0.3 * rng.normal(size=cat.size)
    words_only = lexical.mean(axis=0) + 0.05 * rng.normal(size=cat.size)
    beyond = words_only + rng.normal(size=cat.size) + 3.0 * (pref - lexical.mean(axis=0))
    orders = freedman_lane.within_category_orders(rng, category_of_pair=cat, permutations=999)

    def projections(extra):
        return freedman_lane.PermutedProjections(pref, np.column_stack([lengths, extra]), orders)

    values = {"mean": {"m": np.stack([words_only, beyond])}}
    t, at_layer = incremental.incremental_tests(values, {"mean": {"m": lexical}}, metrics=["m"], preference=pref,
                                                base=lengths, orders=orders, layer=1)
    t = t["mean"]["m"]
    rank, permuted = at_layer["mean", "m"]
    assert rank == 2 + 3 and permuted.shape == (999,)  # both lengths and three lexical seeds
    np.testing.assert_allclose(permuted, projections(lexical.T).permuted_r(beyond[None, :])[0], rtol=0, atol=1e-15)
    length_only = freedman_lane.PermutedProjections(pref, lengths, orders).test(values["mean"]["m"])
    assert length_only.r[0] > 0.5 and length_only.p[0] == pytest.approx(1 / 1000)  # the words pass for an effect
    # over the lexical metric only noise is left: r within four null standard errors, p far from its floor
    assert abs(t.r[0]) < 4 / np.sqrt(cat.size) and t.p[0] > 0.01
    assert t.r[1] > 0.5 and t.p[1] == pytest.approx(1 / 1000)
    fam = incremental.family_results([incremental.FamilyTest("default", "mean", "m", t.r[0], t.p[0], 1.0, np.nan, 0.1),
                                      incremental.FamilyTest("default", "last", "m", t.r[1], t.p[1], 1.0, np.nan, 0.2)],
                                     layer=2, reported_pooling="mean", permutations=999, alpha=0.01)
    assert fam.tests.at_floor == [False, True] and fam.tests.holm_reject == [False, True]
    assert fam.tests.holm_p[1] == pytest.approx(2 / 1000) and fam.holm_floor == pytest.approx(2 / 1000)


def test_a_policy_with_the_same_states_is_merged_in_the_family_not_counted_twice():
    inp = synthetic_input()
    pol = inp["policies"]["default"]
    twin = dataclasses.replace(pol, name="sink_excluded")  # the same states and lengths (a BOS never pooled)
    other = dataclasses.replace(pol, name="sink_excluded", pooled={p: x[::-1].copy() for p, x in pol.pooled.items()})
    params = small_params()
    _, body = run(dict(inp, policies={"default": pol, "sink_excluded": twin}), seeds=[3], params=params)
    _, alone = run(inp, seeds=[3], params=params)
    for fam, single in ((body["family"], alone["family"]), (body["incremental"]["family"],
                                                             alone["incremental"]["family"])):
        t = fam["tests"]
        assert fam["n_tests"] == 10 and fam["n_merged"] == 10 and t["same_as"] == list(range(10)) * 2
        assert t["holm_p"][10:] == t["holm_p"][:10] == single["tests"]["holm_p"]  # the family of one policy
    # position 0 out of every count but the same pooled tokens: the same tests up to rounding
    shifted = dataclasses.replace(twin, n_content=pol.n_content - 1)
    _, body = run(dict(inp, policies={"default": pol, "sink_excluded": shifted}), seeds=[3], params=params)
    assert body["family"]["n_merged"] == 10 and body["family"]["tests"]["holm_p"][10:] == alone["family"]["tests"][
        "holm_p"]
    _, distinct = run(dict(inp, policies={"default": pol, "sink_excluded": other}), seeds=[3], params=params)
    assert distinct["family"]["n_merged"] == 0 and distinct["family"]["n_tests"] == 20


def _direct_maxt(observed, permuted):
    """Westfall & Young's step-down on each test's own permutation p, written out: every row (the observed one
    first) gets its p within its test's column; successive minima over the tests of rank j and below."""
    rows = np.vstack([observed[None, :], permuted])
    a = np.abs(rows)
    n_rows, n_tests = a.shape
    p = np.array([[np.sum(a[:, j] >= a[i, j] - 1e-12) / n_rows for j in range(n_tests)] for i in range(n_rows)])
    order = np.argsort(p[0], kind="stable")
    adjusted = np.empty(n_tests)
    for rank, j in enumerate(order):
        q = p[:, order[rank:]].min(axis=1)
        adjusted[j] = np.sum(q <= p[0, j] + 1e-12) / n_rows
    running = 0.0
    for j in order:  # monotone over the ranks
        running = max(running, adjusted[j])
        adjusted[j] = running
    return adjusted


def test_maxt_stepdown_matches_the_algorithm_written_out():
    rng = np.random.default_rng(17)
    observed = np.array([0.31, -0.05, 0.2, -0.22, 0.12])
    permuted = rng.normal(scale=0.12, size=(400, 5))
    np.testing.assert_allclose(multiplicity.maxt_stepdown(observed, permuted), _direct_maxt(observed, permuted),
                               rtol=0, atol=1e-15)
    got = multiplicity.maxt_stepdown(np.array([0.3, np.nan]), permuted[:, :2])
    assert np.isnan(got[1]) and got[0] == pytest.approx((1 + np.sum(np.abs(permuted[:, 0]) >= 0.3 - 1e-12)) / 401)
    # a test with a wider null cannot dominate: its own p decides, as in its permutation p
    wide = np.column_stack([permuted[:, 0], 10 * permuted[:, 1]])
    got = multiplicity.maxt_stepdown(np.array([0.5, 0.0]), wide)
    own = (1 + np.sum(np.abs(permuted[:, 0]) >= 0.5 - 1e-12)) / 401
    assert got[0] <= 2 * own


def test_maxt_is_less_conservative_than_holm_for_identical_tests():
    """Five copies of one test: max-T sees one test and keeps its p; Holm multiplies it by five."""
    rng = np.random.default_rng(3)
    one = rng.normal(scale=0.1, size=999)
    observed = np.full(5, 0.2)
    p_one = (1 + np.sum(np.abs(one) >= 0.2 - 1e-12)) / 1000
    got = multiplicity.maxt_stepdown(observed, np.tile(one[:, None], (1, 5)))
    np.testing.assert_allclose(got, p_one, rtol=0, atol=1e-15)
    assert (stats.holm(np.full(5, p_one)) >= got).all()


def test_partial_r_interval_is_fishers_z_with_the_covariates_degrees_of_freedom():
    low, high = multiplicity.partial_r_interval(np.array([0.3, -0.6]), n=np.array([230, 50]),
                                                n_covariates=np.array([7, 2]), level=0.95)
    z = 1.959963984540054
    np.testing.assert_allclose(low, [np.tanh(np.arctanh(0.3) - z / np.sqrt(230 - 7 - 3)),
                                     np.tanh(np.arctanh(-0.6) - z / np.sqrt(50 - 2 - 3))], rtol=1e-12)
    np.testing.assert_allclose(high, [np.tanh(np.arctanh(0.3) + z / np.sqrt(220)),
                                      np.tanh(np.arctanh(-0.6) + z / np.sqrt(45))], rtol=1e-12)
    low, high = multiplicity.partial_r_interval(np.array([0.3]), n=np.array([5]), n_covariates=np.array([2]),
                                                level=0.95)
    assert np.isnan(low[0]) and np.isnan(high[0])


def test_a_degenerate_test_is_reported_and_kept_out_of_the_family():
    rng = np.random.default_rng(5)
    perm = rng.normal(scale=0.05, size=(999, 3))
    tests = [incremental.FamilyTest("default", "mean", m, r, p, v, np.nan, 0.1, 230, 7, perm[:, i])
             for i, (m, r, p, v) in enumerate((("a", 0.3, 0.001, 1.5), ("b", 0.2, 0.002, 9.3e11),
                                               ("c", 0.01, 0.8, 2.0)))]
    fam = document(incremental.family_results(tests, layer=3, reported_pooling="mean", permutations=999, alpha=0.05,
                                              degenerate_vif=10.0, level=0.95))
    reasons = take_reasons(fam)
    t = fam["tests"]
    assert t["degenerate"] == [False, True, False] and fam["n_degenerate"] == 1 and fam["n_tests"] == 2
    assert t["holm_p"][1] is None and t["maxt_p"][1] is None and "degenerate" in reasons["tests/holm_p/1"]
    assert t["holm_p"][0] == pytest.approx(0.002) and t["holm_p"][2] == pytest.approx(0.8)
    np.testing.assert_allclose([t["maxt_p"][0], t["maxt_p"][2]],
                               _direct_maxt(np.array([0.3, 0.01]), perm[:, [0, 2]]), rtol=0, atol=1e-15)
    low, high = multiplicity.partial_r_interval(np.array([0.3]), n=np.array([230]), n_covariates=np.array([7]),
                                                level=0.95)
    assert t["partial_r_low"][0] == pytest.approx(low[0]) and t["partial_r_high"][0] == pytest.approx(high[0])
    assert fam["holm_floor"] == pytest.approx(2 / 1000) and fam["n_maxt_reject"] == 1
