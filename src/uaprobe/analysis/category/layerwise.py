"""Seed 000: layer-wise r(UA, preference) across categories, for every pooling and layer.

Per view (layers 0..L, then the pre-final-norm block): per-category U_A, U_B, UA; Pearson r and p;
Spearman; bootstrap and Fisher-z intervals of r; permutation p; leave-one-category-out r; Holm and
Benjamini-Hochberg corrections across the layers; sign changes and peaks of the layer curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import curves, stats
from uaprobe.analysis.inference.groupstats import GroupStats, LeaveOneOut, Resampling, group_stats, leave_one_out
from uaprobe.schema import missing
from uaprobe.schema.categories import LayerwiseFinal, LayerwisePooling, LayerwisePrenorm
from uaprobe.analysis.geometry.uniformity import Cosines
from uaprobe.config import AnalysisParams


@dataclass(frozen=True)
class CategoryUniformity:
    """Per-view, per-category uniformities of one pooling: arrays (V, n_categories)."""

    u_a: np.ndarray
    u_b: np.ndarray

    @property
    def ua(self) -> np.ndarray:
        return self.u_a - self.u_b


def category_uniformity(cosines: Cosines, *, category_of_pair: np.ndarray, n_categories: int) -> CategoryUniformity:
    """U(A statements) and U(B statements) of every category in every view."""
    labels = np.asarray(category_of_pair)[None, :]
    u_a, _ = cosines.uniformity(labels, n_groups=n_categories, side="a")
    u_b, _ = cosines.uniformity(labels, n_groups=n_categories, side="b")
    return CategoryUniformity(u_a=u_a[:, 0, :], u_b=u_b[:, 0, :])


@dataclass(frozen=True)
class PoolingLayerwise:
    """Everything seed 000 (and the reviewer) computes for one pooling; views = layers + prenorm."""

    uniformity: CategoryUniformity
    stats: GroupStats
    """Rows = views."""
    loco: LeaveOneOut
    holm_p: np.ndarray
    """(L+1,) over the layers only."""
    bh_p: np.ndarray
    permutation_holm_p: np.ndarray
    permutation_bh_p: np.ndarray


def analyze_layerwise(*, uniformity: Mapping[str, CategoryUniformity], mean_preference: np.ndarray,
                      categories: Sequence[str], params: AnalysisParams,
                      rng: np.random.Generator) -> tuple[dict[str, PoolingLayerwise], Resampling]:
    """Category-level statistics for every pooling.

    Args:
        uniformity: pooling -> per-view category uniformities (V = L + 2 views).
        mean_preference: (n_categories,) mean preference of each category.
        categories: names, for leave-one-out reasons.
        params: the analysis knobs.
        rng: this analysis' generator (bootstrap indices, then permutations, drawn once).

    Returns:
        pooling -> :class:`PoolingLayerwise`, and the shared draws.
    """
    n_cat = len(categories)
    draws = Resampling.draw(rng, n=n_cat, resamples=params.bootstrap_resamples, permutations=params.permutations)
    out = {}
    for pooling, cu in uniformity.items():
        ua = cu.ua
        gs = group_stats(x=ua, y=mean_preference, draws=draws, level=params.ci_level)
        loco = leave_one_out(x=ua, y=mean_preference, r=gs.pearson.r, names=categories)
        n_layer_views = ua.shape[0] - 1
        out[pooling] = PoolingLayerwise(
            uniformity=cu, stats=gs, loco=loco,
            holm_p=stats.holm(gs.pearson.p[:n_layer_views]),
            bh_p=stats.benjamini_hochberg(gs.pearson.p[:n_layer_views]),
            permutation_holm_p=stats.holm(gs.permutation_p[:n_layer_views]),
            permutation_bh_p=stats.benjamini_hochberg(gs.permutation_p[:n_layer_views]),
        )
    return out, draws


def _loco_fields(loco: LeaveOneOut, sel: Any, categories: Sequence[str]) -> dict[str, Any]:
    """Leave-one-category-out fields of the rows ``sel`` (a slice of views or one view index)."""
    why = "r or every leave-one-out r is undefined"
    drivers = loco.driver[sel]
    if np.ndim(drivers) == 0:
        name = categories[int(drivers)] if drivers >= 0 else missing.label(None, why)
        return {"loco_r": missing.series(loco.r[sel], loco.reason[sel]), "loco_driver": name,
                "loco_max_shift": missing.value(loco.max_shift[sel], why)}
    names = [categories[int(d)] if d >= 0 else missing.label(None, why) for d in drivers]
    return {"loco_r": missing.series(loco.r[sel], loco.reason[sel]), "loco_driver": names,
            "loco_max_shift": missing.series(loco.max_shift[sel], why)}


def _corrected(name: str, adjusted: np.ndarray, raw_reason: np.ndarray, alpha: float) -> dict[str, Any]:
    reason = stats.inherit(raw_reason, stats.first_reason((~np.isfinite(adjusted), "p-value is undefined")))
    return {f"{name}_p": missing.series(adjusted, reason),
            f"{name}_reject": missing.flags(adjusted <= alpha, defined=np.isfinite(adjusted), reasons=reason)}


def layerwise_results(result: Mapping[str, PoolingLayerwise], *, categories: Sequence[str], n_layers: int,
                      params: AnalysisParams) -> dict[str, LayerwisePooling]:
    """The ``poolings`` object of ``layerwise.json`` (see docs/results.md)."""
    layers = list(range(n_layers + 1))
    seed_idx = curves.seed_layers(n_layers)
    poolings: dict[str, LayerwisePooling] = {}
    for pooling, res in result.items():
        layer_sel = slice(0, n_layers + 1)
        cu = res.uniformity
        r = res.stats.pearson.r[:n_layers + 1]
        p_reason = res.stats.pearson.reason[:n_layers + 1]
        pre = n_layers + 1
        poolings[pooling] = LayerwisePooling(
            u_a=missing.series(cu.u_a[layer_sel]),
            u_b=missing.series(cu.u_b[layer_sel]),
            ua=missing.series(cu.ua[layer_sel]),
            **res.stats.fields(layer_sel),
            **_loco_fields(res.loco, layer_sel, categories),
            **_corrected("holm", res.holm_p, p_reason, params.alpha),
            **_corrected("bh", res.bh_p, p_reason, params.alpha),
            **_corrected("permutation_holm", res.permutation_holm_p, p_reason, params.alpha),
            **_corrected("permutation_bh", res.permutation_bh_p, p_reason, params.alpha),
            sign_changes=curves.sign_change_records(r, layers=layers, n_layers=n_layers),
            seed_layers_sign_changes=curves.sign_change_records(r[seed_idx], layers=seed_idx, n_layers=n_layers),
            peak_positive=curves.peak_record(r, layers=layers, n_layers=n_layers, lowest=False),
            peak_negative=curves.peak_record(r, layers=layers, n_layers=n_layers, lowest=True),
            final=LayerwiseFinal(layer=n_layers, r=missing.value(r[-1], p_reason[-1]),
                                 p=missing.value(res.stats.pearson.p[n_layers], p_reason[-1])),
            prenorm=LayerwisePrenorm(
                u_a=missing.series(cu.u_a[pre]), u_b=missing.series(cu.u_b[pre]), ua=missing.series(cu.ua[pre]),
                **res.stats.fields(pre), **_loco_fields(res.loco, pre, categories)))
    return poolings
