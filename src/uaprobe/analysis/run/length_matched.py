"""The analyses on the length-matched pairs: those whose two statements differ by at most
``analysis.length_matched.max_token_difference`` content tokens (the default policy's counts).

Length is the confound every per-token NLL and every mean-pooled state carries (shorter statements have fewer
tokens to average); on pairs matched in length it can move neither side much. Over the kept pairs:

- **category level**: each category's UA = U(its kept A statements) - U(its kept B statements) and its mean
  preference over the kept pairs, at the pre-declared layer for each of the primary poolings (default policy);
  r across the categories with at least two kept pairs and its exact two-sided p over every order of their
  preferences (:func:`uaprobe.analysis.category.power.exact_p`);
- **pair level**: the family of :mod:`uaprobe.analysis.pairs.pairmodels` (every metric, pooling and policy at the
  pre-declared layer, the category indicators and both sides' content tokens as covariates) over the kept pairs,
  the metrics as computed over all pairs, with its own within-category permutations (generator
  :data:`RNG_NAME`), Holm and the max-T step-down.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from uaprobe.analysis.category import power
from uaprobe.analysis.geometry import uniformity
from uaprobe.analysis.inference import controls, stats
from uaprobe.analysis.pairs import freedman_lane, incremental
from uaprobe.schema import missing
from uaprobe.schema.pairmodels import (LengthMatched, LengthMatchedCategories, LengthMatchedCategory,
                                       LengthMatchedPairs)
from uaprobe.config import AnalysisParams

RNG_NAME = "pair-models-length-matched"
"""Names the generator of the within-category permutations over the length-matched pairs."""


def matched(n_content: np.ndarray, *, row_a: np.ndarray, row_b: np.ndarray, max_difference: int) -> np.ndarray:
    """(n,) bool: the pairs whose statements' content-token counts differ by at most ``max_difference``."""
    n = np.asarray(n_content, dtype=np.int64)
    return np.abs(n[np.asarray(row_b)] - n[np.asarray(row_a)]) <= max_difference


def category_level(pooled: np.ndarray, *, keep: np.ndarray, row_a: np.ndarray, row_b: np.ndarray,
                   category_of_pair: np.ndarray, n_categories: int, preference: np.ndarray
                   ) -> LengthMatchedCategory:
    """UA and mean preference of every category over its kept pairs (``pooled``: (N, D) the states of one layer),
    and r with its exact p over the categories with at least two kept pairs."""
    cat = np.asarray(category_of_pair)
    ua, pref = np.full(n_categories, np.nan), np.full(n_categories, np.nan)
    for c in range(n_categories):
        mine = keep & (cat == c)
        if mine.sum() >= 2:
            ua[c] = float(uniformity.uniformity(pooled[row_a[mine]]) - uniformity.uniformity(pooled[row_b[mine]]))
            pref[c] = float(np.mean(preference[mine]))
    used = np.isfinite(ua)
    why_cat = "fewer than two length-matched pairs in the category"
    r = p = np.nan
    if used.sum() >= 3:
        r = float(stats.pearson(ua[used], pref[used]).r)
        p = float(power.exact_p(ua[used], pref[used][None, :])[0]) if np.isfinite(r) else np.nan
    why = "fewer than three categories with two length-matched pairs, or UA or the preference is constant"
    return LengthMatchedCategory(ua=missing.series(ua, why_cat), preference=missing.series(pref, why_cat),
                                 n_categories=int(used.sum()), orders=math.factorial(int(used.sum())),
                                 r=missing.value(r, why), permutation_p=missing.value(p, why))


def length_matched_results(*, states: Mapping[str, Mapping[str, np.ndarray]],
                           values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
                           n_content: Mapping[str, np.ndarray], policy_names: Mapping[str, str], row_a: np.ndarray,
                           row_b: np.ndarray, category_of_pair: np.ndarray, categories: Sequence[str],
                           preference: np.ndarray, metrics: Sequence[str], params: AnalysisParams
                           ) -> LengthMatched:
    """The ``length_matched`` object of ``pair_models.json``.

    Args:
        states: policy -> pooling -> (N, L+1, D) the pooled states as every analysis reads them.
        values: policy -> pooling -> metric -> (V, n) the pair metrics over all pairs.
        n_content: policy -> (N,) content tokens behind each pooled state; the default policy's picks the pairs.
        policy_names: policy -> the name the results files write.
    """
    row_a, row_b = np.asarray(row_a), np.asarray(row_b)
    cat = np.asarray(category_of_pair)
    pref = np.asarray(preference, dtype=float)
    k = params.length_matched.max_token_difference
    keep = matched(n_content["default"], row_a=row_a, row_b=row_b, max_difference=k)
    n_cat = len(categories)
    n_layers = int(next(iter(states["default"].values())).shape[1]) - 1
    layer = params.primary.layer(n_layers)
    cat_body = {p: category_level(np.asarray(states["default"][p][:, layer], dtype=float), keep=keep, row_a=row_a,
                                  row_b=row_b, category_of_pair=cat, n_categories=n_cat, preference=pref)
                for p in params.primary.poolings if p in states["default"]}
    fixed = controls.category_indicators(cat, n_cat)
    inputs = {key: incremental.PolicyMetrics(
        values={p: {m: ms[m] for m in metrics} for p, ms in values[key].items()},
        lexical={p: {m: np.empty((0, pref.size)) for m in metrics} for p in values[key]},
        base=np.column_stack([fixed, np.asarray(n_content[key], dtype=float)[row_a],
                              np.asarray(n_content[key], dtype=float)[row_b]])) for key in values}
    orders = freedman_lane.within_category_orders(stats.rng_for(seed=params.seed, name=RNG_NAME),
                                                  category_of_pair=cat[keep], permutations=params.permutations)
    tests = incremental.tests_over(inputs, keep=keep, names=metrics, layer=layer, preference=pref, orders=orders)
    same = [np.ascontiguousarray(np.asarray(inputs[key].values[p][m])[layer, keep]).tobytes()
            for key in inputs for p in inputs[key].values for m in metrics]
    family = incremental.family_results(
        tests, same=same, layer=layer,
        reported_pooling=params.primary.pooling, permutations=params.permutations, alpha=params.alpha,
        degenerate_vif=params.degenerate_vif, level=params.ci_level)
    return LengthMatched(max_token_difference=int(k), policy=policy_names["default"], layer=int(layer),
                         n_pairs=int(keep.sum()), n_pairs_all=int(keep.size),
                         pairs_per_category=np.bincount(cat[keep], minlength=n_cat).tolist(),
                         pairs_per_category_all=np.bincount(cat, minlength=n_cat).tolist(),
                         category=LengthMatchedCategories(poolings=cat_body), pair=LengthMatchedPairs(family=family))


__all__: Sequence[str] = ("RNG_NAME", "category_level", "length_matched_results", "matched")
