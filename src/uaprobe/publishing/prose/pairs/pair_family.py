"""The pair-level family as phrases: every (policy, pooling, metric) test at the pre-declared layer with the
category and length covariates (``pair_models.json`` ``family``), with the lexical baseline's metric of the same
pair and pooling added (``incremental``), and with both over the pairs outside the declared category, for every
model, Holm-corrected as one family (``results/panel.json`` ``pair_family``).

Tests that two policies make on the same states are one test (counted once); the phrases name each surviving
(pooling, metric) once, with its policy where only one policy holds it. A sign is the metric's only where the
partial r without the lexical covariates has it too (``base_partial_r``); otherwise it is the lexical covariate's
(suppression) and the phrases say so. Every number shown is a sourced
:class:`~uaprobe.publishing.provenance.values.Value`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from uaprobe.names import PANEL_RESULTS
from uaprobe.publishing.prose.category.curve import POOLING_WORDS
from uaprobe.publishing.prose.primitives.formats import pretty
from uaprobe.publishing.prose.primitives.markdown import NUMBER_WORDS, join_words, markdown_table, prose, sign_word
from uaprobe.publishing.prose.primitives.markdown import category as category_name
from uaprobe.publishing.provenance.outputs import ManuscriptDataError, Outputs
from uaprobe.publishing.prose.pairs.pair_findings import METRIC_WORDS, lexical
from uaprobe.publishing.prose.primitives.study import the_models
from uaprobe.publishing.provenance.values import Value
from uaprobe.schema.pairmodels import FamilyTests, PairFamily, PairModels
from uaprobe.schema.panel import PanelPairFamily, PanelPairFamilyModel

FAMILIES: dict[str, Callable[[PairModels], PairFamily]] = {
    "family": lambda r: r.family, "incremental": lambda r: r.incremental.family,
    "without_category": lambda r: r.incremental.without_category.family}
"""The three families: length covariates only; the lexical metric added (incremental); the incremental tests
without the pre-declared category's pairs."""
PANEL_NAMES = {"family": "length", "incremental": "lexical", "without_category": "lexical_without_category"}
"""Each family's name in ``results/panel.json``'s ``pair_family``."""


def family_of(out: Outputs, m: str, family: str) -> PairFamily:
    """One model's family of :data:`FAMILIES`."""
    return FAMILIES[family](out.record(m, PairModels))


def family_value(out: Outputs, m: str, family: str, get: Callable[[PairFamily], Any], fmt: str = "r") -> Value:
    """The field ``get`` reads of one model's family, sourced."""
    return out.value(m, PairModels, lambda r: get(FAMILIES[family](r)), fmt)


def test_value(out: Outputs, m: str, family: str, get: Callable[[FamilyTests], Any], fmt: str = "r") -> Value:
    """The field ``get`` reads of the tests of one model's family, sourced."""
    return family_value(out, m, family, lambda f: get(f.tests), fmt)


def panel_pairs(out: Outputs) -> PanelPairFamily:
    """The panel-wide pair family (``results/panel.json``'s ``pair_family``)."""
    found = out.panel().pair_family
    if found is None:
        raise ManuscriptDataError(f"{PANEL_RESULTS} has no pair_family: rerun `dvc repro` (its compare stage writes it)")
    return found


def panel_family(out: Outputs, m: str, family: str) -> PanelPairFamilyModel:
    """One model's family in the panel-wide pair family."""
    return panel_pairs(out).models[m][PANEL_NAMES[family]]


def panel_family_value(out: Outputs, m: str, family: str, get: Callable[[Any], Any], fmt: str = "r") -> Value:
    """The field ``get`` reads of :func:`panel_family`, as a value."""
    return out.panel_value(lambda r: get(r.pair_family.models[m][PANEL_NAMES[family]]), fmt)

SAME_R = 10
"""Decimals to which two tests' partial r agree when they are one test on the same states."""


def survivors(out: Outputs, m: str, family: str, *, reported_only: bool | None = None,
              holm_only: bool = False) -> list[Survivor]:
    """The tests of ``family`` that survive Holm across the panel-wide family or (unless ``holm_only``) the
    panel's max-T (``maxt_reject``: the step-down within the model's family, Bonferroni across the families), one
    per test: rows on the same states (the same metric with bit-identical partial r and p, as under two policies
    that pool the same tokens) are one test, named with every pooling and policy it stands for.
    ``reported_only``: only tests with the reported pooling (True), only the others (False), or all (None)."""
    tests = family_of(out, m, family).tests
    groups: dict[tuple[object, ...], list[int]] = {}
    panel = panel_family(out, m, family)
    holm = panel.holm_reject
    maxt = [None] * len(holm) if holm_only else panel.maxt_reject
    for i, reject in enumerate(holm):
        if reject or maxt[i]:
            r = tests.partial_r[i]
            key = (tests.metric[i], None if r is None else round(r, SAME_R), tests.permutation_p[i])
            groups.setdefault(key, []).append(i)
    policies = set(tests.policy)
    found = []
    for rows in groups.values():
        reported = any(tests.reported[i] for i in rows)
        if reported_only is not None and reported != reported_only:
            continue
        held = {tests.policy[i] for i in rows}
        found.append(Survivor(rows[0], list(dict.fromkeys(tests.pooling[i] for i in rows)),
                              None if held == policies else held.pop() if len(held) == 1 else None))
    return found


@dataclass(frozen=True)
class Survivor:
    """One surviving test: its first row, the poolings it stands for, and its policy where only one holds it."""

    row: int
    poolings: list[str]
    policy: str | None


@prose
def family_phrase(out: Outputs) -> str:
    """The one family across covariate sets and models: its size, then per covariate set and model what survives
    Holm in it, first with the reported pooling."""
    m0 = out.models[0]
    pooling = out.record(m0, PairModels).family.reported_pooling
    category = category_name(out.record(m0, PairModels).incremental.without_category.left_out)
    text = (f"Every pair-level test at the pre-declared layer (the last) forms one family, corrected by Holm: each "
            "metric with each pooling under each position-0 policy, with three sets of covariates (the base set, category "
            "indicators and the two sides' lengths; these and the lexical baseline's metric of the same "
            f"pair and pooling, one column per random seed; both over the pairs outside {category}, with their own "
            f"within-category permutations), for {the_models(out)}: "
            f"{out.panel_value(lambda r: r.pair_family.n_tests, 'int')} tests, those on the same states counted once, "
            f"so its smallest Holm p is {out.panel_value(lambda r: r.pair_family.holm_floor, 'p')}. "
            f"{degenerate_words(out)} Holm ignores how strongly these tests depend on each other (the same pairs, "
            "metrics of the same states). Beside it, the *max-T* correction uses that dependence: the "
            "Westfall–Young max-T step-down over the joint within-category permutations within each model and "
            "covariate set, its p multiplied by the number of such sets, "
            f"{out.panel_value(lambda r: r.pair_family.n_families, 'int')} (Bonferroni), so that it too bounds the "
            "family-wise error over the whole panel. "
            f"{POOLING_WORDS.get(pooling, pooling).capitalize()} pooling, the declared one, is the one reported "
            f"first. {mde_words(out)}")
    for family, lead in (("family", "With the category and length covariates"),
                         ("incremental", "With the lexical metric added"),
                         ("without_category", f"With both, over the pairs outside {category}")):
        parts = []
        for m in out.models:
            parts.append(f"{panel_family_value(out, m, family, lambda f: f.n_maxt_reject, 'int')} and "
                         f"{panel_family_value(out, m, family, lambda f: f.n_reject, 'int')} of the "
                         f"{family_value(out, m, family, lambda f: f.n_tests, 'int')} tests of {out.display(m)}")
        text += f" {lead}, {join_words(parts)} survive max-T and Holm respectively."
    return text + " @tbl-family lists them with their signs."


def mde_words(out: Outputs) -> str:
    """The smallest partial r the base family's tests detect at the target power, uncorrected and at the first
    step of the panel's Holm correction, per model (once where every model's are the same)."""
    target = out.panel_value(lambda r: r.pair_family.power_target, "percent_g")

    def pair(m: str) -> str:
        return (f"{panel_family_value(out, m, 'family', lambda f: f.power.mde, 'f2')} uncorrected and "
                f"{panel_family_value(out, m, 'family', lambda f: f.power.mde_panel, 'f2')} at the first step of "
                "Holm's correction")
    same = len({(panel_family(out, m, "family").power.mde, panel_family(out, m, "family").power.mde_panel)
                for m in out.models}) == 1
    text = (f"{pair(out.models[0])} for the base set of "
            f"{'every model' if len(out.models) > 1 else out.display(out.models[0])}"
            if same else join_words([f"{pair(m)} for the base set of {out.display(m)}" for m in out.models]))
    return (f"With {target} power, a two-sided test over these pairs and covariates detects a population partial r of "
            f"{text} (Fisher-z approximation): smaller within-category associations go undetected.")


def degenerate_words(out: Outputs) -> str:
    """How many tests are degenerate (VIF above ``analysis.degenerate_vif``) and kept out of the family."""
    n = int(panel_pairs(out).n_degenerate or 0)
    vif = family_value(out, out.models[0], "family", lambda f: f.degenerate_vif, "g")
    if not n:
        return f"No test has a variance inflation factor (VIF) of its metric on its covariates above {vif}."
    return (f"{NUMBER_WORDS.get(n, str(n)).capitalize()} {'test has' if n == 1 else 'tests have'} a variance "
            f"inflation factor (VIF) of the metric on the covariates above {vif}: the covariates all but span the "
            f"metric, so {'it is' if n == 1 else 'they are'} reported as degenerate and kept out of the family.")


SUPPRESSED = "suppressed"
"""The sign of a test whose partial r without the lexical covariates, over the same pairs, has the other sign."""


def test_sign(out: Outputs, m: str, family: str, row: int) -> str:
    """``positive``, ``negative`` or :data:`SUPPRESSED`: the sign of a test's partial r, where the base covariates
    alone (category and length) give the same sign over the same pairs."""
    tests = family_of(out, m, family).tests
    r, base = tests.partial_r[row], tests.base_partial_r[row]
    if r is not None and base is not None and r * base < 0:
        return SUPPRESSED
    return sign_word(r)


def signed_names(out: Outputs, m: str, family: str, found: list[Survivor]) -> str:
    """The surviving metrics in words, grouped by the sign of their partial r (``the centroid asymmetry and
    kNN density asymmetry with a negative partial r, the margin asymmetry with a positive one``); a sign that only
    the lexical covariate gives is named as such; a metric whose tests disagree in sign is named with both."""
    signs: dict[str, set[str]] = {}
    for t in found:
        metric = family_of(out, m, family).tests.metric[t.row]
        signs.setdefault(METRIC_WORDS.get(metric, pretty(metric)), set()).add(test_sign(out, m, family, t.row))
    groups: dict[str, list[str]] = {}
    for name in sorted(signs):
        groups.setdefault(signs[name].pop() if len(signs[name]) == 1 else "mixed", []).append(name)
    parts = []
    said = False  # a signed partial r named before: the next is "one"
    for sign, names in groups.items():
        tail = ("with partial r of both signs" if sign == "mixed" else
                "with a sign that only the lexical covariate gives" if sign == SUPPRESSED else
                f"with a {sign} one" if said else f"with a {sign} partial r")
        said = said or sign not in ("mixed", SUPPRESSED)
        parts.append(f"the {join_words(names)} {tail}")
    return ", ".join(parts)


@prose
def suppression_phrase(out: Outputs) -> str:
    """How many surviving incremental tests change sign without the lexical covariates, and how far the covariates
    span the metrics of the surviving tests (their largest VIF)."""
    flipped, total, vifs = 0, 0, []
    for m in out.models:
        for family in ("incremental", "without_category"):
            for t in survivors(out, m, family):
                total += 1
                flipped += test_sign(out, m, family, t.row) == SUPPRESSED
                vifs.append((family_of(out, m, family).tests.vif[t.row] or 0.0, m, family, t.row))
    if not total:
        return "No test with the lexical covariates survives, so none can owe its sign to them"
    _, m, family, row = max(vifs)
    vif = test_value(out, m, family, lambda t: t.vif[row], "f2")
    kept = total - flipped
    share = ("every one keeps" if not flipped else "none keeps" if not kept else
             f"{kept} {'keeps' if kept == 1 else 'keep'}")
    return (f"A covariate that nearly spans the metric can reverse the sign of a partial r (suppression): of the "
            f"{total} surviving tests with the lexical covariates, {share} the sign that the category and length "
            "covariates alone give over the same pairs, and the variance inflation factor of their metrics on the "
            f"covariates is at most {vif}")


TABLE_METRIC = {"centroid_asymmetry": "centroid", "cross_centroid": "cross-centroid",
                "knn_density_asymmetry": "kNN density", "margin_asymmetry": "margin",
                "within_pair_sim": "within-pair"}
"""The metrics' short names in the family table (its caption names them)."""
FAMILY_WORDS = {"family": "base", "incremental": "lex.", "without_category": "subset"}
"""The covariates (and pairs) of each family, as the table names them (its caption defines the words)."""


def family_table(out: Outputs) -> str:
    """Every surviving test of the three families, per model: its metric, poolings and policy, r, partial r, the
    partial r without the lexical covariates over the same pairs, the VIF and the panel-wide Holm p; a family with
    none says so."""
    rows = []
    for m in out.models:
        first = True
        for family in FAMILIES:
            tests = family_of(out, m, family).tests
            found = survivors(out, m, family)
            label = FAMILY_WORDS[family]
            if not found:
                rows.append([out.display(m) if first else "", label, "none", "", "", "", "", "", "", ""])
                first = False
            ci = tests.partial_r_low is not None
            for i, t in enumerate(found):
                metric = tests.metric[t.row]
                row = t.row
                policy = ("both" if t.policy is None else "default" if t.policy == "default" else "excluded")
                rows.append([out.display(m) if first else "", label if i == 0 else "",
                             TABLE_METRIC.get(metric, pretty(metric)), ", ".join(t.poolings), policy,
                             f"{test_value(out, m, family, lambda t: t.partial_r[row], 's2')}"
                             + (f" [{test_value(out, m, family, lambda t: t.partial_r_low[row], 's2')}, "
                                f"{test_value(out, m, family, lambda t: t.partial_r_high[row], 's2')}]" if ci else ""),
                             "—" if family == "family" else test_value(out, m, family,
                                                                       lambda t: t.base_partial_r[row], "s2"),
                             test_value(out, m, family, lambda t: t.vif[row], "f2"),
                             f"{panel_family_value(out, m, family, lambda f: f.holm_p[row], 'p')}"
                             + ("*" if tests.at_floor[t.row] else ""),
                             panel_family_value(out, m, family, lambda f: f.maxt_p[row], "p")])
                first = False
    return markdown_table(["Model", "Set", "Metric", "Pooling", "Pos. 0", "Partial r [95 % CI]", "No lex.",
                           "VIF", "Holm p", "Max-T p"], rows, align="lllllrrrrr")


HYPOTHESIS_SIGN = {"centroid_asymmetry": 1, "knn_density_asymmetry": 1}
"""The metrics whose sign UA's hypothesis fixes (the framing whose states sit closer to their own set is preferred:
a positive partial r); the others' sign has no stated prediction."""


@prose
def family_conclusion(out: Outputs) -> str:
    """What survives the length covariates, the lexical baseline and the pre-declared category left out together,
    per model, with the reported pooling (the Conclusion's clause)."""
    m0 = out.models[0]
    pooling = out.record(m0, PairModels).family.reported_pooling
    category = category_name(out.record(m0, PairModels).incremental.without_category.left_out)
    parts = []
    signs: set[bool] = set()  # for each surviving metric whose sign UA predicts: whether it has that sign
    for m in out.models:
        mine = survivors(out, m, "without_category", reported_only=True)
        names = signed_names(out, m, "without_category", mine)
        parts.append(f"for {out.display(m)}, {names or 'nothing'}")
        for t in mine:
            metric = family_of(out, m, "without_category").tests.metric[t.row]
            sign = test_sign(out, m, "without_category", t.row)
            if metric in HYPOTHESIS_SIGN and sign in ("positive", "negative"):
                signs.add((sign == "positive") == (HYPOTHESIS_SIGN[metric] > 0))
    predicted = join_words([METRIC_WORDS.get(k, pretty(k)) for k in HYPOTHESIS_SIGN])
    verdict = ("" if not signs else
               f"; there, of the {predicted}, whose sign UA predicts, what survives has the opposite sign"
               if signs == {False} else
               f"; there, of the {predicted}, whose sign UA predicts, what survives has that sign" if signs == {True}
               else f"; there, of the {predicted}, whose sign UA predicts, what survives has both signs")
    return (f"with {POOLING_WORDS.get(pooling, pooling)} pooling at the last layer, what survives both statements' "
            f"lengths, the lexical baseline and {category} left out together in one pair-level family is, "
            f"{'; '.join(parts)}{verdict}")


@prose
def lexical_versus_models(out: Outputs, metric: str = "centroid_asymmetry") -> str:
    """Per model, the lexical baseline's median partial r for ``metric`` (position 0 excluded) beside the range of
    |partial r| of the model's surviving pair-level tests (any set of covariates, Holm or max-T); the tokens'
    association is called of the same order where it lies within that range for every model; and how many tests
    survive with the lexical covariate over every pair (Holm across the panel)."""
    parts = []
    for m in out.models:
        lex = lexical(out, m, metric)[0]
        sizes = [abs(r) for family in FAMILIES for t in survivors(out, m, family)
                 if (r := family_of(out, m, family).tests.partial_r[t.row]) is not None]
        if not sizes or lex.raw is None:
            continue
        parts.append(f"{lex} with the tokenizer of {out.display(m)}, against |partial r| from {min(sizes):.2f} to "
                     f"{max(sizes):.2f} for its surviving tests")
    if not parts:
        return ""
    counts = [int(panel_family(out, m, "incremental").n_reject or 0) for m in out.models]
    survive = ("no test of any model survives Holm's correction" if not any(counts) else
               join_words([f"{panel_family_value(out, m, 'incremental', lambda f: f.n_reject, 'int')} of the tests "
                           f"of {out.display(m)}" for m in out.models]) + " survive Holm's correction")
    return (f"At the pair level, the lexical baseline's {METRIC_WORDS.get(metric, pretty(metric))} alone has a median "
            f"partial r of {join_words(parts)} (other metrics and sets of pairs): the tokens alone carry an "
            "association of that size, so only a test with the lexical covariate speaks for the states; over every "
            f"pair, with that covariate, {survive}.")


@prose
def hypothesis_synthesis(out: Outputs) -> str:
    """Which reading the pair level supports, per model: the surviving tests (Holm across the panel, any set of
    covariates) of the metrics whose sign UA predicts, with that sign, the other or both."""
    parts, verdicts = [], set()
    for m in out.models:
        signs: dict[str, set[bool]] = {}
        for family in FAMILIES:
            for t in survivors(out, m, family, holm_only=True):
                metric = family_of(out, m, family).tests.metric[t.row]
                sign = test_sign(out, m, family, t.row)
                if metric in HYPOTHESIS_SIGN and sign in ("positive", "negative"):
                    signs.setdefault(metric, set()).add((sign == "positive") == (HYPOTHESIS_SIGN[metric] > 0))
        if not signs:
            parts.append(f"for {out.display(m)}, none of them survives")
            verdicts.add("none")
            continue
        agree = [METRIC_WORDS.get(k, pretty(k)) for k, v in signs.items() if v == {True}]
        against = [METRIC_WORDS.get(k, pretty(k)) for k, v in signs.items() if v == {False}]
        mixed = [METRIC_WORDS.get(k, pretty(k)) for k, v in signs.items() if len(v) > 1]
        words = ([f"the {join_words(agree)} with the predicted sign"] if agree else []) + (
            [f"the {join_words(against)} with the opposite sign"] if against else []) + (
            [f"the {join_words(mixed)} with both signs"] if mixed else [])
        parts.append(f"for {out.display(m)}, {join_words(words)}")
        verdicts.add("for" if agree and not against and not mixed else "against" if against and not agree and not
                     mixed else "mixed")
    predicted = join_words([METRIC_WORDS.get(k, pretty(k)) for k in HYPOTHESIS_SIGN])
    every = "for every model" if len(out.models) > 1 else f"for {out.display(out.models[0])}"
    summary = (f"so the pair level supports UA's hypothesis {every}" if verdicts == {"for"} else
               f"so the pair level speaks against UA's hypothesis {every}" if verdicts == {"against"} else
               "so the pair level does not support UA's hypothesis consistently"
               + (" from one model to the other" if len(out.models) == 2 else
                  " over the panel" if len(out.models) > 2 else ""))
    text = (f"Of the {predicted}, whose sign UA predicts, the tests surviving Holm's correction over the panel "
            f"(any pooling and set of covariates) show, {'; '.join(parts)}: {summary}. The surviving metrics are computed from the same states and "
            "correlate with each other, so several survivors of one model are not independent findings.")
    swings = [out.display(m) for m in out.models
              if int(panel_family(out, m, "without_category").n_reject or 0) > 0
              and not any(int(panel_family(out, m, f).n_reject or 0) > 0
                          for f in ("family", "incremental"))]
    if swings:
        category = category_name(out.record(out.models[0], PairModels).incremental.without_category.left_out)
        text += (f" For {join_words(swings)}, every survivor needs {category} left out, and none survives over every "
                 "pair: the within-category association differs between the categories, which one slope per family "
                 "does not describe.")
    return text
