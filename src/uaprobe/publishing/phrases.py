"""The words of the paper that depend on its numbers: short phrases, each with its values sourced.

The sentences live in ``paper/paper.qmd``. What is conditional on the data (a sign, a reversal,
whether an interval excludes zero, whether a baseline matches the model, whether anything is
significant) is a phrase returned by a small function here, tested on its own. Every number in a
phrase is a :class:`~uaprobe.publishing.values.Value`, so it keeps its file and key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uaprobe.publishing.outputs import PUBLISHED_PYTHIA, Outputs
from uaprobe.publishing.tables import L_STAR, interval
from uaprobe.publishing.values import Value, pretty, prose

MATCH_TOLERANCE = 0.05
"""Two correlations closer than this count as "comparable" in the text."""


@prose
def join_words(items: Sequence[Any], conjunction: str = "and") -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


@prose
def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``noun`` or its plural, for ``n`` things."""
    return noun if n == 1 else (plural_form or noun + "s")


@prose
def count_phrase(n: Any, noun: str, plural_form: str | None = None) -> str:
    """``no layer``, ``1 layer``, ``3 layers`` (``n`` an int or a value holding one)."""
    k = int(n.raw if isinstance(n, Value) else n)
    return f"no {noun}" if k == 0 else f"{n} {plural(k, noun, plural_form)}"


@prose
def per_model(out: Outputs, stem: str, key: str, fmt: str = "r") -> str:
    """``x (Model A) and y (Model B)``: one value of every model of the panel; ``x for both models`` (or
    ``for every model``) when every model shows the same text."""
    values = [out.v(m, stem, key, fmt) for m in out.models]
    if len(values) > 1 and len({v.text for v in values}) == 1:
        return f"{values[0]} for {'both models' if len(values) == 2 else 'every model'}"
    return join_words([f"{v} ({out.display(m)})" for v, m in zip(values, out.models)])


@prose
def models(out: Outputs) -> str:
    return join_words([out.display(m) for m in out.models])


@prose
def sign_word(r: float | None) -> str:
    if r is None:
        return "undefined"
    return "positive" if r > 0 else "negative" if r < 0 else "zero"


@prose
def interval_phrase(low: Value, high: Value) -> str:
    """``[+0.10, +0.40], which excludes zero`` or ``…, which includes zero``."""
    if low.raw is None or high.raw is None:
        return "no interval (undefined)"
    verdict = "excludes" if low.raw > 0 or high.raw < 0 else "includes"
    return f"[{low}, {high}], which {verdict} zero"


@prose
def change_phrase(before: Value, after: Value) -> str:
    """How r changes: ``reverses its sign (+0.97 to −0.24)`` or ``moves from +0.97 to +0.80``."""
    if before.raw is None or after.raw is None:
        return "cannot be compared (an r is undefined)"
    if before.raw * after.raw < 0:
        return f"reverses its sign ({before} to {after})"
    return f"moves from {before} to {after}"


@prose
def comparison_word(baseline: float | None, model: float | None, *, tolerance: float = MATCH_TOLERANCE) -> str:
    """How a baseline's r compares with the model's: ``exceeds``, ``matches`` or ``falls short of``."""
    if baseline is None or model is None:
        return "cannot be compared with"
    if abs(baseline - model) <= tolerance:
        return "matches"
    return "exceeds" if baseline > model else "falls short of"


# ------------------------------------------------------------------------------------------------
# Per-model phrases of the results sections


@prose
def significance_word(p: Value, alpha: float) -> str:
    """``significant at α = 0.05`` or ``not significant at α = 0.05`` (``untested`` without a p)."""
    if p.raw is None:
        return "untested"
    return f"{'' if p.raw < alpha else 'not '}significant at α = {alpha:g}"


@prose
def last_layer_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model: the last-layer r with its exact permutation p (the test of record) and its verdict, and
    the Fisher-z interval beside it."""
    parts = []
    for m in out.models:
        last = out.raw(m, "layerwise", "n_layers")
        b = f"poolings/{pooling}"
        p = out.v(m, "layerwise", f"{b}/permutation_p/{last}", "p")
        alpha = float(out.raw(m, "layerwise", "settings/alpha"))
        parts.append(f"{out.v(m, 'layerwise', f'{b}/pearson_r/{last}')} for {out.display(m)} (exact permutation p = "
                     f"{p}, {significance_word(p, alpha)}; Fisher-z interval "
                     f"{interval(out.v(m, 'layerwise', f'{b}/fisher_ci_low/{last}', 's2'), out.v(m, 'layerwise', f'{b}/fisher_ci_high/{last}', 's2'))})")
    return "; ".join(parts)


@prose
def smallest_holm_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model: the smallest Holm-corrected exact permutation p over the layers, and its layer."""
    parts = []
    for m in out.models:
        key = f"poolings/{pooling}/permutation_holm_p"
        values = out.raw(m, "layerwise", key)
        finite = [(v, i) for i, v in enumerate(values) if v is not None]
        if not finite:
            parts.append(f"none ({out.display(m)})")
            continue
        smallest, i = min(finite)
        where = ("every layer" if len(finite) > 1 and all(v == smallest for v, _ in finite) else
                 f"layer {out.v(m, 'layerwise', f'layers/{i}', 'int')}")
        parts.append(f"{out.v(m, 'layerwise', f'{key}/{i}', 'p')} at {where} ({out.display(m)})")
    return join_words(parts)


@prose
def holm_layers_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model: how many layers' exact permutation p survive Holm's correction, of how many."""
    return join_words([f"{out.v(m, 'layerwise', f'poolings/{pooling}/permutation_holm_reject', 'count_true')} of "
                       f"{out.v(m, 'layerwise', 'layers', 'count')} layers for {out.display(m)}" for m in out.models])


@prose
def sign_changes_phrase(out: Outputs, stem: str = "layerwise", pooling: str = "mean") -> str:
    """Per model: how often the layer curve changes sign, and between which layers."""
    parts = []
    for m in out.models:
        changes = out.raw(m, stem, f"poolings/{pooling}/sign_changes")
        n = out.v(m, stem, f"poolings/{pooling}/sign_changes", "count")
        where = join_words([f"{out.v(m, stem, f'poolings/{pooling}/sign_changes/{i}/layer_before', 'int')}→"
                            f"{out.v(m, stem, f'poolings/{pooling}/sign_changes/{i}/layer_after', 'int')}"
                            for i in range(len(changes))])
        parts.append(f"{n} {plural(len(changes), 'time')} for {out.display(m)}" + (f" (layers {where})" if changes else ""))
    return "; ".join(parts)


@prose
def aligned_phrase(out: Outputs, variant: str = "mean") -> str:
    """Per model: how many categories are aligned, of how many."""
    parts = []
    for m in out.models:
        table = out.raw(m, "validation", f"variants/{variant}/table")
        aligned = sum(1 for row in table if row.get("aligned"))
        parts.append(f"{aligned} of {out.v(m, 'validation', f'variants/{variant}/table', 'count')} ({out.display(m)})")
    return join_words(parts)


@prose
def stability_phrase(out: Outputs, pooling: str = "mean") -> str:
    """The seed's verdict on the peak depths across the panel, as a sentence."""
    stable = out.raw_at("results/panel.json", f"poolings/{pooling}/summary/stable")
    if stable is None:
        return "The panel has too few models for the seed's stability criterion."
    threshold = out.at("results/panel.json", "stable_depth_std", "f0")
    verdict = (f"The seed's criterion, a standard deviation below {threshold} %, "
               f"{'calls' if stable else 'does not call'} the peak depth stable")
    if len(out.models) < 3:
        verdict += f"; {len(out.models)} {plural(len(out.models), 'model')} allow no claim about stability either way"
    return verdict + "."


@prose
def bell_phrase(out: Outputs) -> str:
    """Per model: whether the profile passes the seed's sign-only test and the test with significant slopes."""
    parts = []
    for m in out.models:
        seed = out.raw(m, "anisotropy", "bell_curve/is_bell_curve")
        sig = out.raw(m, "anisotropy", "bell_curve/is_bell_curve_significant")
        word = "passes" if seed else "fails" if seed is not None else "cannot be given"
        parts.append(f"{out.display(m)}'s profile {word} the sign-only test and {'passes' if sig else 'fails'} "
                     "the test with both slopes significant")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# Panel-wide findings


@prose
def sink_excluded_sign_changes(out: Outputs) -> str:
    """Per model: sign changes of the layer curve with the sink excluded."""
    return join_words([f"{count_phrase(out.v(m, 'robustness', 'policies/sink_excluded/n_sign_changes', 'int'), 'sign change')}"
                       f" ({out.display(m)})" for m in out.models])


def same_pooling_models(out: Outputs) -> list[str]:
    """Models whose layer curve with position 0 excluded is the default policy's, value for value."""
    return [m for m in out.models
            if out.raw(m, "robustness", "policies/default/r") == out.raw(m, "robustness", "policies/sink_excluded/r")]


@prose
def same_pooling_phrase(out: Outputs) -> str:
    """A sentence per model for which excluding position 0 changes nothing (a BOS the default policy
    already drops, when the extraction says one was added), or nothing."""
    sentences = []
    for m in same_pooling_models(out):
        why = ("position 0 is a BOS token that the default policy already drops, so "
               if out.raw(m, "layerwise", "extraction/bos_added") else "")
        sentences.append(f"For {out.display(m)}, {why}its layer curves and pooled statistics with the sink excluded are the default ones, value for "
                         "value: they are no separate check.")
    return " ".join(sentences)


@prose
def normalisation_phrase(out: Outputs) -> str:
    """A sentence: the last-layer r with the summed NLL as the preference, and whether the headline r
    depends on that choice (a change of sign, or a difference beyond :data:`MATCH_TOLERANCE`)."""
    moved = [out.display(m) for m in out.models
             if (a := out.raw(m, "robustness", "preference/final_r_mean_nll")) is not None
             and (b := out.raw(m, "robustness", "preference/final_r_sum_nll")) is not None
             and (a * b < 0 or abs(a - b) > MATCH_TOLERANCE)]
    text = (f"With the summed NLL as the preference instead of the per-token mean, the last-layer r is "
            f"{per_model(out, 'robustness', 'preference/final_r_sum_nll')}")
    if moved:
        return (text + f": for {join_words(moved)} the headline r depends on how the NLL is normalised for length, "
                "not on the models' states alone.")
    return text + ", close to the per-token r: the normalisation does not decide it."


@prose
def late_inversion_sink_phrase(out: Outputs, pooling: str = "mean") -> str:
    """A sentence per model whose Option B late-inversion verdict changes when position 0 is excluded."""
    ph = f"poolings/{pooling}/metrics/centroid_asymmetry/phases"
    sentences = []
    for m in out.models:
        default = out.raw(m, "option_b", f"{ph}/late_inversion")
        excluded = out.raw(m, "sink_excluded/option_b", f"{ph}/late_inversion")
        if default is None or excluded is None or default == excluded:
            continue
        late = f"{ph}/late"
        shown = (f"{out.v(m, 'sink_excluded/option_b', f'{late}/mean_r', 's2')} "
                 f"{interval(out.v(m, 'sink_excluded/option_b', f'{late}/bootstrap_ci_low', 's2'), out.v(m, 'sink_excluded/option_b', f'{late}/bootstrap_ci_high', 's2'))}")
        sentences.append(
            f"For {out.display(m)} the late inversion {'holds only while' if default else 'appears only when'} position 0 "
            f"is {'in' if default else 'out of'} the pooling: with it excluded, the late mean is {shown}"
            f"{', and there is no late inversion' if default else ''}.")
    return " ".join(sentences) if sentences else "No model's late-inversion verdict changes when position 0 is excluded."


def reversing_models(out: Outputs) -> list[str]:
    """Models whose last-layer r reverses its sign without their most influential category."""
    return [out.display(m) for m in out.models if out.raw(m, "robustness", "loco/sign_reversed")]


@prose
def loco_phrase(out: Outputs) -> str:
    """Per model: the most influential category and r with and without it."""
    parts = []
    for m in out.models:
        if out.raw(m, "robustness", "loco/most_influential") is None:
            parts.append(f"no category can be singled out ({out.display(m)})")
            continue
        before, after = out.v(m, "robustness", "loco/final_r_with"), out.v(m, "robustness", "loco/final_r_without")
        flips = before.raw is not None and after.raw is not None and before.raw * after.raw < 0
        parts.append(f"{pretty(out.raw(m, 'robustness', 'loco/most_influential'))} for {out.display(m)}, {before} with it "
                     f"and {after} without it{' (the sign changes)' if flips else ''}")
    return "; ".join(parts)


@prose
def sink_verdict(out: Outputs) -> str:
    """What excluding position 0 changes: the layers whose sign flips, and L* of the anisotropy profile."""
    flips, moves, dominated = [], [], True
    for m in out.models:
        d = out.raw(m, "robustness", "policies/default/r")
        sx = out.raw(m, "robustness", "policies/sink_excluded/r")
        share = out.raw(m, "robustness", "sink/mean_share_median")
        flipped = [i for i, (a, b) in enumerate(zip(d, sx)) if a is not None and b is not None and a * b < 0]
        if flipped:
            flips.append(f"{count_phrase(len(flipped), 'layer')} of {out.display(m)}")
            dominated = dominated and all(share[i] is not None and share[i] > 0.5 for i in flipped)
        a = out.v(m, "anisotropy", "variants/all_tokens/l_star", "int")
        b = out.v(m, "anisotropy", "variants/sink_excluded/l_star", "int")
        if a.raw is not None and b.raw is not None and a.raw != b.raw:
            moves.append(f"from layer {a} with every token to layer {b} for {out.display(m)}")
    text = (f"Excluding position 0 reverses the sign of r at {join_words(flips)}"
            + (", all of them layers at which position 0 supplies more than half of the mean-pooled vector (median over "
               "the statements)" if dominated else "") if flips else
            "Excluding position 0 reverses the sign of r at no layer")
    text += (f"; and {L_STAR} of the anisotropy profile moves {join_words(moves)} when position 0 of every prompt "
             "is left out." if moves else f"; {L_STAR} of the anisotropy profile does not move when position 0 is left out.")
    return text


@prose
def null_phrase(out: Outputs) -> str:
    """Per model: the size-matched null's p at the last layer."""
    return join_words([f"p = {out.v(m, 'robustness', 'policies/default/size_matched_null_p/-1', 'p')} "
                       f"({out.display(m)})" for m in out.models])


def lexical_matches_or_beats(out: Outputs) -> list[str]:
    """Models whose lexical baseline reaches (within the tolerance) or exceeds their own last-layer r."""
    return [out.display(m) for m in out.models
            if comparison_word(out.raw(m, "robustness", "lexical_baseline/final_r/mean"),
                               out.raw(m, "robustness", "policies/default/final_r")) in ("matches", "exceeds")]


@prose
def lexical_phrase(out: Outputs) -> str:
    """Per model: the lexical baseline's r against the model's."""
    parts = []
    for m in out.models:
        lex = "lexical_baseline/final_r"
        own = out.v(m, "robustness", "policies/default/final_r")
        mean = out.v(m, "robustness", f"{lex}/mean")
        parts.append(f"{mean} (range {out.v(m, 'robustness', f'{lex}/min')} to {out.v(m, 'robustness', f'{lex}/max')})"
                     f" for the tokens of {out.display(m)}, which {comparison_word(mean.raw, own.raw)} the model's own {own}")
    return "; ".join(parts)


def significant_layers(out: Outputs, policy: str = "default") -> list[int]:
    """Per model: layers whose exact permutation p survives Holm's correction."""
    return [int(out.raw(m, "robustness", f"policies/{policy}/n_layers_permutation_holm")) for m in out.models]


@prose
def significance_phrase(out: Outputs, policy: str = "default") -> str:
    """``no layer of any model`` or per model counts, for Holm-corrected exact permutation tests."""
    if not any(significant_layers(out, policy)):
        return "no layer of any model"
    return join_words([f"{count_phrase(out.v(m, 'robustness', f'policies/{policy}/n_layers_permutation_holm', 'int'), 'layer')}"
                       f" of {out.display(m)}" for m in out.models])


@prose
def parametric_layers_phrase(out: Outputs) -> str:
    """Per model: layers that the parametric t-test with Holm's correction would have called significant."""
    return join_words([f"{out.v(m, 'robustness', 'inference/n_layers_parametric_holm', 'int')} of "
                       f"{out.v(m, 'layerwise', 'layers', 'count')} ({out.display(m)})" for m in out.models])


@prose
def published_comparison(out: Outputs) -> str:
    """The original study's Pythia-6.9B final-layer r beside this panel's, under both policies."""
    return (f"{out.at(PUBLISHED_PYTHIA, 'category_level/r/-1')} for Pythia-6.9B, against "
            f"{per_model(out, 'robustness', 'policies/default/final_r')} here (sink excluded: "
            f"{per_model(out, 'robustness', 'policies/sink_excluded/final_r')})")


@prose
def conclusion_phrase(out: Outputs) -> str:
    """What the data support, in one clause list: lexical or not, one category or not, significant or not."""
    lexical = lexical_matches_or_beats(out)
    reversed_ = reversing_models(out)
    parts = []
    if lexical and len(lexical) == len(out.models):
        parts.append("the category-level correlation is reproduced by the statements' words alone, so it need not "
                     "reflect the models' representations at all")
    elif lexical:
        parts.append(f"for {join_words(lexical)} the category-level correlation is reproduced by the statements' "
                     "words alone")
    else:
        parts.append("the models' category-level correlation exceeds what the statements' words alone give")
    if reversed_:
        parts.append(f"its sign rests on a single category for {join_words(reversed_)}")
    parts.append("no layer's category-level r of any model is significant under the exact permutation test with "
                 "Holm's correction, a test with little power at this number of categories" if not any(significant_layers(out))
                 else f"the exact permutation test of the category-level r with Holm's correction finds "
                      f"{significance_phrase(out)} significant")
    return "; ".join(parts)


@prose
def panel_phrase(out: Outputs) -> str:
    """What the panel is, and what that rules out: quantized weights, small models, not the original's."""
    specs = [out.params.model(m) for m in out.models]
    quantized = [sp for sp in specs if sp.source in ("packaged", "gguf")]
    sizes = [sp.params_millions for sp in specs if sp.params_millions is not None]
    text = []
    if quantized:
        files = join_words([f"`{sp.gguf_file or sp.location}`" for sp in quantized])
        text.append(f"{join_words([sp.display for sp in quantized])} {'are' if len(quantized) > 1 else 'is'} loaded "
                    f"from quantized GGUF files ({files}) and dequantized to 32-bit floats: the weights keep the "
                    "quantization error, so hidden states and likelihoods differ from those of the "
                    "original-precision models, and the tokenizer is rebuilt from the GGUF metadata.")
    if sizes and max(sizes) < 1000:
        text.append("These are small models that run on a CPU, far smaller than the models of the original study; "
                    "nothing here says how the results carry over to larger models.")
    published = str(out.raw_at(PUBLISHED_PYTHIA, "model")).lower()
    if not any(sp.location.lower() == published for sp in specs):
        text.append("No model of the panel is the original study's published one, so the numbers in this paper "
                    "are not a replication of its published values; running the Pythia panel reproduces that setting.")
    if len(specs) < 3:
        text.append(f"With {len(specs)} {plural(len(specs), 'model')}, the scaling analysis (@sec-scaling) is a "
                    "comparison, not a trend.")
    return " ".join(text)


@prose
def peak_depth_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model: the depth of the positive peak, ``41 % (A) and 60 % (B)``."""
    panel = "results/panel.json"
    return join_words([f"{out.at(panel, f'poolings/{pooling}/models/{m}/peak_positive/depth_pct', 'f0')} % "
                       f"({out.display(m)})" for m in out.models])


@prose
def bins_phrase(out: Outputs, pooling: str = "mean", scheme: str = "balanced") -> str:
    """Per model, over the partitions into ``ci_k`` bins: the last-layer r's mean and sd, the share of
    partitions with r > 0 and the share whose Fisher-z interval excludes zero."""
    parts = []
    for m in out.models:
        k = out.raw(m, "layerwise", "settings/bins/ci_k")
        base = f"poolings/{pooling}/schemes/{scheme}/by_k/{k}"

        def v(key: str, fmt: str, base: str = base, m: str = m) -> Any:
            return out.v(m, "bins", f"{base}/{key}/-1", fmt)
        parts.append(f"{v('r_mean', 'r')} (sd {v('r_std', 'f2')}) for {out.display(m)}, with r > 0 in "
                     f"{v('share_positive', 'percent')} % of the partitions and a Fisher-z interval excluding zero in "
                     f"{v('share_excludes_zero', 'percent')} %")
    return "; ".join(parts)


@prose
def l_star_phrase(out: Outputs) -> str:
    """Per model: L* and the layers tied with it (``12, tied with layers 12–24``; ``1, with no tie``)."""
    parts = []
    for m in out.models:
        ties = out.raw(m, "anisotropy", "l_star_ties") or []
        tie = (f"layers {out.v(m, 'anisotropy', 'l_star_ties', 'layers')} within the tolerance of its maximum"
               if len(ties) > 1 else "no other layer within the tolerance")
        parts.append(f"layer {out.v(m, 'anisotropy', 'l_star', 'int')} for {out.display(m)}, {tie}")
    return "; ".join(parts)


@prose
def slopes_phrase(out: Outputs) -> str:
    """Per model: the least-squares slopes of λ1/Σλ before and after L* with their p-values."""
    parts = []
    for m in out.models:
        sides = []
        for side, word in (("before", "before"), ("after", "after")):
            slope = out.v(m, "anisotropy", f"bell_curve/{side}/slope", "s4")
            sides.append(f"no slope {word} {L_STAR} (too few layers)" if slope.raw is None else
                         f"{slope} (p {out.v(m, 'anisotropy', f'bell_curve/{side}/p', 'p')}) {word}")
        parts.append(f"{' and '.join(sides)} for {out.display(m)}")
    return "; ".join(parts)


@prose
def r_with_p_phrase(out: Outputs, stem: str, r_key: str, p_key: str, test: str) -> str:
    """Per model: ``+0.077 (A, t-test p = 0.249) and +0.140 (B, p = 0.034)``."""
    parts = []
    for i, m in enumerate(out.models):
        label = f"{test} p" if i == 0 else "p"
        parts.append(f"{out.v(m, stem, r_key)} ({out.display(m)}, {label} = {out.v(m, stem, p_key, 'p')})")
    return join_words(parts)
