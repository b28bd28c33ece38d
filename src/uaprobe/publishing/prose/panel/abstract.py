"""The abstract: the answer in its first two sentences, then the tests behind it, each number a sourced
:class:`~uaprobe.publishing.provenance.values.Value`, every term defined in the clause that uses it.

The answer is chosen from the outputs: the category-level correlation is called *not robust* for the
reasons the outputs give (one category carries its sign, a lexical baseline matches it, layer 0 already
has it), and *robust* where none holds. Model names stay out of the abstract (they hold digits).
"""

from __future__ import annotations

import re

from uaprobe.publishing.prose.category.curve import POOLING_WORDS, curve_of, differs
from uaprobe.publishing.prose.primitives.markdown import NUMBER_WORDS, join_words, prose
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, PUBLISHED_R, Outputs
from uaprobe.publishing.prose.panel.design import divergence
from uaprobe.publishing.prose.category.findings import confound_models, per_character_flips
from uaprobe.publishing.prose.primitives.formats import pretty
from uaprobe.publishing.prose.category.phrases import lexical_matches_or_beats, reversing_models
from uaprobe.publishing.prose.pairs.pair_family import FAMILIES, HYPOTHESIS_SIGN, family_of, survivors, test_sign
from uaprobe.publishing.prose.primitives.wording import MATCH_TOLERANCE
from uaprobe.publishing.provenance.values import Value, plain_text
from uaprobe.schema.categories import Layerwise
from uaprobe.schema.geometry import Robustness
from uaprobe.schema.specs import SpecificationCurve



def _all(found: list[str], out: Outputs) -> bool:
    return bool(out.models) and len(found) == len(out.models)


def layer_zero_r(out: Outputs, m: str, pooling: str = "mean") -> tuple[Value, Value]:
    """r at layer 0 (the token embeddings) and at the last layer, with ``pooling`` under the default policy."""
    last = len(out.record(m, Layerwise).poolings[pooling].pearson_r or []) - 1
    read = out.reader(m, Layerwise)
    return read(lambda r: r.poolings[pooling].pearson_r[0]), read(lambda r: r.poolings[pooling].pearson_r[last])


def layer_zero_carries(out: Outputs, m: str, pooling: str = "mean") -> bool:
    """Whether layer 0's r has the last layer's sign and at least its size less :data:`MATCH_TOLERANCE`."""
    zero, last = (v.raw for v in layer_zero_r(out, m, pooling))
    return zero is not None and last is not None and zero * last > 0 and abs(zero) >= abs(last) - MATCH_TOLERANCE


@prose
def layer_zero_r_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model, r at layer 0 beside r at the last layer (``pooling``, default policy, raw states)."""
    return "; ".join([f"{z} and {a} for {out.display(m)}" for m in out.models for z, a in [layer_zero_r(out, m, pooling)]])


def _pair_survivors(out: Outputs, m: str) -> dict[str, set[tuple[int, str, str]]]:
    """metric -> {(sign, pooling, family)} of every pair-level test of ``m`` that survives Holm across the panel,
    the declared correction, in any set of covariates (a sign only the lexical covariate gives is left out: it is
    not the metric's)."""
    found: dict[str, set[tuple[int, str, str]]] = {}
    for family in FAMILIES:
        for t in survivors(out, m, family, holm_only=True):
            sign = test_sign(out, m, family, t.row)
            if sign not in ("positive", "negative"):
                continue
            metric = family_of(out, m, family).tests.metric[t.row]
            for pooling in t.poolings:
                found.setdefault(metric, set()).add((1 if sign == "positive" else -1, pooling, family))
    return found


SHORT_METRIC = {"centroid_asymmetry": "centroid", "cross_centroid": "cross-centroid",
                "knn_density_asymmetry": "kNN-density", "margin_asymmetry": "margin",
                "within_pair_sim": "within-pair similarity"}
"""The pair-level scores as the abstract names them."""


WHERE_WORDS = {"all": "", "every": "only with every category", "base": "only without the lexical covariate",
               "one_out": "only without one category"}
"""Where a surviving metric survives: in sets with every category and without one (no words); only in the sets with
every category; only in the base set (category and length covariates, without the lexical baseline's); only in the
set without the pre-declared category."""


def _where(families: set[str]) -> str:
    if families == {"without_category"}:
        return "one_out"
    if families == {"family"}:
        return "base"
    return "every" if "without_category" not in families else "all"


def pair_sentence(out: Outputs, *, poolings: bool) -> str:
    """Every surviving pair-level metric per model with its sign, grouped by where it survives (with every
    category, only there, or only without the pre-declared category); those with the sign UA predicts marked;
    ``poolings``: with the poolings of those."""
    hyp = join_words([SHORT_METRIC.get(k, pretty(k)) for k in HYPOTHESIS_SIGN])
    parts = []
    for m in out.models:
        found = _pair_survivors(out, m)
        groups: dict[str, dict[str, list[str]]] = {}
        for metric in sorted(found, key=lambda k: list(SHORT_METRIC).index(k) if k in SHORT_METRIC else 99):
            for sign in sorted({sg for sg, _, _ in found[metric]}, reverse=True):
                word = SHORT_METRIC.get(metric, pretty(metric))
                if metric in HYPOTHESIS_SIGN and sign * HYPOTHESIS_SIGN[metric] > 0:
                    where = sorted({POOLING_WORDS.get(q, q) for sg, q, _ in found[metric] if sg == sign})
                    word += " as predicted" + (f" ({join_words(where)} pooling)" if poolings else "")
                w = _where({f for sg, _, f in found[metric] if sg == sign})
                groups.setdefault(w, {}).setdefault("positive" if sign > 0 else "negative", []).append(word)
        listed = "; ".join(" and ".join(f"{sign} {join_words(names)}" for sign, names in by_sign.items())
                           + (f" ({WHERE_WORDS[w]})" if WHERE_WORDS[w] else "") for w, by_sign in groups.items())
        parts.append(f"{out.display(m)}, {listed or 'none'}")
    return (f"Within categories, pair-level survivors of panel-wide Holm correction (UA predicts positive {hyp}): "
            f"{'; '.join(parts)}")


def _max_power(out: Outputs) -> tuple[str, int]:
    """The model whose exact test has the most power at the largest planted correlation, and that correlation's
    index."""
    planted = curve_of(out, out.models[0]).power.sets[0].planted or [0.0]
    j = len(planted) - 1
    return max(out.models, key=lambda m: curve_of(out, m).power.sets[0].power[j] or 0.0), j


def _zero_abtt(out: Outputs, m: str) -> float | None:
    """r at layer 0 under ABTT (mean pooling, default policy, the primary NLL) from the curve's ``layer_zero``."""
    curve = curve_of(out, m)
    lz, policy = curve.layer_zero, curve.power.specification["policy"]
    for i in range(len(lz.r)):
        if lz.pooling[i] == "mean" and lz.representation[i] == "abtt" and lz.nll[i] == "mean" and lz.policy[i] == policy:
            return lz.r_layer_zero[i]
    return None


def caveat_clause(out: Outputs) -> str:
    """What could explain the category-level r away, as the outputs show it for every model: its sign rests on one
    category (whose framings differ most in length) and a lexical baseline of the statements' tokens matches it;
    empty where neither holds for every model."""
    n = len(out.models)
    one = len(reversing_models(out)) == n
    length = one and len(confound_models(out)) == n
    lexical = len(lexical_matches_or_beats(out)) == n
    parts = []
    if one and per_character_flips(out):
        parts.append("Our sign rests on one category and on dividing the NLL by tokens: per character (exploratory), "
                     + ("both models give" if n == 2 else "every model gives" if n > 2 else "it gives")
                     + " the original's sign")
    elif one:
        located = divergence(out)
        parts.append("Our sign rests on one category" + (", the most length-imbalanced" if length else "")
                     + (", whose preference, not its UA, reverses the original's" if located is not None
                        and located.in_preference else ""))
    if lexical:
        parts.append(("t" if parts else "T") + "oken identities alone reproduce " + ("ours" if parts else "it"))
    return " " + "; ".join(parts) + "." if parts else ""


def layer_zero_clause(out: Outputs) -> str:
    """Layer 0 qualified: as large as the last layer (or not), and its sign under ABTT."""
    carries = [m for m in out.models if layer_zero_carries(out, m)]
    flips = [m for m in out.models if (z := _zero_abtt(out, m)) is not None
             and (r := layer_zero_r(out, m)[0].raw) is not None and z * r < 0]
    if carries and len(carries) == len(out.models):
        text = "Layer-0 token embeddings already show it"
    elif carries:
        text = f"Layer-0 token embeddings already show it for {join_words([out.display(m) for m in carries])}"
    else:
        text = "Layer-0 token embeddings show a smaller correlation"
    if flips and len(flips) == len(out.models):
        text += " (reversed without the top principal directions)"
    elif flips:
        text += f", reversed for {join_words([out.display(m) for m in flips])} once the top principal directions are removed"
    return text


@prose
def abstract(out: Outputs) -> str:
    """The whole abstract (at most :data:`WORDS` words and :data:`NUMBERS` numbers): what UA is with the original
    study's r; the answer, this panel's r with its sign beside it; the power and the primary test within the
    original's estimand; layer 0 with its sign under ABTT; every surviving pair-level metric with its sign. Less
    detail where the budget requires it (the models' r and p unshown, the poolings unnamed)."""
    n = len(out.models)
    n_cat = len(out.record(out.models[0], Layerwise).categories or [])
    published = out.at(PUBLISHED_PYTHIA, PUBLISHED_R, "s2")
    original, cats_orig = "", "categories"
    if (theirs := out.panel().original) is not None and theirs.p is not None:
        n_orig = len(theirs.categories or [])
        cats_orig = f"{NUMBER_WORDS.get(n_orig, str(n_orig))} categories"
        original = f" (our exact test: p = {out.panel_value(lambda r: r.original.p, 'p')})"
    first = ("Uniformity Asymmetry (UA), the hidden-state similarity difference between a statement's two "
             "framings, probes which framing a model prefers; its original study reported r = "
             f"{published} across {cats_orig} with Pythia{original}.")
    ours = join_words([str(out.value(m, Robustness, lambda r: r.policies.default.final_r, "s2")) for m in out.models])
    signs = {(out.record(m, Robustness).policies.default.final_r or 0.0) > 0 for m in out.models}
    pub = out.raw_at(PUBLISHED_PYTHIA, PUBLISHED_R) or 0.0
    relation = ("the opposite sign" if signs == {pub < 0} else "the same sign" if signs == {pub > 0}
                else "signs that differ between models")
    models = f"{NUMBER_WORDS.get(n, str(n))} small {'model' if n == 1 else 'models'}"
    best, j = _max_power(out)
    power = out.value(best, SpecificationCurve, lambda r: r.power.sets[0].power[j], "f2")
    planted = out.value(best, SpecificationCurve, lambda r: r.power.sets[0].planted[j], "g")
    ps = join_words([str(out.value(m, SpecificationCurve, lambda r: r.primary.p, "p")) for m in out.models])
    below = [m for m in out.models if differs(out, m)]
    verdict = ("inconclusive" if not below else "below α for " + join_words([out.display(m) for m in below]))
    cats = NUMBER_WORDS.get(n_cat, str(n_cat))
    variants = []
    # the most detail first: the models' r, the primary p, the poolings of the pair-level survivors
    for show_r, show_p, poolings in ((True, True, True), (True, True, False), (True, False, False),
                                     (False, True, False), (False, False, False)):
        lead = f"{models[0].upper()}{models[1:]} {'give' if n > 1 else 'gives'} {relation}"
        second = (lead
                  + (f" (r = {ours})" if show_r else "")
                  + (f", but {cats} categories cannot settle it: " if not below else f"; over {cats} categories, ")
                  + f"the exact test's power at a planted correlation of {planted} is at most {power}, and the "
                  "primary test "
                  + (f"gives uncorrected p = {ps}." if show_p else f"is {verdict}."))
        variants.append(f"{first} {second}{caveat_clause(out)} {layer_zero_clause(out)}. "
                        f"{pair_sentence(out, poolings=poolings)}.")
    for text in variants:
        if word_count(text) <= WORDS and number_count(text) <= NUMBERS:
            return text
    return variants[-1]


def number_count(text: str) -> int:
    """The numbers of a text as the reader sees it."""
    return len(re.findall(r"(?<![\w.])[−-]?\d+(?:\.\d+)?", plain_text(text)))


def word_count(text: str) -> int:
    """The words of a text as the reader sees it (each value's markup replaced by what it shows)."""
    return sum(1 for w in plain_text(text).split() if re.search(r"\w", w))


WORDS, NUMBERS = 150, 7
"""The abstract's budget: words and numbers."""
