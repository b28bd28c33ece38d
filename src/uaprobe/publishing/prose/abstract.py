"""The abstract: the answer in its first two sentences, then the tests behind it, each number a sourced
:class:`~uaprobe.publishing.provenance.values.Value`, every term defined in the clause that uses it.

The answer is chosen from the outputs: the category-level correlation is called *not robust* for the
reasons the outputs give (one category carries its sign, a lexical baseline matches it, layer 0 already
has it), and *robust* where none holds. Model names stay out of the abstract (they hold digits).
"""

from __future__ import annotations

import re

from uaprobe.publishing.prose.curve import curve_abstract
from uaprobe.publishing.prose.findings import confound_models
from uaprobe.publishing.prose.markdown import NUMBER_WORDS, join_words, prose
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.prose.pair_family import family_abstract
from uaprobe.publishing.prose.wording import MATCH_TOLERANCE
from uaprobe.publishing.prose.phrases import lexical_matches_or_beats, reversing_models
from uaprobe.publishing.prose.study import models_possessive
from uaprobe.publishing.prose.tables import length_category
from uaprobe.publishing.provenance.values import Value, plain_text



def _all(found: list[str], out: Outputs) -> bool:
    return bool(out.models) and len(found) == len(out.models)


def layer_zero_r(out: Outputs, m: str, pooling: str = "mean") -> tuple[Value, Value]:
    """r at layer 0 (the token embeddings) and at the last layer, with ``pooling`` under the default policy."""
    rs = out.raw(m, "layerwise", f"poolings/{pooling}/pearson_r") or []
    return (out.v(m, "layerwise", f"poolings/{pooling}/pearson_r/0"),
            out.v(m, "layerwise", f"poolings/{pooling}/pearson_r/{len(rs) - 1}"))


def layer_zero_carries(out: Outputs, m: str, pooling: str = "mean") -> bool:
    """Whether layer 0's r has the last layer's sign and at least its size less :data:`MATCH_TOLERANCE`."""
    zero, last = (v.raw for v in layer_zero_r(out, m, pooling))
    return zero is not None and last is not None and zero * last > 0 and abs(zero) >= abs(last) - MATCH_TOLERANCE


@prose
def answer(out: Outputs) -> str:
    """The first two sentences: what UA is, and whether its category-level correlation with the preference
    holds up, with the reasons the outputs give (layer 0, the token embeddings, has a sentence of its own)."""
    n = len(out.models)
    reasons = []
    if _all(confound_models(out), out) and _all(reversing_models(out), out):
        reasons.append("its sign rests on the category whose framings differ most in length")
    if _all(lexical_matches_or_beats(out), out):
        reasons.append("a lexical baseline from random token vectors matches it")
    first = ("Uniformity Asymmetry (UA), the difference in hidden-state similarity between a statement's two "
             "framings, was proposed to probe a model's preferred framing.")
    models = f"{NUMBER_WORDS.get(n, str(n))} small {'model' if n == 1 else 'models'}"
    across = "across statement categories"
    if reasons:
        listed = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + f", and {reasons[-1]}"
        second = (f"In {models}, its category-level correlation with the preference (per-token loss difference) "
                  f"is not robust: {listed}.")
    else:
        second = (f"In {models}, its correlation with {models_possessive(out)} preference {across} holds against one category "
                  "left out, a lexical baseline and the token embeddings.")
    return f"{first} {second}"


def layer_zero_relation(out: Outputs, m: str, pooling: str = "mean") -> str:
    """How layer 0's r stands to the last layer's, in words: ``as large as``, ``smaller than`` or ``of the other
    sign than``."""
    zero, last = (v.raw for v in layer_zero_r(out, m, pooling))
    if layer_zero_carries(out, m, pooling):
        return "as large as"
    return "smaller than" if zero is not None and last is not None and zero * last > 0 else "of the other sign than"


@prose
def layer_zero_sentence(out: Outputs, pooling: str = "mean") -> str:
    """Layer 0's r per model, without model names, and how it stands to the last layer's, in words (no more
    numbers than models)."""
    zero = join_words([str(layer_zero_r(out, m, pooling)[0]) for m in out.models])
    words = [layer_zero_relation(out, m, pooling) for m in out.models]
    than = (f"{words[0]} at the last layer" if len(set(words)) == 1 else
            f"respectively {join_words(words)} at the last layer")
    return f"Raw, {pooling}-pooled token embeddings give correlations of {zero}, {than}"


@prose
def layer_zero_r_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model, r at layer 0 beside r at the last layer (``pooling``, default policy, raw states)."""
    return "; ".join([f"{z} and {a} for {out.display(m)}" for m in out.models for z, a in [layer_zero_r(out, m, pooling)]])


@prose
def abstract(out: Outputs) -> str:
    """The whole abstract: the answer, the primary test and the test without the category, layer 0, and the
    pair-level family with the declared pooling (at most :data:`WORDS` words and :data:`NUMBERS` numbers). The
    pair-level clause counts the surviving metrics per model and names those against the hypothesis's sign where
    the budget allows, and says less where it does not."""
    named = names_left_out_category(out)
    head = f"{answer(out)} {curve_abstract(out, category_named=named)}. {layer_zero_sentence(out)}. "
    text = ""
    for per_model, metric_names in ((True, True), (True, False), (False, False)):
        text = (head + "Of a follow-up study's five pair-level scores (not UA), "
                f"{family_abstract(out, category_named=named, metric_names=metric_names, per_model=per_model)}.")
        if word_count(text) <= WORDS:
            break
    return text


def word_count(text: str) -> int:
    """The words of a text as the reader sees it (each value's markup replaced by what it shows)."""
    return sum(1 for w in plain_text(text).split() if re.search(r"\w", w))


def names_left_out_category(out: Outputs) -> bool:
    """Whether the answer names the category that the second joint test leaves out: it gives the one-category
    reason, and that category (the one whose framings differ most in length) is the declared one."""
    if not (_all(confound_models(out), out) and _all(reversing_models(out), out)):
        return False
    m = out.models[0]
    i = length_category(out, m)
    return i is not None and out.raw(m, "layerwise", "categories")[i] == out.raw(
        m, "specification_curve", "joint/without_category/left_out")


WORDS, NUMBERS = 150, 6
"""The abstract's budget: words and numbers."""
