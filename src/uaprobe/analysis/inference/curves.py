"""Summaries of a per-layer curve of r: depth, the seeds' layer subset, sign changes, peaks."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from uaprobe.analysis.inference import stats
from uaprobe.schema import missing

SEED_LAYER_STEP = 4
"""The seeds sampled every 4th layer (plus the last)."""


def depth_pct(layers: Sequence[int] | np.ndarray, *, n_layers: int) -> np.ndarray:
    """``100 * layer / n_layers`` (the seeds' normalised depth)."""
    return 100.0 * np.asarray(layers, dtype=float) / float(n_layers)


def seed_layers(n_layers: int) -> list[int]:
    """The layers the seeds looked at: ``0, 4, 8, ...`` plus ``n_layers``."""
    out = list(range(0, n_layers + 1, SEED_LAYER_STEP))
    if out[-1] != n_layers:
        out.append(n_layers)
    return out


def sign_change_records(r: np.ndarray, *, layers: Sequence[int], n_layers: int) -> list[dict[str, Any]]:
    """One record per sign change between consecutive entries of ``r`` (over ``layers``)."""
    out = []
    for i, j in stats.sign_changes(r):
        mid = (layers[i] + layers[j]) / 2.0
        out.append({
            "layer_before": int(layers[i]), "layer_after": int(layers[j]),
            "r_before": float(r[i]), "r_after": float(r[j]),
            "midpoint_depth_pct": float(100.0 * mid / n_layers),
        })
    return out


def peak_record(r: np.ndarray, *, layers: Sequence[int], n_layers: int, lowest: bool) -> dict[str, Any]:
    """``layer``, ``r``, ``depth_pct`` of the max (or min) finite r; nulls with a reason if none."""
    i = stats.peak(r, lowest=lowest)
    if i is None:
        why = "r is undefined at every layer"
        return {"layer": missing.label(None, why), "r": missing.value(np.nan, why),
                "depth_pct": missing.value(np.nan, why)}
    return {"layer": int(layers[i]), "r": float(r[i]), "depth_pct": float(100.0 * layers[i] / n_layers)}
