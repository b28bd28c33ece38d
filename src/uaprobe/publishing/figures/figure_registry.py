"""Every figure of the project, described once: its key, whether it is drawn per model or for the
panel, the results files it reads, the arrays it plots, and how it is drawn.

The figures stage draws what this registry lists (``stages/figures.py``), the manifest records each
drawing with its sources, and the manuscript's captions close with the arrays it plots
(:func:`data_line`); the supplementary provenance file lists the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from matplotlib.figure import Figure

from uaprobe.names import PANEL_RESULTS
from uaprobe.publishing.figures import figure_spec, figures_geometry, figures_groups, figures_layers, figures_original
from uaprobe.schema import KeyPathError, check_key, kind_of
from uaprobe.schema.manifest import FigureEntry

REFERENCE = "data/published/reference-models.json"
"""The original study's published scientific-facts points, drawn beside the panel in the validation figure."""
PANEL = PANEL_RESULTS


@dataclass(frozen=True)
class FigureSpec:
    """One figure."""

    key: str
    scope: Literal["model", "models", "panel"]
    """``model``: one figure per model; ``models``: one figure of every model's results files side by side;
    ``panel``: one figure of the panel's results."""
    sources: tuple[str, ...]
    """The results files it reads: per model (``model``, ``models``), names under ``results/models/<id>/``
    (``layerwise``, ``sink_excluded/layerwise``); for the panel, paths from the root."""
    data: tuple[tuple[str, tuple[str, ...]], ...]
    """The arrays it plots: (file, keys), the file a per-model results name or a path from the root."""
    draw: Callable[[Mapping[str, Any]], Figure]
    """Draws the figure from the documents of ``sources`` read through their schema (name -> typed
    model; ``reference``: the published reference points; for ``models``, model id -> those documents)."""
    caption: str
    """What the figure shows, in one or two sentences (the supplement's caption; ``{display}``: the model)."""
    settings: tuple[str, ...] = ()
    """The keys of the results files' ``settings`` (the ``analysis`` section of params.yaml) it reads: the only
    ones it is shown, and so the only ones its drawing is keyed on (:mod:`uaprobe.publishing.figures.drawing`)."""

    def __post_init__(self) -> None:
        """Every array it declares is a key of its file's schema (a field renamed there fails here, at import);
        the quoted data files (``data/``) have no schema."""
        for name, keys in self.data:
            if name.startswith("data/"):
                continue
            kind = kind_of(name) if name.startswith("results/") else Path(name).name
            for key in keys:
                try:
                    check_key(kind, key)
                except KeyPathError as exc:
                    raise TypeError(f"figure {self.key!r} plots {name} {key!r}, but the schema of {kind} has no "
                                    f"key {exc.at!r}") from None


def _unit(docs: Mapping[str, Any]) -> str:
    return "nats/token" if docs["layerwise"].preference == "mean" else "nats/statement"


def _model(key: str, sources: tuple[str, ...], data: Mapping[str, tuple[str, ...]],
           draw: Callable[[Mapping[str, Any]], Figure], caption: str) -> FigureSpec:
    return FigureSpec(key, "model", sources, tuple(data.items()), draw, caption)


RANGE = ("the smallest to the largest r with one category left out: a range of the leave-one-out values, not a "
         "confidence interval")


FIGURES: tuple[FigureSpec, ...] = (
    _model("layerwise", ("layerwise", "sink_excluded/layerwise"),
           {"layerwise": ("poolings/*/pearson_r", "poolings/*/loco_r", "poolings/mean/permutation_holm_reject",
                          "poolings/mean/sign_changes", "poolings/*/prenorm/pearson_r", "poolings/*/prenorm/loco_r"),
            "sink_excluded/layerwise": ("poolings/mean/pearson_r",)},
           lambda d: figures_layers.layerwise_figure(d["layerwise"], sink_excluded=d["sink_excluded/layerwise"]),
           "{display}, left: r(UA, preference) per layer with mean pooling under the default position-0 policy "
           "and with position 0 excluded (band: " + RANGE + "; dotted lines: sign changes of r between adjacent "
           "layers; stars: layers whose exact permutation p survives Holm's correction across the layers). Right: r "
           "at the last layer for each pooling and for the pre-norm state (the last block's output before the final "
           "normalisation; hatched), with the same range (open circles)."),
    _model("sink", ("robustness",),
           {"robustness": ("sink/norm_ratio_median", "sink/norm_ratio_q10", "sink/norm_ratio_q90",
                           "sink/mean_share_median", "sink/top_dim_share_median")},
           lambda d: figures_geometry.sink_figure(d["robustness"]),
           "{display}, position 0 against the other tokens per layer: its norm over the median norm of the other "
           "tokens (median and 10-90 % band over the statements, log scale), its share of the mean over all "
           "positions, and the share of its squared norm in its largest dimension."),
    _model("bins", ("bins", "layerwise"),
           {"bins": ("poolings/mean/schemes/*/comparison", "poolings/mean/schemes/*/ci_partition")},
           lambda d: figures_groups.bins_figure(d["bins"], n_categories=len(d["layerwise"].categories)),
           "{display}, notebook 002 (random bins): per layer, r over the categories beside r over random bins of the "
           "pairs, and the width of r's bootstrap interval over the bins, for the notebook's randint assignment "
           "and for balanced bins (mean pooling)."),
    _model("validation", ("validation", "layerwise"),
           {"validation": ("variants/mean/table/*/ua", "variants/mean/table/*/mean_preference"),
            REFERENCE: ("models",)},
           lambda d: figures_groups.validation_figure(
               d["validation"], reference={name: (v["ua"], v["preference"]) for name, v in d["reference"]["models"].items()},
               reference_category=d["reference"]["category"], preference_unit=_unit(d)),
           "{display}, notebook 003 (validation): each category's UA against its mean preference at the last layer "
           "(mean pooling), with the original study's published scientific-facts points of its reference models."),
    _model("anisotropy", ("anisotropy",),
           {"anisotropy": ("lambda1_ratio", "effective_rank", "mean_cos_to_mean", "eigenvalue_variance", "l_star")},
           lambda d: figures_geometry.anisotropy_figure(d["anisotropy"]),
           "{display}, notebook 004 (anisotropy profile) of all token states of the anisotropy prompts per layer: the "
           "share of variance on the first principal component, the effective rank, the mean cosine to the mean "
           "state and the eigenvalue variance, with L* (the layer of the largest first-component share) marked."),
    _model("spectrum", ("anisotropy",), {"anisotropy": ("spectrum", "l_star")},
           lambda d: figures_geometry.spectrum_figure(d["anisotropy"]),
           "{display}, notebook 004: the leading covariance eigenvalues of the token states at key layers, as shares "
           "of the total variance."),
    _model("pairs", ("pairs",),
           {"pairs": ("poolings/*/pearson_r", "poolings/*/bootstrap_ci_low", "poolings/*/bootstrap_ci_high")},
           lambda d: figures_groups.pairs_figure(d["pairs"]),
           "{display}: per layer and pooling, r between the within-category centroid score of each pair (the cosine of "
           "its A state to the centroid of its category's A states minus that of its B state to its category's B "
           "centroid) and its "
           "preference over all pairs, with a percentile bootstrap interval over pairs resampled independently, which "
           "ignores their categories and is not valid for inference (this project's statistic, not the original's "
           "Option B)."),
    _model("loco", ("layerwise",), {"layerwise": ("poolings/mean/pearson_r", "poolings/mean/loco_r")},
           lambda d: figures_layers.loco_figure(d["layerwise"]),
           "{display}: r(UA, preference) per layer with every category and with each category left out in turn "
           "(mean pooling)."),
    _model("option_b", ("option_b",),
           {"option_b": ("poolings/mean/metrics/*/pearson_r", "poolings/mean/metrics/centroid_asymmetry/bootstrap_ci_low",
                         "poolings/mean/metrics/centroid_asymmetry/bootstrap_ci_high",
                         "poolings/mean/metrics/centroid_asymmetry/phases")},
           lambda d: figures_original.option_b_figure(d["option_b"]),
           "{display}, Option B (the follow-up study's pair-level analysis with global centroids): r of each "
           "per-pair metric with the preference over all pairs, per layer (mean pooling); the centroid asymmetry "
           "with its bootstrap band over pairs resampled independently (it ignores their categories and is not valid for "
           "inference; the paper's cluster intervals are in its tables); the follow-up study's early, middle and late "
           "phases shaded."),
    FigureSpec("specification_curve", "models", ("specification_curve",),
               (("specification_curve", ("specs/*", "null_band/*")),),
               lambda d: figure_spec.specification_curve_figure({m: docs["specification_curve"]
                                                                 for m, docs in d.items()}),
               "Specification curve of every model: the category-level r of every distinct specification, sorted, "
               "over the pointwise permutation null band (per rank, the central share of the sorted curves under every "
               "relabelling of the categories' preferences; the share is the confidence level of params.yaml), above "
               "the choices that make it.", settings=("alpha",)),
    FigureSpec("category_scatter", "models", ("validation", "layerwise"),
               (("validation", ("variants/mean/table/*/ua", "variants/mean/table/*/mean_preference")),),
               lambda d: figures_groups.category_scatter_figure({m: docs["validation"] for m, docs in d.items()},
                                                                preference_unit=_unit(next(iter(d.values())))),
               "Every model's categories: UA against the mean preference at the last layer (mean pooling, default "
               "position-0 policy), each category named; the category-level r is the correlation of these points."),
    FigureSpec("scaling", "panel", (PANEL,),
               ((PANEL, ("poolings/mean/models/*/r", "poolings/mean/models/*/depth_pct",
                         "poolings/mean/models/*/peak_positive")),),
               lambda d: figures_layers.scaling_figure(d[PANEL]),
               "Notebook 001 (scaling): the layer curves of r(UA, preference) of every model of the panel, by layer and "
               "by depth, with each model's positive peak marked (mean pooling)."),
)
"""Every figure, in the order the figures stage draws them (per-model figures for each model, then the panel's)."""

BY_KEY: Mapping[str, FigureSpec] = {f.key: f for f in FIGURES}


def data_line(entry: FigureEntry) -> str:
    """A caption's closing provenance for a manifest entry: the arrays plotted and their files."""
    spec = BY_KEY.get(entry.key)
    if spec is None:
        return ""
    files = []
    for name, keys in spec.data:
        if name.startswith(("results/", "data/")):
            paths = [name]
        elif spec.scope == "models":  # every model's file, as the manifest lists them
            paths = [s for s in entry.sources if s.endswith(f"/{name}.json")]
        else:
            paths = [f"results/models/{entry.model}/{name}.json"]
        files += [f"`{file}`: " + ", ".join(f"`{k}`" for k in keys) for file in paths]
    return f"Data: {'; '.join(files)}."


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` where it lies below it (the manifest's form)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def manifest_entry(key: str, model_id: str | None, written: list[Path], build: Path, out: Path, root: Path,
                   sources: list[str]) -> FigureEntry:
    """The manifest entry of a figure drawn into ``build`` and moved to ``out``: its files (paths from the root)."""
    files = {p.suffix.lstrip("."): relative(out / p.relative_to(build), root) for p in written}
    return FigureEntry(key=key, model=model_id, stage="figures", sources=sources, files=files, png=files["png"])
