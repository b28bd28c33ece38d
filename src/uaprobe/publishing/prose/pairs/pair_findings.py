"""The pair-level models as phrases and a table.

Reads ``pair_models.json``: per position-0 policy and pooling, each Option B metric's partial r with the
preference over the pairs (both sides' content-token counts as covariates), its Freedman–Lane
permutation p with the residuals permuted within categories, Holm's correction across the layers, and
the lexical baseline run the same way over several seeds. Beside it, ``option_b.json``'s kNN result
(permutation over all pairs, the token difference alone partialled out) for the comparison. Every
number shown is a sourced :class:`~uaprobe.publishing.provenance.values.Value`; the words follow the numbers.
"""

from __future__ import annotations

from typing import Any

from uaprobe.names import OPTION_B_METRIC_WORDS
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.prose.primitives.formats import pretty
from uaprobe.publishing.prose.primitives.markdown import join_words, markdown_table, prose
from uaprobe.publishing.provenance.values import Value
from uaprobe.schema.categories import Layerwise
from uaprobe.schema.pairs import OptionB
from uaprobe.schema.pairmodels import PairModels

KNN = "knn_density_asymmetry"
METRIC_WORDS = OPTION_B_METRIC_WORDS


def metrics(out: Outputs, m: str, policy: str = "sink_excluded", pooling: str = "mean") -> list[str]:
    return list(out.record(m, PairModels).policies[policy].poolings.get(pooling, {}))


def n_layers(out: Outputs, m: str) -> Value:
    return out.value(m, PairModels, lambda r: r.layers, "count")


def holm_count(out: Outputs, m: str, metric: str, policy: str = "sink_excluded", pooling: str = "mean") -> Value:
    return out.value(m, PairModels, lambda r: r.policies[policy].poolings[pooling][metric].n_holm_layers, "int")


def partial_r_range(out: Outputs, m: str, metric: str, pooling: str = "mean") -> tuple[Value, Value]:
    """The smallest and largest partial r over the layers, position 0 excluded."""
    return (out.value(m, PairModels, lambda r: r.policies["sink_excluded"].poolings[pooling][metric].partial_r_min),
            out.value(m, PairModels, lambda r: r.policies["sink_excluded"].poolings[pooling][metric].partial_r_max))


def lexical(out: Outputs, m: str, metric: str, policy: str = "sink_excluded") -> tuple[Value, Value, Value]:
    """The lexical baseline's median partial r over seeds, its number of significant seeds, and of seeds."""
    def get(r: PairModels) -> Any:
        return r.policies[policy].lexical_baseline.metrics[metric]

    return (out.value(m, PairModels, lambda r: get(r).median_partial_r),
            out.value(m, PairModels, lambda r: get(r).significant, "count_true"),
            out.value(m, PairModels, lambda r: get(r).significant, "count"))


@prose
def old_knn_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Option B's kNN r (permutation over all pairs, token difference partialled out): Holm-surviving layers per
    model under each policy, then the within-category models' count and whether their partial r stays positive."""
    parts, models = [], []
    for m in out.models:
        sx, df = (out.value(m, OptionB, lambda r: r.poolings[pooling].metrics[KNN].permutation_holm_reject, "count_true",
                            stem=stem) for stem in ("sink_excluded/option_b", "option_b"))
        where = ("under both policies" if sx.raw == df.raw else
                 f"with position 0 excluded ({df} under the default policy)")
        layers = out.value(m, OptionB, lambda r: r.layers, "count", stem="sink_excluded/option_b")
        parts.append(f"{sx} of {layers} layers of {out.display(m)} {where}")
        models.append((holm_count(out, m, KNN, pooling=pooling), n_layers(out, m),
                       *partial_r_range(out, m, KNN, pooling)))
    text = (f"Option B's test of the kNN density asymmetry (@tbl-optionb), which permutes the preference over all "
            f"pairs, finds its r significant after Holm's correction at {join_words(parts)}; with the category "
            f"indicators and both sides' lengths as covariates and the permutation within categories, it survives at "
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
    header = ["Model", "Metric", "Holm, excl.", "Holm, default", "Partial r range", "Lex. median", "Lex. sig."]
    rows = []
    for m in out.models:
        for i, k in enumerate(metrics(out, m, pooling=pooling)):
            low, high = partial_r_range(out, m, k, pooling)
            med, sig, seeds = lexical(out, m, k)
            rows.append([out.display(m) if i == 0 else "", METRIC_WORDS.get(k, pretty(k)),
                         f"{holm_count(out, m, k, pooling=pooling)} of {n_layers(out, m)}",
                         f"{holm_count(out, m, k, 'default', pooling)} of {n_layers(out, m)}",
                         f"{low} to {high}",
                         str(med), f"{sig} of {seeds}"])
    return markdown_table(header, rows, align="llrrrrr")


@prose
def pooling_limitation(out: Outputs, pooling: str = "mean") -> str:
    """A limitation: whether the pair-level Holm counts of the kNN density asymmetry depend on the pooling."""
    counts = {e.n_holm_layers for m in out.models for pol in ("sink_excluded", "default")
              for e in (ms[KNN] for ms in out.record(m, PairModels).policies[pol].poolings.values())}
    if len(counts) <= 1:
        return ""
    return (f"The pair-level Holm counts depend on the pooling: the {pooling}-pooling result is not that of the "
            "first- or last-token state (@sec-pairs).")


@prose
def cluster_phrase(out: Outputs) -> str:
    """How coarse the two-stage cluster bootstrap is with few categories: its resamples, how many hold three or
    fewer distinct categories, and the fewest any resample holds (the same draws for every model)."""
    m = out.models[0]
    read = out.reader(m, OptionB)
    return (f"With {out.value(m, Layerwise, lambda r: r.categories, 'count')} categories that bootstrap is coarse: "
            f"{read(lambda r: r.cluster_bootstrap.degenerate, 'thousands')} of its "
            f"{read(lambda r: r.cluster_bootstrap.resamples, 'thousands')} resamples draw three or fewer distinct "
            f"categories, some only {read(lambda r: r.cluster_bootstrap.distinct_categories_min, 'int')}, so its "
            "intervals describe the spread and carry no claim of coverage; no conclusion here rests on an interval")


@prose
def lexical_pair_phrase(out: Outputs, metric: str = "centroid_asymmetry") -> str:
    """The lexical baseline's own pair-level result for ``metric``: per model (its tokenizer), the median partial r
    over the random seeds and how many seeds are significant (position 0 excluded, as in the appendix table)."""
    parts = []
    for m in out.models:
        med, sig, seeds = lexical(out, m, metric)
        parts.append(f"{med} with the tokenizer of {out.display(m)} ({sig} of {seeds} seeds below α)")
    return (f"The lexical baseline alone relates to the preference across pairs: its "
            f"{METRIC_WORDS.get(metric, pretty(metric))} has a median partial r over its random seeds (position 0 "
            "excluded) of "
            f"{join_words(parts)}; the pair-level family takes it as a covariate")
