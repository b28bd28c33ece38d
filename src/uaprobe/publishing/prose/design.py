"""What the design can show, as phrases and tables: the power of the exact category-level test
(``specification_curve.json`` ``power``), the original study's published r faced with this panel's, why its
model is not run here, and the length-matched pairs and mixed models of ``pair_models.json``. Every number
shown is a sourced :class:`~uaprobe.publishing.provenance.values.Value`; counts come from the results."""

from __future__ import annotations

from uaprobe.publishing.prose.curve import CURVE, POOLING_WORDS, category_words
from uaprobe.publishing.prose.formats import pretty
from uaprobe.publishing.prose.markdown import NUMBER_WORDS, join_words, markdown_table, prose
from uaprobe.publishing.prose.pair_findings import METRIC_WORDS, PAIRS
from uaprobe.publishing.prose.phrases import position0_inversions
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, Outputs

PYTHIA_COMMAND = "dvc exp run -S preset=original -S 'models=[pythia-6-9b]'"
"""The one command that runs the original study's model with its settings (params.yaml's catalog and preset)."""


def _count(n: int) -> str:
    return NUMBER_WORDS.get(n, str(n))


def power_table(out: Outputs) -> str:
    """Per model and set of categories (every one; without the pre-declared one): the smallest attainable p, the
    observed r and its exact p, the power at each planted correlation, and the minimum detectable effect."""
    m0 = out.models[0]
    planted = out.raw(m0, CURVE, "power/sets/0/planted") or []
    rows = []
    for m in out.models:
        for i, s in enumerate(out.raw(m, CURVE, "power/sets") or []):
            base = f"power/sets/{i}"
            rows.append([out.display(m) if i == 0 else "",
                         "all" if s["left_out"] is None else f"without {pretty(s['left_out'])}",
                         out.v(m, CURVE, f"{base}/n_categories", "int"), out.v(m, CURVE, f"{base}/p_floor", "f4"),
                         out.v(m, CURVE, f"{base}/observed_r"), out.v(m, CURVE, f"{base}/observed_p", "p"),
                         *[out.v(m, CURVE, f"{base}/power/{j}", "f2") for j in range(len(planted))],
                         out.v(m, CURVE, f"{base}/mde", "f2")])
    head = ["Model", "Categories", "n", "Floor", "r", "p", *[f"ρ = {r:g}" for r in planted], "MDE"]
    return markdown_table(head, rows, align="ll" + "r" * (len(head) - 2))


@prose
def power_phrase(out: Outputs) -> str:
    """Methods: how the power is simulated, and what it means for a null."""
    m0 = out.models[0]
    target = out.v(m0, CURVE, "power/target", "percent_g")
    draws = out.v(m0, CURVE, "power/draws", "thousands")
    pooling = POOLING_WORDS.get(str(out.raw(m0, CURVE, "power/specification/pooling")), "mean")
    return ("**Power.** The exact test's reach depends on the categories' UA itself, so its power is simulated "
            f"with each model's own category UA held fixed ({pooling} pooling, raw states, "
            "the last layer): preferences are drawn with a planted population correlation ρ with the standardised "
            f"UA plus independent normal noise, {draws} draws per ρ, and the power is the share whose exact p reaches "
            "α. The *floor* is the smallest p the test can attain, one over the number of orders; the "
            f"*minimum detectable effect* (MDE) is the smallest ρ on a grid with {target} power (@tbl-power). "
            "A category-level p above α is therefore read as no evidence at this power, not as evidence of no "
            "association; the pair level, with its "
            f"{out.v(m0, PAIRS, 'n_pairs', 'int')} pairs, carries the inference the category level cannot.")


@prose
def original_phrase(out: Outputs) -> str:
    """Results: the original study's last-layer r beside this panel's, what the sign means, and the position-0
    reading for a model without a BOS."""
    published = out.at(PUBLISHED_PYTHIA, "category_level/r/-1", "s2")
    ours = join_words([f"{out.v(m, 'robustness', 'policies/default/final_r')} for {out.display(m)}"
                       for m in out.models])
    signs = {(out.raw(m, "robustness", "policies/default/final_r") or 0.0) > 0 for m in out.models}
    pub = out.raw_at(PUBLISHED_PYTHIA, "category_level/r/-1") or 0.0
    relation = ("the opposite sign" if signs == {pub < 0} else "the same sign" if signs == {pub > 0}
                else "signs that differ between the models")
    text = (f"The original study reports r = {published} at the last layer of Pythia-6.9B; here, at that layer "
            f"(mean pooling), r is {ours}: {relation}. The models differ in size, training and precision, so the "
            "two are not a replication of each other, and at the power of @tbl-power neither sign is established "
            "by the category-level test alone")
    sink_made = [out.display(m) for m, default, excluded in position0_inversions(out)
                 if not excluded and not out.raw(m, "layerwise", "extraction/bos_added")]
    if sink_made:
        text += (f". A negative r does appear here: at the intermediate layers of {join_words(sink_made)}, which "
                 "like Pythia adds no BOS, but only while position 0, the attention sink, is pooled (@sec-sink). The "
                 "original notebooks drop position 0 from every pooled state, so the sink cannot have made their "
                 "negative r in this way; what made it is not something this panel reproduces")
    return text


@prose
def checks_phrase(out: Outputs) -> str:
    """Results: the primary statistic over the universe as first declared and over each named robustness check,
    per model, with its exact joint p (comparisons in no family)."""
    m0 = out.models[0]
    stat = str(out.raw(m0, CURVE, "primary/statistic"))
    p_key = "median_p" if stat == "median_r" else "share_p"
    words = {"median_r": "median r", "share_positive": "share of r > 0"}.get(stat, stat)

    def per_model(test: str) -> str:
        return join_words([f"{out.v(m, CURVE, f'joint/{test}/{stat}')} (p = {out.v(m, CURVE, f'joint/{test}/{p_key}', 'p')})"
                           f" for {out.display(m)}" for m in out.models])
    parts = [f"over the universe as first declared, every pooling and NLL, the {words} is {per_model('full_universe')}"]
    checks = out.raw(m0, CURVE, "universe/robustness_checks") or {}
    if (checks.get("nll") or {}).get("options"):
        parts.append(f"with the summed NLL instead, {per_model('other_nll')}")
    if (checks.get("pooling") or {}).get("options"):
        pools = join_words([POOLING_WORDS.get(q, q) for q in checks["pooling"]["options"]])
        parts.append(f"with {pools} pooling instead, {per_model('other_poolings')}")
    text = "Beside the primary universe, as comparisons in no family: " + "; ".join(parts)

    def between(m: str) -> bool:
        full, a, b = (out.raw(m, CURVE, f"joint/{t}/{stat}") for t in ("full_universe", "declared", "other_nll"))
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
    poolings = list(out.raw(m0, PAIRS, "length_matched/category/poolings") or {})
    rows = []
    for m in out.models:
        kept = ", ".join(str(k) for k in out.raw(m, PAIRS, "length_matched/pairs_per_category") or [])
        row = [out.display(m), f"{out.v(m, PAIRS, 'length_matched/n_pairs', 'int')} ({kept})"]
        for p in poolings:
            base = f"length_matched/category/poolings/{p}"
            row += [out.v(m, PAIRS, f"{base}/r"), out.v(m, PAIRS, f"{base}/permutation_p", "p")]
        fam = "length_matched/pair/family"
        row += [out.v(m, PAIRS, f"{fam}/n_tests", "int"), out.v(m, PAIRS, f"{fam}/n_reject", "int"),
                out.v(m, PAIRS, f"{fam}/n_maxt_reject", "int")]
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
    k = out.raw(m0, PAIRS, "length_matched/max_token_difference")
    counts = join_words([f"{out.v(m, PAIRS, 'length_matched/n_pairs', 'int')} of "
                         f"{out.v(m, PAIRS, 'length_matched/n_pairs_all', 'int')} for {out.display(m)}"
                         for m in out.models])
    cat = category_words(out, m0)
    fewest = min(((out.raw(m, PAIRS, "length_matched/pairs_per_category") or [0])[
        (out.raw(m, PAIRS, "categories") or []).index(out.raw(m, CURVE, "joint/without_category/left_out"))], m)
        for m in out.models)
    surviving = sum(int(out.raw(m, PAIRS, "length_matched/pair/family/n_maxt_reject") or 0)
                    + int(out.raw(m, PAIRS, "length_matched/pair/family/n_reject") or 0) for m in out.models)
    tail = ("no pair-level test survives either correction" if surviving == 0 else
            "some pair-level tests survive, as counted in the table")
    kept, total = 0, 0
    for m in out.models:
        for p in out.raw(m, PAIRS, "length_matched/category/poolings") or {}:
            r = out.raw(m, PAIRS, f"length_matched/category/poolings/{p}/r")
            rs = out.raw(m, "layerwise", f"poolings/{p}/pearson_r") or []
            full = rs[-1] if rs else None
            if r is not None and full is not None:
                total += 1
                kept += r * full > 0
    sign = ("keeps the sign it has over all pairs" if kept == total else
            "changes the sign it has over all pairs" if kept == 0 else
            f"keeps its sign in {_count(kept)} of the {_count(total)} model and pooling combinations")
    return (f"On the pairs whose statements differ by at most {_count(int(k))} content "
            f"{'token' if k == 1 else 'tokens'} ({counts}; as few as {fewest[0]} in {cat}), the category-level r "
            f"{sign} (exact p in the table), and {tail} (@tbl-length-matched)")


def mixed_survivors(out: Outputs, m: str, *, pooling: str | None = None) -> list[int]:
    """The mixed-model fits of ``m`` whose Wald p is at or below α (uncorrected), with ``pooling`` if given."""
    t = out.raw(m, PAIRS, "mixed/tests")
    a = float(out.raw(m, PAIRS, "mixed/alpha"))
    return [i for i, p in enumerate(t["p"]) if p is not None and p <= a and (pooling is None or t["pooling"][i] == pooling)]


@prose
def mixed_phrase(out: Outputs) -> str:
    """Results: the mixed models with the categories as groups, per model: the fits, how many converged and
    which have a Wald p below α, uncorrected, with the reported pooling."""
    m0 = out.models[0]
    pooling = str(out.raw(m0, PAIRS, "family/reported_pooling"))
    parts = []
    for m in out.models:
        t = out.raw(m, PAIRS, "mixed/tests")
        found = mixed_survivors(out, m, pooling=pooling)
        names = join_words(sorted({f"the {METRIC_WORDS.get(t['metric'][i], pretty(t['metric'][i]))} (slope "
                                   f"{out.v(m, PAIRS, f'mixed/tests/slope/{i}', 's2')})" for i in found
                                   if t["policy"][i] == "default"}))
        parts.append(f"{out.display(m)}: {names or 'none'}")
    n = out.v(m0, PAIRS, "mixed/n_groups", "int")
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
        if out.raw(m, "layerwise", "extraction/bos_added"):
            scored.append(f"for {out.display(m)} the BOS is that first token, so every word is scored")
        else:
            scored.append(f"for {out.display(m)}, which adds no BOS, the first word is not scored")
    return ("Every permutation test here is two-sided: it compares |r| with the |r| of each relabelling. The NLL "
            "of a statement scores each of its tokens from the tokens before it, so the first token of the input, "
            f"which has none, is never scored: {'; '.join(scored)}.")


__all__ = ["checks_phrase", "scope_phrase", "PYTHIA_COMMAND", "length_matched_phrase", "length_matched_table", "mixed_phrase", "mixed_survivors",
           "original_phrase", "power_phrase", "power_table", "pythia_phrase"]
