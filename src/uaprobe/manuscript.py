"""What the manuscript's code cells call: load the tracked outputs, format numbers and tables.

Every number of ``paper/paper.qmd`` comes through here from the files the pipeline tracks
(``params.yaml``, ``results/``, ``metrics/``, ``figures/``, ``dvc.lock``); none is typed into the
text. Tables are returned as pipe-table markdown for ``IPython.display.Markdown``; per-model
figures as markdown images with a label, for cells with ``output: asis``.

The only numbers kept in code are the published reference values of the original study
(:data:`PUBLISHED_SCIENTIFIC_FACTS`), which the seed-003 figure and table compare against.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import math
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from uaprobe.config import Params, load_params
from uaprobe.errors import UAProbeError
from uaprobe.results_files import read_results

# ------------------------------------------------------------------------------------------------
# Published reference values (the one place that holds numbers not computed by the pipeline)
# ------------------------------------------------------------------------------------------------

PUBLISHED_SCIENTIFIC_FACTS: Mapping[str, tuple[float, float]] = {
    "Llama-3.1-8B": (-0.013, 1.165),
    "Gemma-2-9B": (0.021, 1.138),
    "Mistral-7B": (0.010, 0.972),
    "Apertus-8B": (0.109, 1.278),
}
"""(UA, mean preference in nats/token) of the ``scientific_facts`` category for the four models
of the original study (D'Elia 2025, doi:10.5281/zenodo.18110161), as its seed-003 notebook
lists them under "Reference values from the paper". Reference points only: not recomputed here."""

PUBLISHED_REFERENCE_CATEGORY = "scientific_facts"
"""The category the published reference values belong to."""

PUBLISHED_REFERENCE_CITATION = "delia2025ua"
"""Bibliography key of the study the reference values come from."""

RESULT_NAMES: tuple[str, ...] = ("layerwise", "validation", "bins", "pairs", "preference", "anisotropy", "robustness",
                                  "sink_excluded/layerwise")
"""The per-model results files, ``results/models/<id>/<name>.json``."""

MINUS = "\u2212"

L_STAR = "L&#42;"
"""L* (the layer of maximal λ1/Σλ) in markdown. Written with a character reference, not as ``L*``
(two of which read as emphasis) nor as ``L\\*`` (the backslash would show through an inline value
under Quarto, which prints a string's repr)."""

FIGURES_DIR = "figures"
"""The figures stage's output directory, relative to the root (holds ``manifest.json``)."""

FIGURES_DIR_ENV = "UAPROBE_FIGURES_DIR"
"""Set by the Quarto runner to a copy of ``figures/`` inside the paper directory."""


class ManuscriptDataError(UAProbeError):
    """A tracked output the manuscript reads is missing or malformed."""


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------


def find_root(start: str | Path | None = None) -> Path:
    """The repository root: the nearest directory at or above ``start`` with ``params.yaml``."""
    here = Path.cwd() if start is None else Path(start)
    here = here.resolve()
    for candidate in (here, *here.parents):
        if (candidate / "params.yaml").is_file():
            return candidate
    raise ManuscriptDataError(f"no params.yaml at or above {here}; render from inside the repository")


def read_json(root: Path, relative: str) -> Any:
    """A tracked results file, checked for what its readers need (:mod:`uaprobe.results_files`); the error
    names the file, the key and the stage that writes it."""
    return read_results(root, relative)


@dataclass(frozen=True)
class Outputs:
    """Everything the manuscript reads, loaded once."""

    root: Path
    params: Params
    raw_params: Mapping[str, Any]
    models: tuple[str, ...]
    results: Mapping[str, Mapping[str, Mapping[str, Any]]]
    """``results[model_id][name]`` for name in :data:`RESULT_NAMES`."""
    metrics: Mapping[str, Mapping[str, Any]]
    panel: Mapping[str, Any]
    panel_metrics: Mapping[str, Any]
    figures: Mapping[str, Any] = field(default_factory=dict)
    """``figures/manifest.json`` (empty when the figures have not been drawn)."""

    def display(self, model_id: str) -> str:
        return self.params.model(model_id).display

    def lw(self, model_id: str) -> Mapping[str, Any]:
        return self.results[model_id]["layerwise"]


def load_outputs(root: str | Path | None = None) -> Outputs:
    """Load params, every results and metrics file of the panel, and the figure manifest."""
    root = find_root(root)
    params = load_params(root / "params.yaml")
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    results = {m: {name: read_json(root, f"results/models/{m}/{name}.json") for name in RESULT_NAMES}
               for m in params.models}
    metrics = {m: read_json(root, f"metrics/models/{m}.json") for m in params.models}
    manifest_path = root / FIGURES_DIR / "manifest.json"
    figures = read_json(root, f"{FIGURES_DIR}/manifest.json") if manifest_path.is_file() else {}
    return Outputs(root=root, params=params, raw_params=raw, models=tuple(params.models), results=results,
                   metrics=metrics, panel=read_json(root, "results/panel.json"),
                   panel_metrics=read_json(root, "metrics/panel.json"), figures=figures)


# ------------------------------------------------------------------------------------------------
# Formatting
# ------------------------------------------------------------------------------------------------


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt(x: Any, digits: int = 2, *, signed: bool = False, na: str = "n/a") -> str:
    """A number with ``digits`` decimals and a typographic minus; ``na`` for a missing value."""
    if _missing(x):
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    value = float(x)
    if value == 0:
        value = 0.0  # no "-0.00"
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    if float(text) == 0 and text.startswith("-"):
        text = text[1:] if not signed else "+" + text[1:]
    return text.replace("-", MINUS)


def fmt_r(r: Any) -> str:
    """A correlation: signed, three decimals (as the seeds print it)."""
    return fmt(r, 3, signed=True)


def fmt_int(x: Any, na: str = "n/a") -> str:
    return na if _missing(x) else str(int(x))


def fmt_p(p: Any) -> str:
    """A p-value: three significant decimals, ``< 0.001`` below that."""
    if _missing(p):
        return "n/a"
    p = float(p)
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def fmt_ci(low: Any, high: Any, digits: int = 2) -> str:
    """An interval ``[low, high]``."""
    if _missing(low) or _missing(high):
        return "n/a"
    return f"[{fmt(low, digits, signed=True)}, {fmt(high, digits, signed=True)}]"


def fmt_pct(x: Any, digits: int = 0) -> str:
    return "n/a" if _missing(x) else f"{fmt(x, digits)} %"


def fmt_bool(x: Any, yes: str = "yes", no: str = "no") -> str:
    return "n/a" if x is None else (yes if x else no)


def pretty(name: str) -> str:
    """A category or key as text: ``ground_truth_numeric`` -> ``ground truth numeric``."""
    return str(name).replace("_", " ")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None) -> str:
    """A pipe table. ``align``: one of ``l``/``r``/``c`` per column (default: first left, rest right)."""
    header = list(header)
    align = align or ("l" + "r" * (len(header) - 1))
    if len(align) != len(header):
        raise ValueError(f"align {align!r} has {len(align)} columns, header has {len(header)}")
    body = [[_cell(c) for c in row] for row in rows]
    for row in body:
        if len(row) != len(header):
            raise ValueError(f"row {row!r} has {len(row)} cells, header has {len(header)}")
    # Dashes in proportion to each column's widest cell: pandoc sizes wrapped columns by them.
    widths = [max([len(_cell(h))] + [len(r[i]) for r in body]) for i, h in enumerate(header)]

    def rule(a: str, w: int) -> str:
        dashes = "-" * max(3, min(w, 40))
        return {"l": ":" + dashes, "r": dashes + ":", "c": ":" + dashes + ":"}[a]

    lines = ["| " + " | ".join(_cell(h) for h in header) + " |",
             "|" + "|".join(rule(a, w) for a, w in zip(align, widths)) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in body)
    return "\n".join(lines)


def slug(text: str) -> str:
    """A label-safe form of a model id (letters, digits and single hyphens)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def join_words(items: Sequence[str], conjunction: str = "and") -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


# ------------------------------------------------------------------------------------------------
# Scalar summaries used in the text
# ------------------------------------------------------------------------------------------------


def settings(out: Outputs) -> dict[str, Any]:
    """Analysis settings and dataset sizes for the methods text."""
    a = out.params.analysis
    first = out.lw(out.models[0])
    return {
        "n_models": len(out.models),
        "models": join_words([out.display(m) for m in out.models]),
        "n_pairs": sum(first["n_pairs"]),
        "n_categories": len(first["categories"]),
        "categories": join_words([pretty(c) for c in first["categories"]]),
        "bootstrap": f"{a.bootstrap_resamples:,}",
        "permutations": f"{a.permutations:,}",
        "n_permutation_orders": f"{first.get('permutation_count', 0):,}",
        "lexical_seeds": a.robustness.lexical_seeds,
        "null_partitions": f"{a.robustness.null_partitions:,}",
        "l_star_tolerance": f"{a.robustness.l_star_tolerance * 100:g} %",
        "ci_level": f"{a.ci_level * 100:g} %",
        "alpha": f"{a.alpha:g}",
        "seed": a.seed,
        "preference": a.preference,
        "pooling_drop": out.params.pooling.drop,
        "bins_k": join_words([str(k) for k in a.bins.k]),
        "bins_partitions": a.bins.partitions,
        "bins_ci_k": a.bins.ci_k,
        "stable_depth_std": f"{a.stable_depth_std:g}",
        "aligned_r": fmt(a.aligned_r, 1, signed=True),
        "inverted_r": fmt(a.inverted_r, 1, signed=True),
        "spectrum_top": a.spectrum_top,
        "n_prompts": out.results[out.models[0]]["anisotropy"].get("n_prompts"),
        "permutation_mode": first.get("permutation_mode", "n/a"),
    }


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------


def model_panel_table(out: Outputs) -> str:
    """Methods: the panel with each model's source, revision or file, size and depth.

    Where the weights come from is one column of words that wrap (source, location, revision or
    file), so that no long package or file name has to fit a narrow column of its own."""
    rows = []
    for m in out.models:
        spec = out.params.model(m)
        pinned = spec.revision or spec.gguf_file
        extraction = out.lw(m).get("extraction") or {}
        weights = f"{spec.source} `{spec.location}`" + (f", `{pinned}`" if pinned else "")
        rows.append([spec.display, f"`{m}`", weights, fmt(spec.params_millions, 0), fmt_int(out.lw(m)["n_layers"]),
                     str(extraction.get("dtype", "n/a")), fmt_bool(extraction.get("bos_added"))])
    return markdown_table(["Model", "id", "weights: source, location, revision or file", "params (M)", "layers",
                           "dtype", "BOS"], rows, align="lllrrlc")


def validation_table(out: Outputs, variant: str = "mean") -> str:
    """Seed 003: per model and category, U(A), U(B), UA, preference, % preferring A, aligned."""
    rows = []
    for m in out.models:
        val = out.results[m]["validation"]
        for row in val["variants"][variant]["table"]:
            rows.append([out.display(m), pretty(row["category"]), fmt_int(row["n_pairs"]), fmt(row["u_a"], 3),
                         fmt(row["u_b"], 3), fmt(row["ua"], 4, signed=True),
                         fmt(row["mean_preference"], 3, signed=True), fmt(row["pct_prefer_a"], 1),
                         fmt_bool(row["aligned"])])
    return markdown_table(["Model", "category", "pairs", "U(A)", "U(B)", "UA", "preference", "% A", "aligned"],
                          rows, align="llrrrrrrc")


def validation_summary_table(out: Outputs, variant: str = "mean") -> str:
    """Seed 003: the global statistics of every model."""
    rows = []
    for m in out.models:
        g = out.results[m]["validation"]["variants"][variant]["global"]
        rows.append([out.display(m), fmt_int(out.results[m]["validation"]["layer"]), fmt(g["mean_ua"], 4, signed=True),
                     fmt_ci(g["ci_low"], g["ci_high"], 4), fmt(g["cohens_d"], 2, signed=True), fmt_r(g["r"]),
                     str(g.get("label") or "n/a"), fmt(g["mean_preference"], 3, signed=True)])
    return markdown_table(["Model", "layer", "mean UA", "CI of mean UA", "Cohen's d", "r", "label",
                           "mean preference"], rows, align="lrrrrrcr")


def published_reference_table(out: Outputs, variant: str = "mean") -> str:
    """Seed 003: the published reference models next to this panel, for one category."""
    rows = [[name, "published", fmt(ua, 3, signed=True), fmt(pref, 3, signed=True)]
            for name, (ua, pref) in PUBLISHED_SCIENTIFIC_FACTS.items()]
    for m in out.models:
        for row in out.results[m]["validation"]["variants"][variant]["table"]:
            if row["category"] == PUBLISHED_REFERENCE_CATEGORY:
                rows.append([out.display(m), "this pipeline", fmt(row["ua"], 3, signed=True),
                             fmt(row["mean_preference"], 3, signed=True)])
    return markdown_table(["Model", "source", "UA", "preference"], rows, align="llrr")


def layer_table(out: Outputs, pooling: str = "mean") -> str:
    """Seed 000: r per layer at the seeds' layers (every 4th and the last), with the exact permutation
    p and its Holm / BH corrections, the Fisher-z interval, Spearman, the sink-excluded r and, as a
    labelled secondary column, the parametric p."""
    rows = []
    for m in out.models:
        lw = out.lw(m)
        b = lw["poolings"][pooling]
        sx = out.results[m]["sink_excluded/layerwise"]["poolings"][pooling]
        for layer in lw["seed_layers"]:
            rows.append([out.display(m), fmt_int(layer), fmt_r(b["pearson_r"][layer]),
                         fmt_ci(b["fisher_ci_low"][layer], b["fisher_ci_high"][layer]),
                         fmt_r(b["spearman_rho"][layer]), fmt_p(b["permutation_p"][layer]),
                         fmt_p(b["permutation_holm_p"][layer]), fmt_p(b["permutation_bh_p"][layer]),
                         fmt_p(b["pearson_p"][layer]), fmt_r(sx["pearson_r"][layer])])
    header = ["Model", "layer", "r", "Fisher-z CI", "Spearman", "perm. p", "Holm", "BH", "t-test p",
              "r, no sink"]
    return markdown_table(header, rows, align="l" + "r" * (len(header) - 1))


def _seed_view(out: Outputs) -> Mapping[str, Any]:
    """``seed_layers_view`` of the panel results: pooling -> models/summary."""
    view = out.panel.get("seed_layers_view") or {}
    return view.get("poolings", view)


def scaling_table(out: Outputs, pooling: str = "mean", view: str = "all") -> str:
    """Seed 001: peaks, final r and sign changes of every model; the peak-depth summary last."""
    block = out.panel["poolings"][pooling] if view == "all" else _seed_view(out)[pooling]
    rows = []
    for m in out.models:
        e = block["models"][m]
        pos, neg = e.get("peak_positive") or {}, e.get("peak_negative") or {}
        rows.append([e.get("display", out.display(m)), fmt(e.get("params_millions"), 0), fmt_int(e["n_layers"]),
                     fmt_r(pos.get("r")), f"{fmt_int(pos.get('layer'))} ({fmt(pos.get('depth_pct'), 0)} %)",
                     fmt_r(neg.get("r")), f"{fmt_int(neg.get('layer'))} ({fmt(neg.get('depth_pct'), 0)} %)",
                     fmt_r(e.get("final_r")), str(len(e.get("sign_changes", [])))])
    s = block["summary"]
    rows.append(["**across the panel**", "", "", "",
                 f"{fmt(s.get('peak_positive_depth_mean'), 1)} ± {fmt(s.get('peak_positive_depth_std'), 1)} %", "",
                 f"{fmt(s.get('peak_negative_depth_mean'), 1)} ± {fmt(s.get('peak_negative_depth_std'), 1)} %", "",
                 ""])
    return markdown_table(["Model", "params (M)", "layers", "peak r", "at layer (depth)", "min r",
                           "at layer (depth)", "final r", "sign changes"], rows, align="lrrrrrrrr")


def bins_table(out: Outputs, pooling: str = "mean") -> str:
    """Seed 002: the distribution of the last-layer r over all random partitions, for every k and scheme."""
    rows = []
    for m in out.models:
        bins = out.results[m]["bins"]
        last = bins["n_layers"]
        for scheme, data in bins["poolings"][pooling]["schemes"].items():
            for k in sorted(data["by_k"], key=int):
                e = data["by_k"][k]
                rows.append([out.display(m), scheme, k, f"{fmt_r(e['r_mean'][last])} ± {fmt(e['r_std'][last], 2)}",
                             fmt(100 * e["share_positive"][last] if e["share_positive"][last] is not None else None, 0),
                             fmt(100 * e["share_excludes_zero"][last]
                                 if e["share_excludes_zero"][last] is not None else None, 0),
                             fmt_int(e["n_valid"][last])])
    return markdown_table(["Model", "scheme", "k", "r: mean ± sd", "% with r > 0", "% whose CI excludes 0",
                           "partitions"], rows, align="llrrrrr")


def _is_bell(an: Mapping[str, Any]) -> Any:
    if "is_bell_curve" in an:
        return an["is_bell_curve"]
    return (an.get("bell_curve") or {}).get("is_bell_curve")


NBSP = "\u00a0"
"""A no-break space, for table cells only: an inline value under Quarto would show its escape."""


def _slope_cell(side: Mapping[str, Any]) -> str:
    """A bell-curve slope with its p-value, kept on one line each: ``+0.0005`` / ``(p 0.987)``."""
    slope = side.get("slope")
    if _missing(slope):
        return "n/a"
    return f"{fmt(slope, 4, signed=True)} (p{NBSP}{fmt_p(side.get('p')).replace(' ', NBSP)})"


def anisotropy_table(out: Outputs) -> str:
    """Seed 004: L* with its ties and bootstrap, the bell-curve slopes with their p-values, and L*
    with every token and with position 0 of every prompt excluded."""
    rows = []
    for m in out.models:
        an = out.results[m]["anisotropy"]
        bell = an.get("bell_curve") or {}
        before, after = bell.get("before") or {}, bell.get("after") or {}
        ties = an.get("l_star_ties") or []
        boot = an.get("l_star_bootstrap") or {}
        variants = an.get("variants") or {}
        tie_text = (f"{ties[0]}–{ties[-1]}" if len(ties) > 1 and ties == list(range(ties[0], ties[-1] + 1))
                    else ", ".join(map(str, ties)) or "n/a")
        rows.append([out.display(m), f"{fmt_int(an.get('n_tokens'))} {an.get('token_selection', 'n/a')}",
                     f"{fmt_int(an.get('l_star'))} ({fmt(an.get('l_star_depth_pct'), 0)}{NBSP}%)", tie_text,
                     fmt(100 * boot["share_in_ties"], 0) if boot else "n/a",
                     _slope_cell(before), _slope_cell(after),
                     f"{fmt_bool(_is_bell(an))} / {fmt_bool(bell.get('is_bell_curve_significant'))}",
                     fmt_int((variants.get("all_tokens") or {}).get("l_star")),
                     fmt_int((variants.get("sink_excluded") or {}).get("l_star"))])
    return markdown_table(["Model", "tokens", f"{L_STAR} (depth)", "ties", "% in ties", "slope before",
                           "slope after", "bell: seed / sig.", f"{L_STAR}, all", f"{L_STAR}, no pos. 0"], rows,
                          align="lrrrrrrcrr")


# ------------------------------------------------------------------------------------------------
# Sentences
# ------------------------------------------------------------------------------------------------


def _ci_phrase(low: Any, high: Any) -> str:
    if _missing(low) or _missing(high):
        return "has no Fisher-z interval"
    if low > 0 or high < 0:
        return f"has a Fisher-z interval {fmt_ci(low, high)} that excludes zero"
    return f"has a Fisher-z interval {fmt_ci(low, high)} that includes zero"


def layerwise_sentences(out: Outputs, pooling: str = "mean") -> str:
    """One sentence per model on its final-layer r, its peaks and its sign changes."""
    parts = []
    for m in out.models:
        b = out.lw(m)["poolings"][pooling]
        last = out.lw(m)["n_layers"]
        changes = b.get("sign_changes", [])
        where = join_words([f"{c['layer_before']}→{c['layer_after']}" for c in changes])
        holm = sum(1 for x in b["permutation_holm_reject"] if x)
        parts.append(
            f"For {out.display(m)}, r at the last layer ({last}) is {fmt_r(b['pearson_r'][last])} and "
            f"{_ci_phrase(b['fisher_ci_low'][last], b['fisher_ci_high'][last])} "
            f"(exact permutation p = {fmt_p(b['permutation_p'][last])}); r peaks at "
            f"{fmt_r(b['peak_positive']['r'])} in layer {fmt_int(b['peak_positive']['layer'])} and is lowest, "
            f"{fmt_r(b['peak_negative']['r'])}, in layer {fmt_int(b['peak_negative']['layer'])}; it changes sign "
            f"{len(changes)} time{'s' if len(changes) != 1 else ''}"
            f"{' (between layers ' + where + ')' if changes else ''}, and the exact permutation p of "
            f"{holm} of {last + 1} layers survives Holm's correction."
        )
    return " ".join(parts)


def validation_sentences(out: Outputs, variant: str = "mean") -> str:
    """Per model: mean UA with its interval, r and the seed's label, and the aligned categories."""
    parts = []
    for m in out.models:
        val = out.results[m]["validation"]["variants"][variant]
        g = val["global"]
        aligned = [r for r in val["table"] if r.get("aligned")]
        parts.append(
            f"{out.display(m)} has a mean UA of {fmt(g['mean_ua'], 4, signed=True)} "
            f"(interval {fmt_ci(g['ci_low'], g['ci_high'], 4)}, Cohen's d {fmt(g['cohens_d'], 2, signed=True)}) and "
            f"r = {fmt_r(g['r'])} across categories, which the seed labels {g.get('label') or 'n/a'}; "
            f"{len(aligned)} of {len(val['table'])} categories are aligned."
        )
    return " ".join(parts)


def scaling_sentences(out: Outputs, pooling: str = "mean") -> str:
    """The peak depths across the panel and the seed's stability verdict."""
    block = out.panel["poolings"][pooling]
    s = block["summary"]
    peaks = join_words([f"{block['models'][m].get('display', out.display(m))} at "
                        f"{fmt((block['models'][m].get('peak_positive') or {}).get('depth_pct'), 0)} %"
                        for m in out.models])
    stable = s.get("stable")
    verdict = ("which the seed's criterion calls stable" if stable else
               "which the seed's criterion does not call stable" if stable is not None else
               "too few models for the seed's stability criterion")
    seed_view = _seed_view(out).get(pooling, {}).get("summary", {})
    extra = ""
    if seed_view:
        extra = (f" Restricted to the seeds' every-fourth-layer sampling, the peaks lie at "
                 f"{fmt(seed_view.get('peak_positive_depth_mean'), 1)} ± "
                 f"{fmt(seed_view.get('peak_positive_depth_std'), 1)} %.")
    return (f"The positive peak of r lies at {peaks} of depth: {fmt(s.get('peak_positive_depth_mean'), 1)} ± "
            f"{fmt(s.get('peak_positive_depth_std'), 1)} % across the panel, {verdict} (standard deviation "
            f"below {fmt(out.panel.get('stable_depth_std'), 0)} %).{extra}")


def bins_sentences(out: Outputs, pooling: str = "mean", scheme: str = "balanced") -> str:
    """Per model: the distribution of the last-layer r over all partitions with k = ci_k bins."""
    parts = []
    k = str(out.params.analysis.bins.ci_k)
    for m in out.models:
        bins = out.results[m]["bins"]
        schemes = bins["poolings"][pooling]["schemes"]
        name = scheme if scheme in schemes else next(iter(schemes))
        by_k = schemes[name]["by_k"]
        k_used = k if k in by_k else sorted(by_k, key=int)[0]
        e = by_k[k_used]
        last = bins["n_layers"]
        pos, excl = e["share_positive"][last], e["share_excludes_zero"][last]
        parts.append(
            f"For {out.display(m)}, over {fmt_int(e['n_valid'][last])} {name} partitions into {k_used} bins the "
            f"last-layer r averages {fmt_r(e['r_mean'][last])} (sd {fmt(e['r_std'][last], 2)}); "
            f"{fmt(None if pos is None else 100 * pos, 0)} % of the partitions give r > 0 and "
            f"{fmt(None if excl is None else 100 * excl, 0)} % a Fisher-z interval that excludes zero."
        )
    return " ".join(parts)


def anisotropy_sentences(out: Outputs) -> str:
    """Per model: L* with its ties, the bell-curve verdict with its p-values, L* with position 0 out."""
    parts = []
    for m in out.models:
        an = out.results[m]["anisotropy"]
        bell = an.get("bell_curve") or {}
        before, after = bell.get("before") or {}, bell.get("after") or {}
        ties = an.get("l_star_ties") or []
        sx = (an.get("variants") or {}).get("sink_excluded") or {}
        tie_text = ("no other layer is within the tolerance" if len(ties) <= 1 else
                    f"{len(ties) - 1} other layer{'s are' if len(ties) > 2 else ' is'} within "
                    f"{fmt(100 * an.get('l_star_tolerance', 0), 1)} % of it, a tie")
        seed_bell = _is_bell(an)
        parts.append(
            f"For {out.display(m)}, λ1/Σλ is largest at {L_STAR} = {fmt_int(an.get('l_star'))} "
            f"({fmt(an.get('l_star_depth_pct'), 0)} % depth, {fmt(an.get('l_star_value'), 3)}), and {tie_text}; "
            f"the slopes before and after {L_STAR} are {fmt(before.get('slope'), 4, signed=True)} "
            f"(p {fmt_p(before.get('p'))}) and {fmt(after.get('slope'), 4, signed=True)} (p {fmt_p(after.get('p'))}), "
            f"so the profile {'passes' if seed_bell else 'fails' if seed_bell is not None else 'cannot be given'} "
            f"the seed's sign-only bell-curve test and "
            f"{'passes' if bell.get('is_bell_curve_significant') else 'fails'} it when both slopes must differ "
            f"from zero at α = {fmt(out.params.analysis.alpha, 2)}; with position 0 of every prompt excluded, "
            f"{L_STAR} is layer {fmt_int(sx.get('l_star'))}."
        )
    return " ".join(parts)


def limitations_paragraph(out: Outputs) -> str:
    """What the panel of this rendering is, and what that rules out; written from params.yaml."""
    specs = [(m, out.params.model(m)) for m in out.models]
    quantized = [(m, sp) for m, sp in specs if sp.source in ("packaged", "gguf")]
    sizes = [sp.params_millions for _, sp in specs if sp.params_millions is not None]
    text = [f"The panel of this rendering has {len(specs)} model{'s' if len(specs) != 1 else ''} "
            f"({join_words([sp.display for _, sp in specs])})"]
    if sizes:
        text.append(f" of {fmt(min(sizes), 0)} to {fmt(max(sizes), 0)} million parameters" if len(sizes) > 1
                    else f" of {fmt(sizes[0], 0)} million parameters")
    text.append(".")
    if quantized:
        files = join_words([f"`{sp.gguf_file or sp.location}`" for _, sp in quantized])
        text.append(
            f" {join_words([sp.display for _, sp in quantized])} {'are' if len(quantized) > 1 else 'is'} loaded from "
            f"quantized GGUF files ({files}) and dequantized to 32-bit floats: the weights keep the quantization "
            "error, so hidden states and likelihoods differ from those of the original-precision models, and "
            "the tokenizer is rebuilt from the GGUF metadata.")
    if sizes and max(sizes) < 1000:
        text.append(" These are small models that run on a CPU; they are far smaller than the models of the "
                    "original study, and nothing here says how the results carry over to larger models.")
    if not all(m.startswith("pythia") for m, _ in specs):
        text.append(" Because the panel differs from the original study's, the numbers in this paper are not a "
                    "replication of its published values; running the Pythia panel reproduces that setting.")
    if len(specs) < 3:
        text.append(f" With {len(specs)} model{'s' if len(specs) != 1 else ''}, the scaling analysis "
                    "(@sec-scaling) is a comparison, not a trend.")
    return "".join(text)


# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------


def figure_entries(out: Outputs, key: str) -> list[Mapping[str, Any]]:
    """The manifest entries of figure ``key``, in panel order (one per model, or one for the panel)."""
    entries = [e for e in out.figures.get("figures", []) if e.get("key") == key]
    if not entries:
        raise ManuscriptDataError(f"figures/manifest.json: no figure {key!r}; run the `figures` stage")
    order = {m: i for i, m in enumerate(out.models)}
    return sorted(entries, key=lambda e: order.get(e.get("model") or "", -1))


def figure_label(key: str, model_id: str | None = None) -> str:
    return f"fig-{slug(key)}" + (f"-{slug(model_id)}" if model_id else "")


def provenance(entry: Mapping[str, Any]) -> str:
    """The caption's closing provenance: the stage and the results file(s) it was drawn from."""
    sources = join_words([f"`{s}`" for s in entry.get("sources", [])])
    return f"Stage `{entry.get('stage', 'figures')}`, drawn from {sources}."


def figure_markdown(out: Outputs, key: str, caption: str, *, paper_dir: str | Path | None = None) -> str:
    """Markdown figures for ``key`` (one per model where per model), each captioned
    ``caption`` (``{display}`` is replaced by the model's name) and its provenance."""
    paper_dir = Path.cwd() if paper_dir is None else Path(paper_dir)
    staged = os.environ.get(FIGURES_DIR_ENV)
    blocks = []
    for e in figure_entries(out, key):
        model = e.get("model")
        text = caption.format(display=out.display(model) if model else "the panel")
        png = out.root / e["png"]
        if staged:  # the renderer copied figures/ to where Quarto's Typst may read it
            png = Path(staged) / Path(e["png"]).relative_to(FIGURES_DIR)
        path = os.path.relpath(png, paper_dir.resolve()).replace(os.sep, "/")
        blocks.append(f"![{text} {provenance(e)}]({path}){{#{figure_label(key, model)} width=\"100%\"}}")
    return "\n\n".join(blocks) + "\n\n"


def figure_refs(out: Outputs, key: str) -> str:
    """Cross-references to every figure of ``key``: ``@fig-key-a and @fig-key-b``."""
    return join_words([f"@{figure_label(key, e.get('model'))}" for e in figure_entries(out, key)])


# ------------------------------------------------------------------------------------------------
# Reproducibility appendix
# ------------------------------------------------------------------------------------------------


SOURCE_PATHS: tuple[str, ...] = ("src", "stages", "params.yaml", "dvc.yaml", "data", "paper/paper.qmd",
                                  "paper/_quarto.yml", "paper/references.bib", "paper/paper.css", "paper/tables.typ",
                                  "requirements.lock")
"""The tracked sources every output is made from (``dvc.lock``, ``metrics/`` and ``plots/`` are outputs)."""


def git_commit(root: Path) -> dict[str, str]:
    """The last commit that changed the tracked sources, and whether the checkout's sources differ from it.

    Not ``HEAD``: the commit that records the outputs (``dvc.lock``) comes after the render, so a paper
    naming ``HEAD`` could never be reproduced byte for byte from its own commit.
    """
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("log", "-1", "--format=%H", "--", *SOURCE_PATHS)
    if not commit:
        return {"commit": "unavailable (not a git checkout)", "state": "unknown"}
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PATHS)
    state = "clean" if changed == "" else "modified sources" if changed else "unknown"
    return {"commit": commit, "state": state}


MD5_SHOWN = 12
"""Hex digits of each md5 the reproducibility table shows: enough to tell outputs apart, short
enough for the column (``uaprobe verify`` compares the full hashes)."""


def dvc_lock_table(root: Path, prefixes: Sequence[str] = ("results/", "metrics/", "figures/")) -> str:
    """The md5 that ``dvc.lock`` records for every output the manuscript reads, and whether the
    file on disk still has it."""
    path = root / "dvc.lock"
    if not path.is_file():
        return markdown_table(["output", "md5 in dvc.lock", "on disk"], [["dvc.lock not found", "", ""]], align="llc")
    lock = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    rows = []
    for stage, entry in sorted((lock.get("stages") or {}).items()):
        for o in entry.get("outs", []) or []:
            p = str(o.get("path", ""))
            if not p.startswith(tuple(prefixes)):
                continue
            md5 = str(o.get("md5", ""))
            target = root / p
            if md5.endswith(".dir") or target.is_dir():
                state = "directory"
            elif target.is_file():
                state = "matches" if hashlib.md5(target.read_bytes()).hexdigest() == md5 else "differs"
            else:
                state = "missing"
            rows.append([f"`{p}`", f"`{stage}`", f"`{md5[:MD5_SHOWN]}`", state])
    if not rows:
        rows.append(["no matching outputs in dvc.lock", "", "", ""])
    return markdown_table(["output", "stage", "md5 (start)", "file on disk"], rows, align="lllc")


PACKAGES: tuple[str, ...] = ("uaprobe", "torch", "transformers", "gguf", "numpy", "scipy", "h5py", "matplotlib",
                             "dvc", "nbclient", "ipykernel", "pypandoc-binary", "typst", "PyYAML")
"""Packages whose versions the appendix lists."""


def package_versions_table(packages: Sequence[str] = PACKAGES) -> str:
    rows = [["Python", platform.python_version()]]
    for name in packages:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        rows.append([name, version])
    return markdown_table(["package", "version"], rows, align="ll")


def _numerics_row(label: str, rec: Any) -> list[str]:
    if not isinstance(rec, Mapping):
        return [label, "not recorded", "", "", "", ""]
    torch = rec.get("torch") or {}
    blas = str(torch.get("blas", ""))
    mkl = re.search(r"Version ([0-9.]+)", blas)
    cores = sorted({str(b.get("core", "?")) for b in rec.get("openblas") or []})
    simd = (rec.get("numpy") or {}).get("simd") or {}
    threads = rec.get("threads")
    return [label, str(rec.get("isa", "?")),
            f"{torch.get('cpu_capability', '?')}, MKL {mkl.group(1)}" if torch and mkl else
            (str(torch.get("cpu_capability", "?")) if torch else "not used"),
            ", ".join(cores) or "not used",
            " + ".join([*simd.get("baseline", []), *simd.get("dispatch_enabled", [])]) or "not used",
            "1" if isinstance(threads, Mapping) and set(threads.values()) == {"1"} else
            ("any (results do not depend on it)" if isinstance(threads, str) else str(threads))]


def numerics_table(out: Outputs) -> str:
    """The CPU code paths every stage's numbers were computed on (the ``numerics`` block of the
    results files): the pinned instruction set, torch's kernels and BLAS, OpenBLAS's kernels, numpy's
    SIMD targets and the thread count where it is pinned."""
    rows = []
    for m in out.models:
        block = out.lw(m).get("numerics") or {}
        rows.append(_numerics_row(f"extract {out.display(m)}", block.get("extraction")))
        rows.append(_numerics_row(f"analyze {out.display(m)}", block.get("analysis")))
    rows.append(_numerics_row("compare", (out.panel.get("numerics") or {}).get("analysis")))
    return markdown_table(["stage", "pinned ISA", "torch kernels, BLAS", "OpenBLAS kernels", "numpy SIMD",
                           "threads"], rows, align="llllll")


def params_block(out: Outputs, sections: Sequence[str] = ("models", "extract", "pooling", "analysis")) -> str:
    """The parameters the outputs were computed with, as a YAML code block."""
    subset = {k: out.raw_params[k] for k in sections if k in out.raw_params}
    return "```yaml\n" + yaml.safe_dump(subset, sort_keys=False, allow_unicode=True).rstrip() + "\n```"


__all__ = [
    "PUBLISHED_REFERENCE_CATEGORY",
    "PUBLISHED_REFERENCE_CITATION",
    "PUBLISHED_SCIENTIFIC_FACTS",
    "ManuscriptDataError",
    "Outputs",
    "anisotropy_table",
    "bins_table",
    "dvc_lock_table",
    "figure_markdown",
    "figure_refs",
    "find_root",
    "fmt",
    "fmt_ci",
    "fmt_p",
    "fmt_r",
    "git_commit",
    "layer_table",
    "layerwise_sentences",
    "load_outputs",
    "markdown_table",
    "model_panel_table",
    "numerics_table",
    "package_versions_table",
    "params_block",
    "published_reference_table",
    "scaling_table",
    "settings",
    "validation_summary_table",
    "validation_table",
]
