"""The robustness view of one model: what could explain the headline correlation away.

Assembles ``robustness.json`` from the per-policy analyses and the controls of
:mod:`uaprobe.analysis.inference.controls`: the attention sink (position 0's dominance per layer), the
headline r under both pooling policies, the length confound, the most influential category, the
mean- and sum-NLL preferences, the model-free lexical baseline, the size-matched null and the
validity of the inference (exact permutation tests, corrected across layers; the degenerate
category bootstrap).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from uaprobe.analysis.category import layerwise, power, preference
from uaprobe.analysis.inference import controls, stats
from uaprobe.analysis.pairs import centroid_score
from uaprobe.analysis.category.curve_stats import relabellings
from uaprobe.analysis.pairs.pair_table import PairTable
from uaprobe.schema import missing
from uaprobe.schema.common import Spread
from uaprobe.schema.document import record
from uaprobe.schema.metrics import (InferenceMetrics, LengthMetrics, LexicalMetrics, LocoMetrics, RobustnessMetrics,
                                    SinkExcludedMetrics, SinkMetrics)
from uaprobe.schema.geometry import (Inference, LexicalBaseline, Length, Loco, Policies, PolicySummary, Robustness,
                                     RobustnessPreference, Sink)
from uaprobe.analysis.geometry.uniformity import Cosines

DEGENERATE_DISTINCT = 3
"""A bootstrap resample of the categories that holds this many distinct ones or fewer is degenerate."""


@dataclass(frozen=True)
class PolicyView:
    """What the robustness view needs from one pooling policy's analyses (mean pooling)."""

    name: str
    """``special``, ``first`` or ``sink_excluded``."""
    ua: np.ndarray
    """(V, C) category UA."""
    r: np.ndarray
    """(V,) category-level Pearson r."""
    rho: np.ndarray
    """(V,) Spearman rho."""
    permutation_p: np.ndarray
    """(V,) exact (or Monte-Carlo) permutation p."""
    permutation_holm_reject: np.ndarray
    """(L+1,) bool."""
    permutation_bh_reject: np.ndarray
    parametric_holm_reject: np.ndarray
    pair_score: np.ndarray
    """(V, n_pairs) per-category centroid pair score."""
    null_r: np.ndarray
    """(V, P) r across the groups of each size-matched random partition."""


def sink_summary(sink: Mapping[str, np.ndarray], *, n_layers: int) -> Sink:
    """Per-layer summaries over the statements of the position-0 statistics (``sink/*``, (N, L+1))."""
    ratio = np.asarray(sink["norm_ratio"], dtype=float)
    med = np.median(ratio, axis=0)
    top = np.asarray(sink["top_dim"], dtype=np.int64)
    mode = np.array([np.bincount(col).argmax() for col in top.T])
    mode_share = (top == mode[None, :]).mean(axis=0)
    peak = int(np.argmax(med))
    return Sink(
        layers=list(range(n_layers + 1)),
        norm_ratio_median=missing.series(med, "non-finite norm ratio"),
        norm_ratio_q10=missing.series(np.quantile(ratio, 0.1, axis=0), "non-finite norm ratio"),
        norm_ratio_q90=missing.series(np.quantile(ratio, 0.9, axis=0), "non-finite norm ratio"),
        norm_median=missing.series(np.median(sink["norm"], axis=0), "non-finite norm"),
        mean_share_median=missing.series(np.median(sink["mean_share"], axis=0),
                                         "the mean over positions is the zero vector"),
        top_dim_mode=mode.tolist(),
        top_dim_mode_share=mode_share.tolist(),
        top_dim_share_median=missing.series(np.median(sink["top_dim_share"], axis=0),
                                            "position 0's state is the zero vector"),
        max_norm_ratio=float(med[peak]),
        max_norm_ratio_layer=peak)


def lexical_baseline(emb_tokens: tuple[np.ndarray, np.ndarray, np.ndarray], *, table: PairTable, dim: int,
                     preference: np.ndarray, mean_preference: np.ndarray, seeds: Sequence[int],
                     drop_category: int | None) -> dict[str, np.ndarray]:
    """UA and pair scores of the lexical baseline for every seed, and their r with this model's preference.

    Returns arrays over the seeds: ``final_r`` (category level), ``pair_r`` (pair level), and the
    category-level r without ``drop_category`` (``final_r_without``; NaN if None).
    """
    ids, offsets, special = emb_tokens
    n_cat = len(table.categories)
    out: dict[str, list[float]] = {"final_r": [], "pair_r": [], "final_r_without": []}
    keep_cat = np.ones(n_cat, dtype=bool)
    if drop_category is not None:
        keep_cat[drop_category] = False
    for seed in seeds:
        e = controls.lexical_embeddings(ids, offsets, ~special, dim=dim, seed=seed)
        a, b = e[table.row_a][:, None, :], e[table.row_b][:, None, :]
        cos = Cosines(a, b)
        cu = layerwise.category_uniformity(cos, category_of_pair=table.category_of_pair, n_categories=n_cat)
        ua = cu.ua[0]
        out["final_r"].append(float(stats.pearson(ua, mean_preference).r))
        out["final_r_without"].append(float(stats.pearson(ua[keep_cat], mean_preference[keep_cat]).r)
                                      if drop_category is not None else np.nan)
        score = centroid_score.pair_scores(cos, category_of_pair=table.category_of_pair, n_categories=n_cat)[0]
        out["pair_r"].append(float(stats.pearson(score, preference).r))
    return {k: np.array(v) for k, v in out.items()}


def _spread(values: np.ndarray, why: str) -> Spread:
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    return Spread(values=missing.series(v, why), mean=missing.value(v[ok].mean() if ok.any() else np.nan, why),
                  min=missing.value(v[ok].min() if ok.any() else np.nan, why),
                  max=missing.value(v[ok].max() if ok.any() else np.nan, why))


def _quantile(v: np.ndarray, q: float) -> np.ndarray:
    with warnings.catch_warnings():  # all-NaN rows (no defined null draw) give NaN, with their reason
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanquantile(v, q, axis=1)


def _policy_headline(view: PolicyView, *, n_layers: int) -> PolicySummary:
    """One policy's r per layer and at the last layer, its significant layers and its size-matched null."""
    L = n_layers
    r_layers = view.r[:L + 1]
    return PolicySummary(
        policy=view.name,
        r=missing.series(r_layers, "r is undefined"),
        final_r=missing.value(view.r[L], "r is undefined"),
        final_spearman=missing.value(view.rho[L], "rho is undefined"),
        final_permutation_p=missing.value(view.permutation_p[L], "r is undefined"),
        n_sign_changes=len(stats.sign_changes(r_layers)),
        n_positive_layers=int((r_layers > 0).sum()),
        n_layers_permutation_holm=int(np.asarray(view.permutation_holm_reject, dtype=bool).sum()),
        n_layers_permutation_bh=int(np.asarray(view.permutation_bh_reject, dtype=bool).sum()),
        n_layers_parametric_holm=int(np.asarray(view.parametric_holm_reject, dtype=bool).sum()),
        size_matched_null_p=missing.series(stats.tail_p(r_layers, view.null_r[:L + 1], mode="random"),
                                           "r or every null draw is undefined"),
        null_r_q025=missing.series(_quantile(view.null_r[:L + 1], 0.025), "every null draw is undefined"),
        null_r_q975=missing.series(_quantile(view.null_r[:L + 1], 0.975), "every null draw is undefined"),
        null_partitions=int(view.null_r.shape[1]))


def _length(default: PolicyView, *, table: PairTable, preference: np.ndarray, mean_preference: np.ndarray,
            n_content: np.ndarray, n_layers: int) -> Length:
    """The token-count difference against the preference and UA; the centroid score with it partialled out."""
    L, n_cat = n_layers, len(table.categories)
    d_tokens = (n_content[table.row_b] - n_content[table.row_a]).astype(float)
    score = default.pair_score[L]
    dummies = controls.category_indicators(table.category_of_pair, n_cat)[:, 1:]  # category 0: the intercept's
    pr = stats.pearson(score, preference)
    part = controls.partial_r(score, preference, d_tokens[:, None])
    part_fe = controls.partial_r(score, preference, np.column_stack([d_tokens, dummies]))
    tok_pref = stats.pearson(d_tokens, preference, x_name="token difference", y_name="preference")
    cat_tokens = np.bincount(table.category_of_pair, weights=d_tokens, minlength=n_cat) / table.pairs_per_category
    tok_ua = stats.pearson(cat_tokens, default.ua[L], x_name="token difference", y_name="UA")
    tok_cpref = stats.pearson(cat_tokens, mean_preference, x_name="token difference", y_name="preference")
    return Length(
        covariate="content tokens of B minus content tokens of A, under the default policy",
        mean_token_difference=missing.series(cat_tokens, "empty category"),
        pair_r=missing.value(pr.r, pr.reason[()]),
        pair_r_partial=missing.value(part.r, part.reason),
        pair_r_partial_p=missing.value(part.p, part.reason),
        pair_r_partial_category_fe=missing.value(part_fe.r, part_fe.reason),
        pair_r_partial_category_fe_p=missing.value(part_fe.p, part_fe.reason),
        pair_r_tokens_preference=missing.value(tok_pref.r, tok_pref.reason[()]),
        category_r_tokens_ua=missing.value(tok_ua.r, tok_ua.reason[()]),
        category_r_tokens_preference=missing.value(tok_cpref.r, tok_cpref.reason[()]))


def _loco_and_lexical(default: PolicyView, sink_excluded: PolicyView, *, table: PairTable, preference: np.ndarray,
                      mean_preference: np.ndarray, tokens: tuple[np.ndarray, np.ndarray, np.ndarray], dim: int,
                      seeds: Sequence[int], n_layers: int) -> tuple[Loco, dict[str, np.ndarray]]:
    """The most influential category, found from the data, and r without it (the model's, the
    sink-excluded policy's, the pair level's and the lexical baseline's); the lexical baseline's values."""
    L, cats = n_layers, list(table.categories)
    keep_masks = ~np.eye(len(cats), dtype=bool)
    loo = stats.pearson(default.ua[L][None, :], mean_preference[None, :], mask=keep_masks).r
    driver = controls.most_influential(float(default.r[L]), loo)
    if driver is None:
        lex = lexical_baseline(tokens, table=table, dim=dim, preference=preference, mean_preference=mean_preference,
                               seeds=seeds, drop_category=None)
        return Loco(most_influential=missing.label(None, "r or every leave-one-out r is undefined")), lex
    keep = keep_masks[driver]
    pair_keep = table.category_of_pair != driver
    sx_without = stats.pearson(sink_excluded.ua[L][keep], mean_preference[keep]).r
    pair_without = stats.pearson(default.pair_score[L][pair_keep], preference[pair_keep]).r
    lex = lexical_baseline(tokens, table=table, dim=dim, preference=preference, mean_preference=mean_preference,
                           seeds=seeds, drop_category=driver)
    return Loco(
        most_influential=cats[driver],
        final_r_with=missing.value(default.r[L], "r is undefined"),
        final_r_without=missing.value(loo[driver], "r is undefined without it"),
        sign_reversed=bool(np.sign(loo[driver]) * np.sign(default.r[L]) < 0),
        loo_r=missing.series(loo, "r is undefined without this category"),
        sink_excluded_final_r_without=missing.value(sx_without, "r is undefined without it"),
        pair_r_without=missing.value(pair_without, "r is undefined without it"),
        lexical_final_r_without=_spread(lex["final_r_without"], "r is undefined without it")), lex


def per_character(table: PairTable, n_chars: np.ndarray) -> np.ndarray:
    """(C,) per category, the mean over its pairs of NLL(B) - NLL(A) per character: each statement's summed NLL
    divided by its characters (``n_chars`` (N,)), a normalisation that no tokenizer sets."""
    chars = np.asarray(n_chars, dtype=float)
    per_char = table.nll_sum / np.stack([chars[table.row_a], chars[table.row_b]], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return preference.category_means(per_char[:, 1] - per_char[:, 0], category_of_pair=table.category_of_pair,
                                         n_categories=len(table.categories))


def robustness_results(*, default: PolicyView, sink_excluded: PolicyView, table: PairTable,
                       preference: np.ndarray, mean_preference: np.ndarray, sink: Mapping[str, np.ndarray],
                       n_content: np.ndarray, tokens: tuple[np.ndarray, np.ndarray, np.ndarray], dim: int,
                       bootstrap_counts: np.ndarray, permutation_mode: str, r_by_nll: Mapping[str, float],
                       preference_kind: str, seeds: Sequence[int], n_layers: int,
                       n_chars: np.ndarray, header: Mapping[str, Any], rng: np.random.Generator | None = None,
                       permutations: int = 0) -> Robustness:
    """``robustness.json`` (mean pooling, last layer unless a field says otherwise), with the keys every results
    file starts with (``header``). ``n_chars`` (N,): each statement's characters, for the preference per character
    (:func:`per_character`)."""
    policies = Policies(default=_policy_headline(default, n_layers=n_layers),
                        sink_excluded=_policy_headline(sink_excluded, n_layers=n_layers))
    loco, lex = _loco_and_lexical(default, sink_excluded, table=table, preference=preference,
                                  mean_preference=mean_preference, tokens=tokens, dim=dim, seeds=seeds, n_layers=n_layers)
    means = per_character(table, n_chars)
    r_char = stats.pearson(default.ua[n_layers], means)
    # its exact p over every order of the categories' preferences (Monte Carlo past the exact bound)
    orders, _ = relabellings(means.size, rng=rng, permutations=permutations)
    ua_last = np.asarray(default.ua[n_layers], dtype=float)
    defined = bool(np.isfinite(means).all() and np.isfinite(ua_last).all() and np.ptp(means) > 0
                   and np.ptp(ua_last) > 0)
    p_char = float(power.exact_p(ua_last, means[None, :], orders)[0]) if defined else np.nan
    distinct = (np.asarray(bootstrap_counts) > 0).sum(axis=1)
    return record(
        Robustness, header, pooling="mean", layer=n_layers, sink=sink_summary(sink, n_layers=n_layers),
        policies=policies,
        length=_length(default, table=table, preference=preference, mean_preference=mean_preference,
                       n_content=n_content, n_layers=n_layers),
        loco=loco,
        preference=RobustnessPreference(
            selected=preference_kind, final_r_mean_nll=missing.value(r_by_nll["mean"], "r is undefined"),
            final_r_sum_nll=missing.value(r_by_nll["sum"], "r is undefined"),
            final_r_char_nll=missing.value(r_char.r, r_char.reason[()]),
            final_p_char_nll=missing.value(p_char, "UA or the preference is constant over the categories"),
            char_category_means=missing.series(means, "empty category")),
        lexical_baseline=LexicalBaseline(seeds=list(seeds), dim=dim, final_r=_spread(lex["final_r"], "r is undefined"),
                                         pair_r=_spread(lex["pair_r"], "r is undefined")),
        inference=Inference(
            permutation=permutation_mode, bootstrap_resamples=int(distinct.size),
            bootstrap_degenerate=int((distinct <= DEGENERATE_DISTINCT).sum()),
            bootstrap_degenerate_distinct=DEGENERATE_DISTINCT,
            n_layers_permutation_holm=policies.default.n_layers_permutation_holm,
            n_layers_permutation_bh=policies.default.n_layers_permutation_bh,
            n_layers_parametric_holm=policies.default.n_layers_parametric_holm))


def robustness_metrics(rob: Robustness) -> dict[str, Any]:
    """The ``robustness`` and ``inference`` records of ``metrics/models/<id>.json``."""
    pol, loco, length, inf = rob.policies, rob.loco, rob.length, rob.inference
    return {
        "robustness": RobustnessMetrics(
            sink_excluded=SinkExcludedMetrics(final_r=pol.sink_excluded.final_r,
                                              n_sign_changes=pol.sink_excluded.n_sign_changes,
                                              n_layers_permutation_holm=pol.sink_excluded.n_layers_permutation_holm),
            sink=SinkMetrics(max_norm_ratio=rob.sink.max_norm_ratio, max_norm_ratio_layer=rob.sink.max_norm_ratio_layer),
            length=LengthMetrics(pair_r=length.pair_r, pair_r_partial=length.pair_r_partial,
                                 pair_r_partial_category_fe=length.pair_r_partial_category_fe,
                                 pair_r_tokens_preference=length.pair_r_tokens_preference,
                                 category_r_tokens_ua=length.category_r_tokens_ua),
            loco=LocoMetrics(most_influential=loco.most_influential, final_r_without=loco.final_r_without),
            lexical_baseline=LexicalMetrics(final_r_mean=rob.lexical_baseline.final_r.mean,
                                            pair_r_mean=rob.lexical_baseline.pair_r.mean),
            size_matched_null_final_p=pol.default.size_matched_null_p[-1]),
        "inference": InferenceMetrics(n_layers_permutation_holm=inf.n_layers_permutation_holm,
                                      n_layers_permutation_bh=inf.n_layers_permutation_bh,
                                      n_layers_parametric_holm=inf.n_layers_parametric_holm,
                                      bootstrap_degenerate=inf.bootstrap_degenerate),
    }
