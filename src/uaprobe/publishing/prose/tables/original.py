"""The manuscript's tables of the original study's later analyses: Option B (pair level, global
centroids), the phase means of its follow-up paper, the neutral control, and the comparison with
the published Pythia-6.9B numbers (``data/published/pythia-6-9b.json``, quoted, not computed).
Every number is a sourced value, as in :mod:`uaprobe.publishing.prose.tables.manuscript`."""

from __future__ import annotations

from typing import Any, Callable

from uaprobe.names import OPTION_B_METRIC_WORDS, OPTION_B_METRICS
from uaprobe.publishing.prose.primitives.markdown import interval, markdown_table
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, Outputs
from uaprobe.publishing.provenance.values import Value
from uaprobe.schema.pairs import NeutralControl, OptionB


def option_b_table(out: Outputs, pooling: str = "mean") -> str:
    """Per model and metric, at the last layer: r with its bootstrap interval, the permutation p and
    its Holm correction across layers, the length-partialled r, the pair-left-out r, and the layers
    that survive Holm."""
    rows = []
    for m in out.models:
        ob = out.record(m, OptionB)
        last, metrics = ob.n_layers, ob.poolings[pooling].metrics
        for name in OPTION_B_METRICS:
            def v(get: Callable[[Any], Any], fmt: str = "r", name: str = name) -> Value:
                return out.value(m, OptionB, lambda r: get(r.poolings[pooling].metrics[name]), fmt)

            def c(side: str, name: str = name) -> Value:
                return out.value(m, OptionB, lambda r: getattr(r.cluster_bootstrap.poolings[pooling][name], side)[last],
                                 "s2")

            loo = (out.value(m, OptionB, lambda r: r.poolings[pooling].metrics[f"{name}_loo"].pearson_r[last])
                   if f"{name}_loo" in metrics else "—")
            shown = f"{v(lambda e: e.pearson_r[last])} {interval(c('low'), c('high'))}"
            rows.append([out.display(m) if name == OPTION_B_METRICS[0] else "", OPTION_B_METRIC_WORDS[name], shown,
                         v(lambda e: e.permutation_p[last], "p"), v(lambda e: e.permutation_holm_p[last], "p"),
                         v(lambda e: e.partial_r[last]), loo,
                         f"{v(lambda e: e.permutation_holm_reject, 'count_true')} of "
                         f"{out.value(m, OptionB, lambda r: r.layers, 'count')}"])
    return markdown_table(["model", "metric", "r [interval]", "perm. p", "Holm p", "partial r", "r, pair left out",
                           "layers, Holm"], rows, align="llrrrrrr")


def phase_table(out: Outputs, pooling: str = "mean") -> str:
    """Early / mid / late means of the centroid-asymmetry curve with the cluster bootstrap's spread and the sign
    change, for this panel and, marked published, the follow-up paper's models with their late-inversion verdict
    (none is drawn for this panel: no interval over its categories has coverage)."""
    rows = []
    metric = "centroid_asymmetry"
    for m in out.models:
        # the sink-excluded pooling gets its own row where it differs (not where a BOS is already dropped)
        stems = [("option_b", "this panel")]
        phases_of = {stem: out.record(m, OptionB, stem=stem).poolings[pooling].metrics[metric].phases
                     for stem in ("option_b", "sink_excluded/option_b")}
        if phases_of["sink_excluded/option_b"] != phases_of["option_b"]:
            stems.append(("sink_excluded/option_b", "this panel, position 0 excluded"))
        for stem, source in stems:
            def cell(name: str, stem: str = stem) -> str:
                read = out.reader(m, OptionB, stem=stem)
                mean = read(lambda r: getattr(r.poolings[pooling].metrics[metric].phases, name).mean_r, "s2")
                spread = [read(lambda r: getattr(r.cluster_bootstrap.phases[pooling][metric][name], side), "s2")
                          for side in ("low", "high")]
                shown = f"{mean} {interval(*spread)}" if mean.raw is not None else "n/a"
                layers = read(lambda r: getattr(r.poolings[pooling].metrics[metric].phases, name).layers, "layers")
                return f"{shown} (L {layers})"

            rows.append([out.display(m), source, cell("early"), cell("mid"), cell("late"), "not judged",
                         out.value(m, OptionB, lambda r: r.poolings[pooling].metrics[metric].phases.sign_change,
                                   "bool", stem=stem)])
    for i, row in enumerate(out.raw_at(PUBLISHED_PYTHIA, "phases/models")):
        p = out.under(PUBLISHED_PYTHIA, f"phases/models/{i}", fmt="s2")
        sign_change = "yes" if row["early"] > 0 > row["late"] else "no"
        # a qualifier in the published name ("(no template)") goes to the source column, so the name stays whole
        name, _, note = str(row["model"]).partition(" (")
        rows.append([name, "published" + (f", {note.rstrip(')')}" if note else ""), p("early"), p("mid"), p("late"),
                     p("late_inversion", "bool"), f"{sign_change} (from early and late)"])
    return markdown_table(["model", "source", "early", "mid", "late", "late inversion", "sign change"], rows,
                          align="llrrrcc")


def control_table(out: Outputs, pooling: str = "mean") -> str:
    """The study's pairs beside the control pairs: per set, at the last layer, the centroid
    asymmetry's mean over pairs and its r with the preference, and the within-pair similarity's r."""
    rows = []
    for m in out.models:
        last = out.record(m, OptionB).n_layers
        sets: list[tuple[str, Callable[..., Value]]] = [
            ("study pairs", lambda get, fmt: out.value(m, OptionB, lambda r: get(r.poolings[pooling]), fmt))]
        sets += [(f"{name} control",
                  lambda get, fmt, name=name: out.value(m, NeutralControl,
                                                        lambda r: get(r.categories[name].poolings[pooling]), fmt))
                 for name in out.record(m, NeutralControl).categories]
        for label, read in sets:
            def metric(name: str, key: str, fmt: str = "r", read: Callable[..., Value] = read) -> Value:
                return read(lambda e: getattr(e.metrics[name], key)[last], fmt)

            rows.append([out.display(m), label, read(lambda e: e.n_pairs, "int"),
                         metric("centroid_asymmetry", "mean", "s3"), metric("centroid_asymmetry", "pearson_r"),
                         metric("centroid_asymmetry", "permutation_p", "p"), metric("within_pair_sim", "pearson_r"),
                         metric("within_pair_sim", "permutation_p", "p")])
    return markdown_table(["model", "pairs", "n", "mean centroid asym.", "r, centroid asym.", "perm. p",
                           "r, within-pair sim.", "perm. p"], rows, align="llrrrrrr")
