"""The manuscript's tables of the original study's later analyses: Option B (pair level, global
centroids), the phase means of its follow-up paper, the neutral control, and the comparison with
the published Pythia-6.9B numbers (``data/published/pythia-6-9b.json``, quoted, not computed).

Reads ``results/models/<id>/option_b.json`` and ``neutral_control.json`` beside the files
:mod:`uaprobe.manuscript` loads; every table is pipe-table markdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uaprobe.manuscript import Outputs, fmt, fmt_bool, fmt_ci, fmt_p, fmt_r, markdown_table, read_json

PUBLISHED_FILE = "data/published/pythia-6-9b.json"
"""The original study's published Pythia-6.9B numbers, with their source."""
OPTION_B_METRICS = ("centroid_asymmetry", "cross_centroid", "within_pair_sim", "knn_density_asymmetry",
                    "margin_asymmetry")
METRIC_NAMES = {
    "centroid_asymmetry": "centroid asymmetry",
    "cross_centroid": "cross-centroid",
    "within_pair_sim": "within-pair similarity",
    "knn_density_asymmetry": "kNN density asymmetry",
    "margin_asymmetry": "margin asymmetry",
}


def option_b(out: Outputs, model_id: str) -> Mapping[str, Any]:
    return read_json(out.root, f"results/models/{model_id}/option_b.json")


def control(out: Outputs, model_id: str) -> Mapping[str, Any]:
    return read_json(out.root, f"results/models/{model_id}/neutral_control.json")


def published(out: Outputs) -> Mapping[str, Any]:
    return read_json(out.root, PUBLISHED_FILE)


def _r_ci(e: Mapping[str, Any], layer: int) -> str:
    return f"{fmt_r(e['pearson_r'][layer])} {fmt_ci(e['bootstrap_ci_low'][layer], e['bootstrap_ci_high'][layer])}"


def option_b_table(out: Outputs, pooling: str = "mean") -> str:
    """Per model and metric, at the last layer: r with its bootstrap interval, the permutation p
    and its Holm correction across layers, the length-partialled r, the leave-one-out r, and the
    layers that survive Holm."""
    rows = []
    for m in out.models:
        ob = option_b(out, m)
        last = ob["n_layers"]
        metrics = ob["poolings"][pooling]["metrics"]
        for name in OPTION_B_METRICS:
            e = metrics[name]
            loo = metrics.get(f"{name}_loo")
            rows.append([out.display(m), METRIC_NAMES[name], _r_ci(e, last), fmt_p(e["permutation_p"][last]),
                         fmt_p(e["permutation_holm_p"][last]), fmt_r(e["partial_r"][last]),
                         fmt_r(loo["pearson_r"][last]) if loo else "—",
                         f"{sum(1 for v in e['permutation_holm_reject'] if v)} of {last + 1}"])
    return markdown_table(["model", "metric", "r [interval]", "perm. p", "Holm p", "partial r", "r, pair left out",
                           "layers, Holm"], rows, align="llrrrrrr")


def phase_table(out: Outputs, pooling: str = "mean") -> str:
    """Early / mid / late means of the centroid-asymmetry curve with intervals and the verdicts,
    for this panel and, marked published, the follow-up paper's models."""
    rows = []
    for m in out.models:
        ph = option_b(out, m)["poolings"][pooling]["metrics"]["centroid_asymmetry"]["phases"]

        def cell(name: str) -> str:
            e = ph[name]
            layers = ", ".join(str(x) for x in e["layers"])
            return f"{fmt(e['mean_r'], 2, signed=True)} {fmt_ci(e['bootstrap_ci_low'], e['bootstrap_ci_high'])} (L {layers})"

        rows.append([out.display(m), "this panel", cell("early"), cell("mid"), cell("late"),
                     fmt_bool(ph["late_inversion"]), fmt_bool(ph["sign_change"])])
    for row in published(out)["phases"]["models"]:
        rows.append([row["model"], "published", fmt(row["early"], 2, signed=True), fmt(row["mid"], 2, signed=True),
                     fmt(row["late"], 2, signed=True), fmt_bool(row["late_inversion"]),
                     fmt_bool(row["early"] > 0 > row["late"])])
    return markdown_table(["model", "source", "early", "mid", "late", "late inversion", "sign change"], rows,
                          align="llrrrcc")


def control_table(out: Outputs, pooling: str = "mean") -> str:
    """The study's pairs beside the control pairs: per set, at the last layer, the centroid
    asymmetry's mean over pairs and its r with the preference, and the within-pair similarity's r."""
    rows = []
    for m in out.models:
        ob = option_b(out, m)
        last = ob["n_layers"]
        sets = [("study pairs", ob["poolings"][pooling])]
        sets += [(f"{name} control", c["poolings"][pooling]) for name, c in control(out, m)["categories"].items()]
        for label, block in sets:
            ca = block["metrics"]["centroid_asymmetry"]
            wp = block["metrics"]["within_pair_sim"]
            rows.append([out.display(m), label, str(block["n_pairs"]), fmt(ca["mean"][last], 3, signed=True),
                         _r_ci(ca, last), fmt_p(ca["permutation_p"][last]), _r_ci(wp, last)])
    return markdown_table(["model", "pairs", "n", "mean centroid asym.", "r, centroid asym. [interval]", "perm. p",
                           "r, within-pair sim. [interval]"], rows, align="llrrrrr")


def published_comparison_table(out: Outputs, pooling: str = "mean") -> str:
    """The original study's published Pythia-6.9B numbers beside this panel's value of the same
    quantity (at each model's last layer; the published values are at Pythia-6.9B's layer 32)."""
    pub = published(out)
    cat = pub["category_level"]
    bins = pub["bins"]
    ob_pub = pub["option_b"]
    pythia = next(r for r in pub["phases"]["models"] if r["model"] == "Pythia-6.9B")

    def ours(fn) -> list[str]:
        return [fn(m) for m in out.models]

    def last(m: str) -> int:
        return out.lw(m)["n_layers"]

    rows = []
    rows.append(["category-level r (6 categories)", f"{fmt(cat['r'][-1], 2, signed=True)} "
                 f"{fmt_ci(cat['ci_low'][-1], cat['ci_high'][-1])}",
                 *ours(lambda m: f"{fmt_r(out.lw(m)['poolings'][pooling]['final']['r'])} "
                                 f"{fmt_ci(out.lw(m)['poolings'][pooling]['bootstrap_ci_low'][last(m)], out.lw(m)['poolings'][pooling]['bootstrap_ci_high'][last(m)])}")])

    def bins_cell(m: str) -> str:
        ci = out.results[m]["bins"]["poolings"]["mean"]["schemes"]["randint"]["ci_partition"]
        return f"{fmt_r(ci['r'][-1])} {fmt_ci(ci['bootstrap_ci_low'][-1], ci['bootstrap_ci_high'][-1])}"

    ci_k = out.params.analysis.bins.ci_k
    rows.append([f"random bins, r (k = {bins['k']}; here k = {ci_k})" if ci_k != bins["k"] else f"random bins, r (k = {ci_k})", f"{fmt_r(bins['r'][-1])} {fmt_ci(bins['ci_low'][-1], bins['ci_high'][-1])}",
                 *ours(bins_cell)])
    for name in OPTION_B_METRICS:
        p = ob_pub["metrics"][name]
        rows.append([f"Option B: {METRIC_NAMES[name]}, r", f"{fmt_r(p['r'][-1])} {fmt_ci(p['ci_low'][-1], p['ci_high'][-1])}",
                     *ours(lambda m, name=name: _r_ci(option_b(out, m)["poolings"][pooling]["metrics"][name],
                                                      option_b(out, m)["n_layers"]))])
    for phase in ("early", "mid", "late"):
        rows.append([f"phase mean, {phase}", fmt(pythia[phase], 2, signed=True),
                     *ours(lambda m, phase=phase: fmt(option_b(out, m)["poolings"][pooling]["metrics"]
                                                      ["centroid_asymmetry"]["phases"][phase]["mean_r"], 2, signed=True))])
    rows.append(["late inversion", fmt_bool(pythia["late_inversion"]),
                 *ours(lambda m: fmt_bool(option_b(out, m)["poolings"][pooling]["metrics"]["centroid_asymmetry"]
                                          ["phases"]["late_inversion"]))])
    return markdown_table(["quantity (last layer)", "Pythia-6.9B, published", *[out.display(m) for m in out.models]],
                          rows, align="l" + "r" * (1 + len(out.models)))


def published_model_ids(out: Outputs) -> list[str]:
    """The panel's models that are the published model (same hub location, any case)."""
    location = str(published(out)["model"]).lower()
    return [m for m in out.models if out.params.model(m).location.lower() == location]


def published_layers_markdown(out: Outputs, pooling: str = "mean") -> str:
    """Layer by layer at the published layers, each Option B metric's published r beside this
    run's, for the panel's copy of the published model; a sentence saying how to get one if the
    panel has none."""
    pub = published(out)
    ob_pub = pub["option_b"]
    ids = published_model_ids(out)
    if not ids:
        return (f"No model of this panel is the published one ({pub['model']}), so the layer-by-layer comparison "
                "of Option B is not shown; `dvc exp run -S preset=original -S 'models=[pythia-6-9b]'` adds it.")
    parts = []
    for m in ids:
        metrics = option_b(out, m)["poolings"][pooling]["metrics"]
        rows = []
        for i, layer in enumerate(ob_pub["layers"]):
            row = [str(layer)]
            for name in OPTION_B_METRICS:
                mine = metrics[name]["pearson_r"][layer] if layer < len(metrics[name]["pearson_r"]) else None
                row.append(f"{fmt_r(ob_pub['metrics'][name]['r'][i])} / {fmt_r(mine)}")
            rows.append(row)
        parts.append(markdown_table(["layer", *[METRIC_NAMES[n] for n in OPTION_B_METRICS]], rows))
        parts.append(f"\n: Option B of {out.display(m)}, r published / this run ({pooling} pooling, pooling policy "
                     f"`{option_b(out, m)['extraction'].get('pooling_drop', 'n/a')}`, dtype "
                     f"`{option_b(out, m)['extraction'].get('dtype', 'n/a')}`) at the published layers.\n")
    return "\n".join(parts)


__all__ = ("PUBLISHED_FILE", "published_model_ids", "published_layers_markdown", "option_b", "control", "published", "option_b_table", "phase_table", "control_table",
           "published_comparison_table")
