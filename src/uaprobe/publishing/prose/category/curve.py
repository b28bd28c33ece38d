"""The specification curve as phrases.

Reads ``specification_curve.json``: every analytic choice's category-level r, the universe of the one
primary joint test (declared in ``params.yaml``), its exact joint permutation p, the secondary family with
Holm's correction, the test without the pre-declared category and layer 0 beside the declared layer. Every number shown is a sourced
:class:`~uaprobe.publishing.provenance.values.Value`; a median over a subset of the specifications is a derived
key (:func:`~uaprobe.publishing.provenance.values.median_key`) that the provenance checks recompute. The shared
direction and what each representation does to r are in :mod:`uaprobe.publishing.prose.category.direction`.
"""

from __future__ import annotations

from typing import Any, Callable

from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.prose.primitives.markdown import NUMBER_WORDS, category, join_words, prose
from uaprobe.publishing.prose.primitives.study import curve_test_word, curve_test_words, left_out_reason
from uaprobe.publishing.provenance.values import Value, median_key
from uaprobe.schema import check_key
from uaprobe.schema.specs import JointP, SpecificationCurve

CURVE = "specification_curve"


def curve_of(out: Outputs, m: str) -> SpecificationCurve:
    """The model's ``specification_curve.json``."""
    return out.record(m, SpecificationCurve)

REPRESENTATION_WORDS = {"raw": "raw", "zscore": "z-scored", "abtt": "ABTT"}
POOLING_WORDS = {"mean": "mean", "last": "last-token", "first": "first-token"}


def band_level(out: Outputs) -> str:
    """The share of the relabelled curves the figure's null band holds, as text (``95 %``): a caption's words."""
    return out.value(out.models[0], SpecificationCurve, lambda r: r.null_band.level, "percent_g").text


def alpha(out: Outputs, m: str) -> float:
    return float(curve_of(out, m).settings["alpha"])


def representations(out: Outputs, m: str) -> list[str]:
    return list(curve_of(out, m).choices.representation or [])


def spec_median(out: Outputs, m: str, **where: Any) -> Value:
    """The median r over the specifications whose columns hold the values ``where`` names (a derived, sourced
    value; :func:`~uaprobe.publishing.provenance.values.median_key`), each column a key of the schema."""
    for column in ("r", *where):
        check_key(CURVE, f"specs/{column}")
    return out.v(m, CURVE, median_key("specs/r", **where))


def representation_median(out: Outputs, m: str, representation: str) -> Value:
    """The median r over every distinct specification with ``representation`` (a derived, sourced value):
    identical specifications (the same states) are counted once, as in the joint tests."""
    return spec_median(out, m, representation=representation, distinct=True)



STATISTIC_WORDS = {"median_r": "median r", "share_positive": "share of r > 0"}


def category_words(out: Outputs, m: str) -> str:
    """The category the second joint test leaves out, in words."""
    return category(str(curve_of(out, m).joint["without_category"].left_out))


def test_words(out: Outputs, m: str, test: str) -> str:
    """Where a joint statistic is taken: ``over the universe``, ``over every layer``, ``without ground truth numeric``."""
    return {"declared": "over the universe", "every_layer": "over every layer instead",
            "without_category": f"without {category_words(out, m)}"}.get(test, test)


def floor_words(test: JointP) -> str:
    """``, the smallest p its test can give`` where the p of ``test`` sits at its test's floor."""
    return ", the smallest p its test can give" if test.at_floor else ""


def primary_statistic(out: Outputs, m: str) -> str:
    return STATISTIC_WORDS.get(str(curve_of(out, m).primary.statistic), "statistic")


@prose
def universe_phrase(out: Outputs) -> str:
    """Methods: the universe of the primary test (its axes, the pre-declared layer, the duplicates counted once
    per model), the primary statistic with its number of relabellings and smallest p, and the secondary family."""
    m0 = out.models[0]
    read, universe = out.reader(m0, SpecificationCurve), curve_of(out, m0).universe
    counts = {k: read(lambda r: r.universe.axes[k].options, "count") for k in ("policy", "representation")}
    layer = ("the last" if universe.depth == 1.0 else
             f"at depth {read(lambda r: r.universe.depth, 'f2')} of the layers")
    distinct = join_words([f"{out.value(m, SpecificationCurve, lambda r: r.universe.n_distinct, 'int')} of "
                           f"{out.value(m, SpecificationCurve, lambda r: r.universe.n_listed, 'int')} for {out.display(m)}"
                           for m in out.models])
    tests = curve_of(out, m0).secondary.tests or []
    secondary = join_words([f"the {STATISTIC_WORDS.get(t.statistic, t.statistic)} "
                            f"{test_words(out, m0, t.test)}" for t in tests])
    poolings = join_words([POOLING_WORDS.get(str(q), str(q)) for q in universe.axes["pooling"].options])
    checks = universe.robustness_checks or {}
    nll_check = bool("nll" in checks and checks["nll"].options)
    pool_check = [POOLING_WORDS.get(q, q) for q in (checks["pooling"].options if "pooling" in checks else [])]
    named = (["the summed NLL (it puts the statements' length into the preference: another estimand)"]
             if nll_check else [])
    if pool_check:
        named.append(f"{join_words(pool_check)} pooling (a lexical measure in a causal model)")
    listed = join_words(named)
    robustness = (f" {listed[:1].upper() + listed[1:]} "
                  f"{'are named robustness checks' if len(named) > 1 else 'is a named robustness check'} outside it, "
                  "each with its own joint test." if named else "")
    return ("**The primary test.** Declared in `params.yaml` (`analysis.primary`), its universe is the original "
            "study's estimand: "
            f"the preference from the per-token mean NLL, with {poolings} pooling (a state that summarises the "
            f"whole statement), crossed with {counts['policy']} position-0 policies and "
            f"{counts['representation']} representations at one pre-declared layer, {layer}: a depth curve is an "
            "estimand, not an analytic choice, and leaving a category out is an influence diagnostic, not a "
            f"choice.{robustness} The universe was first declared with every pooling and both NLLs, after the "
            "curve over every layer had been seen, and narrowed to this estimand after its results had been read: "
            "a declaration, not a preregistration, with the first universe reported beside it. Specifications "
            "with bit-identical category UA and the same NLL are one, counted once: "
            f"{distinct} are distinct. The primary statistic is the "
            f"{primary_statistic(out, m0)} over the distinct specifications; {curve_test_words(out, m0)}. The secondary "
            f"statistics, Holm-corrected as one family within each model{' (not across the models)' if len(out.models) > 1 else ''}, are {secondary}; the last two run over the "
            f"{read(lambda r: r.joint['without_category'].relabellings, 'thousands')} relabellings of the remaining "
            f"categories. {left_out_reason(out, m0)}")


CORRECTION_WORDS = {"holm": "Holm's correction", "bonferroni": "Bonferroni's correction"}


@prose
def below_alpha_phrase(out: Outputs) -> str:
    """Per model, the share of distinct specifications with every category whose own exact p is at or below α,
    uncorrected, against its mean over the relabellings (what chance gives) and its exact p."""
    def shares(m: str) -> str:
        read = out.reader(m, SpecificationCurve)
        return (f"{read(lambda r: r.below_alpha.share, 'percent')} % of the "
                f"{read(lambda r: r.below_alpha.n_specs, 'thousands')} specifications of {out.display(m)} (against "
                f"{read(lambda r: r.below_alpha.null_mean_share, 'percent')} % on average over the "
                f"relabellings; p = {read(lambda r: r.below_alpha.null_p, 'p')})")

    parts = join_words([shares(m) for m in out.models])
    return (f"Uncorrected, the {curve_test_word(out)} p of a distinct specification with every category (any layer and choice) is at "
            f"or below α for {parts}. The p of such a share applies every relabelling of the categories' preferences "
            "to all the specifications at once, which keeps their correlation (the first indicator row of "
            "@fig-specification-curve marks them, with those that leave a category out).")


@prose
def primary_phrase(out: Outputs) -> str:
    """Results: per model, the primary statistic with its exact p (said to be at the floor where it is), the
    verdict before and after the pre-declared correction across the models, the secondary family after Holm,
    and the test without the pre-declared category."""
    parts = []
    for m in out.models:
        read = out.reader(m, SpecificationCurve)
        parts.append(f"{read(lambda r: r.primary.estimate)} for {out.display(m)} "
                     f"(p = {read(lambda r: r.primary.p, 'p')}{floor_words(curve_of(out, m).primary)})")
    a = alpha(out, out.models[0])
    text = f"Over the universe, the {primary_statistic(out, out.models[0])} is {join_words(parts)}."
    nominal = [m for m in out.models if differs(out, m)]
    primary = out.panel().primary
    correction = CORRECTION_WORDS.get(str(primary.correction), "the correction")
    adjusted = join_words([f"{out.panel_value(lambda r: r.primary.models[m].adjusted_p, 'p')} for {out.display(m)}"
                           for m in out.models])
    kept = [out.display(m) for m in out.models if primary.models[m].reject]
    n = len(out.models)
    if n > 1:
        text += (f" The test runs once per model, so α = {a:g} is split across the {NUMBER_WORDS.get(n, str(n))} models "
                 f"by {correction}, declared with the primary test: the corrected p is {adjusted}.")
    if kept:
        text += f" The primary test finds the statistic different from chance for {join_words(kept)}."
    elif nominal:
        text += (f" The p of {join_words([out.display(m) for m in nominal])} is below α only before that correction: "
                 "the primary test is inconclusive for every model.")
    else:
        text += (" The primary test finds the statistic different from chance for no model: at this design's power "
                 "(@tbl-power), inconclusive, not evidence of no correlation.")
    def secondary(m: str, i: int, get: Callable[[Any], Any], fmt: str = "r") -> Value:
        return out.value(m, SpecificationCurve, lambda r: get(r.secondary.tests[i]), fmt)

    def named(m: str, i: int) -> str:
        t = curve_of(out, m).secondary.tests[i]
        return f"the {STATISTIC_WORDS.get(t.statistic, '')} {test_words(out, m, t.test)}"

    survivors = [(m, i) for m in out.models for i, t in enumerate(curve_of(out, m).secondary.tests or [])
                 if t.holm_reject]
    if survivors:
        text += (" After Holm's correction, the secondary tests find " + join_words([
            f"{named(m, i)} of {out.display(m)} (Holm p = {secondary(m, i, lambda t: t.holm_p, 'p')})"
            for m, i in survivors]) + ".")
    else:
        text += " After Holm's correction, no secondary test is significant for any model."
    nominal_secondary = [(m, i) for m in out.models for i, t in enumerate(curve_of(out, m).secondary.tests or [])
                         if not t.holm_reject and t.p is not None and t.p <= alpha(out, m)]
    if nominal_secondary:
        text += (" Before it, p falls below α for " + join_words([
            f"{named(m, i)} ({out.display(m)}, p = {secondary(m, i, lambda t: t.p, 'p')}, Holm p = "
            f"{secondary(m, i, lambda t: t.holm_p, 'p')})" for m, i in nominal_secondary]) + ".")
    without = []
    for m in out.models:
        i = without_index(out, m)
        if i is not None:
            without.append(f"{secondary(m, i, lambda t: t.estimate)} for {out.display(m)} "
                           f"(p = {secondary(m, i, lambda t: t.p, 'p')}, Holm p = "
                           f"{secondary(m, i, lambda t: t.holm_p, 'p')})")
    if without:
        text += (f" Without {category_words(out, out.models[0])}, over the same choices, the "
                 f"{primary_statistic(out, out.models[0])} is {join_words(without)}.")
    return text


def without_index(out: Outputs, m: str) -> int | None:
    """The secondary test of the primary statistic without the pre-declared category."""
    curve = curve_of(out, m)
    for i, t in enumerate(curve.secondary.tests or []):
        if t.test == "without_category" and t.statistic == curve.primary.statistic:
            return i
    return None


@prose
def layer_zero_phrase(out: Outputs) -> str:
    """Layer 0 (the token embeddings) beside the pre-declared layer: the primary statistic over the universe's
    choices at each, per model, with layer 0's exact joint p (a secondary, exploratory comparison in no family)."""
    stat = str(curve_of(out, out.models[0]).primary.statistic)
    p_key = "median_p" if stat == "median_r" else "share_p"
    parts = [f"{out.value(m, SpecificationCurve, lambda r: getattr(r.joint['layer_zero'], stat))} (p = "
             f"{out.value(m, SpecificationCurve, lambda r: getattr(r.joint['layer_zero'], p_key), 'p')})"
             f" for {out.display(m)}" for m in out.models]
    return (f"Layer 0, the token embeddings before any context, holds what the tokens carry by themselves. Over the "
            f"universe's choices at layer 0, the {primary_statistic(out, out.models[0])} is {join_words(parts)}; "
            "this is an exploratory comparison, in no family and uncorrected")


def differs(out: Outputs, m: str) -> bool:
    """Whether the primary joint p is below α."""
    p = curve_of(out, m).primary.p
    return p is not None and p < alpha(out, m)
