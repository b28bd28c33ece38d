"""What the design can show, as phrases and tables: the power of the exact category-level test
(``specification_curve.json`` ``power``), the original study's published r faced with this panel's, why its
model is not run here, and the length-matched pairs and mixed models of ``pair_models.json``. Every number
shown is a sourced :class:`~uaprobe.publishing.provenance.values.Value`; counts come from the results."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from uaprobe.publishing.prose.category.curve import POOLING_WORDS, category_words, curve_of
from uaprobe.publishing.prose.category.curve import alpha as curve_alpha
from uaprobe.publishing.prose.primitives.formats import pretty
from uaprobe.publishing.prose.primitives.markdown import NUMBER_WORDS, join_words, markdown_table, prose
from uaprobe.publishing.prose.pairs.pair_findings import METRIC_WORDS
from uaprobe.publishing.prose.primitives.markdown import category as category_name
from uaprobe.publishing.prose.category.phrases import layer_span, negative_layers, position0_inversions
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, PUBLISHED_R, Outputs
from uaprobe.publishing.provenance.values import Value
from uaprobe.schema.categories import Layerwise, Validation
from uaprobe.schema.geometry import Robustness
from uaprobe.schema.pairmodels import LengthMatched, PairModels
from uaprobe.schema.specs import SpecificationCurve

PYTHIA_COMMAND = "dvc exp run -S preset=original -S 'models=[pythia-6-9b]'"
"""The one command that runs the original study's model with its settings (params.yaml's catalog and preset)."""


def _count(n: int) -> str:
    return NUMBER_WORDS.get(n, str(n))


def power_table(out: Outputs) -> str:
    """Per model, statistic (r of the reference specification; the primary median r over the universe) and set of
    categories (every one; without the pre-declared one): the smallest attainable p, the observed statistic and its
    exact p, the power at each planted correlation, and the minimum detectable effect."""
    m0 = out.models[0]
    planted = curve_of(out, m0).power.sets[0].planted or []
    rows = []
    for m in out.models:
        first = True
        curve = curve_of(out, m)
        for sets_of, label in ((lambda r: r.power.sets, "r, one specification"),
                               (lambda r: r.power.primary.sets, "median r, universe")):
            for i, s in enumerate(sets_of(curve) or []):
                cell = _power_cell(out, m, sets_of, i)
                rows.append([out.display(m) if first else "", label if i == 0 else "",
                             "all" if s.left_out is None else "one out",
                             cell(lambda t: t.n_categories, "int"), cell(lambda t: t.p_floor, "f4"),
                             cell(lambda t: t.observed_r), cell(lambda t: t.observed_p, "p"),
                             *[cell(lambda t, j=j: t.power[j], "f2") for j in range(len(planted))],
                             cell(lambda t: t.mde, "f2")])
                first = False
    head = ["Model", "Statistic", "Categories", "n", "Floor", "Value", "p", *[f"ρ = {r:g}" for r in planted], "MDE"]
    return markdown_table(head, rows, align="lll" + "r" * (len(head) - 3))


def _power_cell(out: Outputs, m: str, sets_of: Callable[[Any], Any], i: int) -> Callable[..., Value]:
    """A reader of the ``i``-th set of those ``sets_of`` takes from the specification curve: ``cell(get, fmt)``."""
    return lambda get, fmt="r": out.value(m, SpecificationCurve, lambda r: get(sets_of(r)[i]), fmt)


@prose
def power_phrase(out: Outputs) -> str:
    """Methods: how the power is simulated, for one specification and for the primary statistic, and what it means
    for a null."""
    m0 = out.models[0]
    target = out.value(m0, SpecificationCurve, lambda r: r.power.target, "percent_g")
    draws = out.value(m0, SpecificationCurve, lambda r: r.power.draws, "thousands")
    pooling = POOLING_WORDS.get(str(curve_of(out, m0).power.specification["pooling"]), "mean")
    return ("**Power.** The exact test's reach depends on the categories' UA itself, so its power is simulated "
            f"with each model's own category UA held fixed ({pooling} pooling, raw states, "
            "the last layer: the reference specification): preferences are drawn with a planted population "
            f"correlation ρ with the standardised UA plus independent normal noise, {draws} draws per ρ, and the "
            "power is the share whose exact p reaches α. The same simulated preferences give the power of the "
            "primary statistic (the universe's median r, with its joint exact p). "
            "The *floor* is the smallest p the test can attain; the "
            f"*minimum detectable effect* (MDE) is the smallest ρ on a grid with {target} power (@tbl-power). "
            "A category-level p above α is therefore read as no evidence at this power, not as evidence of no "
            "association; the pair level, with its "
            f"{out.value(m0, PairModels, lambda r: r.n_pairs, 'int')} pairs, carries the inference the category level cannot."
            f"{powerless_words(out)}")


def powerless_words(out: Outputs) -> str:
    """Where the primary statistic's simulated power falls below α at the largest planted correlation (the planted
    correlation of one specification does not carry over to the universe's others): which models and sets, and
    what that means for its p."""
    found = []
    for m in out.models:
        power_of = curve_of(out, m).power
        for i, st in enumerate(power_of.primary.sets or []):
            power, planted = st.power or [], st.planted or []
            if power and power[-1] is not None and power[-1] < (power_of.alpha or 0.0):
                found.append((m, i, len(planted) - 1))
    if not found:
        return ""
    where = join_words([f"{out.display(m)} {'with every category' if i == 0 else 'with one category out'} "
                        f"({out.value(m, SpecificationCurve, lambda r: r.power.primary.sets[i].power[j], 'f2')} at ρ = "
                        f"{out.value(m, SpecificationCurve, lambda r: r.power.primary.sets[i].planted[j], 'g')})"
                        for m, i, j in found])
    return (" Planted on one specification, the correlation need not carry over to the universe's other "
            "specifications, whose UA can disagree with it: the primary statistic's power then falls below α, as "
            f"for {where}. Its p stays valid under the null, but such a test cannot find a correlation of one "
            "specification, and a p above α from it says nothing.")


@prose
def original_phrase(out: Outputs) -> str:
    """Results: the original study's last-layer r beside this panel's, what the sign means, and the position-0
    reading for a model without a BOS."""
    published = out.at(PUBLISHED_PYTHIA, PUBLISHED_R, "s2")
    ours = join_words([f"{out.value(m, Robustness, lambda r: r.policies.default.final_r)} for {out.display(m)}"
                       for m in out.models])
    signs = {(out.record(m, Robustness).policies.default.final_r or 0.0) > 0 for m in out.models}
    pub = out.raw_at(PUBLISHED_PYTHIA, PUBLISHED_R) or 0.0
    relation = ("the opposite sign" if signs == {pub < 0} else "the same sign" if signs == {pub > 0}
                else "signs that differ between the models")
    text = (f"The original study reports r = {published} at the last layer of Pythia-6.9B; here, at that layer "
            f"(mean pooling), r is {ours}: {relation}. The models differ in size, training and precision, so the "
            "two are not a replication of each other, and at the power of @tbl-power this panel's sign is not "
            f"established by the category-level test alone{original_test_words(out)}")
    sink_made = [out.display(m) for m, default, excluded in position0_inversions(out)
                 if not excluded and not out.record(m, Layerwise).extraction.bos_added]
    if sink_made:
        text += (f". The strongest negative r here is at the intermediate layers of {join_words(sink_made)} with "
                 "mean pooling, and it appears only while position 0 (the attention sink, and there also the first "
                 "word) is pooled (@sec-sink); like Pythia, that model adds no BOS. The original notebooks drop "
                 "position 0 from every pooled state, so the sink cannot have made their negative r in this way")
    located = divergence_words(out)
    if located:
        text += f". {located}"
    negatives = negative_without_sink(out)
    if negatives:
        text += (". Negative r need no sink, though: with position 0 excluded, the category-level r is negative "
                 f"{negatives}. A negative r at intermediate layers is thus within what this panel shows without "
                 "position 0, and its layers and sign depend on the pooling")
    return text


def original_test_words(out: Outputs) -> str:
    """The original study's published category points under this paper's exact test (``results/panel.json``
    ``original``): r, its exact p, the power at the largest planted correlation and r with one category left out;
    empty where the panel holds no such points."""
    theirs = out.panel().original
    if theirs is None:
        return ""
    planted = theirs.power.planted or []
    j = len(planted) - 1
    loo = [r for r in theirs.leave_one_out_r or [] if r is not None]
    lo = min(range(len(loo)), key=lambda i: loo[i]) if loo else None
    hi = max(range(len(loo)), key=lambda i: loo[i]) if loo else None
    n = len(theirs.categories or [])
    read = out.panel_value
    text = (f": the original's own {_count(n)} published category points give, under this paper's exact test, "
            f"r = {read(lambda r: r.original.r, 's3')} with p = {read(lambda r: r.original.p, 'p')} "
            f"over {read(lambda r: r.original.orders, 'thousands')} orders (power "
            f"{read(lambda r: r.original.power.power[j], 'f2')} at a planted ρ of "
            f"{read(lambda r: r.original.power.planted[j], 'g')})")
    if lo is not None and hi is not None:
        names = theirs.categories or []
        weakest = min(range(len(loo)), key=lambda i: abs(loo[i]))
        text += (f", and r from {read(lambda r: r.original.leave_one_out_r[lo], 's3')} to "
                 f"{read(lambda r: r.original.leave_one_out_r[hi], 's3')} with one category left out"
                 + (f" (nearest zero without {category_name(names[weakest])})" if len(names) == len(loo) else ""))
    passes, kept, ours_neither = _original_verdict(out)
    if passes and kept:
        text += (". The original's r thus passes the exact test, uncorrected for the layers it was read at, and "
                 "keeps its sign with any category left out" + ("; this panel's does neither. That one p is below α "
                                                                 "and the other is not is no test of their difference"
                                                                 if ours_neither else ""))
    elif kept:
        text += ". The original's sign keeps with any category left out, but its exact p is above α"
    return text


def _original_verdict(out: Outputs) -> tuple[bool, bool, bool]:
    """(the original's published points pass the exact test at α; every leave-one-out r keeps their sign; this
    panel's reference r passes for no model and reverses without its most influential category for some)."""
    theirs = out.panel().original
    if theirs is None:
        return False, False, False
    r, p = theirs.r, theirs.p
    loo = [v for v in theirs.leave_one_out_r or [] if v is not None]
    alpha = curve_alpha(out, out.models[0])
    kept = bool(loo) and r is not None and all(v * r > 0 for v in loo)
    ours_pass = any((q := curve_of(out, m).power.sets[0].observed_p) is not None and q <= alpha
                    for m in out.models)
    ours_reverse = any(out.record(m, Robustness).loco.sign_reversed for m in out.models)
    return p is not None and p <= alpha, kept, not ours_pass and ours_reverse


@prose
def discussion_original(out: Outputs) -> str:
    """The Discussion's sentence on the original's r and this panel's: both rest on as many categories, whose exact
    test has the power of the power table; whether the original's passes it; where the two part; the pair level as
    the place to tell the readings apart."""
    n = out.value(out.models[0], Layerwise, lambda r: r.categories, "count")
    passes, kept, _ = _original_verdict(out)
    found = divergence(out)
    text = ("The original study's last-layer r and this panel's are both category-level correlations over the same "
            f"{n} categories, whose exact test has the power of @tbl-power")
    text += (": the original's passes it, with no correction for its choice of layer, and this panel's does not"
             if passes else ": neither is settled by it")
    if found is not None and found.in_preference:
        text += "; they part in one category's preference, not in its UA (@sec-spec)"
    elif found is not None:
        text += "; they part in one category (@sec-spec)"
    return text + ". The pair-level tests, which have more power, are where the two readings can be told apart."


@prose
def original_conclusion(out: Outputs) -> str:
    """The Conclusion's sentence on the original's published points: where they pass the exact test and keep
    their sign with any category out while this panel's do neither, the two results differ in more than power."""
    passes, kept, ours_neither = _original_verdict(out)
    if not (passes and kept and ours_neither):
        return ""
    theirs = out.panel().original
    n = len(theirs.categories or []) if theirs is not None else 0
    return ("The original's published category points, under the same exact test, pass it (its choice of layer "
            "uncorrected) and keep their sign with any category left out; this panel's do neither, though "
            f"with {_count(n)} points on each side that contrast is not itself a test of a difference.")


def negative_without_sink(out: Outputs, poolings: tuple[str, ...] = ("mean", "last")) -> str:
    """Per model and pooling with any negative layer under the policy that excludes position 0
    (``sink_excluded/layerwise.json``): at how many of the layers, which, and the most negative r."""
    parts = []
    for m in out.models:
        for pooling in poolings:
            rs = out.record(m, Layerwise, stem="sink_excluded/layerwise").poolings[pooling].pearson_r or []
            neg = negative_layers(out, m, "sink_excluded/layerwise", pooling)
            if not neg:
                continue
            low = min(neg, key=lambda i: rs[i])
            parts.append(f"at {len(neg)} of the {len(rs)} layers of {out.display(m)} with "
                         f"{POOLING_WORDS.get(pooling, pooling)} pooling ({layer_span(neg)}, down to "
                         f"{out.value(m, Layerwise, lambda r: r.poolings[pooling].pearson_r[low], stem='sink_excluded/layerwise')})")
    return join_words(parts)


def _category_row(out: Outputs, m: str, category: str) -> int | None:
    rows = out.record(m, Validation).variants["mean"].table or []
    return next((i for i, row in enumerate(rows) if row.category == category), None)


class Divergence(NamedTuple):
    """Where this panel's r and the original's part (:func:`divergence`)."""

    category: str
    """the category that carries every model's sign"""
    published: int
    """its index among the published points"""
    rows: list[int]
    """its row in each model's validation table"""
    same_ua: bool
    """every model's UA there has the original's sign"""
    same_preference: bool
    """every model's mean preference there has the original's sign"""

    @property
    def in_preference(self) -> bool:
        """The signs part in the preference alone."""
        return self.same_ua and not self.same_preference


def divergence(out: Outputs) -> Divergence | None:
    """(the category that carries every model's sign, its index among the published points, its row in each
    model's validation table, whether every model's UA there has the original's sign, whether every model's mean
    preference does); None where the models' most influential categories differ or no published point matches."""
    theirs = out.panel().original
    if theirs is None:
        return None
    cats = {out.record(m, Robustness).loco.most_influential for m in out.models}
    names = theirs.categories or []
    if len(cats) != 1 or (cat := cats.pop()) not in names:
        return None
    j = names.index(cat)
    ua_o, pref_o = theirs.ua[j], theirs.preference[j]
    rows, same_ua, same_pref = [], True, True
    for m in out.models:
        i = _category_row(out, m, cat)
        if i is None:
            return None
        row = out.record(m, Validation).variants["mean"].table[i]
        ua, pref = row.ua, row.mean_preference
        if None in (ua, pref, ua_o, pref_o):
            return None
        same_ua &= ua * ua_o > 0
        same_pref &= pref * pref_o > 0
        rows.append(i)
    return Divergence(cat, j, rows, same_ua, same_pref)


@prose
def divergence_words(out: Outputs) -> str:
    """Where this panel's r and the original's part: in the category that carries every model's sign (the most
    influential one), whether UA or the mean preference has the other sign than the original's published point;
    empty where :func:`divergence` finds no such category."""
    found = divergence(out)
    if found is None:
        return ""
    cat, j, rows, same_ua, same_pref = found

    def here(key: str, fmt: str) -> str:
        return join_words([str(out.value(m, Validation, lambda r: getattr(r.variants["mean"].table[i], key), fmt))
                           for m, i in zip(out.models, rows)])
    ua_words = (f"UA has {'the original' + chr(39) + 's' if same_ua else 'the other'} sign "
                f"({out.panel_value(lambda r: r.original.ua[j], 's3')} there, {here('ua', 's3')} here)")
    pref_words = (f"the mean preference {'the same' if same_pref else 'the other'} sign "
                  f"({out.panel_value(lambda r: r.original.preference[j], 's2')} there, "
                  f"{here('mean_preference', 's2')} here)")
    where = ("so the opposite r comes from the preference, the per-token NLL difference, in that one category"
             if same_ua and not same_pref else
             "so the opposite r comes from the UA in that one category" if same_pref and not same_ua else
             "so both differ in that category" if not same_ua else "so neither differs in sign there")
    return f"In {category_name(cat)}, the category that carries the sign, {ua_words} and {pref_words}: {where}"


@prose
def checks_phrase(out: Outputs) -> str:
    """Results: the primary statistic over the universe as first declared and over each named robustness check,
    per model, with its exact joint p (comparisons in no family)."""
    m0 = out.models[0]
    stat = str(curve_of(out, m0).primary.statistic)
    p_key = "median_p" if stat == "median_r" else "share_p"
    words = {"median_r": "median r", "share_positive": "share of r > 0"}.get(stat, stat)

    def per_model(test: str) -> str:
        def joint(m: str, key: str, fmt: str = "r") -> Value:
            return out.value(m, SpecificationCurve, lambda r: getattr(r.joint[test], key), fmt)
        return join_words([f"{joint(m, stat)} (p = {joint(m, p_key, 'p')}) for {out.display(m)}" for m in out.models])
    parts = [f"over the universe as first declared, every pooling and NLL, the {words} is {per_model('full_universe')}"]
    checks = curve_of(out, m0).universe.robustness_checks or {}
    if "nll" in checks and checks["nll"].options:
        parts.append(f"with the summed NLL instead, {per_model('other_nll')}")
    if "pooling" in checks and checks["pooling"].options:
        pools = join_words([POOLING_WORDS.get(q, q) for q in checks["pooling"].options])
        parts.append(f"with {pools} pooling instead, {per_model('other_poolings')}")
    text = "Beside the primary universe, as comparisons in no family: " + "; ".join(parts)

    def between(m: str) -> bool:
        full, a, b = (getattr(curve_of(out, m).joint[t], stat) for t in ("full_universe", "declared", "other_nll"))
        return None not in (full, a, b) and min(a, b) < full < max(a, b)
    if stat == "median_r" and all(between(m) for m in out.models):
        text += (". The first universe mixed the two NLLs' estimands, and its median falls between the medians of "
                 "each")
    return text


@prose
def pythia_phrase(out: Outputs) -> str:
    """Why the original study's model is not run here, and the one command that runs it."""
    return ("Pythia is not run here: its weights come from the Hugging Face hub, which the machines this paper is "
            "built on cannot reach, and no Python package ships them. Where the hub (or its cache) is reachable, "
            f"`{PYTHIA_COMMAND}` runs it with the original notebooks' settings (position 0 dropped, 16-bit floats) "
            "and rebuilds this paper with it.")


def length_matched_table(out: Outputs) -> str:
    """Per model: the length-matched pairs per category, the category-level r and exact p for each primary pooling,
    and the pair-level family over them (tests, Holm and max-T survivors)."""
    m0 = out.models[0]
    poolings = list(out.record(m0, PairModels).length_matched.category.poolings)
    rows = []
    for m in out.models:
        def matched(get: Callable[[LengthMatched], Any], fmt: str = "r", m: str = m) -> Value:
            return out.value(m, PairModels, lambda r: get(r.length_matched), fmt)

        kept = ", ".join(str(k) for k in out.record(m, PairModels).length_matched.pairs_per_category)
        row = [out.display(m), f"{matched(lambda lm: lm.n_pairs, 'int')} ({kept})"]
        for p in poolings:
            row += [matched(lambda lm: lm.category.poolings[p].r),
                    matched(lambda lm: lm.category.poolings[p].permutation_p, "p")]
        row += [matched(lambda lm: lm.pair.family.n_tests, "int"), matched(lambda lm: lm.pair.family.n_reject, "int"),
                matched(lambda lm: lm.pair.family.n_maxt_reject, "int")]
        rows.append(row)
    head = ["Model", "Pairs (per category)"]
    for p in poolings:
        head += [f"r, {POOLING_WORDS.get(p, p)}", "p"]
    head += ["Tests", "Holm", "Max-T"]
    return markdown_table(head, rows, align="ll" + "r" * (len(head) - 2))


@prose
def length_matched_phrase(out: Outputs) -> str:
    """Results: which pairs are length-matched, how many remain, and what the two levels give over them."""
    m0 = out.models[0]
    k = out.record(m0, PairModels).length_matched.max_token_difference
    counts = join_words([f"{out.value(m, PairModels, lambda r: r.length_matched.n_pairs, 'int')} of "
                         f"{out.value(m, PairModels, lambda r: r.length_matched.n_pairs_all, 'int')} for "
                         f"{out.display(m)}" for m in out.models])
    cat = category_words(out, m0)
    fewest = min((out.record(m, PairModels).length_matched.pairs_per_category[
        out.record(m, PairModels).categories.index(curve_of(out, m).joint["without_category"].left_out)], m)
        for m in out.models)
    surviving = sum(out.record(m, PairModels).length_matched.pair.family.n_maxt_reject
                    + out.record(m, PairModels).length_matched.pair.family.n_reject for m in out.models)
    tail = ("no pair-level test survives either correction" if surviving == 0 else
            "some pair-level tests survive, as counted in the table")
    kept, total, flips = 0, 0, []
    for m in out.models:
        for p, level in out.record(m, PairModels).length_matched.category.poolings.items():
            r = level.r
            rs = out.record(m, Layerwise).poolings[p].pearson_r or []
            full = rs[-1] if rs else None
            if r is not None and full is not None:
                total += 1
                kept += r * full > 0
                if r * full <= 0:
                    flips.append(f"{out.display(m)} with {POOLING_WORDS.get(p, p)} pooling "
                                 f"({out.value(m, PairModels, lambda r: r.length_matched.category.poolings[p].r)})")
    sign = ("keeps the sign it has over all pairs" if kept == total else
            "changes the sign it has over all pairs" if kept == 0 else
            f"keeps its sign in {_count(kept)} of the {_count(total)} model and pooling combinations and "
            f"changes it for {join_words(flips)}")
    return (f"On the pairs whose statements differ by at most {_count(int(k))} content "
            f"{'token' if k == 1 else 'tokens'} ({counts}; as few as {fewest[0]} in {cat}), the category-level r "
            f"{sign} (exact p in the table), and {tail} (@tbl-length-matched)")


def mixed_survivors(out: Outputs, m: str, *, pooling: str | None = None) -> list[int]:
    """The mixed-model fits of ``m`` whose Wald p is at or below α (uncorrected), with ``pooling`` if given."""
    mixed = out.record(m, PairModels).mixed
    t = mixed.tests
    return [i for i, p in enumerate(t.p) if p is not None and p <= mixed.alpha and (pooling is None or t.pooling[i] == pooling)]


@prose
def mixed_phrase(out: Outputs) -> str:
    """Results: the mixed models with the categories as groups, per model: the fits, how many converged and
    which have a Wald p below α, uncorrected, with the reported pooling."""
    m0 = out.models[0]
    pooling = out.record(m0, PairModels).family.reported_pooling
    parts = []
    for m in out.models:
        t = out.record(m, PairModels).mixed.tests
        found = mixed_survivors(out, m, pooling=pooling)
        names = join_words(sorted({f"the {METRIC_WORDS.get(t.metric[i], pretty(t.metric[i]))} (slope "
                                   f"{out.value(m, PairModels, lambda r: r.mixed.tests.slope[i], 's2')})"
                                   for i in found if t.policy[i] == "default"}))
        parts.append(f"{out.display(m)}: {names or 'none'}")
    n = out.value(m0, PairModels, lambda r: r.mixed.n_groups, "int")
    return ("With the categories as groups instead of fixed effects (a linear mixed model with a random intercept "
            f"and a random slope of the standardised metric in each of the {n} categories, fitted by restricted "
            "maximum likelihood with statsmodels), the metrics whose fixed slope has a Wald p of α or less, "
            f"uncorrected ({POOLING_WORDS.get(pooling, pooling)} pooling, default policy), are "
            f"{'; '.join(parts)}. The slope is the change in the preference per standard deviation of the metric; "
            "with so few groups the Wald test is liberal, so these fits show the direction a random slope leaves, "
            "not a corrected finding")


@prose
def scope_phrase(out: Outputs) -> str:
    """Methods: the sidedness of every test, and which tokens the NLL scores for each model (the first token of
    the input has no context and is never scored)."""
    scored = []
    for m in out.models:
        if out.record(m, Layerwise).extraction.bos_added:
            scored.append(f"for {out.display(m)} the BOS is that first token, so every word is scored")
        else:
            scored.append(f"for {out.display(m)}, which adds no BOS, the first word is not scored")
    return ("Every permutation test here is two-sided: it compares |r| with the |r| of each relabelling. The NLL "
            "of a statement scores each of its tokens from the tokens before it, so the first token of the input, "
            f"which has none, is never scored: {'; '.join(scored)}.")


__all__ = ["checks_phrase", "scope_phrase", "PYTHIA_COMMAND", "length_matched_phrase", "length_matched_table", "mixed_phrase", "mixed_survivors",
           "original_phrase", "power_phrase", "power_table", "pythia_phrase"]
