"""Summaries of a per-layer curve of r: depth, the seeds' layer subset, sign changes, peaks."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from uaprobe.analysis.inference import stats
from uaprobe.schema import missing
from uaprobe.schema.common import Peak, SignChange

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


def sign_change_records(r: np.ndarray, *, layers: Sequence[int], n_layers: int) -> list[SignChange]:
    """One record per sign change between consecutive entries of ``r`` (over ``layers``)."""
    return [SignChange(layer_before=int(layers[i]), layer_after=int(layers[j]), r_before=float(r[i]),
                       r_after=float(r[j]), midpoint_depth_pct=float(100.0 * ((layers[i] + layers[j]) / 2.0) / n_layers))
            for i, j in stats.sign_changes(r)]


def peak_record(r: np.ndarray, *, layers: Sequence[int], n_layers: int, lowest: bool,
                reported: np.ndarray | None = None) -> Peak:
    """The layer, r and depth of the max (or min) finite ``r``; missing values with a reason if none.
    ``reported``: the r written at that layer, where the peak is of another curve (e.g. of ``|r|``)."""
    i = stats.peak(r, lowest=lowest)
    if i is None:
        why = "r is undefined at every layer"
        return Peak(layer=missing.label(None, why), r=missing.value(np.nan, why), depth_pct=missing.value(np.nan, why))
    shown = r if reported is None else reported
    return Peak(layer=int(layers[i]), r=float(shown[i]), depth_pct=float(100.0 * layers[i] / n_layers))
