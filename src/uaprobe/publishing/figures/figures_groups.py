"""Figures of how the statements are grouped, drawn from the results files only (see ``docs/results.md``):
the categories against random bins (seed 002), UA against the output preference by category beside the
published reference models (seed 003), and the within-category centroid score over all pairs.

One function per figure: it takes the typed results documents and returns a
:class:`matplotlib.figure.Figure`; it reads no file, touches no global matplotlib state (no
``pyplot``; style through :func:`uaprobe.publishing.figures.plotting.style`) and is deterministic. What the
figures share (palette, layer axis, labels, writing) is :mod:`uaprobe.publishing.figures.plotting`; which figure
is drawn from which results files is :mod:`uaprobe.publishing.figures.figure_registry`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from uaprobe.names import POOLINGS
from uaprobe.publishing.figures.plotting import (LINESTYLES, MARKERS, OKABE_ITO, POOLING_STYLE, PRINT_WIDTH_IN, R_LABEL,
                                                 arr, layer_axis, new_figure, pick, place_point_labels, style,
                                                 data_label, model_title, zero_line)
from uaprobe.schema.categories import Bins, Validation
from uaprobe.schema.pairs import Pairs

# --------------------------------------------------------------------------------------------
# Seed 002: categories vs random bins
# --------------------------------------------------------------------------------------------


def bins_figure(bins: Bins, *, pooling: str = "mean", n_categories: int | None = None) -> Figure:
    """Seed 002: per layer, r and the width of its bootstrap CI with the categories against the
    ``ci_k`` random bins (both binning schemes). ``n_categories`` only labels the legend."""
    schemes = pick(bins.poolings, pooling, where="poolings", of=bins.model).schemes
    layers = arr(bins.layers)
    ci_k = bins.ci_k
    with style():
        fig = new_figure(9.0, 3.6)
        ax_r, ax_w = fig.subplots(1, 2, sharex=True)
        first = next(iter(schemes.values()))
        comparison = first.comparison
        cat_label = f"n = {n_categories} categories" if n_categories else "categories"
        ax_r.plot(layers, arr(comparison.categories_r), color=OKABE_ITO[7], marker="o",
                  label=cat_label)
        ax_w.plot(layers, arr(comparison.categories_ci_width), color=OKABE_ITO[7], marker="o",
                  label=cat_label)
        for i, (scheme, data) in enumerate(schemes.items()):
            color = OKABE_ITO[(i + 1) % 7]
            part = data.ci_partition
            label = f"k = {ci_k} bins ({scheme})"
            ax_r.plot(layers, arr(part.r), color=color, marker=MARKERS[i + 1],
                      linestyle=LINESTYLES[i + 1], label=label)
            ax_r.fill_between(layers, arr(part.bootstrap_ci_low), arr(part.bootstrap_ci_high),
                              color=color, alpha=0.12, linewidth=0)
            ax_w.plot(layers, arr(data.comparison.bins_ci_width), color=color, marker=MARKERS[i + 1],
                      linestyle=LINESTYLES[i + 1], label=label)
        zero_line(ax_r)
        ax_r.set_ylim(-1.05, 1.05)
        layer_axis(ax_r, layers)
        ax_r.set_ylabel(R_LABEL)
        ax_r.set_title("Correlation (bands: bootstrap CI of the bins)")
        layer_axis(ax_w, layers)
        ax_w.set_ylabel("CI width (Pearson r units)")
        ax_w.set_ylim(0, 2.05)
        ax_w.set_title("Width of the bootstrap CI of r")
        ax_w.legend(loc="best")
        fig.suptitle(f"{model_title(bins)}: categories vs random bins ({pooling} pooling)")
    return fig


# --------------------------------------------------------------------------------------------
# Seed 003: validation scatter
# --------------------------------------------------------------------------------------------


def validation_figure(
    validation: Validation,
    *,
    variant: str = "mean",
    reference: Mapping[str, tuple[float, float]] | None = None,
    reference_category: str | None = None,
    preference_unit: str = "nats/token",
) -> Figure:
    """Seed 003: UA against the mean output preference by category at the final layer, with the
    published reference models (one category) marked for comparison."""
    table = pick(validation.variants, variant, where="variants", of=validation.model).table
    with style():
        fig = new_figure(6.4, 4.6)
        ax = fig.subplots()
        ua = arr([row.ua for row in table])
        pref = arr([row.mean_preference for row in table])
        ax.scatter(ua, pref, s=46, color=OKABE_ITO[0], edgecolors="black", linewidths=0.8, zorder=5,
                   label=f"{model_title(validation)} (categories)")
        labelled = [(data_label(row.category), x, y) for row, x, y in zip(table, ua, pref)
                    if not (math.isnan(x) or math.isnan(y))]
        if reference:
            for i, (name, (ref_ua, ref_pref)) in enumerate(reference.items()):
                # hollow and above the categories: a category at the same place shows through
                ax.scatter([ref_ua], [ref_pref], marker=MARKERS[(i + 2) % len(MARKERS)], s=64,
                           facecolors="none", edgecolors=OKABE_ITO[(i + 1) % 7], linewidths=1.6, zorder=6,
                           label=f"{data_label(name)} (published{', ' + data_label(reference_category) if reference_category else ''})")
        zero_line(ax, axis="y")
        zero_line(ax, axis="x")
        ax.set_xlabel("UA = U(A) \u2212 U(B) (difference of mean cosine similarities, unitless)")
        ax.set_ylabel(f"mean preference NLL(B) \u2212 NLL(A) ({preference_unit})")
        layer = validation.layer
        ax.set_title(f"{model_title(validation)}: UA vs output preference, layer {layer} ({variant} pooling)")
        ax.legend(loc="best", fontsize=7)
        place_point_labels(ax, labelled, fontsize=7)
    return fig


INSET_CORNERS = ((0.56, 0.22, 0.41, 0.38), (0.56, 0.58, 0.41, 0.38), (0.16, 0.58, 0.41, 0.38),
                 (0.16, 0.22, 0.41, 0.38))
"""Where an inset may go, in axes fractions (x, y, width, height), in the order tried: lower right, upper right,
upper left, lower left; each leaves room below and to its left for its own tick labels."""
INSET_LABEL_ROOM = (0.12, 0.12)
"""The room, in axes fractions, an inset's tick labels take to its left and below it."""


def inset_corner(ax: Any, x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float] | None:
    """The first of :data:`INSET_CORNERS` that holds none of the points (x, y), with its tick labels' room, once
    the axes have their limits; None where every corner holds one."""
    ax.autoscale_view()
    pts = np.column_stack([x, y])
    pts = pts[np.isfinite(pts).all(axis=1)]
    frac = ax.transAxes.inverted().transform(ax.transData.transform(pts)) if pts.size else np.empty((0, 2))
    pad = 0.03  # a marker's half-width
    for x0, y0, w, h in INSET_CORNERS:
        lo_x, lo_y = x0 - INSET_LABEL_ROOM[0] - pad, y0 - INSET_LABEL_ROOM[1] - pad
        inside = ((frac[:, 0] >= lo_x) & (frac[:, 0] <= x0 + w + pad) & (frac[:, 1] >= lo_y)
                  & (frac[:, 1] <= y0 + h + pad))
        if not inside.any():
            return (x0, y0, w, h)
    return None


def category_scatter_figure(validations: Mapping[str, Validation], *, variant: str = "mean",
                            preference_unit: str = "nats/token") -> Figure:
    """Every model's categories side by side at print width: UA against the mean preference at the last
    layer, one colour and marker per category with one legend (points too close to name apart stay apart by
    colour), the paper's view of how one category sets the category-level r."""
    models = list(validations.values())
    with style():
        fig = new_figure(PRINT_WIDTH_IN, 3.1)
        axes = fig.subplots(1, max(len(models), 1), squeeze=False)[0]
        handles: dict[str, Any] = {}
        for ax, doc in zip(axes, models):
            chosen = pick(doc.variants, variant, where="variants", of=doc.model)
            table = chosen.table
            ua = np.array([row.ua for row in table], dtype=float)
            pref = np.array([row.mean_preference for row in table], dtype=float)
            styles = [dict(s=34, marker=MARKERS[i % len(MARKERS)], color=OKABE_ITO[i % len(OKABE_ITO)],
                           edgecolors="black", linewidths=0.6, zorder=5) for i in range(len(table))]
            for i, row in enumerate(table):
                name = data_label(row.category)
                handles[name] = ax.scatter([row.ua], [row.mean_preference], label=name, **styles[i])
            # the inset enlarges every category but the one farthest from the others (standardised distance),
            # in a corner of the panel that holds no point (with room for its tick labels), else the first corner
            far = int(np.nanargmax(np.hypot(*(np.abs(v - np.nanmedian(v)) / (np.nanstd(v) or 1.0)
                                              for v in (ua, pref))))) if len(table) > 3 else -1
            rect = (inset_corner(ax, ua, pref) or INSET_CORNERS[0]) if far >= 0 else None
            inset = ax.inset_axes(rect, zorder=6) if rect is not None else None
            if inset is not None:
                inset.set_facecolor("white")
                for i, row in enumerate(table):
                    if i != far:
                        inset.scatter([row.ua], [row.mean_preference], **styles[i])
            if inset is not None:
                inset.tick_params(labelsize=7)
                inset.xaxis.set_major_locator(MaxNLocator(3))
                inset.yaxis.set_major_locator(MaxNLocator(3))
                inset.set_title("enlarged", fontsize=7, pad=2)
                zero_line(inset, axis="y")
                zero_line(inset, axis="x")
            zero_line(ax, axis="y")
            zero_line(ax, axis="x")
            ax.set_xlabel("UA = U(A) \u2212 U(B)", fontsize=8)
            r = chosen.global_.r
            r_text = "r n/a" if r is None else f"r = {r:+.3f}".replace("-", "\u2212")
            ax.set_title(f"{model_title(doc)}, layer {doc.layer}: {r_text}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(4))  # ticks that do not run into one another at print width
        axes[0].set_ylabel(f"mean preference NLL(B) \u2212 NLL(A)\n({preference_unit})", fontsize=8)
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize=7,
                   frameon=False)
    return fig


# --------------------------------------------------------------------------------------------
# Added analysis: pair level
# --------------------------------------------------------------------------------------------


def pairs_figure(pairs: Pairs) -> Figure:
    """r of the within-category centroid score vs the preference over all pairs, per layer, with its
    bootstrap CI, for every pooling (``pairs.json``; not the original's global-centroid Option B)."""
    layers = arr(pairs.layers)
    poolings = pairs.poolings
    n_pairs = len(pairs.preference) or None
    with style():
        fig = new_figure(6.8, 3.8)
        ax = fig.subplots()
        for name in POOLINGS:
            if name not in poolings:
                continue
            block = poolings[name]
            st = POOLING_STYLE[name]
            ax.fill_between(layers, arr(block.bootstrap_ci_low), arr(block.bootstrap_ci_high),
                            color=st["color"], alpha=0.15, linewidth=0)
            ax.plot(layers, arr(block.pearson_r), label=f"{name} pooling", **st)
        zero_line(ax)
        layer_axis(ax, layers)
        ax.set_ylabel("r(within-category centroid score, preference)\n(Pearson r, unitless)")
        ax.set_title(f"{model_title(pairs)}: within-category centroid score"
                     + (f"\n(n = {n_pairs} pairs; bands: pair bootstrap spread, ignores the categories)"
                        if n_pairs else ""))
        ax.legend(loc="best")
    return fig


__all__ = [
    "bins_figure",
    "pairs_figure",
    "validation_figure",
]
