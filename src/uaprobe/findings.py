"""The findings of the paper, as values and short phrases drawn from ``robustness.json`` and its peers.

Each value is read by its results file and key path (:func:`value`), so a sentence of the
manuscript names where its number comes from. What is conditional on the data (a sign, a
reversal, whether a baseline matches the model, whether anything is significant) is a phrase
returned by a small function here, tested on its own; the sentences around them live in
``paper/paper.qmd``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from uaprobe.manuscript import (
    L_STAR,
    Outputs,
    fmt,
    fmt_ci,
    fmt_int,
    fmt_p,
    fmt_r,
    join_words,
    markdown_table,
    pretty,
)

MATCH_TOLERANCE = 0.05
"""Two correlations closer than this count as "comparable" in the text."""
PUBLISHED_PYTHIA_FINAL_R = -0.87
"""The original study's category-level r at the last layer of Pythia-6.9B (mean pooling, position 0
dropped, float16), from its published summary (``FINDINGS_SUMMARY.md``; D'Elia 2025)."""


def value(out: Outputs, model: str, stem: str, path: str) -> Any:
    """The value at ``path`` (slash-separated keys and list indices) of ``results/models/<model>/<stem>.json``."""
    node: Any = out.results[model][stem]
    for key in path.split("/"):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def per_model(out: Outputs, stem: str, path: str, fmt_value: Callable[[Any], str] = fmt_r) -> str:
    """``x (Model A) and y (Model B)``: one value of every model of the panel."""
    return join_words([f"{fmt_value(value(out, m, stem, path))} ({out.display(m)})" for m in out.models])


# ------------------------------------------------------------------------------------------------
# Phrases: each returns a few words whose choice depends on the numbers


def count_phrase(n: int, noun: str, plural: str | None = None) -> str:
    """``no layer``, ``1 layer``, ``3 layers``."""
    if n == 0:
        return f"no {noun}"
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def sign_word(r: float | None) -> str:
    if r is None:
        return "undefined"
    return "positive" if r > 0 else "negative" if r < 0 else "zero"


def change_phrase(before: float | None, after: float | None) -> str:
    """How r changes: ``reverses its sign (+0.97 to −0.24)`` or ``moves from +0.97 to +0.80``."""
    if before is None or after is None:
        return "cannot be compared (an r is undefined)"
    if before * after < 0:
        return f"reverses its sign ({fmt_r(before)} to {fmt_r(after)})"
    return f"moves from {fmt_r(before)} to {fmt_r(after)}"


def comparison_phrase(baseline: float | None, model: float | None, *, tolerance: float = MATCH_TOLERANCE) -> str:
    """How a baseline's r compares with the model's: ``exceeds``, ``matches`` or ``falls short of``."""
    if baseline is None or model is None:
        return "cannot be compared with"
    if abs(baseline - model) <= tolerance:
        return "matches"
    return "exceeds" if baseline > model else "falls short of"


# ------------------------------------------------------------------------------------------------
# Panel-wide findings


def _rob(out: Outputs, m: str) -> dict[str, Any]:
    return out.results[m]["robustness"]


def sink_excluded_sign_changes(out: Outputs) -> str:
    """Per model: sign changes of the layer curve with the sink excluded."""
    return join_words([f"{count_phrase(_rob(out, m)['policies']['sink_excluded']['n_sign_changes'], 'sign change')} "
                       f"({out.display(m)})" for m in out.models])


def reversing_models(out: Outputs) -> list[str]:
    """Models whose last-layer r reverses its sign without their most influential category."""
    return [out.display(m) for m in out.models if _rob(out, m)["loco"].get("sign_reversed")]


def loco_phrase(out: Outputs) -> str:
    """Per model: the most influential category and r with and without it."""
    parts = []
    for m in out.models:
        loco = _rob(out, m)["loco"]
        if loco.get("most_influential") is None:
            parts.append(f"no category can be singled out ({out.display(m)})")
            continue
        before, after = loco["final_r_with"], loco["final_r_without"]
        reversal = before is not None and after is not None and before * after < 0
        parts.append(f"{pretty(loco['most_influential'])} for {out.display(m)}, {fmt_r(before)} to {fmt_r(after)}"
                     f"{', a reversal of sign' if reversal else ''}")
    return "; ".join(parts)


def sink_verdict(out: Outputs) -> str:
    """What excluding position 0 changes: the layers whose sign flips, and L* of the anisotropy profile."""
    flips, moves = [], []
    for m in out.models:
        pol = _rob(out, m)["policies"]
        d, sx = pol["default"]["r"], pol["sink_excluded"]["r"]
        n = sum(1 for a, b in zip(d, sx) if a is not None and b is not None and a * b < 0)
        if n:
            flips.append(f"{count_phrase(n, 'layer')} of {out.display(m)}")
        v = out.results[m]["anisotropy"].get("variants") or {}
        a, b = (v.get("all_tokens") or {}).get("l_star"), (v.get("sink_excluded") or {}).get("l_star")
        if a is not None and b is not None and a != b:
            moves.append(f"from layer {a} to layer {b} for {out.display(m)}")
    text = (f"Excluding position 0 reverses the sign of r at {join_words(flips)}: there, a pooling that keeps "
            "the sink measures the sink" if flips else "Excluding position 0 reverses the sign of r at no layer")
    text += (f"; and {L_STAR} of the anisotropy profile moves {join_words(moves)} when position 0 of every prompt "
             "is left out." if moves else f"; {L_STAR} of the anisotropy profile does not move when position 0 is left out.")
    return text


def null_phrase(out: Outputs) -> str:
    """Per model: the size-matched null's p at the last layer."""
    return join_words([f"p = {fmt_p(_rob(out, m)['policies']['default']['size_matched_null_p'][-1])} "
                       f"({out.display(m)})" for m in out.models])


def lexical_matches_or_beats(out: Outputs) -> list[str]:
    """Models whose lexical baseline reaches (within the tolerance) or exceeds their own last-layer r."""
    names = []
    for m in out.models:
        rob = _rob(out, m)
        lex, own = rob["lexical_baseline"]["final_r"]["mean"], rob["policies"]["default"]["final_r"]
        if comparison_phrase(lex, own) in ("matches", "exceeds"):
            names.append(out.display(m))
    return names


def lexical_phrase(out: Outputs) -> str:
    """Per model: the lexical baseline's r against the model's."""
    parts = []
    for m in out.models:
        rob = _rob(out, m)
        lex = rob["lexical_baseline"]["final_r"]
        own = rob["policies"]["default"]["final_r"]
        parts.append(f"{fmt_r(lex['mean'])} (range {fmt_r(lex['min'])} to {fmt_r(lex['max'])}) for the tokens of "
                     f"{out.display(m)}, which {comparison_phrase(lex['mean'], own)} the model's own {fmt_r(own)}")
    return "; ".join(parts)


def significant_layers(out: Outputs, policy: str = "default") -> list[int]:
    """Per model: layers whose exact permutation p survives Holm's correction."""
    return [int(_rob(out, m)["policies"][policy]["n_layers_permutation_holm"]) for m in out.models]


def significance_phrase(out: Outputs, policy: str = "default") -> str:
    """``no layer of any model`` or per model counts, for Holm-corrected exact permutation tests."""
    counts = significant_layers(out, policy)
    if not any(counts):
        return "no layer of any model"
    return join_words([f"{count_phrase(n, 'layer')} of {out.display(m)}" for m, n in zip(out.models, counts)])


def parametric_layers_phrase(out: Outputs) -> str:
    """Per model: layers that the parametric t-test with Holm's correction would have called significant."""
    return join_words([f"{_rob(out, m)['inference']['n_layers_parametric_holm']} of "
                       f"{out.results[m]['layerwise']['n_layers'] + 1} ({out.display(m)})" for m in out.models])


# ------------------------------------------------------------------------------------------------
# Tables


def robustness_table(out: Outputs) -> str:
    """Per model, the last-layer r (mean pooling) under each policy and each control."""
    rows: list[list[str]] = []
    for m in out.models:
        rob = _rob(out, m)
        pol, length, loco, lex = rob["policies"], rob["length"], rob["loco"], rob["lexical_baseline"]
        name = out.display(m)
        d, sx = pol["default"], pol["sink_excluded"]
        without = pretty(loco.get("most_influential") or "n/a")
        rows += [
            [name, f"categories, `{d['policy']}` policy (headline)", fmt_r(d["final_r"]),
             f"exact perm. p {fmt_p(d['final_permutation_p'])}; Spearman {fmt_r(d['final_spearman'])}"],
            [name, "categories, sink excluded", fmt_r(sx["final_r"]),
             f"exact perm. p {fmt_p(sx['final_permutation_p'])}; {sx['n_sign_changes']} sign changes"],
            [name, f"categories, without {without}", fmt_r(loco.get("final_r_without")),
             "most influential category, found from the data"],
            [name, f"categories, sink excluded, without {without}", fmt_r(loco.get("sink_excluded_final_r_without")),
             ""],
            [name, "categories, summed NLL", fmt_r(rob["preference"]["final_r_sum_nll"]),
             f"headline uses the {rob['preference']['selected']} NLL"],
            [name, "size-matched null", fmt_r(d["final_r"]),
             f"p {fmt_p(d['size_matched_null_p'][-1])}; null 95 %: "
             f"{fmt_ci(d['null_r_q025'][-1], d['null_r_q975'][-1])}"],
            [name, "lexical baseline, categories", fmt_r(lex["final_r"]["mean"]),
             f"range {fmt_ci(lex['final_r']['min'], lex['final_r']['max'])} over {len(lex['seeds'])} seeds"],
            [name, "pairs (per-category centroid score)", fmt_r(length["pair_r"]),
             f"r(token difference, preference) {fmt_r(length['pair_r_tokens_preference'])}"],
            [name, "pairs, token difference partialled out", fmt_r(length["pair_r_partial"]),
             f"p {fmt_p(length['pair_r_partial_p'])} (t-test)"],
            [name, "pairs, token difference and category partialled out", fmt_r(length["pair_r_partial_category_fe"]),
             f"p {fmt_p(length['pair_r_partial_category_fe_p'])} (t-test)"],
            [name, "pairs, lexical baseline", fmt_r(lex["pair_r"]["mean"]),
             f"range {fmt_ci(lex['pair_r']['min'], lex['pair_r']['max'])}"],
        ]
    return markdown_table(["Model", "check (last layer, mean pooling)", "r", "notes"], rows, align="llrl")


def inference_table(out: Outputs) -> str:
    """Per model: layers significant under each procedure, and the category bootstrap's degeneracy."""
    rows = []
    for m in out.models:
        rob = _rob(out, m)
        inf, pol = rob["inference"], rob["policies"]
        n = out.results[m]["layerwise"]["n_layers"] + 1
        rows.append([out.display(m), f"{pol['default']['n_layers_permutation_holm']} / {n}",
                     f"{pol['default']['n_layers_permutation_bh']} / {n}",
                     f"{pol['sink_excluded']['n_layers_permutation_holm']} / {n}",
                     f"{inf['n_layers_parametric_holm']} / {n}",
                     f"{fmt_int(inf['bootstrap_degenerate'])} of {fmt_int(inf['bootstrap_resamples'])}"])
    return markdown_table(["Model", "perm. Holm", "perm. BH", "perm. Holm, no sink", "t-test Holm",
                           "degenerate bootstraps"], rows, align="lrrrrr")


def sink_table(out: Outputs) -> str:
    """Per model: what sits at position 0 and how much it dominates."""
    rows = []
    for m in out.models:
        sk = _rob(out, m)["sink"]
        bos = bool(out.results[m]["layerwise"].get("extraction", {}).get("bos_added"))
        peak = sk["max_norm_ratio_layer"]
        rows.append([out.display(m), "BOS" if bos else "first word", fmt(sk["max_norm_ratio"], 1),
                     fmt_int(peak), fmt(sk["mean_share_median"][peak], 2), fmt_int(sk["top_dim_mode"][peak]),
                     fmt(sk["top_dim_share_median"][peak], 2)])
    return markdown_table(["Model", "position 0", "max. median norm ratio", "at layer", "share of the mean",
                           "top dimension", "its share of the norm²"], rows, align="llrrrrr")


def published_comparison(out: Outputs) -> str:
    """The original study's Pythia-6.9B final-layer r beside this panel's, under both policies."""
    return (f"{fmt_r(PUBLISHED_PYTHIA_FINAL_R)} for Pythia-6.9B, against "
            f"{per_model(out, 'robustness', 'policies/default/final_r')} here (sink excluded: "
            f"{per_model(out, 'robustness', 'policies/sink_excluded/final_r')})")


__all__: Sequence[str] = (
    "value", "per_model", "count_phrase", "sign_word", "change_phrase", "comparison_phrase",
    "sink_excluded_sign_changes", "reversing_models", "loco_phrase", "lexical_matches_or_beats", "lexical_phrase",
    "significant_layers", "significance_phrase", "parametric_layers_phrase", "robustness_table", "sink_verdict",
    "null_phrase",
    "inference_table", "sink_table", "published_comparison", "conclusion_phrase",
)


def conclusion_phrase(out: Outputs) -> str:
    """What the data support, in one clause list: lexical or not, one category or not, significant or not."""
    names = [out.display(m) for m in out.models]
    lexical = lexical_matches_or_beats(out)
    reversed_ = reversing_models(out)
    significant = any(significant_layers(out))
    parts = []
    if lexical and len(lexical) == len(names):
        parts.append("the category-level correlation is reproduced by the statements' words alone, so it is a "
                     "lexical effect before it is a representational one")
    elif lexical:
        parts.append(f"for {join_words(lexical)} the category-level correlation is reproduced by the statements' "
                     "words alone")
    else:
        parts.append("the models' category-level correlation exceeds what the statements' words alone give")
    if reversed_:
        parts.append(f"its sign rests on a single category for {join_words(reversed_)}")
    parts.append("no layer of any model is significant under the exact permutation test with Holm's correction"
                 if not significant else
                 f"the exact permutation test with Holm's correction finds {significance_phrase(out)} significant")
    return "; ".join(parts)
