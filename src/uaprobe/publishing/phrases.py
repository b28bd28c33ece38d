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
from uaprobe.publishing.tables import (
    L_STAR,
    POLICY_FILES,
    POOLING_WORDS,
    interval,
    loco_range,
    poolings,
    same_numbers,
    same_pooling_models,
)
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
def per_model(out: Outputs, stem: str, key: str, fmt: str = "r", models: Sequence[str] | None = None) -> str:
    """``x (Model A) and y (Model B)``: one value of every model of the panel (or of ``models``); ``x for
    both models`` (or ``for every model``) when every model of the whole panel shows the same text."""
    chosen = list(out.models if models is None else models)
    values = [out.v(m, stem, key, fmt) for m in chosen]
    if len(values) > 1 and len(chosen) == len(out.models) and len({v.text for v in values}) == 1:
        return f"{values[0]} for {'both models' if len(values) == 2 else 'every model'}"
    return join_words([f"{v} ({out.display(m)})" for v, m in zip(values, chosen)])


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
    the range of r with one category left out (at six categories a Fisher-z interval would look precise
    and is not: its normal approximation needs many more points)."""
    parts = []
    for m in out.models:
        last = out.raw(m, "layerwise", "n_layers")
        b = f"poolings/{pooling}"
        p = out.v(m, "layerwise", f"{b}/permutation_p/{last}", "p")
        alpha = float(out.raw(m, "layerwise", "settings/alpha"))
        loco = loco_range(out, m, last, pooling)
        parts.append(f"{out.v(m, 'layerwise', f'{b}/pearson_r/{last}')} for {out.display(m)} (exact permutation p = "
                     f"{p}, {significance_word(p, alpha)}; "
                     + (f"with one category left out, r ranges from {loco[0]} to {loco[1]})" if loco else
                        "with one category left out, r is undefined)"))
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
def same_numbers_reason(out: Outputs, m: str) -> str:
    """Why excluding position 0 changes nothing for a model, from what its extraction recorded."""
    if out.raw(m, "layerwise", "extraction/bos_added"):
        return "position 0 is the BOS, which no pooled state includes"
    return "the default policy already leaves position 0 out of every pooled state"


@prose
def sink_exclusion_phrase(out: Outputs, *, final_r: bool = False) -> str:
    """A sentence: what excluding position 0 from the pooling does to each model's layer curve (mean
    pooling): its sign changes (and, with ``final_r``, its last-layer r) beside the default policy's; for a
    model whose two policies give the same numbers, that they do and why, so that no agreement reads as
    a robustness check."""
    changed, same = [], []
    for m in out.models:
        if m in same_pooling_models(out):
            same.append(f"for {out.display(m)} it gives the same numbers: {same_numbers_reason(out, m)}, so there "
                        "the exclusion is no check")
            continue
        d, sx = "policies/default", "policies/sink_excluded"
        text = (f"{count_phrase(out.v(m, 'robustness', f'{sx}/n_sign_changes', 'int'), 'sign change')} in the layer "
                f"curve of {out.display(m)} ({out.v(m, 'robustness', f'{d}/n_sign_changes', 'int')} under the default policy)")
        if final_r:
            text += (f" and a last-layer r of {out.v(m, 'robustness', f'{sx}/final_r')} "
                     f"({out.v(m, 'robustness', f'{d}/final_r')} under the default policy)")
        changed.append(text)
    if changed:
        return f"Excluding position 0 from the pooling leaves {join_words(changed)}" + "".join(f"; {c}" for c in same) + "."
    return "Excluding position 0 from the pooling changes no number: " + "; ".join(same) + "."


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
    """Per model: layers whose exact permutation p survives Holm's correction (mean pooling, one policy)."""
    return [int(out.raw(m, "robustness", f"policies/{policy}/n_layers_permutation_holm")) for m in out.models]


@prose
def significance_phrase(out: Outputs, policy: str = "default") -> str:
    """``no layer of any model`` or per model counts, for Holm-corrected exact permutation tests."""
    if not any(significant_layers(out, policy)):
        return "no layer of any model"
    return join_words([f"{count_phrase(out.v(m, 'robustness', f'policies/{policy}/n_layers_permutation_holm', 'int'), 'layer')}"
                       f" of {out.display(m)}" for m in out.models])


def specifications(out: Outputs) -> list[tuple[str, str, str]]:
    """Every (model, policy, pooling) whose layer-wise exact permutation tests the results hold."""
    return [(m, policy, p) for m in out.models for policy in POLICY_FILES for p in poolings(out, m)]


def surviving_layers(out: Outputs, m: str, policy: str, pooling: str) -> list[int]:
    """Indices of the layers whose exact permutation p survives Holm's correction across the layers of
    this specification (``poolings/<pooling>/permutation_holm_reject``)."""
    reject = out.raw(m, POLICY_FILES[policy], f"poolings/{pooling}/permutation_holm_reject")
    return [i for i, x in enumerate(reject) if x]


@prose
def specifications_scope(out: Outputs) -> str:
    """``the 12 specifications the results hold (2 models; mean, first-token and last-token pooling; the
    default position-0 policy and position 0 excluded; 8 of them distinct, …)``."""
    specs = specifications(out)
    distinct = sum(1 for m, policy, p in specs if policy == "default" or not same_numbers(out, m, p))
    pools = [POOLING_WORDS.get(p, p) for p in dict.fromkeys(p for _, _, p in specs)]
    text = (f"the {len(specs)} {plural(len(specs), 'specification')} the results hold ({len(out.models)} "
            f"{plural(len(out.models), 'model')}; {join_words(pools)} pooling; the default position-0 policy and "
            "position 0 excluded")
    if distinct < len(specs):
        text += f"; {distinct} of them distinct, as the two policies agree wherever no pooled state includes position 0"
    return text + ")"


POLICY_WORDS = {"default": "under the default policy", "sink_excluded": "and position 0 excluded"}


def specification_words(out: Outputs, m: str, specs: Sequence[tuple[str, str]]) -> str:
    """``with first-token pooling and position 0 excluded``, ``with mean and last-token pooling under the
    default policy``, or ``with every pooling under both position-0 policies``, for (policy, pooling) pairs."""
    if len(specs) == len(poolings(out, m)) * len(POLICY_FILES):
        return "with every pooling under both position-0 policies"
    by_policy: dict[str, list[str]] = {}
    for policy, p in specs:
        by_policy.setdefault(policy, []).append(POOLING_WORDS.get(p, p))
    return join_words([f"with {join_words(pools)} pooling {POLICY_WORDS[policy]}" for policy, pools in by_policy.items()])


@prose
def specification_significance_phrase(out: Outputs) -> str:
    """Which specifications hold a layer whose category-level r survives the exact permutation test with
    Holm's correction across its layers, with the layers and their corrected p, or that none does.
    Specifications of one model with the same layers and corrected p are named together."""
    groups: dict[tuple[str, tuple[int, ...], tuple[str, ...]], dict[str, Any]] = {}
    for m, policy, p in specifications(out):
        layers = surviving_layers(out, m, policy, p)
        if not layers:
            continue
        stem = POLICY_FILES[policy]
        holm = [out.v(m, stem, f"poolings/{p}/permutation_holm_p/{i}", "p") for i in layers]
        group = groups.setdefault((m, tuple(layers), tuple(h.text for h in holm)), {
            "holm": holm, "layers": [out.v(m, stem, f"layers/{i}", "int") for i in layers], "specs": []})
        group["specs"].append((policy, p))
    if not groups:
        return f"no layer of any model, in any of {specifications_scope(out)}"
    found = []
    for (m, layers, texts), g in groups.items():
        holm, shown = g["holm"], g["layers"]
        ps = (f"Holm p = {holm[0]}" + (f" at {'both' if len(layers) == 2 else 'each'}" if len(layers) > 1 else "")
              if len(set(texts)) == 1 else
              "Holm p = " + join_words([f"{h} at layer {layer}" for h, layer in zip(holm, shown)]))
        found.append(f"{plural(len(layers), 'layer')} {join_words(shown)} of {out.display(m)} "
                     f"{specification_words(out, m, g['specs'])} ({ps})")
    others = len(specifications(out)) - sum(len(g["specs"]) for g in groups.values())
    rest = (f"and no layer in the other {others} of {specifications_scope(out)}" if others else
            f"a layer in every one of {specifications_scope(out)}")
    return (f"{join_words(found)}, {rest}, with Holm's correction across the layers of one specification, not across "
            "the specifications")


@prose
def parametric_layers_phrase(out: Outputs) -> str:
    """Per model: layers that the parametric t-test with Holm's correction would have called significant."""
    return join_words([f"{out.v(m, 'robustness', 'inference/n_layers_parametric_holm', 'int')} of "
                       f"{out.v(m, 'layerwise', 'layers', 'count')} ({out.display(m)})" for m in out.models])


@prose
def published_comparison(out: Outputs) -> str:
    """The original study's Pythia-6.9B final-layer r beside this panel's, under both policies."""
    differ = [m for m in out.models if m not in same_pooling_models(out)]
    same = [out.display(m) for m in out.models if m not in differ]
    excluded = "; ".join(([per_model(out, 'robustness', 'policies/sink_excluded/final_r', models=differ)] if differ else [])
                         + ([f"the same numbers for {join_words(same)}"] if same else []))
    return (f"{out.at(PUBLISHED_PYTHIA, 'category_level/r/-1')} for Pythia-6.9B, against "
            f"{per_model(out, 'robustness', 'policies/default/final_r')} here (sink excluded: {excluded})")


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
    if not any(surviving_layers(out, *spec) for spec in specifications(out)):
        parts.append("no layer's category-level r of any model is significant under the exact permutation test with "
                     f"Holm's correction, in any of {specifications_scope(out)}, a test with little power at this "
                     "number of categories")
    else:
        parts.append("the exact permutation test of the category-level r with Holm's correction finds significant "
                     f"{specification_significance_phrase(out)}")
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
def r_with_p_phrase(out: Outputs, stem: str, r_key: str, p_key: str, test: str, n: Value | None = None,
                    unit: str = "pairs") -> str:
    """Per model: ``+0.077 (A, t-test p = 0.249) and +0.140 (B, p = 0.034)``; with ``n`` the test names how
    many points it ran over: ``(A, t-test over 230 pairs, p = 0.249)``."""
    parts = []
    for i, m in enumerate(out.models):
        if i:
            label = "p"
        elif n is None:
            label = f"{test} p"
        else:
            label = f"{test} over {n} {unit}, p"
        parts.append(f"{out.v(m, stem, r_key)} ({out.display(m)}, {label} = {out.v(m, stem, p_key, 'p')})")
    return join_words(parts)
