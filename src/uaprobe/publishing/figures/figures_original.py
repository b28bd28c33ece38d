"""The figure of the original study's pair-level analysis (Option B), from ``option_b.json`` only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from uaprobe.names import OPTION_B_METRIC_WORDS
from uaprobe.publishing.figures.plotting import arr, layer_axis, new_figure, pick, style, model_title, zero_line
from uaprobe.schema.pairs import OptionB

METRIC_STYLE: Mapping[str, Mapping[str, Any]] = {
    "centroid_asymmetry": {"color": "#1b4f72", "linestyle": "-", "marker": "o"},
    "cross_centroid": {"color": "#7d3c98", "linestyle": "--", "marker": "s"},
    "within_pair_sim": {"color": "#117a65", "linestyle": "-.", "marker": "^"},
    "knn_density_asymmetry": {"color": "#b9770e", "linestyle": ":", "marker": "D"},
    "margin_asymmetry": {"color": "#922b21", "linestyle": (0, (5, 1, 1, 1)), "marker": "v"},
}
"""Colour, dash and marker per metric: distinguishable without colour."""
PHASE_SHADE = {"early": "0.93", "mid": "0.97", "late": "0.88"}


def option_b_figure(option_b: OptionB, *, pooling: str = "mean") -> Figure:
    """r of each Option B metric with the preference over all pairs, per layer (one pooling); the
    centroid asymmetry with its bootstrap band; the follow-up paper's phases shaded."""
    block = pick(option_b.poolings, pooling, where="poolings", of=option_b.model)
    layers = arr(option_b.layers)
    metrics = block.metrics
    with style():
        fig = new_figure(6.8, 4.6)
        ax = fig.subplots()
        phases: dict[float, str] = {}
        for name, layer_list in sorted(block.phase_layers.model_dump().items()):  # the file's key order
            if layer_list:
                ax.axvspan(min(layer_list) - 0.5, max(layer_list) + 0.5, color=PHASE_SHADE.get(name, "0.95"),
                           zorder=0, linewidth=0)
                phases[float(np.mean(layer_list))] = name
        _phase_axis(ax, phases)
        ca = pick(metrics, "centroid_asymmetry", where=f"poolings/{pooling}/metrics", of=option_b.model)
        ax.fill_between(layers, arr(ca.bootstrap_ci_low), arr(ca.bootstrap_ci_high),
                        color=METRIC_STYLE["centroid_asymmetry"]["color"], alpha=0.15, linewidth=0)
        for name, st in METRIC_STYLE.items():
            if name in metrics:
                ax.plot(layers, arr(metrics[name].pearson_r), label=OPTION_B_METRIC_WORDS.get(name, name.replace("_", " ")), markersize=3.5,
                        linewidth=1.3, **st)
        zero_line(ax)
        layer_axis(ax, layers)
        ax.set_ylabel("r(metric, preference) over pairs (Pearson r, unitless)")
        n = block.n_pairs
        ax.set_title(f"{model_title(option_b)}: Option B, global centroids ({pooling} pooling"
                     + (f", n = {n} pairs" if n else "") + ")")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8, frameon=False)
    return fig


PHASE_AXIS_GID = "phase-axis"
"""``gid`` of the top axis that names the phases (tests find it by it)."""


def _phase_axis(ax: Axes, phases: Mapping[float, str]) -> None:
    """Name each shaded phase above the plotting area, on a secondary top axis (tick labels at the
    phase centres, no ticks, no spine), so that no name lies over a curve; the title sits above it."""
    if not phases:
        return
    top = ax.secondary_xaxis("top")
    top.set_gid(PHASE_AXIS_GID)
    centres = sorted(phases)
    top.set_xticks(centres, labels=[phases[c] for c in centres], fontsize=8, color="0.3")
    top.tick_params(axis="x", length=0, pad=2)
    top.spines["top"].set_visible(False)


__all__ = ("METRIC_STYLE", "PHASE_AXIS_GID", "option_b_figure")
