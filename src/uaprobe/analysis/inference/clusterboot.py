"""Two-stage cluster bootstrap of a pair-level Pearson r: categories, then pairs within them.

The pairs come in C categories, and pairs of one category share its topic, wording and length
profile: resampling pairs as if independent understates the uncertainty of an r over all pairs.
Each resample here (Davison & Hinkley 1997, sec. 3.8; Field & Welsh 2007) draws

1. C categories with replacement from the C categories, then
2. for every drawn category (each draw anew), as many pairs as it has, with replacement from its own pairs,

and r is recomputed with each pair weighted by how often it was drawn. A resample's size is the
sum of its drawn categories' sizes, so the weighted moments divide by each resample's own total
(:func:`weighted_pearson`). The interval is the percentile interval of the finite resampled r
(:func:`uaprobe.analysis.inference.stats.percentile_interval`). With C = 6 many resamples hold few distinct
categories; the file records how many hold 3 or fewer. Resampling with replacement at both stages
is conservative: where the categories share nothing, the within-category variance is counted at
both stages and the interval is up to about sqrt(2 - 1/C) times the pair bootstrap's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference.phases import phase_mean
from uaprobe.analysis.inference import stats
from uaprobe.schema import missing
from uaprobe.schema.pairs import ClusterBootstrap, ClusterInterval, PhaseInterval
from uaprobe.config import AnalysisParams

RNG_NAME = "cluster-bootstrap"
"""Names the one generator of the cluster bootstrap (:func:`uaprobe.analysis.inference.stats.rng_for`)."""
DEGENERATE_DISTINCT = 3
"""A resample holding this many distinct categories or fewer is counted as degenerate."""
SCHEME = ("two-stage cluster bootstrap: each resample draws the categories with replacement, then, for each drawn "
          "category, as many of its pairs with replacement; r weights each pair by its multiplicity; percentile "
          "interval")


@dataclass(frozen=True)
class ClusterDraws:
    """The resamples: pair multiplicities and the distinct categories of each."""

    counts: np.ndarray
    """(B, n) how often each pair is in each resample."""
    distinct: np.ndarray
    """(B,) distinct categories drawn in each resample."""


def cluster_bootstrap(rng: np.random.Generator, *, category_of_pair: np.ndarray, resamples: int) -> ClusterDraws:
    """``resamples`` two-stage resamples of the pairs grouped by ``category_of_pair`` (n,) int.

    Draws, from ``rng``: the (B, C) category draws at once, then per category (ascending) the
    member indices of all its draws at once."""
    cat = np.asarray(category_of_pair, dtype=np.int64)
    labels = np.unique(cat)
    n, n_cat = cat.size, labels.size
    drawn = rng.integers(0, n_cat, size=(resamples, n_cat))  # (B, C): which categories each resample holds
    counts = np.zeros((resamples, n), dtype=np.float64)
    for c in range(n_cat):
        members = np.flatnonzero(cat == labels[c])
        times = (drawn == c).sum(axis=1)  # (B,) how often resample b drew category c
        picks = rng.integers(0, members.size, size=int(times.sum()) * members.size)
        owner = np.repeat(np.arange(resamples), times * members.size)
        counts += np.bincount(owner * n + members[picks], minlength=resamples * n).reshape(resamples, n)
    distinct = np.array([np.unique(row).size for row in drawn], dtype=np.int64)
    return ClusterDraws(counts=counts, distinct=distinct)


def weighted_pearson(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson r of every row of ``x`` (M, n) with ``y`` (n,), the points weighted by each row of
    ``counts`` (B, n): -> (M, B); NaN where either side has no weighted variance (relative to the
    full sample's, :data:`uaprobe.analysis.inference.stats.DEGENERATE_RELATIVE_VARIANCE`)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    w = np.asarray(counts, dtype=float)
    xc, yc = x - x.mean(axis=1, keepdims=True), y - y.mean()
    total = w.sum(axis=1)[:, None]  # (B, 1)
    sx, sxx, sxy = w @ xc.T, w @ (xc * xc).T, w @ (xc * yc).T  # (B, M)
    sy, syy = (w @ yc)[:, None], (w @ (yc * yc))[:, None]
    vx, vy, cxy = sxx - sx * sx / total, syy - sy * sy / total, sxy - sx * sy / total
    # the tolerance scaled to the resample's size: a constant side has variance ~0 whatever its weight
    tol_x = stats.DEGENERATE_RELATIVE_VARIANCE * (xc * xc).sum(axis=1)[None, :] * total / x.shape[1]
    tol_y = stats.DEGENERATE_RELATIVE_VARIANCE * float((yc * yc).sum()) * total / x.shape[1]
    ok = (vx > tol_x) & (vy > tol_y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(ok, cxy / np.sqrt(np.where(ok, vx * vy, 1.0)), np.nan)
    return np.clip(r, -1.0, 1.0).T


def resampled_r(x: np.ndarray, y: np.ndarray, draws: ClusterDraws) -> tuple[np.ndarray, np.ndarray]:
    """(M, B) r of every row of ``x`` (M, n) in every resample (NaN where undefined), and the (M,)
    reason of rows undefined in every resample ("" where some resample defines it)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    finite = np.isfinite(x).all(axis=1) & np.isfinite(y).all()
    rb = np.full((x.shape[0], draws.counts.shape[0]), np.nan)
    if finite.any():
        rb[finite] = weighted_pearson(x[finite], y, draws.counts)
    valid = np.isfinite(rb).any(axis=1)
    why = np.where(~finite, "the metric is not finite for every pair",
                   np.where(~valid, "no resample had variance in both variables", ""))
    return rb, why


def cluster_interval(x: np.ndarray, y: np.ndarray, draws: ClusterDraws, *, level: float) -> ClusterInterval:
    """Per row of ``x`` (M, n), the percentile interval at ``level`` of the resampled r (missing, with its
    reason, where r itself or every resampled r is undefined)."""
    rb, why = resampled_r(x, y, draws)
    low, high, _ = stats.percentile_interval(rb, level=level)
    return ClusterInterval(low=missing.series(low, why), high=missing.series(high, why))


def phase_intervals(x: np.ndarray, y: np.ndarray, draws: ClusterDraws, *, phases: Mapping[str, Sequence[int]],
                    level: float) -> dict[str, PhaseInterval]:
    """Per phase, the percentile interval of the phase mean of the resampled r of the layers ``x``
    (V, n) (:mod:`uaprobe.analysis.inference.phases`: a resample undefined at a layer of the phase is left out)."""
    rb, why = resampled_r(x, y, draws)
    out: dict[str, PhaseInterval] = {}
    for name, layers in phases.items():
        idx = list(layers)
        means = phase_mean(rb, idx)
        low, high, valid = stats.percentile_interval(means[None], level=level)
        reason = (next((w for w in why[idx] if w), "") if idx else "the phase has no layer") or (
            "no resample had variance at every layer of the phase" if valid[0] == 0 else "")
        out[name] = PhaseInterval(low=missing.value(low[0], reason), high=missing.value(high[0], reason))
    return out


def cluster_block(series: Mapping[str, Mapping[str, np.ndarray]], y: np.ndarray, draws: ClusterDraws, *,
                  params: AnalysisParams, phases: Mapping[str, Sequence[int]] | None = None) -> ClusterBootstrap:
    """The ``cluster_bootstrap`` object of ``pairs.json`` / ``option_b.json``: ``series[pooling][name]``
    (V, n) per-layer values of each pair, ``y`` (n,) the preference; with ``phases`` (phase ->
    layers) the intervals of the phase means as well."""
    return ClusterBootstrap(
        scheme=SCHEME, resamples=int(draws.counts.shape[0]), level=float(params.ci_level),
        distinct_categories_min=int(draws.distinct.min()), degenerate=int((draws.distinct <= DEGENERATE_DISTINCT).sum()),
        poolings={p: {name: cluster_interval(v, y, draws, level=params.ci_level) for name, v in named.items()}
                  for p, named in series.items()},
        phases=None if phases is None else {
            p: {name: phase_intervals(v, y, draws, phases=phases, level=params.ci_level) for name, v in named.items()}
            for p, named in series.items()})


def draws_for(params: AnalysisParams, *, category_of_pair: np.ndarray) -> ClusterDraws:
    """The one set of resamples of an extraction (``analysis.bootstrap_resamples``, seeded)."""
    return cluster_bootstrap(stats.rng_for(seed=params.seed, name=RNG_NAME), category_of_pair=category_of_pair,
                             resamples=params.bootstrap_resamples)


__all__: Sequence[str] = ("DEGENERATE_DISTINCT", "RNG_NAME", "SCHEME", "ClusterDraws", "cluster_block",
                          "cluster_bootstrap", "cluster_interval", "draws_for", "phase_intervals", "resampled_r",
                          "weighted_pearson")
