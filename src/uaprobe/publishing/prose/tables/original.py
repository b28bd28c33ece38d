"""The manuscript's tables of the original study's later analyses: Option B (pair level, global
centroids), the phase means of its follow-up paper, the neutral control, and the comparison with
the published Pythia-6.9B numbers (``data/published/pythia-6-9b.json``, quoted, not computed).
Every number is a sourced value, as in :mod:`uaprobe.publishing.prose.tables.manuscript`."""

from __future__ import annotations

from uaprobe.names import OPTION_B_METRIC_WORDS, OPTION_B_METRICS
from uaprobe.publishing.prose.primitives.markdown import interval, markdown_table
from uaprobe.publishing.provenance.outputs import PUBLISHED_PYTHIA, Outputs


def option_b_table(out: Outputs, pooling: str = "mean") -> str:
    """Per model and metric, at the last layer: r with its bootstrap interval, the permutation p and
    its Holm correction across layers, the length-partialled r, the pair-left-out r, and the layers
    that survive Holm."""
    rows = []
    for m in out.models:
        file = out.model_file(m, "option_b")
        last = out.raw_at(file, "n_layers")
        metrics = out.raw_at(file, f"poolings/{pooling}/metrics")
        for name in OPTION_B_METRICS:
            key = f"poolings/{pooling}/metrics/{name}"
            loo = (out.at(file, f"{key}_loo/pearson_r/{last}") if f"{name}_loo" in metrics else "—")
            cluster = f"cluster_bootstrap/poolings/{pooling}/{name}"
            shown = (f"{out.at(file, f'{key}/pearson_r/{last}')} "
                     f"{interval(out.at(file, f'{cluster}/low/{last}', 's2'), out.at(file, f'{cluster}/high/{last}', 's2'))}")
            rows.append([out.display(m) if name == OPTION_B_METRICS[0] else "", OPTION_B_METRIC_WORDS[name], shown,
                         out.at(file, f"{key}/permutation_p/{last}", "p"),
                         out.at(file, f"{key}/permutation_holm_p/{last}", "p"), out.at(file, f"{key}/partial_r/{last}"),
                         loo, f"{out.at(file, f'{key}/permutation_holm_reject', 'count_true')} of "
                              f"{out.at(file, 'layers', 'count')}"])
    return markdown_table(["model", "metric", "r [interval]", "perm. p", "Holm p", "partial r", "r, pair left out",
                           "layers, Holm"], rows, align="llrrrrrr")


def phase_table(out: Outputs, pooling: str = "mean") -> str:
    """Early / mid / late means of the centroid-asymmetry curve with the cluster bootstrap's spread and the sign
    change, for this panel and, marked published, the follow-up paper's models with their late-inversion verdict
    (none is drawn for this panel: no interval over its categories has coverage)."""
    rows = []
    ph = f"poolings/{pooling}/metrics/centroid_asymmetry/phases"
    for m in out.models:
        # the sink-excluded pooling gets its own row where it differs (not where a BOS is already dropped)
        files = [(out.model_file(m, "option_b"), "this panel")]
        if out.raw(m, "sink_excluded/option_b", ph) != out.raw(m, "option_b", ph):
            files.append((out.model_file(m, "sink_excluded/option_b"), "this panel, position 0 excluded"))
        for file, source in files:
            cluster = f"cluster_bootstrap/phases/{pooling}/centroid_asymmetry"

            def cell(name: str, file: str = file) -> str:
                v = out.under(file, f"{ph}/{name}", fmt="s2")
                c = out.under(file, f"{cluster}/{name}", fmt="s2")
                mean = v("mean_r")
                shown = f"{mean} {interval(c('low'), c('high'))}" if mean.raw is not None else "n/a"
                return f"{shown} (L {v('layers', 'layers')})"

            rows.append([out.display(m), source, cell("early"), cell("mid"), cell("late"), "not judged",
                         out.at(file, f"{ph}/sign_change", "bool")])
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
        study = out.model_file(m, "option_b")
        control = out.model_file(m, "neutral_control")
        last = out.raw_at(study, "n_layers")
        sets = [("study pairs", study, f"poolings/{pooling}")]
        sets += [(f"{name} control", control, f"categories/{name}/poolings/{pooling}")
                 for name in out.raw_at(control, "categories")]
        for label, file, block in sets:
            ca, wp = f"{block}/metrics/centroid_asymmetry", f"{block}/metrics/within_pair_sim"
            rows.append([out.display(m), label, out.at(file, f"{block}/n_pairs", "int"),
                         out.at(file, f"{ca}/mean/{last}", "s3"), out.at(file, f"{ca}/pearson_r/{last}"),
                         out.at(file, f"{ca}/permutation_p/{last}", "p"), out.at(file, f"{wp}/pearson_r/{last}"),
                         out.at(file, f"{wp}/permutation_p/{last}", "p")])
    return markdown_table(["model", "pairs", "n", "mean centroid asym.", "r, centroid asym.", "perm. p",
                           "r, within-pair sim.", "perm. p"], rows, align="llrrrrrr")





