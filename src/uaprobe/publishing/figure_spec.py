"""The specification curve figure (Simonsohn, Simmons & Nelson 2020): every specification's r,
sorted, above a matrix of the choices that make it; drawn from ``specification_curve.json`` only."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from uaprobe.publishing.plotting import OKABE_ITO, R_LABEL, arr, model_title, new_figure, style, zero_line
from uaprobe.schema.specs import SpecificationCurve

ROWS: tuple[tuple[str, str], ...] = (("pooling", "pooling"), ("policy", "position 0"),
                                     ("representation", "representation"), ("nll", "NLL"),
                                     ("left_out", "left out"))
"""The choice columns drawn as dot rows, top to bottom, and their labels."""
MAX_COLUMNS = 240
"""At most this many columns in the choice matrix: with more specifications each column is a run of
adjacent specifications, and its bar's height the share of them that take the option."""


def _p_text(p: float | None) -> str:
    return "undefined" if p is None else f"{p:.3f}"


def specification_curve_figure(doc: SpecificationCurve) -> Figure:
    """Top: r of every specification, sorted, coloured by the sign of r, with the median; bottom:
    one row per option of each choice marking the specifications that take it (a full-height mark;
    beyond :data:`MAX_COLUMNS` specifications a bar as high as the share of a run of adjacent ones),
    and a strip of each specification's layer. The joint permutation p of the median r and of the share r > 0 are in the title."""
    s = doc.specs
    r = arr(s.r)
    n = len(r)
    x = np.arange(n)
    options = [(col, label, opt) for col, label in ROWS for opt in getattr(doc.choices, col)]
    joint = doc.joint["all"]
    with style():
        fig = new_figure(9.0, 7.2)
        # fixed margins rather than the constrained layout: its iterations moved the axes by rounding
        # amounts between two draws of ~10^4 artists, and with them the SVG's clip-path ids
        fig.set_layout_engine("none")
        grid = fig.add_gridspec(3, 1, height_ratios=[2.2, 2.6, 0.18], hspace=0.08, left=0.24, right=0.98,
                                top=0.91, bottom=0.07)
        ax = fig.add_subplot(grid[0])
        # one line per sign (one SVG path each, whatever the number of specifications)
        ax.plot(x, np.where(r > 0, r, np.nan), color=OKABE_ITO[0], linewidth=1.6, label="r > 0")
        ax.plot(x, np.where(r > 0, np.nan, r), color=OKABE_ITO[1], linewidth=1.6, label="r <= 0")
        if joint.median_r is not None:
            ax.axhline(joint.median_r, color=OKABE_ITO[7], linewidth=1.0, linestyle="--",
                       label=f"median r = {joint.median_r:.2f}")
            ax.legend(loc="upper left", frameon=False)
        zero_line(ax)
        ax.set_ylim(-1.05, 1.05)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_xticklabels([])
        ax.set_ylabel(R_LABEL)
        share = "undefined" if joint.share_positive is None else f"{joint.share_positive:.2f}"
        ax.set_title(f"{model_title(doc)}: specification curve, {doc.n_specs} specifications\n"
                     f"joint exact permutation p ({doc.relabellings} relabellings): median r p = "
                     f"{_p_text(joint.median_p)}, share r > 0 = {share} p = {_p_text(joint.share_p)}")
        dots = fig.add_subplot(grid[1], sharex=ax)
        edges = np.linspace(0, n, min(n, MAX_COLUMNS) + 1).round().astype(int)
        for row, (col, _, opt) in enumerate(options):
            taken = np.array([v == opt for v in getattr(s, col)], dtype=float)
            share = np.array([taken[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
            group = [c for c, _ in ROWS].index(col)
            dots.bar(edges[:-1] - 0.5, 0.8 * share, width=np.diff(edges), bottom=row - 0.4, align="edge",
                     color=OKABE_ITO[group % 7], linewidth=0)
        dots.set_yticks(range(len(options)))
        dots.set_yticklabels([f"{label}: {'none' if opt is None else str(opt).replace('_', ' ')}"
                              for _, label, opt in options], fontsize=6.5)
        dots.set_ylim(len(options) - 0.5, -0.5)
        dots.set_ylabel("choices (bar: share of the specifications)", fontsize=7)
        dots.grid(False)
        dots.get_xaxis().set_visible(False)
        strip = fig.add_subplot(grid[2], sharex=ax)
        n_layers = doc.n_layers
        norm = Normalize(0, max(n_layers, 1))
        layer = np.array(s.layer, dtype=float)
        mean_layer = np.array([layer[i:j].mean() for i, j in zip(edges[:-1], edges[1:])])
        strip.pcolormesh(edges - 0.5, [0, 1], mean_layer[None, :], cmap=colormaps["viridis"], norm=norm)
        strip.set_yticks([0.5])
        strip.set_yticklabels([f"layer (mean): dark 0 .. light {n_layers}"], fontsize=6.5)
        strip.grid(False)
        strip.set_xlabel("specifications, sorted by r")
    return fig
