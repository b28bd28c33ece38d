"""Figures of the geometry of the hidden states, drawn from the results files only (see
``docs/results.md``): the anisotropy profile and the covariance spectrum at key layers (seed 004), and
the attention sink (position 0 against the other tokens).

One function per figure: it takes the typed results documents and returns a
:class:`matplotlib.figure.Figure`; it reads no file, touches no global matplotlib state (no
``pyplot``; style through :func:`uaprobe.publishing.figures.plotting.style`) and is deterministic. What the
figures share (palette, layer axis, labels, writing) is :mod:`uaprobe.publishing.figures.plotting`; which figure
is drawn from which results files is :mod:`uaprobe.publishing.figures.figure_registry`.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from uaprobe.publishing.figures.plotting import LINESTYLES, MARKERS, OKABE_ITO, arr, layer_axis, new_figure, style, model_title
from uaprobe.schema.geometry import Anisotropy, Robustness

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
    "sink_figure",
    "spectrum_figure",
    "spectrum_key_layers",
]
