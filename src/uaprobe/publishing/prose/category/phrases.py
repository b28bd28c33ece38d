"""The words of the paper that depend on its numbers: short phrases, each with its values sourced.

The sentences live in ``paper/paper.qmd``. What is conditional on the data (a sign, a reversal,
whether an interval excludes zero, whether a baseline matches the model, whether anything is
significant) is a phrase returned by a small function here, tested on its own. Every number in a
phrase is a :class:`~uaprobe.publishing.provenance.values.Value`, so it keeps its file and key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Callable

from uaprobe.publishing.prose.primitives.markdown import count_phrase, join_words, plural, prose
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, PUBLISHED_R, Outputs, R
from uaprobe.publishing.prose.tables.manuscript import (
    POLICY_FILES,
    POOLING_WORDS,
    poolings,
    same_numbers,
    same_pooling_models,
)
from uaprobe.publishing.prose.primitives.wording import MATCH_TOLERANCE
from uaprobe.schema.categories import Layerwise
from uaprobe.schema.geometry import Robustness


@prose
def per_model(out: Outputs, kind: type[R], get: Callable[[R], Any], fmt: str = "r",
              models: Sequence[str] | None = None) -> str:
    """``x (Model A) and y (Model B)``: the field ``get`` reads of every model's results file ``kind`` (or of
    ``models``' files, :meth:`Outputs.value`); ``x for both models`` (or ``for every model``) when every model
    of the whole panel shows the same text."""
    chosen = list(out.models if models is None else models)
    values = [out.value(m, kind, get, fmt) for m in chosen]
    if len(values) > 1 and len(chosen) == len(out.models) and len({v.text for v in values}) == 1:
        return f"{values[0]} for {'both models' if len(values) == 2 else 'every model'}"
    return join_words([f"{v} ({out.display(m)})" for v, m in zip(values, chosen)])


@prose
def models(out: Outputs) -> str:
    """The panel's full names, then the short names the rest of the paper uses where they differ."""
    full = join_words([out.full_name(m) for m in out.models])
    short = [out.display(m) for m in out.models if out.display(m) != out.full_name(m)]
    return full + (f" ({join_words(short)} below)" if short else "")


@prose
def comparison_word(baseline: float | None, model: float | None, *, tolerance: float = MATCH_TOLERANCE) -> str:
    """How a baseline's r compares with the model's: ``exceeds``, ``matches`` or ``falls short of``."""
    if baseline is None or model is None:
        return "cannot be compared with"
    if abs(baseline - model) <= tolerance:
        return "matches"
    return "exceeds" if baseline > model else "falls short of"


# ------------------------------------------------------------------------------------------------
# Panel-wide findings


@prose
def same_numbers_reason(out: Outputs, m: str) -> str:
    """Why excluding position 0 changes nothing for a model, from what its extraction recorded."""
    if out.record(m, Layerwise).extraction.bos_added:
        return "position 0 is the BOS, which no pooled state includes"
    return "the default policy already leaves position 0 out of every pooled state"


@prose
def position0_phrase(out: Outputs) -> str:
    """A sentence, per model: what sits at position 0 and what that means for the two position-0 policies."""
    parts = []
    for m in out.models:
        if out.record(m, Layerwise).extraction.bos_added:
            same = m in same_pooling_models(out)
            parts.append(f"the tokenizer of {out.display(m)} adds a BOS at position 0, which neither policy pools"
                         + (", so its two policies give identical numbers" if same else
                            ", yet its two policies give different numbers"))
        else:
            parts.append(f"the tokenizer of {out.display(m)} adds no BOS, so its position 0 is the statement's first word")
    text = "; ".join(parts)
    return text[:1].upper() + text[1:] + "."


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
        read = out.reader(m, Robustness)
        text = (f"{count_phrase(read(lambda r: r.policies.sink_excluded.n_sign_changes, 'int'), 'sign change')} in "
                f"the layer curve of {out.display(m)} ({read(lambda r: r.policies.default.n_sign_changes, 'int')} "
                "under the default policy)")
        if final_r:
            text += (f" and a last-layer r of {read(lambda r: r.policies.sink_excluded.final_r)} "
                     f"({read(lambda r: r.policies.default.final_r)} under the default policy)")
        changed.append(text)
    if changed:
        return f"Excluding position 0 from the pooling leaves {join_words(changed)}" + "".join(f"; {c}" for c in same) + "."
    return "Excluding position 0 from the pooling changes no number: " + "; ".join(same) + "."




def negative_layers(out: Outputs, m: str, file: str, pooling: str = "mean") -> list[int]:
    """The layers whose category-level r is negative in ``file`` (``layerwise`` or ``sink_excluded/layerwise``)."""
    rs = out.record(m, Layerwise, stem=file).poolings[pooling].pearson_r
    return [i for i, r in enumerate(rs or []) if r is not None and r < 0]


def layer_span(layers: Sequence[int]) -> str:
    """``layers 12 to 29`` for a run of more than two adjacent layers, ``layers 3, 5 and 9`` for single ones, and
    both where they mix (``layers 5 to 23 and 25 to 27``)."""
    if len(layers) == 1:
        return f"layer {layers[0]}"
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    parts = [f"{run[0]} to {run[-1]}" if len(run) > 2 else ", ".join(str(i) for i in run) for run in runs]
    return "layers " + join_words(", ".join(parts).split(", ") if all(len(r) <= 2 for r in runs) else parts)


def position0_inversions(out: Outputs, pooling: str = "mean") -> list[tuple[str, list[int], list[int]]]:
    """(model, negative layers under the default policy, with position 0 excluded) of every model whose two
    policies differ and whose default curve is negative at some layer."""
    found = []
    for m in out.models:
        if m in same_pooling_models(out):
            continue
        default = negative_layers(out, m, "layerwise", pooling)
        if default:
            found.append((m, default, negative_layers(out, m, "sink_excluded/layerwise", pooling)))
    return found


@prose
def inversion_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Where the default policy's layer curve (``pooling``) is negative and how much of that remains with position
    0 excluded, per model whose policies differ; empty where no such curve is negative."""
    parts = []
    for m, default, excluded in position0_inversions(out, pooling):
        rs = out.record(m, Layerwise).poolings[pooling].pearson_r
        low = min(default, key=lambda i: rs[i])
        n = out.value(m, Layerwise, lambda r: r.layers, "count")
        kept = "at none of them" if not excluded else f"at {len(excluded)} ({layer_span(excluded)})"
        parts.append(f"under the default policy, the category-level r of {out.display(m)} is negative at "
                     f"{len(default)} of its {n} layers ({layer_span(default)}, down to "
                     f"{out.value(m, Layerwise, lambda r: r.poolings[pooling].pearson_r[low])}) and, with position 0 "
                     "excluded, "
                     f"{kept}")
    if not parts:
        return ""
    return "With " + pooling + " pooling, " + "; ".join(parts) + "."


@prose
def inversion_conclusion(out: Outputs, pooling: str = "mean") -> str:
    """The Conclusion's clause: for which models position 0 alone makes the negative stretch of the layer curve
    (none of it remains without it), or part of it (what remains is some of its layers and no other); empty where
    no curve has one, or where excluding position 0 does not shrink it."""
    made = [out.display(m) for m, default, excluded in position0_inversions(out, pooling) if not excluded]
    partly = [out.display(m) for m, default, excluded in position0_inversions(out, pooling)
              if excluded and set(excluded) < set(default)]
    text = []
    if made:
        no_bos = all(not out.record(m, Layerwise).extraction.bos_added for m in out.models
                     if out.display(m) in made)
        what = ("position 0, the attention sink and, without a BOS, the first word" if no_bos else
                "position 0, the attention sink")
        text.append(f"With {pooling} pooling, the negative r at the intermediate layers of {join_words(made)} comes "
                    f"from {what}: without it that curve stays positive at every layer (@sec-sink).")
    if partly:
        text.append(f"With {pooling} pooling, position 0 makes part of the negative r at the intermediate layers of "
                    f"{join_words(partly)} (@sec-sink).")
    return " ".join(text)


@prose
def first_word_limitation(out: Outputs) -> str:
    """For the models without a BOS, position 0 is the statement's first word: excluding it removes the sink and
    that word together, and no run here separates them (a fixed token prepended would)."""
    no_bos = [out.display(m) for m in out.models if not out.record(m, Layerwise).extraction.bos_added]
    if not no_bos:
        return ""
    return (f"For {join_words(no_bos)}, which {'adds' if len(no_bos) == 1 else 'add'} no BOS, position 0 is the "
            "statement's first word: excluding it removes the sink's massive activation and that word together, and "
            "no run with a fixed token prepended separates the two.")


def reversing_models(out: Outputs) -> list[str]:
    """Models whose last-layer r reverses its sign without their most influential category."""
    return [out.display(m) for m in out.models if out.record(m, Robustness).loco.sign_reversed]


def lexical_matches_or_beats(out: Outputs) -> list[str]:
    """Models whose lexical baseline reaches (within the tolerance) or exceeds their own last-layer r."""
    return [out.display(m) for m in out.models
            if comparison_word((rob := out.record(m, Robustness)).lexical_baseline.final_r.mean,
                               rob.policies.default.final_r) in ("matches", "exceeds")]




def specifications(out: Outputs) -> list[tuple[str, str, str]]:
    """Every (model, policy, pooling) whose layer-wise exact permutation tests the results hold."""
    return [(m, policy, p) for m in out.models for policy in POLICY_FILES for p in poolings(out, m)]


def surviving_layers(out: Outputs, m: str, policy: str, pooling: str) -> list[int]:
    """Indices of the layers whose exact permutation p survives Holm's correction across the layers of
    this specification (``poolings/<pooling>/permutation_holm_reject``)."""
    reject = out.record(m, Layerwise, stem=POLICY_FILES[policy]).poolings[pooling].permutation_holm_reject
    return [i for i, x in enumerate(reject) if x]


@prose
def specifications_scope(out: Outputs) -> str:
    """``the 12 specifications (2 models × 3 poolings × 2 position-0 policies; 8 of them distinct, …)``."""
    specs = specifications(out)
    distinct = n_distinct(out)
    pools = len(dict.fromkeys(p for _, _, p in specs))
    text = (f"the {len(specs)} {plural(len(specs), 'specification')} ({len(out.models)} "
            f"{plural(len(out.models), 'model')} × {pools} {plural(pools, 'pooling')} × {len(POLICY_FILES)} "
            "position-0 policies")
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
        read = out.reader(m, Layerwise, stem=POLICY_FILES[policy])
        holm = [read(lambda r: r.poolings[p].permutation_holm_p[i], "p") for i in layers]
        group = groups.setdefault((m, tuple(layers), tuple(h.text for h in holm)), {
            "holm": holm, "layers": [read(lambda r: r.layers[i], "int") for i in layers], "specs": []})
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
    text = f"{join_words(found)}, {rest}"
    if all(at_holm_floor(out, m, h) for (m, _, _), g in groups.items() for h in g["holm"]):
        text += (". These Holm p-values are the smallest the test can give: the number of layers times one over "
                 f"the {out.value(out.models[0], Layerwise, lambda r: r.permutation_count, 'thousands')} orders")
    a = out.value(out.models[0], Layerwise, lambda r: r.settings["alpha"], "f2")
    text += (". Holm's correction runs across the layers of one specification, not across the specifications: "
             f"without any effect, each distinct specification shows a significant layer with probability up to "
             f"α = {a}, so chance alone predicts up to {n_distinct(out)} × α of them"
             + (", fewer than one" if n_distinct(out) * float(a.raw) < 1 else ""))
    return text


def n_distinct(out: Outputs) -> int:
    """The layer-wise specifications whose numbers differ (the two policies agree where none pools position 0)."""
    return sum(1 for m, policy, p in specifications(out) if policy == "default" or not same_numbers(out, m, p))


def at_holm_floor(out: Outputs, m: str, holm: Any) -> bool:
    """Whether a Holm-adjusted exact p is the smallest the test can give: layers x 1 / orders (capped at 1)."""
    lw = out.record(m, Layerwise)
    layers, orders = len(lw.layers or []), lw.permutation_count
    return bool(orders) and abs(float(holm.raw) - min(1.0, layers / float(orders))) < 1e-12


def published_format(x: Any) -> str:
    """The signed format with as many decimals as a published number was stored with (at most four)."""
    text = repr(float(x)) if isinstance(x, (int, float)) else ""
    decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 3
    return f"s{min(decimals, 4)}"


@prose
def published_comparison(out: Outputs) -> str:
    """The original study's Pythia-6.9B final-layer r beside this panel's (default policy)."""
    return (f"{out.at(PUBLISHED_PYTHIA, PUBLISHED_R, published_format(out.raw_at(PUBLISHED_PYTHIA, PUBLISHED_R)))} for Pythia-6.9B, as its "
            f"published table gives it (`{PUBLISHED_PYTHIA}`), against {per_model(out, Robustness, lambda r: r.policies.default.final_r)} "
            "here")


@prose
def weights_phrase(out: Outputs) -> str:
    """What the weights are: for the GGUF models, their bit width and files, dequantized; empty otherwise."""
    specs = {m: out.params.model(m) for m in out.models}
    quantized = [m for m, sp in specs.items() if sp.source in ("packaged", "gguf")]
    if not quantized:
        return ""
    files = join_words([f"`{specs[m].gguf_file or specs[m].location}`" for m in quantized])
    bits = {b.group(1) for m in quantized if (b := re.search(r"q(\d+)_", str(specs[m].gguf_file).lower()))}
    kind = f"{bits.pop()}-bit GGUF quantizations" if len(bits) == 1 else "quantized GGUF files"
    return (f"The weights of {join_words([out.display(m) for m in quantized])} are {kind} ({files}), dequantized "
            "to 32-bit floats for the forward pass; the tokenizer is rebuilt from the GGUF metadata.")


@prose
def panel_phrase(out: Outputs) -> str:
    """What the panel is, and what that rules out: quantized weights, small models, not the original's."""
    specs = {m: out.params.model(m) for m in out.models}
    quantized = [m for m, sp in specs.items() if sp.source in ("packaged", "gguf")]
    sizes = [sp.params_millions for sp in specs.values() if sp.params_millions is not None]
    text = []
    if quantized:
        text.append("Quantized weights keep the quantization error, so hidden states and likelihoods differ from "
                    "those of the original-precision models; no run at full precision bounds that difference here.")
    instruct = [out.display(m) for m, sp in specs.items()
                if "instruct" in f"{sp.display} {sp.gguf_file or ''}".lower()]
    if instruct:
        verb = "are instruction-tuned models" if len(instruct) > 1 else "is an instruction-tuned model"
        text.append(f"{join_words(instruct)} {verb}, run here, like every model, on the bare statements without "
                    "its chat template: its states and likelihoods are those of text in a form it was not tuned on.")
    if sizes and max(sizes) < 1000:
        text.append("These are small models that run on a CPU, far smaller than the models of the original study; "
                    "nothing here says how the results carry over to larger models.")
    published = str(out.raw_at(PUBLISHED_PYTHIA, "model")).lower()
    if not any(sp.location.lower() == published for sp in specs.values()):
        text.append("No model of the panel is the original study's published one, so the numbers in this paper "
                    "are not a replication of its published values; running the Pythia panel reproduces that setting.")
    if len(specs) == 1:
        text.append("With one model, the scaling analysis (@tbl-scaling) has one row: it compares nothing.")
    elif len(specs) < 3:
        text.append(f"With {len(specs)} {plural(len(specs), 'model')}, the scaling analysis (@tbl-scaling) is a "
                    "comparison, not a trend.")
    return " ".join(text)
