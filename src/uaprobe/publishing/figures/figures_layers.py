"""Figures of r(UA, preference) by layer, drawn from the results files only (see ``docs/results.md``):
one model's layer curve and its pooling strategies (seed 000), the curve with each category left out,
and the curves of every model of the panel (seed 001).

One function per figure: it takes the typed results documents and returns a
:class:`matplotlib.figure.Figure`; it reads no file, touches no global matplotlib state (no
``pyplot``; style through :func:`uaprobe.publishing.figures.plotting.style`) and is deterministic. What the
figures share (palette, layer axis, labels, writing) is :mod:`uaprobe.publishing.figures.plotting`; which figure
is drawn from which results files is :mod:`uaprobe.publishing.figures.figure_registry`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from uaprobe.names import POOLINGS
from uaprobe import escape
from uaprobe.publishing.figures.plotting import (DEPTH_LABEL, LAYER_LABEL, LINESTYLES, MARKERS, OKABE_ITO, POOLING_STYLE,
                                         PRINT_WIDTH_IN, R_LABEL, arr, layer_axis, new_figure, option_words, pick,
                                         style, data_label, model_title, zero_line)
from uaprobe.schema.categories import Layerwise, LayerwisePooling
from uaprobe.schema.panel import Panel

# --------------------------------------------------------------------------------------------
# Seed 000: layer-wise correlation and pooling strategies
# --------------------------------------------------------------------------------------------


def layerwise_figure(layerwise: Layerwise, *, pooling: str = "mean",
                     sink_excluded: Layerwise | None = None) -> Figure:
    """Seed 000: r(UA, preference) per layer with the range of r when one category is left out and the
    sign changes, the same curve with position 0 excluded, and stars where the
    exact permutation test survives Holm's correction; beside it the final-layer r of every pooling (and
    of the pre-final-norm state) with the range of r when one category is left out. At six categories
    neither a Fisher-z interval nor a bootstrap over the categories has coverage: the leave-one-out
    range shows how far one category moves r, and claims no coverage.
    """
    block: LayerwisePooling = pick(layerwise.poolings, pooling, where="poolings", of=layerwise.model)
    layers = arr(layerwise.layers)
    r = arr(block.pearson_r)
    low, high = loco_bounds(block.loco_r)
    with style():
        fig = new_figure(PRINT_WIDTH_IN, 3.3)
        ax_curve, ax_bars = fig.subplots(1, 2, width_ratios=(1.3, 1.0))
        st = POOLING_STYLE.get(pooling, POOLING_STYLE["mean"])
        ax_curve.fill_between(layers, low, high, color=st["color"], alpha=0.18, linewidth=0,
                              label="range, one category left out")
        ax_curve.plot(layers, r, color=st["color"], marker=st["marker"], label=f"r, {pooling} pooling")
        if sink_excluded is not None:
            sx = arr(pick(sink_excluded.poolings, pooling, where="poolings", of=sink_excluded.model).pearson_r)
            ax_curve.plot(layers, sx, color=OKABE_ITO[4], marker="D", markersize=3, linestyle="--",
                          label=f"r, position 0 {option_words('policy', 'sink_excluded')}")
        holm = np.array([bool(x) for x in block.permutation_holm_reject] or [False] * len(r))
        if holm.any():
            ax_curve.plot(layers[holm], r[holm], linestyle="none", marker="*", markersize=9,
                          color=OKABE_ITO[7], label="Holm-adjusted exact p < α")
        for i, change in enumerate(block.sign_changes):
            x = (float(change.layer_before) + float(change.layer_after)) / 2.0
            ax_curve.axvline(x, color=OKABE_ITO[1], linestyle=":", linewidth=1.3,
                             label="sign change" if i == 0 else None)
        zero_line(ax_curve)
        layer_axis(ax_curve, layers)
        ax_curve.set_ylabel(R_LABEL.split(" (")[0])
        ax_curve.set_ylim(-1.05, 1.05)
        ax_curve.set_title("Correlation by layer", fontsize=9)
        # below the axes: the curves fill every corner of the plot
        ax_curve.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize=7, frameon=False)

        final_index = int(np.nanargmax(layers)) if layers.size else -1
        names, values, ranges, colors, hatches = _final_layer_bars(layerwise, final_index)
        x = np.arange(len(names))
        heights = np.nan_to_num(np.array(values, dtype=float))
        bars = ax_bars.bar(x, heights, color=colors, edgecolor="black", linewidth=0.6)
        for bar, hatch, value in zip(bars, hatches, values):
            bar.set_hatch(hatch)
            if hatch:
                bar.set_alpha(0.6)
        span = np.array(ranges, dtype=float).reshape(-1, 2)
        for i, value in enumerate(values):
            # the label sits beyond the far end of the leave-one-out range, so it never collides with it
            text = "n/a" if math.isnan(value) else f"{value:+.2f}"
            up = math.isnan(value) or value >= 0
            ends = [heights[i], *(v for v in span[i] if not math.isnan(v))]
            tip = max(ends) if up else min(ends)
            # vertical, so that neighbouring labels never meet
            ax_bars.annotate(text, (x[i], float(np.clip(tip, -1.0, 1.0))), xytext=(0, 4 if up else -4),
                             textcoords="offset points", ha="center", va="bottom" if up else "top", rotation=90,
                             fontsize=7)
        # the leave-one-out range as its two ends joined by a dotted line: a range, not an error bar
        ax_bars.vlines(x, span[:, 0], span[:, 1], color=OKABE_ITO[7], linewidth=0.8, linestyles=":",
                       label="range, one category left out")
        ax_bars.plot(np.repeat(x, 2), span.ravel(), linestyle="none", marker="o", markerfacecolor="white",
                     color=OKABE_ITO[7], markersize=3.5)
        zero_line(ax_bars)
        ax_bars.set_xticks(x, names, fontsize=7)
        ax_bars.set_ylim(-1.5, 1.5)
        ax_bars.set_ylabel(R_LABEL.split(" (")[0])
        ax_bars.set_title(f"Last layer ({int(layers[final_index]) if layers.size else '?'}), by pooling", fontsize=9)
        fig.suptitle(model_title(layerwise), fontsize=10)
    return fig


def _final_layer_bars(layerwise: Layerwise, final_index: int
                      ) -> tuple[list[str], list[float], list[tuple[float, float]], list[str], list[str]]:
    """The bars of the final layer by pooling, each beside its pre-final-norm state: labels, r, the range of r
    with one category left out, colours and hatches."""
    names: list[str] = []
    values: list[float] = []
    ranges: list[tuple[float, float]] = []
    colors: list[str] = []
    hatches: list[str] = []
    for name in POOLINGS:
        if name not in layerwise.poolings:
            continue
        pb = layerwise.poolings[name]
        final_low, final_high = loco_bounds(pb.loco_r)
        pre_low, pre_high = loco_bounds([pb.prenorm.loco_r])
        for label, value, lo, hi, hatch in (
            (name, arr(pb.pearson_r)[final_index], final_low[final_index], final_high[final_index], ""),
            ("pre-\nnorm", _nan(pb.prenorm.pearson_r), pre_low[0], pre_high[0], "//"),
        ):
            names.append(label)
            values.append(value)
            ranges.append((lo, hi))
            colors.append(POOLING_STYLE[name]["color"])
            hatches.append(hatch)
    return names, values, ranges, colors, hatches


def loco_bounds(loco_r: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the smallest and largest r with one category left out (NaN where none is defined)."""
    rows = [[np.nan if v is None else float(v) for v in row] for row in loco_r]
    low = np.array([min((v for v in row if not math.isnan(v)), default=np.nan) for row in rows], dtype=float)
    high = np.array([max((v for v in row if not math.isnan(v)), default=np.nan) for row in rows], dtype=float)
    return low, high


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


# --------------------------------------------------------------------------------------------
# Seed 001: scaling across the panel
# --------------------------------------------------------------------------------------------


def scaling_figure(panel: Panel, *, pooling: str = "mean") -> Figure:
    """Seed 001: the layer curves of every model of the panel, in absolute layers and in
    normalised depth, with each model's positive peak marked."""
    models = pick(panel.poolings, pooling, where="poolings", of="the panel").models
    order = [m for m in panel.models if m in models]
    with style():
        fig = new_figure(9.0, 3.8)
        ax_abs, ax_rel = fig.subplots(1, 2, sharey=True)
        for i, model_id in enumerate(order):
            entry = models[model_id]
            r = arr(entry.r)
            kwargs = {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i % len(MARKERS)],
                      "linestyle": LINESTYLES[i % len(LINESTYLES)], "label": escape.mathtext(entry.display)}
            ax_abs.plot(arr(entry.layers), r, **kwargs)
            ax_rel.plot(arr(entry.depth_pct), r, **kwargs)
            peak = entry.peak_positive
            if peak.r is not None:
                ax_abs.plot([peak.layer], [peak.r], marker="*", markersize=11, color=kwargs["color"],
                            markeredgecolor="black", linestyle="none")
                ax_rel.plot([peak.depth_pct], [peak.r], marker="*", markersize=11, color=kwargs["color"],
                            markeredgecolor="black", linestyle="none")
        for ax, xlabel, title in ((ax_abs, LAYER_LABEL, "Absolute depth"),
                                  (ax_rel, DEPTH_LABEL, "Normalised depth")):
            zero_line(ax)
            ax.set_xlabel(xlabel)
            if ax is ax_abs:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(title)
            ax.set_ylim(-1.05, 1.05)
        ax_abs.set_ylabel(R_LABEL)
        ax_rel.set_xlim(-2, 102)
        ax_abs.legend(loc="best")
        fig.suptitle(f"Layer curves across the panel ({pooling} pooling; \u2605 = positive peak)")
    return fig


# --------------------------------------------------------------------------------------------
# Added analysis: leave one category out
# --------------------------------------------------------------------------------------------


def loco_figure(layerwise: Layerwise, *, pooling: str = "mean") -> Figure:
    """Leave-one-category-out: r per layer with all categories and with each one left out."""
    block = pick(layerwise.poolings, pooling, where="poolings", of=layerwise.model)
    layers = arr(layerwise.layers)
    categories = layerwise.categories
    loco = np.array([[np.nan if v is None else float(v) for v in row] for row in block.loco_r], dtype=float)
    with style():
        fig = new_figure(6.8, 4.6)
        ax = fig.subplots()
        for j, category in enumerate(categories):
            ax.plot(layers, loco[:, j] if loco.ndim == 2 and loco.shape[1] > j else np.full_like(layers, np.nan),
                    color=OKABE_ITO[j % 7], linestyle=LINESTYLES[(j + 1) % len(LINESTYLES)],
                    marker=MARKERS[(j + 1) % len(MARKERS)], markersize=3, linewidth=1.0,
                    label=f"without {data_label(category)}")
        ax.plot(layers, arr(block.pearson_r), color=OKABE_ITO[7], linewidth=2.2, marker="o",
                label="all categories")
        zero_line(ax)
        ax.set_ylim(-1.05, 1.05)
        layer_axis(ax, layers)
        ax.set_ylabel(R_LABEL)
        ax.set_title(f"{model_title(layerwise)}: leave-one-category-out ({pooling} pooling)")
        # below the axes: seven curves leave no corner of the plot free
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=3, fontsize=7.5, frameon=False)
    return fig


__all__ = [
    "layerwise_figure",
    "loco_figure",
    "scaling_figure",
]
