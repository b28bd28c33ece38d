"""The paper's main findings as phrases: the length confound and the verdict (the specification curve is
in :mod:`uaprobe.publishing.prose.category.curve`, the shared direction in :mod:`uaprobe.publishing.prose.category.direction`, the
pair-level models in :mod:`uaprobe.publishing.prose.pairs.pair_findings`).

Each function reads the values it reports and chooses its words from them, so a different result
gives a different sentence; every number it shows is a sourced
:class:`~uaprobe.publishing.provenance.values.Value` (see :mod:`uaprobe.publishing.prose.category.phrases`).
"""

from __future__ import annotations



from uaprobe.publishing.prose.category.curve import alpha, category_words, curve_of, differs, without_index
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, PUBLISHED_R, PUBLISHED_R_LAYERS, Outputs
from uaprobe.publishing.prose.primitives.markdown import category, join_words, prose
from uaprobe.publishing.prose.primitives.study import across_models_clause, models_possessive, the_models
from uaprobe.publishing.prose.primitives.markdown import sign_word
from uaprobe.publishing.prose.category.phrases import lexical_matches_or_beats, reversing_models
from uaprobe.publishing.prose.tables.manuscript import length_category, other_range
from uaprobe.publishing.prose.primitives.wording import MATCH_TOLERANCE, STANDS_OUT
from uaprobe.schema.categories import Layerwise
from uaprobe.schema.geometry import Robustness, RobustnessPreference
from uaprobe.schema.pairmodels import PairModels
from uaprobe.schema.specs import SpecificationCurve

# ------------------------------------------------------------------------------------------------
# The length confound: one category whose B statements are longer


def confound_models(out: Outputs) -> list[str]:
    """Models whose most influential category (found from the data) is the one whose framings differ
    most in length."""
    found = []
    for m in out.models:
        i = length_category(out, m)
        categories = out.record(m, Layerwise).categories
        if i is not None and out.record(m, Robustness).loco.most_influential == categories[i]:
            found.append(m)
    return found



def stands_out(out: Outputs, m: str) -> bool:
    """Whether one category's mean token difference is at least :data:`STANDS_OUT` times any other's."""
    i = length_category(out, m)
    diffs = out.record(m, Robustness).length.mean_token_difference or []
    if i is None:
        return False
    others = [abs(d) for j, d in enumerate(diffs) if j != i and d is not None]
    return abs(diffs[i]) > 0 and all(abs(diffs[i]) >= STANDS_OUT * d for d in others)


@prose
def length_phrase(out: Outputs) -> str:
    """A sentence: per model, the category whose framings differ most in content tokens, its mean
    difference B − A and the range of the other categories'; led by whether that category stands out."""
    parts, names = [], set()
    for m in out.models:
        i = length_category(out, m)
        if i is None:
            parts.append(f"no token counts are recorded for {out.display(m)}")
            continue
        names.add(category(out.record(m, Layerwise).categories[i]))
        diff = out.value(m, Robustness, lambda r: r.length.mean_token_difference[i], "s1")
        rest = other_range(out, m, i)
        parts.append(f"{diff} for {out.display(m)}" + (f", against {rest[0]} to {rest[1]} elsewhere" if rest else ""))
    lead = ("The framings differ in length in one category far more than in any other"
            if out.models and all(stands_out(out, m) for m in out.models) else
            "No category's framings differ in length far more than every other's")
    where = (f"is largest in size in {names.pop()}" if len(names) == 1 else
             "is largest in size in a different category per model")
    return f"{lead}: the mean difference in content tokens, B − A, {where}: {'; '.join(parts)}."


@prose
def confound_verdict(out: Outputs) -> str:
    """Whether the category that carries the correlation is the longest-B one, what leaving it out does
    to the model's r and to the lexical baseline's, and whether the summed NLL moves the r."""
    same = confound_models(out)
    if not same:
        return ("For no model is the category that most influences the correlation the one whose framings "
                "differ most in length.")
    sentences = []
    who = "both models" if len(same) == len(out.models) == 2 else join_words([out.display(m) for m in same])
    sentences.append(f"For {who}, that category is also the one whose removal changes the last-layer r most "
                     "(@tbl-confound).")
    flips = [m for m in same if out.display(m) in reversing_models(out)]
    flipped = ("both models" if len(flips) == len(out.models) == 2 else
               join_words([out.display(m) for m in flips]))
    baseline = lexical_without_words(out, same)
    if flips:
        pub = out.raw_at(PUBLISHED_PYTHIA, PUBLISHED_R) if out.has(PUBLISHED_PYTHIA, PUBLISHED_R_LAYERS) \
            else None
        theirs = (", the original study's," if pub is not None and all(
            (w := out.record(m, Robustness).loco.final_r_without) is not None and w * pub > 0 for m in flips)
            else "")
        sentences.append(f"Without it, the last-layer r (mean pooling) has the other sign{theirs} for {flipped}, while the "
                         f"lexical baseline's {baseline}; over the categories left, the exact test has too little "
                         "power to establish either sign (@tbl-power), so this shows how much one category carries, "
                         "not a reversed association.")
    else:
        sentences.append(f"Without it, no model's r changes sign, and the lexical baseline's {baseline}.")
    moved = [m for m in same if normalisation_moves(out, m)]
    if moved:
        sentences.append("The per-token mean NLL divides by the statement's length; with the summed NLL instead, "
                         f"the last-layer r {summed_nll_words(out, moved)} (@tbl-confound).")
    per_char = per_character_words(out, same)
    if per_char:
        sentences.append(per_char)
    longer_b = all((d := _token_difference(out, m)) is not None and d > 0 for m in same)
    if (len(same) == len(flips) == len(moved) == len(out.models) and longer_b and baseline == "stays positive"
            and all(stands_out(out, m) for m in out.models)):
        name = category(out.record(same[0], Layerwise).categories[length_category(out, same[0])])
        sentences.append(f"The lexical baseline's agreement with {the_models(out)}, the sign of their r and its dependence "
                         f"on the normalisation of the NLL thus all rest on one category, {name}, whose B statements are "
                         "also much longer. Length is one explanation; the kind of token (numbers against names) is another, and "
                         f"which tokens the NLL scores a third{matched_words(out, same)}.")
    return " ".join(sentences)


def _token_difference(out: Outputs, m: str) -> float | None:
    """The mean token difference B - A of the category whose framings differ most in length."""
    i = length_category(out, m)
    return None if i is None else out.record(m, Robustness).length.mean_token_difference[i]


def matched_words(out: Outputs, models: list[str]) -> str:
    """How many of the most influential category's pairs the length-matched subset keeps, per model (the clause
    that says why it cannot separate length from the category's other differences)."""
    parts = []
    for m in models:
        if not out.has_record(m, PairModels):
            continue
        pairs = out.record(m, PairModels)
        cats, counts = pairs.categories, pairs.length_matched.pairs_per_category
        name = out.record(m, Robustness).loco.most_influential
        if name in cats and len(counts) == len(cats):
            parts.append(f"{counts[cats.index(name)]} for {out.display(m)}")
    return (": the length-matched pairs (@tbl-length-matched) keep few of that category's pairs "
            f"({join_words(parts)}), too few to tell these apart" if parts else "")


@prose
def length_limitation(out: Outputs) -> str:
    """A limitation: where the most influential category is also the one that differs most in length, its
    length and its content cannot be separated."""
    same = confound_models(out)
    if not same:
        return ""
    name = category(out.record(same[0], Layerwise).categories[length_category(out, same[0])])
    return (f"With one influential category ({name}), its length cannot be separated from the rest of what "
            "distinguishes it.")


def lexical_without_words(out: Outputs, models: list[str]) -> str:
    """What the lexical baseline's last-layer r (mean over seeds) does when the most influential category is
    left out: ``stays positive`` (or negative) where its sign is that of the r with every category,
    ``turns negative`` (or positive) where the sign changes, ``differs between the models`` otherwise."""
    words = set()
    for m in models:
        rob = out.record(m, Robustness)
        without = rob.loco.lexical_final_r_without
        before = sign_word(rob.lexical_baseline.final_r.mean)
        after = sign_word(None if without is None else without.mean)
        words.add(f"stays {after}" if before == after else f"turns {after}")
    return words.pop() if len(words) == 1 else "differs between the models"


def _per_character(preference: RobustnessPreference) -> bool:
    """Whether the file holds the last-layer r with the NLL per character."""
    return "final_r_char_nll" in preference.model_fields_set


def per_character_flips(out: Outputs) -> bool:
    """Whether, with the NLL per character, every model's last-layer r has the original study's sign while per token
    it has the other."""
    if not out.has(PUBLISHED_PYTHIA, PUBLISHED_R_LAYERS):
        return False
    pub = out.raw_at(PUBLISHED_PYTHIA, PUBLISHED_R)
    for m in out.models:
        preference = out.record(m, Robustness).preference
        if not _per_character(preference):
            return False
        r_tok, r_chr = preference.final_r_mean_nll, preference.final_r_char_nll
        if None in (pub, r_tok, r_chr) or not (r_chr * pub > 0 > r_tok * pub):
            return False
    return bool(out.models)


def per_character_words(out: Outputs, models: list[str]) -> str:
    """The last-layer r with the NLL per character (each statement's summed NLL over its characters: no tokenizer
    sets it), its exact p and the most influential category's mean preference, per model; what the change of
    normalisation does to the sign."""
    parts, kept = [], []
    for m in models:
        cats = out.record(m, Layerwise).categories or []
        rob = out.record(m, Robustness)
        name = rob.loco.most_influential
        if not _per_character(rob.preference) or name not in cats:
            return ""
        i = cats.index(name)
        r_tok, r_chr = rob.preference.final_r_mean_nll, rob.preference.final_r_char_nll
        parts.append(f"{out.value(m, Robustness, lambda r: r.preference.final_r_char_nll)} for {out.display(m)} "
                     f"(exact p = {out.value(m, Robustness, lambda r: r.preference.final_p_char_nll, 'p')}; mean "
                     f"preference of {category(name)} "
                     f"{out.value(m, Robustness, lambda r: r.preference.char_category_means[i], 's3')} "
                     "nats per character)")
        kept.append(r_tok is not None and r_chr is not None and r_tok * r_chr > 0)
    if not parts:
        return ""
    if per_character_flips(out):
        verdict = ("the original study's sign" + (" for every model" if len(out.models) > 1 else "") + ": the sign "
                   "of this panel's r is set by how the NLL is "
                   "normalised, per token the opposite of the original's, per character the original's")
    elif all(kept):
        verdict = "the per-token r's sign, so that sign does not come from dividing by the number of tokens"
    else:
        verdict = "the other sign than per token for " + join_words([out.display(m) for m, k in zip(models, kept)
                                                                       if not k])
    return ("With the NLL per character instead (each statement's summed NLL over its characters, a normalisation "
            f"no tokenizer sets; an exploratory check, added after the per-token results had been read, in no family "
            f"and uncorrected), the last-layer r is {join_words(parts)}: {verdict}.")


def summed_nll_words(out: Outputs, models: list[str]) -> str:
    """``changes sign for Gemma (+0.912 to −0.651) and moves for SmolLM2 (+0.972 to +0.266)``: what the summed NLL
    does to each model's last-layer r, a sign change named as one."""
    flips, moves = [], []
    for m in models:
        a = out.value(m, Robustness, lambda r: r.preference.final_r_mean_nll)
        b = out.value(m, Robustness, lambda r: r.preference.final_r_sum_nll)
        (flips if a.raw * b.raw < 0 else moves).append(f"{out.display(m)} ({a} to {b})")
    parts = ([f"changes sign for {join_words(flips)}"] if flips else []) + ([f"moves for {join_words(moves)}"]
                                                                          if moves else [])
    return join_words(parts)


def normalisation_moves(out: Outputs, m: str) -> bool:
    """Whether the last-layer r with the summed NLL differs in sign, or by more than
    :data:`~uaprobe.publishing.prose.primitives.wording.MATCH_TOLERANCE`, from the r with the per-token mean NLL."""
    preference = out.record(m, Robustness).preference
    a, b = preference.final_r_mean_nll, preference.final_r_sum_nll
    return a is not None and b is not None and (a * b < 0 or abs(a - b) > MATCH_TOLERANCE)


# ------------------------------------------------------------------------------------------------
# Verdicts


@prose
def conclusion_phrase(out: Outputs) -> str:
    """What the data support, in short sentences (the first continues "On this panel, "): lexical or not at the
    last layer, one category or not, the primary test's verdict after the correction across the models."""
    lexical = lexical_matches_or_beats(out)
    reversed_ = reversing_models(out)
    if lexical and len(lexical) == len(out.models):
        first = ("a lexical baseline that sees only the statements' tokens matches the category-level r at the last "
                 f"layer, so that r alone does not show that {models_possessive(out)} representations produce it")
    elif lexical:
        first = (f"the statements' tokens alone match the category-level r at the last layer for "
                 f"{join_words(lexical)}")
    else:
        first = f"{models_possessive(out)} category-level r at the last layer exceeds what the statements' tokens alone give"
    text = first + "."
    if reversed_:
        text += f" With mean pooling, its sign rests on a single category for {join_words(reversed_)}."
    if per_character_flips(out):
        text += (" It rests on the NLL's normalisation as well: per token its sign is the opposite of the original "
                 "study's, per character it is the original's.")
    return text + " Over the pre-declared analytic choices, " + curve_conclusion(out) + " (@sec-spec)"


def curve_conclusion(out: Outputs) -> str:
    """The primary joint test's verdict after the pre-declared correction across the models (with the p before and
    after it where it differs), and for which models the test without the pre-declared category is below α."""
    kept = [m for m in out.models if out.panel().primary.models[m].reject]
    nominal = [m for m in out.models if differs(out, m) and m not in kept]
    if kept:
        text = (f"the primary test{across_models_clause(out)} finds the correlation different from chance for "
                + join_words([out.display(m) for m in kept]))
    else:
        text = (f"the primary test{across_models_clause(out)} finds the correlation different from chance for no "
                "model, which at the power of this design (@tbl-power) is no evidence either way")
    if nominal:
        text += ("; " + join_words([f"the p of {out.display(m)}, "
                                    f"{out.value(m, SpecificationCurve, lambda r: r.primary.p, 'p')}, becomes "
                                    f"{out.panel_value(lambda r: r.primary.models[m].adjusted_p, 'p')}"
                                    for m in nominal])
                 + ", so it is inconclusive")
    without = [m for m in out.models if (i := without_index(out, m)) is not None
               and (p := curve_of(out, m).secondary.tests[i].p) is not None and p < alpha(out, m)]
    category = category_words(out, out.models[0])
    return text + (f". Without {category}, the test is below α for {join_words([out.display(m) for m in without])}"
                   if without else f". Without {category}, it is below α for no model, again inconclusive by design")
