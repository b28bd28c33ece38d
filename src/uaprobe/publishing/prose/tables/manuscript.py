"""The manuscript's tables: pipe-table markdown whose every number is a sourced value.

Each builder reads its cells with :meth:`Outputs.v` / :meth:`Outputs.at`, so every number of every
table carries its file and key into the HTML and the appendix. The row labels (model names,
categories, the checks' names) are the table's structure, not values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uaprobe.escape import markdown_code
from uaprobe.publishing.prose.primitives.markdown import category, interval, markdown_table
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.provenance.values import Value
from uaprobe.schema.categories import Bins, Layerwise, Validation
from uaprobe.schema.geometry import Anisotropy, Robustness
from uaprobe.schema.panel import ModelCurve, ScalingSummary

L_STAR = "L&#42;"
"""L* (the layer of maximal λ1/Σλ) in markdown, written so that two of them never read as emphasis."""

NBSP = "\u00a0"


# ------------------------------------------------------------------------------------------------
# What the results hold: the position-0 policies, the poolings, the leave-one-category-out range


POLICY_FILES = {"default": "layerwise", "sink_excluded": "sink_excluded/layerwise"}
"""The layer-wise results of each position-0 policy (the policy of the rendering, and position 0 excluded)."""

POOLING_WORDS = {"mean": "mean", "first": "first-token", "last": "last-token"}


def poolings(out: Outputs, m: str) -> list[str]:
    """The poolings whose layer-wise results ``layerwise.json`` holds, mean, first and last first."""
    present = list(out.record(m, Layerwise).poolings)
    return [p for p in POOLING_WORDS if p in present] + sorted(p for p in present if p not in POOLING_WORDS)


def same_numbers(out: Outputs, m: str, pooling: str) -> bool:
    """Whether excluding position 0 gives, for this pooling, the default policy's layer curve value for value."""
    return (out.record(m, Layerwise, stem=POLICY_FILES["default"]).poolings[pooling].pearson_r
            == out.record(m, Layerwise, stem=POLICY_FILES["sink_excluded"]).poolings[pooling].pearson_r)


def same_pooling_models(out: Outputs) -> list[str]:
    """Models for which excluding position 0 changes no number: every pooling's layer curve with position 0
    excluded is the default policy's, value for value (as for a BOS that no pooled state includes)."""
    return [m for m in out.models if all(same_numbers(out, m, p) for p in poolings(out, m))]


def loco_range(out: Outputs, m: str, layer: int, pooling: str = "mean", stem: str = "layerwise") -> tuple[Value, Value] | None:
    """The smallest and the largest r at ``layer`` with one category left out (``poolings/<pooling>/loco_r``
    holds one row per layer, one value per category left out), or None when none is defined."""
    row = out.record(m, Layerwise, stem=stem).poolings[pooling].loco_r[layer]
    finite = [(x, i) for i, x in enumerate(row or []) if x is not None]
    if not finite:
        return None
    (_, lo), (_, hi) = min(finite), max(finite)
    read = out.reader(m, Layerwise, stem=stem)
    return (read(lambda r: r.poolings[pooling].loco_r[layer][lo]),
            read(lambda r: r.poolings[pooling].loco_r[layer][hi]))


# ------------------------------------------------------------------------------------------------
# Methods


def model_panel_table(out: Outputs) -> str:
    """The panel: each model's source, location and pinned revision or file, size, depth, dtype and BOS (its id in
    params.yaml is on the provenance page, with every value)."""
    rows = []
    for m in out.models:
        spec = out.params.model(m)
        pinned = "revision" if spec.revision else "gguf_file" if spec.gguf_file else None
        weights = f"{spec.source} {markdown_code(spec.location)}" + (
            f", {markdown_code(getattr(spec, pinned))}" if pinned else "")
        rows.append([out.full_name(m), weights, out.at("params.yaml", f"catalog/{m}/params_millions", "int"),
                     *(out.value(m, Layerwise, get, fmt) for get, fmt in (
                         (lambda r: r.n_layers, "int"), (lambda r: r.extraction.dtype, "text"),
                         (lambda r: r.extraction.bos_added, "bool")))])
    return markdown_table(["Model", "weights: source, location, revision or file", "params (M)", "layers",
                           "dtype", "BOS"], rows, align="llrrlc")


# ------------------------------------------------------------------------------------------------
# Seeds 000-004


def loco_cell(out: Outputs, m: str, layer: int, pooling: str = "mean") -> str:
    """``[−0.24, +0.99]``: the smallest and largest r at ``layer`` with one category left out, or ``n/a``."""
    found = loco_range(out, m, layer, pooling)
    if found is None:
        return "n/a"
    return interval(*(Value(v.raw, "s2", v.source, v.ledger) for v in found))


SAME = "same"
"""A cell for a number that excluding position 0 leaves as it is (a BOS that no pooled state includes)."""


def layer_table(out: Outputs, pooling: str = "mean") -> str:
    """Seed 000: r at the seeds' layers with the range of r with one category left out (no Fisher-z
    interval: at six categories it would look precise and is not), Spearman, the exact permutation p and
    its corrections and the sink-excluded r (``same`` where excluding position 0
    changes no number of the model)."""
    rows = []
    for m in out.models:
        same = same_numbers(out, m, pooling)
        read = out.reader(m, Layerwise)
        for i, layer in enumerate(out.record(m, Layerwise).seed_layers):
            rows.append([out.display(m), read(lambda r: r.seed_layers[i], "int"),
                         read(lambda r: r.poolings[pooling].pearson_r[layer]), loco_cell(out, m, layer, pooling),
                         read(lambda r: r.poolings[pooling].spearman_rho[layer]),
                         read(lambda r: r.poolings[pooling].permutation_p[layer], "p"),
                         read(lambda r: r.poolings[pooling].permutation_holm_p[layer], "p"),
                         read(lambda r: r.poolings[pooling].permutation_bh_p[layer], "p"),
                         SAME if same else out.value(m, Layerwise, lambda r: r.poolings[pooling].pearson_r[layer],
                                                     stem="sink_excluded/layerwise")])
    header = ["Model", "layer", "r", "r, one category out", "Spearman", "perm. p", "Holm", "BH", "r, position 0 excl."]
    return markdown_table(header, rows)


def validation_table(out: Outputs, variant: str = "mean") -> str:
    """Seed 003: per model and category, U(A), U(B), UA, the preference, % preferring A, aligned."""
    rows = []
    for m in out.models:
        for i, row in enumerate(out.record(m, Validation).variants[variant].table):
            def v(key: str, fmt: str, i: int = i) -> Value:
                return out.value(m, Validation, lambda r: getattr(r.variants[variant].table[i], key), fmt)

            rows.append([out.display(m), category(row.category), v("n_pairs", "int"), v("u_a", "f3"), v("u_b", "f3"),
                         v("ua", "s4"), v("mean_preference", "s3"), v("pct_prefer_a", "f1"), v("aligned", "bool")])
    return markdown_table(["Model", "category", "pairs", "U(A)", "U(B)", "UA", "preference", "% A", "aligned"],
                          rows, align="llrrrrrrc")


def validation_summary_table(out: Outputs, variant: str = "mean") -> str:
    """Seed 003: the global statistics of every model."""
    rows = []
    for m in out.models:
        def v(key: str, fmt: str, m: str = m) -> Value:
            return out.value(m, Validation, lambda r: getattr(r.variants[variant].global_, key), fmt)

        rows.append([out.display(m), out.value(m, Validation, lambda r: r.layer, "int"), v("mean_ua", "s4"),
                     v("cohens_d", "s2"), v("r", "r"), v("label", "text"), v("mean_preference", "s3")])
    return markdown_table(["Model", "layer", "mean UA", "Cohen's d", "r", "label", "mean preference"], rows,
                          align="lrrrrcr")




def scaling_table(out: Outputs, pooling: str = "mean") -> str:
    """Seed 001: peaks, final r and sign changes of every model; the peak-depth summary last."""
    rows = []
    for m in out.models:
        def v(get: Callable[[ModelCurve], Any], fmt: str = "r", m: str = m) -> Value:
            return out.panel_value(lambda r: get(r.poolings[pooling].models[m]), fmt)

        rows.append([out.display(m), v(lambda c: c.params_millions, "int"), v(lambda c: c.n_layers, "int"),
                     v(lambda c: c.peak_positive.r),
                     f"{v(lambda c: c.peak_positive.layer, 'int')} ({v(lambda c: c.peak_positive.depth_pct, 'f0')}{NBSP}%)",
                     v(lambda c: c.peak_negative.r),
                     f"{v(lambda c: c.peak_negative.layer, 'int')} ({v(lambda c: c.peak_negative.depth_pct, 'f0')}{NBSP}%)",
                     v(lambda c: c.final_r), v(lambda c: c.sign_changes, "count")])

    def s(get: Callable[[ScalingSummary], Any]) -> Value:
        return out.panel_value(lambda r: get(r.poolings[pooling].summary), "f1")

    rows.append(["**across the panel**", "", "", "",
                 f"{s(lambda t: t.peak_positive_depth_mean)} ± {s(lambda t: t.peak_positive_depth_std)} %", "",
                 f"{s(lambda t: t.peak_negative_depth_mean)} ± {s(lambda t: t.peak_negative_depth_std)} %", "", ""])
    return markdown_table(["Model", "params (M)", "layers", "peak r", "at layer (depth)", "min r",
                           "at layer (depth)", "final r", "sign changes"], rows)


def bins_table(out: Outputs, pooling: str = "mean") -> str:
    """Seed 002: the distribution of the last-layer r over all random partitions, for every k and scheme."""
    rows = []
    for m in out.models:
        bins = out.record(m, Bins)
        last = bins.n_layers
        ks = [int(k) for k in bins.k]  # the bin counts run (`auto` chosen for the dataset)
        for scheme, data in bins.poolings[pooling].schemes.items():
            for k in sorted(data.by_k, key=int):
                def v(key: str, fmt: str, scheme: str = scheme, k: str = k) -> Value:
                    return out.value(m, Bins, lambda r: getattr(r.poolings[pooling].schemes[scheme].by_k[k], key)[last],
                                     fmt)

                shown_k = (out.value(m, Bins, lambda r: r.k[ks.index(int(k))], "int") if int(k) in ks else k)
                rows.append([out.display(m), scheme, shown_k, f"{v('r_mean', 'r')} ± {v('r_std', 'f2')}",
                             v("share_positive", "percent"), v("share_excludes_zero", "percent"), v("n_valid", "int")])
    return markdown_table(["Model", "scheme", "k", "r: mean ± sd", "% with r > 0", "% whose CI excludes 0",
                           "partitions"], rows, align="llrrrrr")


def _slope_cell(out: Outputs, m: str, side: str) -> str:
    slope = out.value(m, Anisotropy, lambda r: getattr(r.bell_curve, side).slope, "s4")
    p = out.value(m, Anisotropy, lambda r: getattr(r.bell_curve, side).p, "p") if slope.raw is not None else None
    return "n/a" if p is None else f"{slope} (p{NBSP}{p})"


def anisotropy_table(out: Outputs) -> str:
    """Seed 004: L* with its ties and bootstrap, the bell-curve slopes with their p-values, and L*
    with every token and with position 0 of every prompt excluded."""
    rows = []
    for m in out.models:
        read = out.reader(m, Anisotropy)
        rows.append([out.display(m), f"{read(lambda r: r.n_tokens, 'int')} {out.record(m, Anisotropy).token_selection}",
                     f"{read(lambda r: r.l_star, 'int')} ({read(lambda r: r.l_star_depth_pct, 'f0')}{NBSP}%)",
                     read(lambda r: r.l_star_ties, "layers"),
                     read(lambda r: r.l_star_bootstrap.share_in_ties, "percent"), _slope_cell(out, m, "before"),
                     _slope_cell(out, m, "after"),
                     f"{read(lambda r: r.bell_curve.is_bell_curve, 'bool')} / "
                     f"{read(lambda r: r.bell_curve.is_bell_curve_significant, 'bool')}",
                     read(lambda r: r.variants["all_tokens"].l_star, "int"),
                     read(lambda r: r.variants["sink_excluded"].l_star, "int")])
    return markdown_table(["Model", "token states", f"{L_STAR} (depth)", "ties", "% in ties", "slope before",
                           "slope after", "bell", f"{L_STAR}, all", f"{L_STAR}, excl."], rows,
                          align="lrrrrrrcrr")


# ------------------------------------------------------------------------------------------------
# The sink and the controls


def sink_table(out: Outputs) -> str:
    """Per model: what sits at position 0 and how much it dominates, at the layer where it peaks."""
    rows = []
    for m in out.models:
        peak = out.record(m, Robustness).sink.max_norm_ratio_layer
        read = out.reader(m, Robustness)
        bos = out.value(m, Layerwise, lambda r: r.extraction.bos_added, "bool")
        rows.append([out.display(m), f"{'BOS' if bos.raw else 'first word'} (BOS added: {bos})",
                     read(lambda r: r.sink.max_norm_ratio, "f1"), read(lambda r: r.sink.max_norm_ratio_layer, "int"),
                     read(lambda r: r.sink.mean_share_median[peak], "f2"),
                     read(lambda r: r.sink.top_dim_mode[peak], "int"),
                     read(lambda r: r.sink.top_dim_share_median[peak], "f2")])
    return markdown_table(["Model", "position 0", "norm ratio", "at layer",
                           "share of the mean (median)", "top dimension (mode)", "its share of the norm² (median)"],
                          rows, align="llrrrrr")






def length_category(out: Outputs, m: str) -> int | None:
    """Index of the category whose mean content-token difference (B − A) is largest in size."""
    diffs = out.record(m, Robustness).length.mean_token_difference or []
    finite = [(abs(d), i) for i, d in enumerate(diffs) if d is not None]
    return max(finite)[1] if finite else None


def other_range(out: Outputs, m: str, skip: int) -> tuple[Value, Value] | None:
    """The smallest and largest mean token difference of the other categories, as values."""
    diffs = out.record(m, Robustness).length.mean_token_difference
    others = [(d, i) for i, d in enumerate(diffs) if i != skip and d is not None]
    if not others:
        return None
    (_, lo), (_, hi) = min(others), max(others)
    read = out.reader(m, Robustness)
    return (read(lambda r: r.length.mean_token_difference[lo], "s1"),
            read(lambda r: r.length.mean_token_difference[hi], "s1"))


def confound_table(out: Outputs) -> str:
    """The length confound, one column per model: the category whose framings differ most in content
    tokens and by how much, the other categories' range, the most influential category, and the
    last-layer r (mean pooling) of the model and of the lexical baseline with and without it, with the
    summed NLL, and the category-level r of the token difference with UA and with the preference."""
    def row(label: str, cell: Callable[[str], Any]) -> list[Any]:
        return [label, *(cell(m) for m in out.models)]

    def longest(m: str) -> str:
        i = length_category(out, m)
        return "n/a" if i is None else category(out.record(m, Layerwise).categories[i])

    def diff(m: str) -> Any:
        i = length_category(out, m)
        return "n/a" if i is None else out.value(m, Robustness, lambda r: r.length.mean_token_difference[i], "s1")

    def others(m: str) -> str:
        i = length_category(out, m)
        rest = None if i is None else other_range(out, m, i)
        return "n/a" if rest is None else f"{rest[0]} to {rest[1]}"

    def rob(get: Callable[[Robustness], Any]) -> Callable[[str], Value]:
        return lambda m: out.value(m, Robustness, get)

    rows = [
        row("category whose B statements are longest relative to A", longest),
        row("its mean content-token difference, B − A", diff),
        row("the other categories' differences", others),
        row("most influential category (found by leaving each out)",
            lambda m: category(out.record(m, Robustness).loco.most_influential)),
        row("r(UA, preference), last layer, mean NLL", rob(lambda r: r.loco.final_r_with)),
        row("the same without the most influential category", rob(lambda r: r.loco.final_r_without)),
        row("lexical baseline r (mean over seeds)", rob(lambda r: r.lexical_baseline.final_r.mean)),
        row("lexical baseline r without that category (mean over seeds)",
            rob(lambda r: r.loco.lexical_final_r_without.mean)),
        row("r(UA, preference) with the summed NLL", rob(lambda r: r.preference.final_r_sum_nll)),
        row("r(token difference, UA) across categories", rob(lambda r: r.length.category_r_tokens_ua)),
        row("r(token difference, preference) across categories", rob(lambda r: r.length.category_r_tokens_preference)),
    ]
    return markdown_table(["", *(out.display(m) for m in out.models)], rows, align="l" + "r" * len(out.models))
