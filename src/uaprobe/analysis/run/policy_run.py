"""The analyses of one position-0 policy's pooled states: layer-wise, validation, random bins, the
within-category centroid score and the NLL kind, with what the robustness view reads of them.

:func:`cosine_pass` is the only embedding-sized work: one pooling at a time, the cosines feed the
categories' uniformities, the pair scores, the size-matched null and the random bins, so memory
holds one pooling's cosines. The documents are then built from those sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from uaprobe.analysis.category import bins, layerwise, preference, robustness, validation
from uaprobe.analysis.inference import clusterboot, controls, stats
from uaprobe.analysis.pairs import centroid_score
from uaprobe.analysis.pairs.pair_table import PairTable, pooling_cosines
from uaprobe.schema import missing
from uaprobe.schema.categories import Layerwise, Thresholds, Validation
from uaprobe.schema.common import ResultsHeader
from uaprobe.schema.document import record
from uaprobe.schema.pairs import Pairs
from uaprobe.analysis.inference.stats import bootstrap_indices, resample_counts, rng_for
from uaprobe.analysis.geometry.uniformity import CosineForm, group_means
from uaprobe.config import AnalysisParams
from uaprobe.extraction.store import POOLINGS

BIN_POOLINGS: tuple[str, ...] = POOLINGS
"""Poolings the random-bins analysis runs on (the seed used mean pooling)."""


@dataclass
class PolicyRun:
    """One pooling policy's analyses: its results files and what the robustness view reads."""

    results: dict[str, ResultsHeader]
    """stem -> the results file's record"""
    view: robustness.PolicyView
    layerwise_draws: Any


@dataclass
class CosineSums:
    """What the embedding-sized pass leaves, per pooling: the categories' uniformities, the pair
    scores and the random bins; and the size-matched null's r (mean pooling)."""

    uniformity: dict[str, Any]
    scores: dict[str, Any]
    bins: dict[str, Any]
    null_r: np.ndarray | None


def cosine_pass(*, pooled: Mapping[str, np.ndarray], prenorm: Mapping[str, np.ndarray], table: PairTable,
                pref: np.ndarray, params: AnalysisParams, form: CosineForm | None,
                on_step: Callable[[], None] | None) -> CosineSums:
    """Every sum over cosines of one policy's states, one pooling at a time."""
    n_cat = len(table.categories)
    out = CosineSums(uniformity={}, scores={}, bins={}, null_r=None)
    b_rng = rng_for(seed=params.seed, name="bins")
    null_labels = controls.size_matched_labels(rng_for(seed=params.seed, name="size-matched-null"),
                                               sizes=table.pairs_per_category,
                                               partitions=params.robustness.null_partitions)
    null_pref, _ = group_means(pref, null_labels, n_groups=n_cat)
    for p in POOLINGS:
        cos = pooling_cosines(pooled=pooled[p], prenorm=prenorm[p], table=table, form=form)
        out.uniformity[p] = layerwise.category_uniformity(cos, category_of_pair=table.category_of_pair,
                                                          n_categories=n_cat)
        out.scores[p] = centroid_score.pair_scores(cos, category_of_pair=table.category_of_pair, n_categories=n_cat)
        if p == "mean":
            null_ua, _ = cos.uniformity(null_labels, n_groups=n_cat, side="diff")  # (V, P, C)
            out.null_r = stats.pearson(null_ua, null_pref[None]).r  # (V, P)
        if on_step:
            on_step()
        if p in BIN_POOLINGS:
            out.bins[p] = bins.analyze_bins(cosines=cos, preference=pref, params=params, rng=b_rng, on_step=on_step)
        del cos
    return out


def _validation(sums: CosineSums, *, table: PairTable, pref: np.ndarray, n_layers: int, params: AnalysisParams,
                header: Mapping[str, Any]) -> Validation:
    """Seed 003's table at the last layer and before the final norm, for every pooling."""
    categories = list(table.categories)
    n_cat = len(categories)
    v_rng = rng_for(seed=params.seed, name="validation")
    v_counts = resample_counts(bootstrap_indices(v_rng, n=n_cat, resamples=params.bootstrap_resamples), n=n_cat)
    variants = {}
    for p in POOLINGS:
        u = sums.uniformity[p]
        for suffix, view in (("", n_layers), ("_prenorm", n_layers + 1)):
            name = p + suffix
            tab = validation.category_table(u_a=u.u_a[view], u_b=u.u_b[view], preference=pref,
                                            category_of_pair=table.category_of_pair, n_categories=n_cat,
                                            neutral_ua=params.neutral_ua, neutral_preference=params.neutral_preference)
            glob = validation.global_stats(ua=tab.ua, mean_preference=tab.mean_preference, counts=v_counts,
                                           level=params.ci_level, aligned_r=params.aligned_r,
                                           inverted_r=params.inverted_r)
            variants[name] = validation.validation_variant(table=tab, glob=glob, categories=categories,
                                                           level=params.ci_level)
    return record(Validation, header, layer=n_layers,
                  thresholds=Thresholds(aligned_r=params.aligned_r, inverted_r=params.inverted_r,
                                        neutral_ua=params.neutral_ua, neutral_preference=params.neutral_preference),
                  variants=variants)


def _pairs(sums: CosineSums, *, table: PairTable, pref: np.ndarray, n_layers: int, params: AnalysisParams,
           header: Mapping[str, Any]) -> Pairs:
    """The within-category centroid score against the preference over the pairs."""
    pl, pl_draws = centroid_score.analyze_centroid_scores(scores=sums.scores, preference=pref, params=params,
                                               rng=rng_for(seed=params.seed, name="pairs"))
    names = np.array(list(table.categories), dtype=object)[table.category_of_pair]
    return record(
        Pairs, header, pair=table.pair_ids.tolist(), category=names.tolist(), preference=missing.series(pref),
        centroid="mean of the unit-normalised statements of the same side and category, own statement included",
        permutation_mode=pl_draws.mode,
        poolings=centroid_score.centroid_score_results(pl, n_layers=n_layers, alpha=params.alpha),
        cluster_bootstrap=clusterboot.cluster_block(
            {p: {"score": score[:n_layers + 1]} for p, score in sums.scores.items()}, pref,
            clusterboot.draws_for(params, category_of_pair=table.category_of_pair), params=params))


def permutation_floors(*, mode: str, count: int, n_tests: int) -> dict[str, float]:
    """The smallest permutation p (``1 / P`` exact, ``1 / (1 + P)`` random) and the smallest Holm
    p of ``n_tests`` such p-values (``n_tests`` times it, at most 1)."""
    floor = stats.p_floor(count, mode=mode)
    return {"permutation_p_floor": floor, "permutation_holm_floor": min(1.0, n_tests * floor)}


def analyze_policy(*, pooled: Mapping[str, np.ndarray], prenorm: Mapping[str, np.ndarray], policy_name: str,
                   table: PairTable, pref: np.ndarray, mean_pref: np.ndarray, header: dict[str, Any],
                   params: AnalysisParams, form: CosineForm | None,
                   on_step: Callable[[], None] | None) -> PolicyRun:
    """Layer-wise, validation, random bins, pair level and NLL kind for one pooling policy's states."""
    n_layers = header["n_layers"]
    categories = list(table.categories)
    header = dict(header, policy=policy_name)
    sums = cosine_pass(pooled=pooled, prenorm=prenorm, table=table, pref=pref, params=params, form=form,
                       on_step=on_step)
    results: dict[str, ResultsHeader] = {}

    # --- layer-wise (seed 000)
    lw, lw_draws = layerwise.analyze_layerwise(uniformity=sums.uniformity, mean_preference=mean_pref,
                                               categories=categories, params=params,
                                               rng=rng_for(seed=params.seed, name="layerwise"))
    distinct = (lw_draws.counts > 0).sum(axis=1)
    results["layerwise"] = record(
        Layerwise, header, categories=categories, n_pairs=table.pairs_per_category.tolist(),
        preference=params.preference, mean_preference=missing.series(mean_pref), permutation_mode=lw_draws.mode,
        permutation_count=int(lw_draws.orders.shape[0]),
        **permutation_floors(mode=lw_draws.mode, count=int(lw_draws.orders.shape[0]), n_tests=n_layers + 1),
        bootstrap_degenerate=int((distinct <= robustness.DEGENERATE_DISTINCT).sum()),
        poolings=layerwise.layerwise_results(lw, categories=categories, n_layers=n_layers, params=params))

    # --- validation table (seed 003)
    results["validation"] = _validation(sums, table=table, pref=pref, n_layers=n_layers, params=params,
                                        header=header)

    # --- random bins (seed 002)
    results["bins"] = bins.bins_file(
        {p: bins.bins_results(sums.bins[p], categories_stats=lw[p].stats, n_layers=n_layers) for p in BIN_POOLINGS},
        n_pairs=table.n_pairs, params=params, header=header)

    # --- pair level (the within-category centroid score)
    results["pairs"] = _pairs(sums, table=table, pref=pref, n_layers=n_layers, params=params, header=header)

    # --- NLL mean vs sum
    results["preference"] = preference.preference_results(
        table=table, ua={p: sums.uniformity[p].ua for p in POOLINGS}, selected=params.preference, n_layers=n_layers,
        header=header)

    m = lw["mean"]
    view = robustness.PolicyView(
        name=policy_name, ua=sums.uniformity["mean"].ua, r=m.stats.pearson.r, rho=m.stats.spearman.r,
        permutation_p=m.stats.permutation_p,
        permutation_holm_reject=m.permutation_holm_p <= params.alpha,
        permutation_bh_reject=m.permutation_bh_p <= params.alpha,
        parametric_holm_reject=m.holm_p <= params.alpha,
        pair_score=sums.scores["mean"], null_r=sums.null_r)
    return PolicyRun(results=results, view=view, layerwise_draws=lw_draws)
