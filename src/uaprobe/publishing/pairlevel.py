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
from uaprobe.publishing.phrases import MATCH_TOLERANCE, join_words, plural
from uaprobe.publishing.tables import markdown_table
from uaprobe.publishing.values import Value, pretty, prose

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
    return text + f" The partial r of the kNN density asymmetry runs {'; '.join(knn)}."


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


def lexical_holds(out: Outputs, m: str, metric: str = KNN, pooling: str = "mean") -> bool:
    """Whether the lexical baseline's median partial r reaches the model's largest in size, same sign
    (within :data:`~uaprobe.publishing.phrases.MATCH_TOLERANCE`)."""
    b = f"{base('sink_excluded', pooling)}/{metric}"
    lo, hi = out.raw(m, PAIRS, f"{b}/partial_r_min"), out.raw(m, PAIRS, f"{b}/partial_r_max")
    lex = out.raw(m, PAIRS, f"policies/sink_excluded/lexical_baseline/metrics/{metric}/median_partial_r")
    if None in (lo, hi, lex):
        return False
    strongest = hi if abs(hi) >= abs(lo) else lo
    return lex * strongest > 0 and abs(lex) >= abs(strongest) - MATCH_TOLERANCE


@prose
def pair_verdict(out: Outputs, pooling: str = "mean") -> str:
    """The pair-level verdict: the most layers any metric survives Holm at (position 0 excluded), and
    whether the lexical baseline does as well as the models on the kNN density asymmetry."""
    best = most_layers(out, pooling=pooling)
    if best is None:
        return "no pair-level model is recorded"
    m, k = best
    n = holm_count(out, m, k, pooling=pooling)
    held = [out.display(x) for x in out.models if lexical_holds(out, x, pooling=pooling)]
    most = (f"with position 0 excluded, no metric survives Holm's correction at more than {n} of the layers of any "
            f"model (the {METRIC_WORDS.get(k, pretty(k))} of {out.display(m)}, of {n_layers(out, m)} layers)"
            if n.raw else "with position 0 excluded, no metric survives Holm's correction at any layer of any model")
    default = most_layers(out, "default", pooling)
    if default is not None and default != best:
        dm, dk = default
        dn = holm_count(out, dm, dk, "default", pooling)
        if dn.raw > n.raw:
            most += (f"; under the default policy, the {METRIC_WORDS.get(dk, pretty(dk))} of {out.display(dm)} survives "
                     f"at {dn} of {n_layers(out, dm)}")
    lex = ("the lexical baseline's partial r for the kNN density asymmetry matches or exceeds the models' largest "
           f"for {'both models' if len(held) == len(out.models) == 2 else join_words(held)}" if held else
           "the models' kNN density asymmetry exceeds the lexical baseline's partial r")
    return f"{most}, and {lex}"


@prose
def pair_abstract(out: Outputs, pooling: str = "mean") -> str:
    """The kNN result in one clause, without model names: the most layers at which it survives Holm in any
    model, and whether the lexical baseline does as well."""
    counts = [holm_count(out, m, KNN, pooling=pooling) for m in out.models]
    top = max(counts, key=lambda v: v.raw)
    held = all(lexical_holds(out, m, pooling=pooling) for m in out.models)
    survive = (f"at no more than {top} {plural(int(top.raw), 'layer')} of either model" if len(counts) == 2 else
               f"at no more than {top} {plural(int(top.raw), 'layer')} of any model") if top.raw else "at no layer"
    return (f"the original's kNN density asymmetry survives Holm's correction {survive}, "
            + ("and a lexical baseline does as well" if held else "and it does better than a lexical baseline"))


@prose
def old_knn_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Option B's kNN r (permutation over all pairs, token difference partialled out), Holm-surviving layers
    per model, beside the count of the within-category models."""
    parts = []
    for m in out.models:
        key = f"poolings/{pooling}/metrics/{KNN}/permutation_holm_reject"
        parts.append(f"{out.v(m, 'sink_excluded/option_b', key, 'count_true')} of "
                     f"{out.v(m, 'sink_excluded/option_b', 'layers', 'count')} layers of {out.display(m)} "
                     f"(here {holm_count(out, m, KNN, pooling=pooling)})")
    fewer = all(out.raw(m, PAIRS, f"{base('sink_excluded', pooling)}/{KNN}/n_holm_layers")
                < sum(1 for x in out.raw(m, "sink_excluded/option_b", f"poolings/{pooling}/metrics/{KNN}/permutation_holm_reject") if x)
                for m in out.models)
    return (f"Option B's test of the kNN density asymmetry (@tbl-optionb), which permutes the preference over all "
            f"pairs, finds its r significant after Holm's correction at {join_words(parts)}"
            + ("; with both sides' lengths as covariates and the permutation within categories, that association is "
               "no longer distinguishable from what the categories' differences and the lengths produce" if fewer else ""))


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
