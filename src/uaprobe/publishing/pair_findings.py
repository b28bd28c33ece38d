"""The pair-level models as phrases and a table.

Reads ``pair_models.json``: per position-0 policy and pooling, each Option B metric's partial r with the
preference over the pairs (both sides' content-token counts as covariates), its Freedman–Lane
permutation p with the residuals permuted within categories, Holm's correction across the layers, and
the lexical baseline run the same way over several seeds. Beside it, ``option_b.json``'s kNN result
(permutation over all pairs, the token difference alone partialled out) for the comparison. Every
number shown is a sourced :class:`~uaprobe.publishing.values.Value`; the words follow the numbers.
"""

from __future__ import annotations

from uaprobe.publishing.outputs import Outputs
from uaprobe.publishing.curve import POOLING_WORDS
from uaprobe.publishing.formats import pretty
from uaprobe.publishing.markdown import join_words, markdown_table, plural, prose
from uaprobe.publishing.phrases import MATCH_TOLERANCE
from uaprobe.publishing.values import Value

PAIRS = "pair_models"
KNN = "knn_density_asymmetry"
METRIC_WORDS = {"centroid_asymmetry": "centroid asymmetry", "cross_centroid": "cross-centroid score",
                "knn_density_asymmetry": "kNN density asymmetry", "margin_asymmetry": "margin asymmetry",
                "within_pair_sim": "within-pair similarity"}


def base(policy: str, pooling: str) -> str:
    return f"policies/{policy}/poolings/{pooling}"


def metrics(out: Outputs, m: str, policy: str = "sink_excluded", pooling: str = "mean") -> list[str]:
    return list(out.raw(m, PAIRS, base(policy, pooling)) or {})


def n_layers(out: Outputs, m: str) -> Value:
    return out.v(m, PAIRS, "layers", "count")


def holm_count(out: Outputs, m: str, metric: str, policy: str = "sink_excluded", pooling: str = "mean") -> Value:
    return out.v(m, PAIRS, f"{base(policy, pooling)}/{metric}/n_holm_layers", "int")


def lexical(out: Outputs, m: str, metric: str, policy: str = "sink_excluded") -> tuple[Value, Value, Value]:
    """The lexical baseline's median partial r over seeds, its number of significant seeds, and of seeds."""
    b = f"policies/{policy}/lexical_baseline/metrics/{metric}"
    return (out.v(m, PAIRS, f"{b}/median_partial_r"), out.v(m, PAIRS, f"{b}/significant", "count_true"),
            out.v(m, PAIRS, f"{b}/significant", "count"))


def same_policies(out: Outputs, m: str, pooling: str = "mean") -> bool:
    """Whether both policies give the same Holm counts for every metric (as where no pooled state holds
    position 0)."""
    return all(out.raw(m, PAIRS, f"{base('default', pooling)}/{k}/n_holm_layers")
               == out.raw(m, PAIRS, f"{base('sink_excluded', pooling)}/{k}/n_holm_layers")
               for k in metrics(out, m, "default", pooling))


def _surviving(out: Outputs, m: str, policy: str, pooling: str) -> str:
    found = sorted(((out.raw(m, PAIRS, f"{base(policy, pooling)}/{k}/n_holm_layers"), k)
                    for k in metrics(out, m, policy, pooling)), key=lambda x: -x[0])
    found = [(n, k) for n, k in found if n]
    if not found:
        return f"no metric survives at any of the {n_layers(out, m)} layers of {out.display(m)}"
    return (f"{join_words([f'{METRIC_WORDS.get(k, pretty(k))} at {holm_count(out, m, k, policy, pooling)}' for _, k in found])} "
            f"of the {n_layers(out, m)} layers of {out.display(m)}")


@prose
def pair_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Which metrics survive Holm at how many layers, with position 0 excluded (and under the default policy
    where its counts differ); the kNN density asymmetry's partial r range and the lexical baseline's median
    partial r with its significant seeds."""
    sx = [_surviving(out, m, "sink_excluded", pooling) for m in out.models]
    text = (f"With {pooling} pooling and position 0 excluded, the metrics that survive Holm's correction are "
            f"{'; '.join(sx)}.")
    differ = [m for m in out.models if not same_policies(out, m, pooling)]
    if differ:
        text += (" Under the default policy they are " + "; ".join(_surviving(out, m, "default", pooling) for m in differ)
                 + ".")
    same = [out.display(m) for m in out.models if m not in differ]
    if same:
        text += f" For {join_words(same)} both policies give the same counts."
    knn = []
    for m in out.models:
        b = f"{base('sink_excluded', pooling)}/{KNN}"
        med, sig, seeds = lexical(out, m, KNN)
        knn.append(f"from {out.v(m, PAIRS, f'{b}/partial_r_min')} to {out.v(m, PAIRS, f'{b}/partial_r_max')} over the "
                   f"layers of {out.display(m)}, against a median {med} for the lexical baseline (significant for "
                   f"{sig} of {seeds} seeds)")
    lead = "With position 0 excluded, the partial r" if differ else "The partial r"
    return text + f" {lead} of the kNN density asymmetry runs {'; '.join(knn)}."


def most_layers(out: Outputs, policy: str = "sink_excluded", pooling: str = "mean") -> tuple[str, str] | None:
    """The (model, metric) with the largest share of Holm-surviving layers (ties: panel, then metric order)."""
    best, share = None, -1.0
    for m in out.models:
        total = len(out.raw(m, PAIRS, "layers") or []) or 1
        for k in metrics(out, m, policy, pooling):
            s = out.raw(m, PAIRS, f"{base(policy, pooling)}/{k}/n_holm_layers") / total
            if s > share:
                best, share = (m, k), s
    return best


def lexical_gap(out: Outputs, m: str, metric: str = KNN, pooling: str = "mean") -> tuple[Value, Value] | None:
    """The lexical baseline's median partial r over seeds and the model's partial r of largest size over the
    layers (position 0 excluded), or None where either is missing."""
    b = f"{base('sink_excluded', pooling)}/{metric}"
    lo, hi = out.raw(m, PAIRS, f"{b}/partial_r_min"), out.raw(m, PAIRS, f"{b}/partial_r_max")
    lex = f"policies/sink_excluded/lexical_baseline/metrics/{metric}/median_partial_r"
    if None in (lo, hi, out.raw(m, PAIRS, lex)):
        return None
    return out.v(m, PAIRS, lex), out.v(m, PAIRS, f"{b}/partial_r_{'max' if abs(hi) >= abs(lo) else 'min'}")


def lexical_word(out: Outputs, m: str, metric: str = KNN, pooling: str = "mean") -> str:
    """``exceeds`` where the lexical baseline's median partial r reaches the model's largest in size (same sign),
    ``nearly reaches`` where it falls short by less than
    :data:`~uaprobe.publishing.phrases.MATCH_TOLERANCE`, ``falls short of`` otherwise."""
    gap = lexical_gap(out, m, metric, pooling)
    if gap is None:
        return "falls short of"
    lex, strongest = gap[0].raw, gap[1].raw
    if lex * strongest > 0 and abs(lex) >= abs(strongest):
        return "exceeds"
    return "nearly reaches" if lex * strongest > 0 and abs(lex) >= abs(strongest) - MATCH_TOLERANCE else "falls short of"


def lexical_comparison(out: Outputs, pooling: str = "mean", *, name_policy: bool = False) -> str:
    """Per model, the lexical baseline's median partial r for the kNN density asymmetry against the model's
    largest, both with position 0 excluded, with the numbers: ``exceeds the model's largest for A (+x vs +y)
    and nearly reaches it for B (…)``; with ``name_policy``, the clause says that policy (as where it follows
    a clause under the default policy)."""
    parts = []
    for m in out.models:
        gap = lexical_gap(out, m, pooling=pooling)
        if gap is None:
            continue
        word = lexical_word(out, m, pooling=pooling)
        obj = "the model's largest" if not parts else "it"
        parts.append(f"{word} {obj} for {out.display(m)} ({gap[0]} vs {gap[1]})")
    policy = "with position 0 excluded, " if name_policy else ""
    return (f"{policy}the lexical baseline's partial r for the kNN density asymmetry " + join_words(parts)) if parts else \
        "no lexical baseline is recorded"


@prose
def pair_verdict(out: Outputs, pooling: str = "mean") -> str:
    """The pair-level verdict with ``pooling``: the most layers any metric survives Holm at (position 0
    excluded), and the lexical baseline's kNN partial r against each model's largest."""
    best = most_layers(out, pooling=pooling)
    if best is None:
        return "no pair-level model is recorded"
    m, k = best
    n = holm_count(out, m, k, pooling=pooling)
    most = (f"with {POOLING_WORDS.get(pooling, pooling)} pooling and position 0 excluded, no metric survives Holm's "
            f"correction at more than {n} of the layers of any model (the {METRIC_WORDS.get(k, pretty(k))} of "
            f"{out.display(m)}, of {n_layers(out, m)} layers)" if n.raw else
            f"with {POOLING_WORDS.get(pooling, pooling)} pooling and position 0 excluded, no metric survives Holm's "
            "correction at any layer of any model")
    default, named = most_layers(out, "default", pooling), False
    if default is not None and default != best:
        dm, dk = default
        dn = holm_count(out, dm, dk, "default", pooling)
        if dn.raw > n.raw:
            most += (f"; under the default policy, the {METRIC_WORDS.get(dk, pretty(dk))} of {out.display(dm)} survives "
                     f"at {dn} of {n_layers(out, dm)}")
            named = True
    return f"{most}, and {lexical_comparison(out, pooling, name_policy=named)}"


def other_poolings(out: Outputs, pooling: str = "mean") -> list[tuple[str, str]]:
    """The (model, pooling) pairs, other than ``pooling``, at which the kNN density asymmetry survives Holm at more
    layers than with ``pooling`` under the same policy, for either policy."""
    def count(m: str, pol: str, p: str) -> int:
        return out.raw(m, PAIRS, f"{base(pol, p)}/{KNN}/n_holm_layers") or 0
    return [(m, p) for m in out.models for p in (out.raw(m, PAIRS, "policies/sink_excluded/poolings") or {})
            if p != pooling and any(count(m, pol, p) > count(m, pol, pooling) for pol in ("sink_excluded", "default"))]


@prose
def other_poolings_phrase(out: Outputs, pooling: str = "mean") -> str:
    """The kNN density asymmetry's Holm counts under the other poolings, where any is above zero, per policy;
    with a note where a model's partial r is the same at every layer (a state that does not change with depth)."""
    found = other_poolings(out, pooling)
    if not found:
        return ("No other pooling makes the kNN density asymmetry survive Holm's correction at more layers of any "
                "model.")
    parts = []
    for m, p in found:
        sx, df = (holm_count(out, m, KNN, pol, p) for pol in ("sink_excluded", "default"))
        text = f"at {sx} of {n_layers(out, m)} layers of {out.display(m)} with {POOLING_WORDS.get(p, p)} pooling"
        if sx.raw == df.raw:
            parts.append(text + " under both policies")
            continue
        text += f" and position 0 excluded ({df} under the default policy"
        b = f"{base('default', p)}/{KNN}"
        lo, hi = out.raw(m, PAIRS, f"{b}/partial_r_min"), out.raw(m, PAIRS, f"{b}/partial_r_max")
        if lo is not None and hi is not None and abs(hi - lo) < CONSTANT:
            text += (f", where its partial r is {out.v(m, PAIRS, f'{b}/partial_r_max')} at every layer: the pooled "
                     "state is that of position 0, which depends only on the first token")
        parts.append(text + ")")
    return f"Other poolings give more: the kNN density asymmetry survives Holm's correction {join_words(parts)}."


CONSTANT = 1e-3
"""A partial r whose range over the layers is below this is "the same at every layer"."""


@prose
def pair_abstract(out: Outputs, pooling: str = "mean") -> str:
    """The kNN result in one clause, without model names: with ``pooling`` (the pre-declared one, not the
    pooling that gives most), the most layers at which it survives Holm in any model, and how the lexical
    baseline compares."""
    counts = [holm_count(out, m, KNN, pooling=pooling) for m in out.models]
    top = max(counts, key=lambda v: v.raw)
    words = [lexical_word(out, m, pooling=pooling) for m in out.models]
    survive = (f"at no more than {top} {plural(int(top.raw), 'layer')} of either model" if len(counts) == 2 else
               f"at no more than {top} {plural(int(top.raw), 'layer')} of any model") if top.raw else "at no layer"
    if all(w == "exceeds" for w in words):
        lex = "a lexical baseline does as well"
    elif all(w == "falls short of" for w in words):
        lex = "it does better than a lexical baseline"
    elif "falls short of" not in words:
        lex = ("a lexical baseline does as well for one model, nearly for the other" if len(words) == 2 else
               "a lexical baseline does as well for some models and nearly for the others")
    else:
        lex = "a lexical baseline does as well for some models but not for others"
    return (f"with {POOLING_WORDS.get(pooling, pooling)} pooling the original's kNN density asymmetry survives Holm "
            f"correction {survive}, and {lex}")


@prose
def old_knn_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Option B's kNN r (permutation over all pairs, token difference partialled out): Holm-surviving layers per
    model under each policy, then the within-category models' count and whether their partial r stays positive."""
    parts, models = [], []
    for m in out.models:
        key = f"poolings/{pooling}/metrics/{KNN}/permutation_holm_reject"
        sx, df = out.v(m, "sink_excluded/option_b", key, "count_true"), out.v(m, "option_b", key, "count_true")
        where = ("under both policies" if sx.raw == df.raw else
                 f"with position 0 excluded ({df} under the default policy)")
        parts.append(f"{sx} of {out.v(m, 'sink_excluded/option_b', 'layers', 'count')} layers of {out.display(m)} {where}")
        b = f"{base('sink_excluded', pooling)}/{KNN}"
        models.append((holm_count(out, m, KNN, pooling=pooling), n_layers(out, m),
                       out.v(m, PAIRS, f"{b}/partial_r_min"), out.v(m, PAIRS, f"{b}/partial_r_max")))
    text = (f"Option B's test of the kNN density asymmetry (@tbl-optionb), which permutes the preference over all "
            f"pairs, finds its r significant after Holm's correction at {join_words(parts)}; with both sides' lengths "
            f"as covariates and the permutation within categories, it survives at "
            f"{join_words([f'{n} of {total}' for n, total, _, _ in models])} layers")
    positive = [(lo, hi) for _, _, lo, hi in models if lo.raw is not None and lo.raw > 0]
    if len(positive) == len(models):
        text += (", though its partial r stays positive at every layer ("
                 + "; ".join(f"{lo} to {hi}" for lo, hi in positive) + ")")
    return text


def pair_table(out: Outputs, pooling: str = "mean") -> str:
    """Per model and metric (mean pooling): the layers surviving Holm under each policy, the partial r range
    over the layers with position 0 excluded, and the lexical baseline's median partial r and significant
    seeds."""
    header = ["Model", "Metric", "Holm layers, pos. 0 excl.", "Holm layers, default", "Partial r, min to max",
              "Lexical median r", "Lexical seeds sig."]
    rows = []
    for m in out.models:
        for i, k in enumerate(metrics(out, m, pooling=pooling)):
            b = f"{base('sink_excluded', pooling)}/{k}"
            med, sig, seeds = lexical(out, m, k)
            rows.append([out.display(m) if i == 0 else "", METRIC_WORDS.get(k, pretty(k)),
                         f"{holm_count(out, m, k, pooling=pooling)} of {n_layers(out, m)}",
                         str(holm_count(out, m, k, 'default', pooling)),
                         f"{out.v(m, PAIRS, f'{b}/partial_r_min')} to {out.v(m, PAIRS, f'{b}/partial_r_max')}",
                         str(med), f"{sig} of {seeds}"])
    return markdown_table(header, rows, align="llrrrrr")


@prose
def pooling_limitation(out: Outputs, pooling: str = "mean") -> str:
    """A limitation: whether the pair-level Holm counts of the kNN density asymmetry depend on the pooling."""
    counts = {out.raw(m, PAIRS, f"{base(pol, p)}/{KNN}/n_holm_layers") for m in out.models
              for pol in ("sink_excluded", "default") for p in (out.raw(m, PAIRS, f"policies/{pol}/poolings") or {})}
    if len(counts) <= 1:
        return ""
    return (f"The pair-level Holm counts depend on the pooling: the {pooling}-pooling result is not that of the "
            "first- or last-token state (@sec-pairs).")
