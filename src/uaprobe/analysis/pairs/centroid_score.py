"""Pair-level view over all pairs: does a pair's position relative to its category predict its preference?

Per pair i of category c: ``score_i = cos(A_i, centroid_A(c)) - cos(B_i, centroid_B(c))`` where the
centroid of a side is the mean of the unit-normalised statements of that side in c (the pair's own
statement included). r = Pearson of score vs preference across all pairs, per view, with bootstrap
(resampling pairs), Fisher-z, permutation p, and Holm / Benjamini-Hochberg across layers.

From the unit vectors: one sum per category and side, then one dot product per statement, so the
cost is linear in the number of pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from uaprobe.analysis.inference import curves, stats
from uaprobe.analysis.inference.groupstats import GroupStats, Resampling, group_stats
from uaprobe.analysis.geometry.uniformity import UNIT_CHUNK_ROWS, Cosines
from uaprobe.schema import missing
from uaprobe.schema.pairs import PairsFinal, PairsPooling, PairsPrenorm
from uaprobe.config import AnalysisParams


def centroid_cosines(units: np.ndarray, *, category_of_pair: np.ndarray, n_categories: int) -> np.ndarray:
    """cos(u_i, centroid of u_j over i's category) for every member: units (n, V, D) -> (V, n).

    NaN where a statement or a centroid is the zero vector.
    """
    cat = np.asarray(category_of_pair)
    onehot = np.eye(n_categories)[cat]  # (n, C)
    sums = np.einsum("nc,nvd->cvd", onehot, units)  # (C, V, D): per-category sums of unit vectors
    own = np.empty(units.shape[:2]).T  # (V, n), laid out (n, V) as numpy's einsum lays it: the later
    self_norm = np.empty(units.shape[:2]).T  # reductions over these scores then add in the same order
    for start in range(0, cat.size, UNIT_CHUNK_ROWS):  # per statement: the same bytes a chunk at a time
        rows = slice(start, start + UNIT_CHUNK_ROWS)
        own[:, rows] = np.einsum("nvd,nvd->vn", units[rows], sums[cat[rows]])
        self_norm[:, rows] = np.linalg.norm(units[rows], axis=-1).T
    centroid_norm = np.linalg.norm(sums, axis=-1).T[:, cat]  # (V, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = own / (self_norm * centroid_norm)
    return np.where((self_norm > 0) & (centroid_norm > 0), cos, np.nan)


def pair_scores(cosines: Cosines, *, category_of_pair: np.ndarray, n_categories: int) -> np.ndarray:
    """(V, n_pairs) score = cos(A, centroid_A) - cos(B, centroid_B)."""
    return (centroid_cosines(cosines.units["a"], category_of_pair=category_of_pair, n_categories=n_categories)
            - centroid_cosines(cosines.units["b"], category_of_pair=category_of_pair, n_categories=n_categories))


@dataclass(frozen=True)
class PairLevel:
    score: np.ndarray
    """(V, n_pairs)"""
    stats: GroupStats
    holm_p: np.ndarray
    """(L+1,)"""
    bh_p: np.ndarray


def analyze_centroid_scores(*, scores: dict[str, np.ndarray], preference: np.ndarray, params: AnalysisParams,
                      rng: np.random.Generator) -> tuple[dict[str, PairLevel], Resampling]:
    """Statistics of score vs preference for every pooling (scores: pooling -> (V, n_pairs)).
    Bootstrap indices and permutations are drawn once and shared by all poolings and views."""
    draws = Resampling.draw(rng, n=preference.size, resamples=params.bootstrap_resamples,
                            permutations=params.permutations)
    out = {}
    for pooling, score in scores.items():
        gs = group_stats(x=score, y=preference, draws=draws, level=params.ci_level, x_name="pair score")
        n_layer_views = score.shape[0] - 1
        out[pooling] = PairLevel(score=score, stats=gs, holm_p=stats.holm(gs.pearson.p[:n_layer_views]),
                                 bh_p=stats.benjamini_hochberg(gs.pearson.p[:n_layer_views]))
    return out, draws


def centroid_score_results(result: dict[str, PairLevel], *, n_layers: int, alpha: float) -> dict[str, PairsPooling]:
    """The ``poolings`` object of ``pairs.json``."""
    layers = list(range(n_layers + 1))
    sel = slice(0, n_layers + 1)
    pre = n_layers + 1
    zero = "a statement or its category centroid is the zero vector"
    out: dict[str, PairsPooling] = {}
    for pooling, res in result.items():
        g = res.stats
        p, b = g.pearson, g.bootstrap
        corrected: dict[str, Any] = {}
        for name, adj in (("holm", res.holm_p), ("bh", res.bh_p)):
            why = stats.inherit(p.reason[sel], stats.first_reason((~np.isfinite(adj), "p-value is undefined")))
            corrected[f"{name}_p"] = missing.series(adj, why)
            corrected[f"{name}_reject"] = missing.flags(adj <= alpha, defined=np.isfinite(adj), reasons=why)
        r = p.r[sel]
        peak = curves.peak_record(np.abs(r), layers=layers, n_layers=n_layers, lowest=False, reported=r)
        out[pooling] = PairsPooling(
            score=missing.series(res.score[sel], zero), **g.fields(sel), **corrected, peak_abs=peak,
            final=PairsFinal(layer=n_layers, r=missing.value(p.r[n_layers], p.reason[n_layers]),
                             p=missing.value(p.p[n_layers], p.reason[n_layers]),
                             bootstrap_ci_low=missing.value(b.low[n_layers], b.reason[n_layers]),
                             bootstrap_ci_high=missing.value(b.high[n_layers], b.reason[n_layers])),
            prenorm=PairsPrenorm(score=missing.series(res.score[pre], zero), **g.fields(pre)))
    return out


__all__: Sequence[str] = ("centroid_cosines", "pair_scores", "analyze_centroid_scores", "centroid_score_results")
