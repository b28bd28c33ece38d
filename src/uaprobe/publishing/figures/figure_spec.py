"""The specification curve figure (Simonsohn, Simmons & Nelson 2020): for every model of the panel, in one
figure, every distinct specification's r, sorted, above a panel of the choices that make it; drawn from
each model's ``specification_curve.json`` only, at the width the PDF prints it
(:data:`~uaprobe.publishing.figures.plotting.PRINT_WIDTH_IN`), so that no text is below 7 pt on the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from uaprobe.publishing.figures.plotting import (OKABE_ITO, PRINT_WIDTH_IN, R_LABEL, arr, model_title, new_figure,
                                         option_words, style, zero_line)
from uaprobe.names import short_names
from uaprobe.schema.specs import SpecificationCurve

ROWS: tuple[tuple[str, str], ...] = (("pooling", "pooling"), ("policy", "position 0"),
                                     ("representation", "representation"), ("nll", "NLL"),
                                     ("left_out", "left out"))
"""The choice columns drawn as indicator rows, top to bottom, and their labels."""
SIGNIFICANT = "exact p \u2264 {alpha:g}"
"""The label of the indicator row that marks the specifications whose own exact permutation p is below α."""
NULL_BAND = "{level:g} % of the\nrelabelled curves"
"""The legend entry of the permutation null band (``null_band`` of the results)."""
MAX_COLUMNS = 120
"""At most this many columns in the indicator panel: with more specifications each column is a run of
adjacent specifications, and its bar's height the share of them that take the option."""
DEPTH_CMAP = "viridis"
FONT = 7.5
"""The smallest font of the figure, in points at the printed width."""


def distinct_mask(doc: SpecificationCurve) -> np.ndarray:
    """The specifications counted once (``specs.distinct`` where the results record it; else every one)."""
    flags = getattr(doc.specs, "distinct", None)
    return np.ones(len(doc.specs.r), dtype=bool) if flags is None else np.array([bool(f) for f in flags])


def declared_mask(doc: SpecificationCurve) -> np.ndarray:
    """The specifications of the primary test's universe: at its pre-declared layers, with its poolings and NLL,
    every category kept."""
    axes = doc.universe.axes
    layers = {int(o) for o in axes["layer"].options}
    poolings, nlls = set(axes["pooling"].options), set(axes["nll"].options)
    s = doc.specs
    return np.array([int(layer) in layers and left is None and pooling in poolings and nll in nlls
                     for layer, left, pooling, nll in zip(s.layer, s.left_out, s.pooling, s.nll)], dtype=bool)


def row_options(docs: Sequence[SpecificationCurve]) -> list[tuple[str, str, object]]:
    """(column, label, option) of every indicator row: every option any model's curve takes."""
    rows = []
    for col, label in ROWS:
        seen: list[object] = []
        for doc in docs:
            seen += [o for o in getattr(doc.choices, col) if o not in seen]
        rows += [(col, label, o) for o in seen]
    return rows


def _alpha(doc: SpecificationCurve) -> float:
    return float(doc.settings["alpha"])


def _indicators(panel: Axes, doc: SpecificationCurve, keep: np.ndarray, edges: np.ndarray,
                options: Sequence[tuple[str, str, Any]], labels: Sequence[str], *, alpha: float) -> None:
    """The indicator panel: a first row for the specifications whose own exact p is at most ``alpha``, then one
    row per option; each column (``edges``) a run of adjacent specifications, its bar as high as the share of them
    in the row."""
    widths = np.diff(edges)
    p = arr(doc.specs.permutation_p)[keep]
    columns = [np.array([v == p_ for v in getattr(doc.specs, col)], dtype=float)[keep] for col, _, p_ in options]
    rows = [np.nan_to_num(p, nan=1.0) <= alpha] + columns
    for i, taken in enumerate(rows):
        share = np.array([np.mean(taken[a:b]) for a, b in zip(edges[:-1], edges[1:])])
        group = 7 if i == 0 else [c for c, _ in ROWS].index(options[i - 1][0])
        panel.bar(edges[:-1] - 0.5, np.ones_like(share) * 0.8, width=widths, bottom=i - 0.4, align="edge",
                  color="0.92", linewidth=0)
        panel.bar(edges[:-1] - 0.5, 0.8 * share, width=widths, bottom=i + 0.4 - 0.8 * share, align="edge",
                  color=OKABE_ITO[group], linewidth=0)
    panel.set_ylim(len(rows) - 0.5, -0.5)
    panel.set_yticks(range(len(rows)))
    panel.set_yticklabels(labels, fontsize=FONT)
    panel.tick_params(length=0)
    panel.grid(False)
    panel.get_xaxis().set_visible(False)


def _depth_strip(strip: Axes, doc: SpecificationCurve, keep: np.ndarray, edges: np.ndarray, *, first: bool,
                 norm: Normalize) -> QuadMesh:
    """The mean depth of each column's layers, as a colour strip under the indicator panel."""
    depth = 100.0 * np.array(doc.specs.layer, dtype=float)[keep] / max(doc.n_layers, 1)
    mean_depth = np.array([depth[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
    mesh = strip.pcolormesh(edges - 0.5, [0, 1], mean_depth[None, :], cmap=colormaps[DEPTH_CMAP], norm=norm)
    strip.set_yticks([0.5])
    strip.set_yticklabels(["depth (mean)"] if first else [], fontsize=FONT)
    strip.tick_params(length=0, labelsize=FONT)
    strip.grid(False)
    strip.set_xlabel("specifications, sorted by r", fontsize=FONT)
    return mesh


def specification_curve_figure(docs: Mapping[str, SpecificationCurve]) -> Figure:
    """One column per model (``docs``: model id -> its curve, in panel order). Top: r of every distinct
    specification, sorted, over the permutation null band (``null_band``: per rank, the central ``level`` share
    of the sorted relabelled curves, light grey), its declared universe (the primary test's specifications)
    marked, with the median over all of them and over the declared universe (the primary statistic). Below,
    the indicator panel: one row per option of each choice
    and a first row for the specifications whose own exact permutation p is below α; each column of the
    panel is a run of adjacent specifications, its bar as high as the share of them taking the option (the
    grey row behind it is 100 %). Bottom: the mean depth of each column's layers, with a colour bar."""
    models = list(docs.values())
    names = short_names([model_title(doc) for doc in models])
    options = row_options(models)
    alpha = _alpha(models[0]) if models else 0.05
    labels = [SIGNIFICANT.format(alpha=alpha)] + [f"{label}: {option_words(col, opt)}" for col, label, opt in options]
    norm = Normalize(0, 100)
    with style():
        fig = new_figure(PRINT_WIDTH_IN, 4.6)
        fig.set_layout_engine("none")  # fixed margins: the same bytes on every draw
        grid = fig.add_gridspec(3, len(models) or 1, height_ratios=[1.5, 3.2, 0.16], hspace=0.06, wspace=0.06,
                                left=0.33, right=0.97, top=0.91, bottom=0.18)
        for j, doc in enumerate(models):
            keep = distinct_mask(doc)
            r = arr(doc.specs.r)[keep]
            defined = np.isfinite(r)
            n = len(r)
            x = np.arange(n)
            ax = fig.add_subplot(grid[0, j])
            band = getattr(doc, "null_band", None)
            if band is not None and band.low:
                ranks = np.arange(len(band.low))
                ax.fill_between(ranks, arr(band.low), arr(band.high), color="0.85", linewidth=0, zorder=0,
                                label=NULL_BAND.format(level=100 * band.level))
            ax.plot(x, r, color="0.15", linewidth=1.4, label="r")
            declared = declared_mask(doc)[keep]
            if declared.any():
                ax.plot(x[declared], r[declared], linestyle="none", marker="o", markersize=3.2, markerfacecolor="white",
                        markeredgecolor="black", markeredgewidth=0.7, label="primary universe")
            medians = []
            if defined.any():
                median = float(np.median(r[defined]))
                ax.axhline(median, color=OKABE_ITO[1], linewidth=1.0, linestyle="-.", label="median, all")
                medians.append(f"all {median:+.2f}")
            if (declared & defined).any():
                primary = float(np.median(r[declared & defined]))
                ax.axhline(primary, color=OKABE_ITO[0], linewidth=1.2, linestyle=":", label="median, primary")
                medians.append(f"primary {primary:+.2f}")
            zero_line(ax)
            ax.set_ylim(-1.05, 1.05)
            ax.set_xlim(-0.5, n - 0.5)
            ax.tick_params(labelbottom=False, labelsize=FONT)
            ax.set_title(f"{names[model_title(doc)]}: {n:,} specifications\n" + ", ".join(medians), fontsize=8)
            if j == 0:  # one legend, in the margin left of the first panel: no line runs under it
                ax.legend(loc="upper right", bbox_to_anchor=(-0.36, 1.0), frameon=False, fontsize=FONT,
                          handlelength=1.6, borderaxespad=0)
                ax.set_ylabel(R_LABEL.split(" (")[0], fontsize=8)
            else:
                ax.tick_params(labelleft=False)
            edges = np.linspace(0, n, min(n, MAX_COLUMNS) + 1).round().astype(int)
            _indicators(fig.add_subplot(grid[1, j], sharex=ax), doc, keep, edges, options,
                        labels if j == 0 else [], alpha=alpha)
            mesh = _depth_strip(fig.add_subplot(grid[2, j], sharex=ax), doc, keep, edges, first=j == 0, norm=norm)
            if j == len(models) - 1:
                bar = fig.add_axes((0.33, 0.075, 0.64, 0.02))
                fig.colorbar(mesh, cax=bar, orientation="horizontal")
                bar.tick_params(labelsize=FONT, length=2)
                bar.set_xlabel("layer depth, % of the model's layers (0 = token embeddings)", fontsize=FONT,
                               labelpad=1)
    return fig
