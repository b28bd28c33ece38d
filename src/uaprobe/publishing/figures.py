"""Figures of the paper, drawn from the results files only (see ``docs/results.md``).

One function per figure: it takes the typed results documents and returns a
:class:`matplotlib.figure.Figure`; it reads no file, touches no global matplotlib state (no
``pyplot``; style through :func:`uaprobe.publishing.plotting.style`) and is deterministic. What the
figures share (palette, layer axis, labels, writing) is :mod:`uaprobe.publishing.plotting`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from uaprobe.names import POOLINGS
from uaprobe.publishing.plotting import (DEPTH_LABEL, LAYER_LABEL, LINESTYLES, MARKERS, OKABE_ITO, POOLING_STYLE,
                                         R_LABEL, arr, layer_axis, new_figure, pick, place_point_labels, style, model_title,
                                         zero_line)
from uaprobe.schema.categories import Bins, Layerwise, LayerwisePooling, Validation
from uaprobe.schema.geometry import Anisotropy, Robustness
from uaprobe.schema.pairs import Pairs
from uaprobe.schema.panel import Panel

# --------------------------------------------------------------------------------------------
# Seed 000: layer-wise correlation and pooling strategies
# --------------------------------------------------------------------------------------------


def layerwise_figure(layerwise: Layerwise, *, pooling: str = "mean",
                     sink_excluded: Layerwise | None = None) -> Figure:
    """Seed 000: r(UA, preference) per layer with the range of r when one category is left out and the
    sign changes ("divergence"), the same curve with the attention sink excluded, and stars where the
    exact permutation test survives Holm's correction; beside it the final-layer r of every pooling (and
    of the pre-final-norm state) with the range of r when one category is left out. At six categories
    neither a Fisher-z interval nor a bootstrap over the categories has coverage: the leave-one-out
    range shows how far one category moves r, and claims no coverage.
    """
    block: LayerwisePooling = pick(layerwise.poolings, pooling, where="poolings", of=layerwise.model)
    layers = arr(layerwise.layers)
    r = arr(block.pearson_r)
    low, high = loco_bounds(block.loco_r)
    policy = layerwise.policy
    with style():
        fig = new_figure(9.0, 3.6)
        ax_curve, ax_bars = fig.subplots(1, 2, width_ratios=(1.7, 1.0))
        st = POOLING_STYLE.get(pooling, POOLING_STYLE["mean"])
        ax_curve.fill_between(layers, low, high, color=st["color"], alpha=0.18, linewidth=0,
                              label="range with one category left out")
        ax_curve.plot(layers, r, color=st["color"], marker=st["marker"], label=f"r, {pooling}, {policy}")
        if sink_excluded is not None:
            sx = arr(pick(sink_excluded.poolings, pooling, where="poolings", of=sink_excluded.model).pearson_r)
            ax_curve.plot(layers, sx, color=OKABE_ITO[4], marker="D", markersize=3, linestyle="--",
                          label=f"r, {pooling}, sink excluded")
        holm = np.array([bool(x) for x in block.permutation_holm_reject] or [False] * len(r))
        if holm.any():
            ax_curve.plot(layers[holm], r[holm], linestyle="none", marker="*", markersize=9,
                          color=OKABE_ITO[7], label="exact permutation p, Holm < alpha")
        for i, change in enumerate(block.sign_changes):
            x = (float(change.layer_before) + float(change.layer_after)) / 2.0
            ax_curve.axvline(x, color=OKABE_ITO[1], linestyle=":", linewidth=1.3,
                             label="sign change (divergence)" if i == 0 else None)
        zero_line(ax_curve)
        layer_axis(ax_curve, layers)
        ax_curve.set_ylabel(R_LABEL)
        ax_curve.set_ylim(-1.05, 1.05)
        ax_curve.set_title("Correlation by layer")
        ax_curve.legend(loc="best")

        names: list[str] = []
        values: list[float] = []
        ranges: list[tuple[float, float]] = []
        colors: list[str] = []
        hatches: list[str] = []
        final_index = int(np.nanargmax(layers)) if layers.size else -1
        for name in POOLINGS:
            if name not in layerwise.poolings:
                continue
            pb = layerwise.poolings[name]
            final_low, final_high = loco_bounds(pb.loco_r)
            pre_low, pre_high = loco_bounds([pb.prenorm.loco_r])
            for label, value, lo, hi, hatch in (
                (name, arr(pb.pearson_r)[final_index], final_low[final_index], final_high[final_index], ""),
                (f"{name}\npre-norm", _nan(pb.prenorm.pearson_r), pre_low[0], pre_high[0], "//"),
            ):
                names.append(label)
                values.append(value)
                ranges.append((lo, hi))
                colors.append(POOLING_STYLE[name]["color"])
                hatches.append(hatch)
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
            ax_bars.annotate(text, (x[i], float(np.clip(tip, -1.0, 1.0))), xytext=(0, 3 if up else -9),
                             textcoords="offset points", ha="center", fontsize=7)
        ax_bars.vlines(x, span[:, 0], span[:, 1], color=OKABE_ITO[7], linewidth=0.8,
                       label="range with one category left out")
        ax_bars.plot(np.repeat(x, 2), span.ravel(), linestyle="none", marker="_", color=OKABE_ITO[7], markersize=5)
        zero_line(ax_bars)
        ax_bars.set_xticks(x, names, fontsize=7)
        ax_bars.set_ylim(-1.2, 1.2)
        ax_bars.set_ylabel(R_LABEL)
        ax_bars.set_title(f"Pooling strategy, final layer ({int(layers[final_index]) if layers.size else '?'})")
        fig.suptitle(model_title(layerwise))
    return fig


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
                      "linestyle": LINESTYLES[i % len(LINESTYLES)], "label": entry.display}
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
        labelled = [(row.category.replace("_", " "), x, y) for row, x, y in zip(table, ua, pref)
                    if not (math.isnan(x) or math.isnan(y))]
        if reference:
            for i, (name, (ref_ua, ref_pref)) in enumerate(reference.items()):
                # hollow and above the categories: a category at the same place shows through
                ax.scatter([ref_ua], [ref_pref], marker=MARKERS[(i + 2) % len(MARKERS)], s=64,
                           facecolors="none", edgecolors=OKABE_ITO[(i + 1) % 7], linewidths=1.6, zorder=6,
                           label=f"{name} (published{', ' + reference_category.replace('_', ' ') if reference_category else ''})")
        zero_line(ax, axis="y")
        zero_line(ax, axis="x")
        ax.set_xlabel("UA = U(A) \u2212 U(B) (difference of mean cosine similarities, unitless)")
        ax.set_ylabel(f"mean preference NLL(B) \u2212 NLL(A) ({preference_unit})")
        layer = validation.layer
        ax.set_title(f"{model_title(validation)}: UA vs output preference, layer {layer} ({variant} pooling)")
        ax.legend(loc="best", fontsize=7)
        place_point_labels(ax, labelled, fontsize=7)
    return fig


# --------------------------------------------------------------------------------------------
# Seed 004: anisotropy
# --------------------------------------------------------------------------------------------


def anisotropy_figure(anisotropy: Anisotropy) -> Figure:
    """Seed 004: the anisotropy profile (λ1/Σλ, effective rank, mean cosine to the mean state,
    eigenvalue variance) per layer, with L* = argmax λ1/Σλ marked."""
    layers = arr(anisotropy.layers)
    l_star = anisotropy.l_star
    panels = (
        ("lambda1_ratio", r"$\lambda_1/\Sigma\lambda$ (share of variance, unitless)", "Variance in the first component", False),
        ("effective_rank", "effective rank (dimensions)", "Effective rank (lower = more anisotropic)", False),
        ("mean_cos_to_mean", "mean cosine to the mean state (unitless)", "Directional anisotropy", False),
        ("eigenvalue_variance", r"Var($\lambda$) (squared activation variance, log scale)", "Eigenvalue variance", True),
    )
    with style():
        fig = new_figure(9.0, 6.4)
        axes = fig.subplots(2, 2, sharex=True)
        for ax, (key, ylabel, title, log), color, marker in zip(axes.flat, panels, OKABE_ITO, MARKERS):
            values = arr(getattr(anisotropy, key))
            ax.plot(layers, values, color=color, marker=marker)
            if log:
                positive = values[np.isfinite(values) & (values > 0)]
                if positive.size:
                    ax.set_yscale("log")
            if l_star is not None:
                ax.axvline(float(l_star), color=OKABE_ITO[1], linestyle="--", linewidth=1.2,
                           label=f"L* = {int(l_star)}")
                ax.legend(loc="best")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
        for ax in axes[1]:
            layer_axis(ax, layers)
        fig.suptitle(f"{model_title(anisotropy)}: anisotropy profile ({anisotropy.n_tokens} token "
                     f"states of {anisotropy.n_prompts} prompts, {anisotropy.token_selection} tokens)")
    return fig


def spectrum_key_layers(n_layers: int, l_star: int | None) -> list[int]:
    """Seed 004's key layers: 0, L*/2, L*, (L* + L)/2 and L (duplicates dropped, in order)."""
    star = n_layers // 2 if l_star is None else int(l_star)
    layers = [0, star // 2, star, (star + n_layers) // 2, n_layers]
    return sorted(set(layers))


def spectrum_figure(anisotropy: Anisotropy) -> Figure:
    """Seed 004: the leading covariance eigenvalues at key layers, as shares of the total variance."""
    spectrum = anisotropy.spectrum
    top1 = arr(anisotropy.var_top1)
    l_star = anisotropy.l_star
    key_layers = spectrum_key_layers(anisotropy.n_layers, l_star)
    with style():
        fig = new_figure(6.4, 4.2)
        ax = fig.subplots()
        for i, layer in enumerate(key_layers):
            eig = arr(spectrum[layer])
            if eig.size == 0 or not np.isfinite(eig[0]) or eig[0] <= 0:
                continue
            # lambda_1 / sum(lambda) is var_top1: rescale so each value is a share of the total.
            share = eig * (top1[layer] / eig[0])
            star = " (L*)" if layer == l_star else ""
            ax.semilogy(np.arange(1, eig.size + 1), share, color=OKABE_ITO[i % 7],
                        linestyle=LINESTYLES[i % len(LINESTYLES)], label=f"layer {layer}{star}")
        ax.set_xlabel("eigenvalue rank (1 = largest)")
        ax.set_ylabel(r"$\lambda_i/\Sigma\lambda$ (share of total variance, log scale)")
        ax.set_title(f"{model_title(anisotropy)}: covariance spectrum at key layers "
                     f"(top {anisotropy.spectrum_top})")
        ax.legend(loc="best")
    return fig


# --------------------------------------------------------------------------------------------
# Added analyses: pair level, leave one category out
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
                     + (f"\n(n = {n_pairs} pairs; bands: bootstrap CI)" if n_pairs else ""))
        ax.legend(loc="best")
    return fig


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
                    label=f"without {category.replace('_', ' ')}")
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


# --------------------------------------------------------------------------------------------
# The attention sink
# --------------------------------------------------------------------------------------------


def sink_figure(robustness: Robustness) -> Figure:
    """Position 0 against the other tokens, per layer: its norm over the median norm of the other
    tokens (median and 10-90 % band over the statements, log scale), its share of the mean over all
    positions, and the share of its squared norm in its largest dimension."""
    sk = robustness.sink
    layers = arr(sk.layers)
    bos = robustness.extraction.bos_added
    what = "the BOS token" if bos else "the first word (no BOS)"
    with style():
        fig = new_figure(9.0, 3.9)
        ax_ratio, ax_share = fig.subplots(1, 2)
        ax_ratio.fill_between(layers, arr(sk.norm_ratio_q10), arr(sk.norm_ratio_q90), color=OKABE_ITO[0],
                              alpha=0.18, linewidth=0, label="10-90 % of statements")
        ax_ratio.plot(layers, arr(sk.norm_ratio_median), color=OKABE_ITO[0], marker="o", label="median")
        ax_ratio.axhline(1.0, color="black", linewidth=0.8)
        ax_ratio.set_yscale("log")
        layer_axis(ax_ratio, layers)
        ax_ratio.set_ylabel(r"$\|h_0\|$ / median $\|h_t\|$, $t > 0$")
        ax_ratio.set_title(f"Position 0 = {what}")
        # below the axes, as in every panel of this figure: the curves span the whole height by layer
        ax_ratio.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, fontsize=7.5, frameon=False)
        ax_share.plot(layers, arr(sk.mean_share_median), color=OKABE_ITO[1], marker="s",
                      label="share of the mean-pooled vector")
        ax_share.plot(layers, arr(sk.top_dim_share_median), color=OKABE_ITO[2], marker="^", linestyle="--",
                      label="share of its norm² in its top dimension")
        layer_axis(ax_share, layers)
        ax_share.set_ylim(-0.05, 1.05)
        ax_share.set_ylabel("median over statements (fraction)")
        modes = sorted(set(sk.top_dim_mode))
        ax_share.set_title("Dominance of position 0")
        ax_share.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=1, fontsize=7.5, frameon=False)
        fig.suptitle(f"{model_title(robustness)}: top dimension{'s' if len(modes) > 1 else ''} "
                     f"{', '.join(map(str, modes[:4]))}{' ...' if len(modes) > 4 else ''}")
    return fig


__all__ = [
    "anisotropy_figure",
    "bins_figure",
    "layerwise_figure",
    "loco_figure",
    "pairs_figure",
    "scaling_figure",
    "sink_figure",
    "spectrum_figure",
    "spectrum_key_layers",
    "validation_figure",
]
