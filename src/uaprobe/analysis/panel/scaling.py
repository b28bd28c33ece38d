"""Seed 001: layer curves of r across the model panel, in absolute and normalised depth.

Per model: peak positive / negative r and their depth (% of the model's layers), final-layer r,
sign changes. Across models: mean and std (ddof 0, as the seed) of the peak depths, and the seed's
verdict "stable if the std of the positive-peak depth is below ``stable_depth_std``".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import curves
from uaprobe.schema import missing
from uaprobe.schema.panel import CurveSignChange, ScalingSummary, ScalingView
from uaprobe.schema.panel import ModelCurve as CurveRecord

if TYPE_CHECKING:
    from uaprobe.schema.categories import Layerwise


@dataclass(frozen=True)
class ModelCurve:
    """One model's layer curve of r for one pooling."""

    model_id: str
    display: str
    params_millions: float | None
    n_layers: int
    r: np.ndarray
    """(L+1,) r per layer, NaN where undefined."""


def curve_from_results(*, model_id: str, layerwise: Layerwise, pooling: str,
                       params_millions: float | None) -> ModelCurve:
    """Read a model's curve from its ``layerwise.json`` (nulls become NaN)."""
    values = layerwise.poolings[pooling].pearson_r
    r = np.array([np.nan if v is None else float(v) for v in values])
    return ModelCurve(model_id=model_id, display=layerwise.display, params_millions=params_millions,
                      n_layers=layerwise.n_layers, r=r)


def model_summary(curve: ModelCurve, *, layers: Sequence[int]) -> CurveRecord:
    """Seed 001's per-model summary over ``layers`` (all layers, or the seeds' subset)."""
    layers = list(layers)
    r = curve.r[layers]
    why = f"undefined in results/models/{curve.model_id}/layerwise.json (see its nan_reasons)"
    return CurveRecord(
        display=curve.display, params_millions=curve.params_millions, n_layers=curve.n_layers, layers=layers,
        depth_pct=curves.depth_pct(layers, n_layers=curve.n_layers).tolist(), r=missing.series(r, why),
        peak_positive=curves.peak_record(r, layers=layers, n_layers=curve.n_layers, lowest=False),
        peak_negative=curves.peak_record(r, layers=layers, n_layers=curve.n_layers, lowest=True),
        final_r=missing.value(r[-1], why),
        sign_changes=[CurveSignChange(layer_before=sc.layer_before, layer_after=sc.layer_after,
                                      midpoint_depth_pct=sc.midpoint_depth_pct)
                      for sc in curves.sign_change_records(r, layers=layers, n_layers=curve.n_layers)])


def panel_summary(models: Mapping[str, CurveRecord], *, stable_depth_std: float) -> ScalingSummary:
    """Mean and std of the peak depths across models, and the seed's stability verdict."""
    why = "no model has a defined peak"
    pos = np.array([m.peak_positive.depth_pct for m in models.values() if missing.present(m.peak_positive.depth_pct)],
                   dtype=float)
    neg = np.array([m.peak_negative.depth_pct for m in models.values() if missing.present(m.peak_negative.depth_pct)],
                   dtype=float)
    std = pos.std() if pos.size else np.nan
    return ScalingSummary(
        peak_positive_depth_mean=missing.value(pos.mean() if pos.size else np.nan, why),
        peak_positive_depth_std=missing.value(std, why),
        peak_negative_depth_mean=missing.value(neg.mean() if neg.size else np.nan, why),
        peak_negative_depth_std=missing.value(neg.std() if neg.size else np.nan, why),
        n_models_with_peak=int(pos.size),
        stable=missing.flag(bool(std < stable_depth_std), defined=pos.size >= 2,
                            reason="fewer than 2 models with a defined peak"))


def scaling_view(curves_by_pooling: dict[str, list[ModelCurve]], *, seed_view: bool,
                 stable_depth_std: float) -> dict[str, ScalingView]:
    """``poolings.<p>`` with ``models`` and ``summary``; ``seed_view`` restricts each model to the
    seeds' layers (every 4th, plus the last)."""
    out: dict[str, ScalingView] = {}
    for pooling, model_curves in curves_by_pooling.items():
        models = {c.model_id: model_summary(c, layers=curves.seed_layers(c.n_layers) if seed_view
                                            else list(range(c.n_layers + 1))) for c in model_curves}
        out[pooling] = ScalingView(models=models, summary=panel_summary(models, stable_depth_std=stable_depth_std))
    return out
