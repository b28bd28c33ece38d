"""The pair-level family as phrases: every (policy, pooling, metric) test at the pre-declared layer,
Holm-corrected as one family, with the length covariates alone (``pair_models.json`` ``family``) and with
the lexical baseline's metric of the same pair and pooling among the covariates (``incremental``).

Tests that two policies make on the same states are one test (the family's ``n_tests`` counts them once);
the phrases name each surviving (pooling, metric) once, with its policy where only one policy holds it.
Every number shown is a sourced :class:`~uaprobe.publishing.provenance.values.Value`.
"""

from __future__ import annotations

from dataclasses import dataclass

from uaprobe.publishing.prose.curve import POOLING_WORDS
from uaprobe.publishing.prose.formats import pretty
from uaprobe.publishing.prose.markdown import join_words, markdown_table, prose
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.prose.pair_findings import METRIC_WORDS, PAIRS

FAMILIES = {"family": "family", "incremental": "incremental/family",
            "without_category": "incremental/without_category/family"}
"""The three families: length covariates only; the lexical metric added (incremental); the incremental tests
without the pre-declared category's pairs."""

SAME_R = 10
"""Decimals to which two tests' partial r agree when they are one test on the same states."""


def survivors(out: Outputs, m: str, family: str, *, reported_only: bool | None = None) -> list[Survivor]:
    """The tests of ``family`` that survive Holm, one per test: rows on the same states (the same metric with
    bit-identical partial r and p, as under two policies that pool the same tokens) are one test, named with
    every pooling and policy it stands for. ``reported_only``: only tests with the reported pooling (True),
    only the others (False), or all (None)."""
    tests = out.raw(m, PAIRS, f"{FAMILIES[family]}/tests")
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, reject in enumerate(tests["holm_reject"]):
        if reject:
            r = tests["partial_r"][i]
            key = (tests["metric"][i], None if r is None else round(r, SAME_R), tests["permutation_p"][i])
            groups.setdefault(key, []).append(i)
    policies = set(tests["policy"])
    found = []
    for rows in groups.values():
        reported = any(tests["reported"][i] for i in rows)
        if reported_only is not None and reported != reported_only:
            continue
        held = {tests["policy"][i] for i in rows}
        found.append(Survivor(rows[0], list(dict.fromkeys(tests["pooling"][i] for i in rows)),
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
    """The family's size per model and what survives Holm in it: first with the reported pooling, then with the
    others, first with the length covariates alone, then with the lexical metric added."""
    m0 = out.models[0]
    pooling = out.raw(m0, PAIRS, "family/reported_pooling")
    sizes = join_words([f"{out.v(m, PAIRS, 'family/n_tests', 'int')} for {out.display(m)}" for m in out.models])
    text = (f"Every test at the pre-declared layer (the last) forms one family, corrected by Holm: each metric "
            f"with each pooling under each position-0 policy, tests on the same states counted once ({sizes}); "
            f"{POOLING_WORDS.get(pooling, pooling)} pooling, declared before any result, is the one reported first.")
    category = pretty(str(out.raw(m0, PAIRS, "incremental/without_category/left_out")))
    for family, lead in (("family", "With the length covariates"),
                         ("incremental", "With the lexical baseline's metric of the same pair and pooling added to "
                                         "the covariates (one column per seed)"),
                         ("without_category", f"With both, over the pairs outside {category} (their own "
                                              "within-category permutations)")):
        parts = []
        for m in out.models:
            mine = survivors(out, m, family, reported_only=True)
            names = signed_names(out, m, family, mine)
            parts.append(f"{out.v(m, PAIRS, f'{FAMILIES[family]}/n_reject', 'int')} of the "
                         f"{out.v(m, PAIRS, f'{FAMILIES[family]}/n_tests', 'int')} tests of {out.display(m)} "
                         + (f"(with {POOLING_WORDS.get(pooling, pooling)} pooling: {names})" if mine else
                            f"(none with {POOLING_WORDS.get(pooling, pooling)} pooling)"))
        text += f" {lead}, {join_words(parts)} survive Holm's correction."
    return text + " @tbl-family lists them."


def sign_word(r: float | None) -> str:
    return "undefined" if r is None else "positive" if r > 0 else "negative" if r < 0 else "zero"


def signed_names(out: Outputs, m: str, family: str, found: list[Survivor]) -> str:
    """The surviving metrics in words, grouped by the sign of their partial r (``the centroid asymmetry and
    kNN density asymmetry with a negative partial r, the margin asymmetry with a positive one``); a metric whose
    tests disagree in sign is named with both signs."""
    signs: dict[str, set[str]] = {}
    for t in found:
        metric = out.raw(m, PAIRS, f"{FAMILIES[family]}/tests/metric/{t.row}")
        signs.setdefault(METRIC_WORDS.get(metric, pretty(metric)), set()).add(
            sign_word(out.raw(m, PAIRS, f"{FAMILIES[family]}/tests/partial_r/{t.row}")))
    groups: dict[str, list[str]] = {}
    for name in sorted(signs):
        groups.setdefault(signs[name].pop() if len(signs[name]) == 1 else "mixed", []).append(name)
    parts = []
    for sign, names in groups.items():
        tail = "with partial r of both signs" if sign == "mixed" else (
            f"with a {sign} partial r" if not parts else f"with a {sign} one")
        parts.append(f"the {join_words(names)} {tail}")
    return ", ".join(parts)


FAMILY_WORDS = {"family": "length", "incremental": "length, lexical", "without_category": "length, lexical; "
                "without {category}"}
"""The covariates (and pairs) of each family, as the table names them."""


def family_table(out: Outputs) -> str:
    """Every surviving test of the three families, per model: its metric, poolings and policy, partial r and Holm
    p; a family with none says so."""
    rows = []
    for m in out.models:
        category = pretty(str(out.raw(m, PAIRS, "incremental/without_category/left_out")))
        first = True
        for family in FAMILIES:
            base = f"{FAMILIES[family]}/tests"
            found = survivors(out, m, family)
            label = FAMILY_WORDS[family].format(category=category)
            if not found:
                rows.append([out.display(m) if first else "", label, "none", "", "", "", "", ""])
                first = False
            for i, t in enumerate(found):
                metric = out.raw(m, PAIRS, f"{base}/metric/{t.row}")
                policy = ("both" if t.policy is None else "default" if t.policy == "default" else "excluded")
                ob = out.model_file(m, "option_b" if t.policy in (None, "default") else f"{t.policy}/option_b")
                last = out.raw_at(ob, "n_layers")
                rows.append([out.display(m) if first else "", label if i == 0 else "",
                             METRIC_WORDS.get(metric, pretty(metric)),
                             ", ".join(POOLING_WORDS.get(p, p) for p in t.poolings), policy,
                             out.at(ob, f"poolings/{t.poolings[0]}/metrics/{metric}/pearson_r/{last}"),
                             out.v(m, PAIRS, f"{base}/partial_r/{t.row}"),
                             f"{out.v(m, PAIRS, f'{base}/holm_p/{t.row}', 'p')}"
                             + ("*" if out.raw(m, PAIRS, f"{base}/at_floor/{t.row}") else "")])
                first = False
    return markdown_table(["Model", "Covariates", "Metric", "Pooling", "Position 0", "r", "Partial r", "Holm p"],
                          rows, align="lllllrrr")


HYPOTHESIS_SIGN = {"centroid_asymmetry": 1, "knn_density_asymmetry": 1}
"""The metrics whose sign UA's hypothesis fixes (the framing whose states sit closer to their own set is preferred:
a positive partial r); the others' sign has no stated prediction."""


def _who_survives(out: Outputs, family: str) -> tuple[str, int]:
    """``one metric of one model`` / ``several metrics of both models``: how many metrics of ``family`` survive
    with the reported pooling, and of which models, without numbers or metric names; where some of them have
    the sign opposite to :data:`HYPOTHESIS_SIGN`, says so."""
    key = FAMILIES[family]
    found = {m: [(out.raw(m, PAIRS, f"{key}/tests/metric/{t.row}"), out.raw(m, PAIRS, f"{key}/tests/partial_r/{t.row}"))
                 for t in survivors(out, m, family, reported_only=True)] for m in out.models}
    metrics = sorted({k for ks in found.values() for k, _ in ks})
    holders = [m for m in out.models if found[m]]
    who = ("both models" if len(holders) == len(out.models) == 2 else
           "one model" if len(holders) == 1 else "every model" if len(holders) == len(out.models) else
           "some models")
    words = "one metric" if len(metrics) == 1 else f"{'two' if len(metrics) == 2 else 'several'}"
    against = sorted({k for ks in found.values() for k, r in ks
                      if k in HYPOTHESIS_SIGN and r is not None and r * HYPOTHESIS_SIGN[k] < 0})
    tail = ("" if not against else ", against the hypothesis's sign" if len(metrics) == 1 else
            f", {'one' if len(against) == 1 else 'two' if len(against) == 2 else 'some'} against the hypothesis's sign")
    return f"{words} of {who}{tail}", len(metrics)


@prose
def family_abstract(out: Outputs, *, category_named: bool = False) -> str:
    """The incremental family with the reported pooling, then the same without the declared category's pairs, in
    one number-free clause; ``category_named``: the abstract named that category before."""
    pooling = out.raw(out.models[0], PAIRS, "family/reported_pooling")
    lead = f"with length and lexical covariates ({POOLING_WORDS.get(pooling, pooling)} pooling), "
    words, n = _who_survives(out, "incremental")
    text = lead + (f"{words} {'survives' if n == 1 else 'survive'}" if n else "no metric of any model survives")
    text += " Holm's correction"
    category = ("that category" if category_named else
                pretty(str(out.raw(out.models[0], PAIRS, "incremental/without_category/left_out"))))
    words, n = _who_survives(out, "without_category")
    if not n:
        return text + f"; without {category}, none does"
    head, _, tail = words.partition(", ")
    return text + f"; without {category}, {head} {'does' if n == 1 else 'do'}" + (f", {tail}" if tail else "")


@prose
def family_conclusion(out: Outputs) -> str:
    """What survives the length covariates, the lexical baseline and the pre-declared category left out together,
    per model, with the reported pooling (the Conclusion's clause)."""
    m0 = out.models[0]
    pooling = out.raw(m0, PAIRS, "family/reported_pooling")
    category = pretty(str(out.raw(m0, PAIRS, "incremental/without_category/left_out")))
    parts = []
    for m in out.models:
        mine = survivors(out, m, "without_category", reported_only=True)
        names = signed_names(out, m, "without_category", mine)
        parts.append(f"for {out.display(m)}, {names or 'nothing'}")
    return (f"with {POOLING_WORDS.get(pooling, pooling)} pooling at the last layer, what survives both statements' "
            f"lengths, the lexical baseline and {category} left out together in one pair-level family is, "
            f"{'; '.join(parts)}")
