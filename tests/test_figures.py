"""Figure functions on a small synthetic results tree; byte-stable files; the figures stage."""

from __future__ import annotations

import warnings

import json
import re
import sys
from pathlib import Path

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from synthetic_h5 import SYNTHETIC_MODELS
from uaprobe.publishing.figures import figure_spec, figures_geometry, figures_groups, figures_layers, plotting
from uaprobe.schema import Record, read_results
from uaprobe.schema.document import document
from uaprobe.schema.categories import Layerwise, Validation

REPO = Path(__file__).resolve().parents[1]
_REFERENCE = json.loads((REPO / "data" / "published" / "reference-models.json").read_text(encoding="utf-8"))
PUBLISHED_SCIENTIFIC_FACTS = {name: (v["ua"], v["preference"]) for name, v in _REFERENCE["models"].items()}


@pytest.fixture(scope="module")
def tree(synthetic_tree: Path) -> Path:
    return synthetic_tree


def _docs(root: Path, model: str = "tiny-a") -> dict[str, Record]:
    return {n: read_results(root, f"results/models/{model}/{n}.json") for n in ("layerwise", "validation", "bins", "pairs", "anisotropy",
                                                      "robustness", "sink_excluded/layerwise")}


DRAWERS = {
    "layerwise": lambda d: figures_layers.layerwise_figure(d["layerwise"]),
    "layerwise_last": lambda d: figures_layers.layerwise_figure(d["layerwise"], pooling="last"),
    "bins": lambda d: figures_groups.bins_figure(d["bins"], n_categories=6),
    "validation": lambda d: figures_groups.validation_figure(d["validation"], reference=PUBLISHED_SCIENTIFIC_FACTS,
                                                             reference_category="scientific_facts"),
    "validation_noref": lambda d: figures_groups.validation_figure(d["validation"]),
    "anisotropy": lambda d: figures_geometry.anisotropy_figure(d["anisotropy"]),
    "spectrum": lambda d: figures_geometry.spectrum_figure(d["anisotropy"]),
    "pairs": lambda d: figures_groups.pairs_figure(d["pairs"]),
    "loco": lambda d: figures_layers.loco_figure(d["layerwise"]),
    "layerwise_sink": lambda d: figures_layers.layerwise_figure(d["layerwise"],
                                                                 sink_excluded=d["sink_excluded/layerwise"]),
    "sink": lambda d: figures_geometry.sink_figure(d["robustness"]),
}


def _line(ax, label: str) -> np.ndarray:
    for line in ax.get_lines():
        if line.get_label() == label:
            return np.asarray(line.get_ydata(), dtype=float)
    raise AssertionError(f"no line labelled {label!r}: {[ln.get_label() for ln in ax.get_lines()]}")


def _values(series) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in series], dtype=float)


@pytest.mark.parametrize("model", sorted(SYNTHETIC_MODELS))
def test_layerwise_figure_plots_the_results_arrays(tree: Path, model: str) -> None:
    d = _docs(tree, model)
    fig = DRAWERS["layerwise_sink"](d)
    ax = fig.get_axes()[0]
    np.testing.assert_array_equal(_line(ax, "r, mean pooling"), _values(d["layerwise"].poolings["mean"].pearson_r))
    np.testing.assert_array_equal(_line(ax, "r, position 0 excluded"),
                                  _values(d["sink_excluded/layerwise"].poolings["mean"].pearson_r))
    band = np.concatenate([path.vertices[:, 1] for path in ax.collections[0].get_paths()])
    loco = np.array([[np.nan if v is None else float(v) for v in row]
                     for row in d["layerwise"].poolings["mean"].loco_r], dtype=float)
    with warnings.catch_warnings():  # a layer with no leave-one-out r (all NaN) is a gap
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanmin(loco, axis=1), np.nanmax(loco, axis=1)  # the leave-one-category-out range
    assert np.isin(np.round(low[np.isfinite(low)], 12), np.round(band, 12)).all()
    assert np.isin(np.round(high[np.isfinite(high)], 12), np.round(band, 12)).all()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "range, one category left out" in legend and not any("Fisher" in t or "divergence" in t for t in legend)
    bars = fig.get_axes()[1]
    ranges = [c for c in bars.collections if c.get_label() == "range, one category left out"]
    assert len(ranges) == 1  # the leave-one-out range, no bootstrap: dotted, between open circles, no caps
    assert ranges[0].get_linestyle()[0][1] is not None
    segments = ranges[0].get_segments()
    assert segments[0][:, 1].min() == pytest.approx(np.nanmin(loco[-1]))
    assert segments[0][:, 1].max() == pytest.approx(np.nanmax(loco[-1]))


@pytest.mark.parametrize("model", sorted(SYNTHETIC_MODELS))
def test_sink_figure_plots_the_results_arrays(tree: Path, model: str) -> None:
    d = _docs(tree, model)
    sk = d["robustness"].sink
    fig = figures_geometry.sink_figure(d["robustness"])
    ratio_ax, share_ax = fig.get_axes()
    np.testing.assert_array_equal(_line(ratio_ax, "median"), _values(sk.norm_ratio_median))
    np.testing.assert_array_equal(_line(share_ax, "share of the mean-pooled vector"), _values(sk.mean_share_median))
    np.testing.assert_array_equal(_line(share_ax, "share of its norm² in its top dimension"),
                                  _values(sk.top_dim_share_median))
    bos = d["robustness"].extraction.bos_added
    assert ratio_ax.get_title().endswith("the BOS token" if bos else "the first word (no BOS)")


@pytest.mark.parametrize("name", sorted(DRAWERS))
@pytest.mark.parametrize("model", sorted(SYNTHETIC_MODELS))
def test_each_figure_function_draws_from_a_results_file_of_the_synthetic_run(tree: Path, name: str, model: str) -> None:
    fig = DRAWERS[name](_docs(tree, model))
    assert isinstance(fig, Figure)
    axes = fig.get_axes()
    assert axes, "a figure with no axes"
    for ax in axes:
        assert ax.get_ylabel(), f"{name}: an axis without a y label"
        assert ax.has_data(), f"{name}: an empty axis"
    # every x label of a data axis says its unit or scale
    assert any("(" in ax.get_xlabel() for ax in axes)


def test_scaling_figure_draws_every_model_of_the_panel(tree: Path) -> None:
    panel = read_results(tree, "results/panel.json")
    fig = figures_layers.scaling_figure(panel)
    labels = [t.get_text() for t in fig.get_axes()[0].get_legend().get_texts()]
    assert labels == [SYNTHETIC_MODELS[m]["display"] for m in panel.models]


def test_figures_use_the_colour_blind_safe_palette(tree: Path) -> None:
    fig = figures_layers.layerwise_figure(_docs(tree)["layerwise"])
    palette = {mcolors.to_hex(c) for c in plotting.OKABE_ITO}
    for ax in fig.get_axes():
        for line in ax.get_lines():
            colour = mcolors.to_hex(line.get_color())
            assert colour in palette or colour in {"#737373", "#000000"}, colour


def test_missing_values_are_gaps_not_errors(tree: Path) -> None:
    raw = _raw(tree, "layerwise")
    raw["poolings"]["mean"]["pearson_r"][2] = None
    raw["poolings"]["mean"]["loco_r"][2] = [None] * len(raw["poolings"]["mean"]["loco_r"][2])
    raw["poolings"]["mean"]["prenorm"]["pearson_r"] = None
    fig = figures_layers.layerwise_figure(Layerwise.model_validate(raw))
    ydata = fig.get_axes()[0].get_lines()[0].get_ydata()
    assert np.isnan(ydata[2])


def test_a_missing_key_names_the_key(tree: Path) -> None:
    raw = _raw(tree, "layerwise")
    del raw["poolings"]["mean"]
    with pytest.raises(plotting.FigureDataError, match="results of tiny-a: missing key 'poolings/mean' "):
        figures_layers.layerwise_figure(Layerwise.model_validate(raw))


def _raw(root: Path, name: str, model: str = "tiny-a") -> dict:
    return json.loads((root / "results" / "models" / model / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_saved_files_are_byte_identical_and_carry_no_dates(tree: Path, tmp_path: Path, fmt: str) -> None:
    d = _docs(tree)
    first = plotting.save_figure(figures_geometry.anisotropy_figure(d["anisotropy"]), tmp_path / "a" / "fig",
                                 formats=(fmt,))
    second = plotting.save_figure(figures_geometry.anisotropy_figure(d["anisotropy"]), tmp_path / "b" / "fig",
                                  formats=(fmt,))
    data = first[0].read_bytes()
    assert data == second[0].read_bytes()
    assert first[0].suffix == f".{fmt}"
    for marker in (b"CreationDate", b"ModDate", b"<dc:date>", b"Software", b"matplotlib version"):
        assert marker not in data, marker


def test_save_figure_rejects_an_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="format"):
        plotting.save_figure(Figure(), tmp_path / "x", formats=("jpg",))


def test_spectrum_key_layers_follow_seed_004() -> None:
    assert figures_geometry.spectrum_key_layers(32, 7) == [0, 3, 7, 19, 32]
    assert figures_geometry.spectrum_key_layers(4, 4) == [0, 2, 4]


def test_figures_stage_writes_every_figure_and_a_manifest(tmp_path: Path, make_synthetic_project) -> None:
    sys.path.insert(0, str(REPO / "stages"))
    from figures import run  # stages/figures.py

    tree = make_synthetic_project(tmp_path / "one-model", models={"tiny-b": SYNTHETIC_MODELS["tiny-b"]})

    out = tree / "figures"
    entries = run(params_path=tree / "params.yaml", root=tree, out=out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"] == [document(e) for e in entries]
    keys = {(e.key, e.model) for e in entries}
    for model in ("tiny-b",):
        for key in ("layerwise", "bins", "validation", "anisotropy", "spectrum", "pairs", "loco", "sink"):
            assert (key, model) in keys
            assert (out / "models" / model / f"{key}.png").is_file()
            assert (out / "models" / model / f"{key}.svg").is_file()
    assert ("scaling", None) in keys and ("specification_curve", None) in keys
    assert (out / "panel" / "specification_curve.png").is_file()
    for e in entries:
        assert e.stage == "figures"
        assert all((tree / s).is_file() for s in e.sources), e
        assert (tree / e.png).is_file()
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "models" / "stale-model").mkdir()
    run(params_path=tree / "params.yaml", root=tree, out=out)
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before, "a rerun changed bytes or kept a stale file"


def _clustered_validation(root: Path) -> Validation:
    """Six categories, five of them almost on one spot (a real panel puts them within a few hundredths)."""
    ua = [-0.218, 0.0010, 0.0012, 0.0014, 0.0016, 0.0018]
    pref = [-2.858, 0.30, 0.31, 0.32, 0.33, 0.34]
    raw = _raw(root, "validation")
    raw.update(display="Model M", layer=18)
    for row, u, p in zip(raw["variants"]["mean"]["table"], ua, pref, strict=True):
        row.update(ua=u, mean_preference=p)
    return Validation.model_validate(raw)


def test_validation_labels_do_not_overlap_each_other_the_markers_or_the_legend(tree: Path) -> None:
    fig = figures_groups.validation_figure(_clustered_validation(tree), reference=PUBLISHED_SCIENTIFIC_FACTS,
                                    reference_category="scientific_facts")
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_gid() == plotting.POINT_LABEL_GID]
    assert sorted(t.get_text() for t in labels) == sorted(
        r.category.replace("_", " ") for r in _clustered_validation(tree).variants["mean"].table)
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the text, without its leader line
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), "two category labels overlap"
        assert not a.overlaps(ax.get_legend().get_window_extent(renderer)), "a label covers the legend"
        frame = ax.get_window_extent(renderer)
        assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
        for collection in ax.collections:
            for x, y in collection.get_offset_transform().transform(collection.get_offsets()):
                assert not a.contains(x, y), f"label {a} covers a marker at ({x:.0f}, {y:.0f})"


def test_a_label_moved_away_from_its_point_has_a_leader_line(tree: Path) -> None:
    fig = figures_groups.validation_figure(_clustered_validation(tree))
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[0]
    pt = fig.dpi / 72

    def gap(t) -> float:  # points from the labelled point to the nearest edge of its label
        box = Text.get_window_extent(t, renderer)
        x, y = ax.transData.transform(t.xy)
        return float(np.hypot(max(box.x0 - x, 0, x - box.x1), max(box.y0 - y, 0, y - box.y1))) / pt

    labels = [t for t in ax.texts if t.get_gid() == plotting.POINT_LABEL_GID]
    near = [t for t in labels if t.arrow_patch is None]
    led = [t for t in labels if t.arrow_patch is not None]
    assert led, "the clustered labels should not all fit beside their points"
    assert all(gap(t) <= 4 * np.sqrt(2) + 0.5 for t in near), [gap(t) for t in near]
    assert all(gap(t) > 4 * np.sqrt(2) for t in led), [gap(t) for t in led]


@pytest.mark.parametrize("model", sorted(SYNTHETIC_MODELS))
def test_bar_labels_stay_clear_of_the_range_ends_and_of_each_other(tree: Path, model: str) -> None:
    fig = figures_layers.layerwise_figure(_docs(tree, model)["layerwise"])
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[1]
    labels = [Text.get_window_extent(t, renderer) for t in ax.texts]
    assert len(labels) == len(ax.patches) > 0, "one label per bar"
    ends = [xy for line in ax.get_lines() if line.get_marker() == "o"
            for xy in line.get_transform().transform(line.get_xydata())]
    assert ends, "the leave-one-out ranges end in open circles"
    for box in labels:
        for x, y in ends:
            assert not (box.x0 - 1 <= x <= box.x1 + 1 and box.y0 - 1 <= y <= box.y1 + 1), \
                f"a bar label at {box} covers a range end at ({x:.0f}, {y:.0f})"
    for i, a in enumerate(labels):
        assert not any(a.overlaps(b) for b in labels[i + 1:]), "two bar labels overlap"


LAYER_FIGURES = ("layerwise", "bins", "pairs", "loco", "sink")


@pytest.mark.parametrize("name", LAYER_FIGURES)
def test_a_layer_axis_spans_the_models_layers_and_no_further(tree: Path, name: str) -> None:
    d = _docs(tree, "tiny-a")
    n_layers = len(d["layerwise"].layers) - 1
    fig = DRAWERS[name](d)
    for ax in fig.axes:
        if ax.get_xlabel() == plotting.LAYER_LABEL:
            assert ax.get_xlim() == pytest.approx((-0.5, n_layers + 0.5)), name
            assert all(-0.5 <= t <= n_layers + 0.5 for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1])


def test_the_option_b_layer_axis_ends_at_the_last_layer(tree: Path) -> None:
    from uaprobe.publishing.figures import figures_original

    doc = read_results(tree, "results/models/tiny-a/option_b.json")
    ax = figures_original.option_b_figure(doc).axes[0]
    assert ax.get_xlim() == pytest.approx((-0.5, doc.layers[-1] + 0.5))


def test_the_leave_one_out_legend_covers_no_curve(tree: Path) -> None:
    fig = figures_layers.loco_figure(_docs(tree, "tiny-a")["layerwise"])
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.y1 <= ax.get_window_extent(renderer).y0, "the legend lies inside the plot"


def test_the_sink_legends_cover_no_curve(tree: Path) -> None:
    fig = figures_geometry.sink_figure(_docs(tree, "tiny-a")["robustness"])
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.y1 <= ax.get_window_extent(renderer).y0, f"the legend of {ax.get_title()!r} lies inside the plot"
        assert 0 <= legend.y0, "the legend is cut off at the bottom of the figure"


def test_the_option_b_phase_names_lie_above_the_plot_and_below_the_title(tree: Path) -> None:
    from uaprobe.publishing.figures import figures_original

    doc = read_results(tree, "results/models/tiny-a/option_b.json")
    phases = {name for name, layers in doc.poolings["mean"].phase_layers.model_dump().items() if layers}
    assert phases, "the synthetic run shades no phase"
    fig = figures_original.option_b_figure(doc)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    ax = fig.axes[0]
    frame = ax.get_window_extent(renderer)
    title = ax.title.get_window_extent(renderer)
    names = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text() in phases]
    assert sorted(t.get_text() for t in names) == sorted(phases), "each shaded phase is named once"
    for t in names:
        box = t.get_window_extent(renderer)
        assert box.y0 >= frame.y1, f"phase name {t.get_text()!r} lies inside the plotting area"
        assert box.y1 <= title.y0, f"phase name {t.get_text()!r} runs into the title"


def _rgb_pixels(fig: Figure) -> np.ndarray:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].astype(int)


@pytest.mark.parametrize("reference_name", sorted(PUBLISHED_SCIENTIFIC_FACTS))
def test_a_category_on_a_published_marker_leaves_both_visible(tree: Path, reference_name: str) -> None:
    """A category drawn at the very place of a published model: both markers' colours show there."""
    ref_ua, ref_pref = PUBLISHED_SCIENTIFIC_FACTS[reference_name]
    raw = _raw(tree, "validation")
    raw["variants"]["mean"]["table"][0].update(ua=ref_ua, mean_preference=ref_pref)
    fig = figures_groups.validation_figure(Validation.model_validate(raw), reference=PUBLISHED_SCIENTIFIC_FACTS,
                                    reference_category="scientific_facts")
    ax = fig.axes[0]
    i = list(PUBLISHED_SCIENTIFIC_FACTS).index(reference_name)
    reference = [c for c in ax.collections if c.get_label().startswith(f"{reference_name} (published")]
    assert len(reference) == 1
    pixels = _rgb_pixels(fig)
    x, y = ax.transData.transform((ref_ua, ref_pref))
    row, col = int(round(pixels.shape[0] - y)), int(round(x))  # image rows run downwards
    radius = int(np.ceil(np.sqrt(reference[0].get_sizes().max()) / 2 * fig.dpi / 72)) + 2
    patch = pixels[max(row - radius, 0):row + radius + 1, max(col - radius, 0):col + radius + 1].reshape(-1, 3)

    def shows(colour: str) -> bool:
        rgb = np.array(mcolors.to_rgb(colour)) * 255
        return bool((np.abs(patch - rgb).max(axis=1) <= 12).sum() >= 4)

    assert shows(plotting.OKABE_ITO[0]), "the category marker is hidden under the published one"
    assert shows(plotting.OKABE_ITO[(i + 1) % 7]), f"the {reference_name} marker is hidden under the category"


def test_the_specification_curve_draws_every_models_sorted_distinct_r_in_one_figure(tree: Path) -> None:
    docs = {m: read_results(tree, f"results/models/{m}/specification_curve.json") for m in ("tiny-a", "tiny-b")}
    fig = figure_spec.specification_curve_figure(docs)
    tops = [ax for ax in fig.axes if "specifications" in ax.get_title()]
    assert len(tops) == len(docs)
    assert [ax.get_legend() is not None for ax in tops] == [True] + [False] * (len(tops) - 1)  # one legend
    for top, doc in zip(tops, docs.values()):
        keep = figure_spec.distinct_mask(doc)
        r = _values(doc.specs.r)[keep]
        np.testing.assert_allclose(_line(top, "r"), r)
        assert (np.diff(r[np.isfinite(r)]) >= 0).all()
        assert f"{int(keep.sum()):,} specifications" in top.get_title()
        finite = r[np.isfinite(r)]
        assert _line(top, "median, all")[0] == pytest.approx(np.median(finite))
        assert f"all {np.median(finite):+.2f}" in top.get_title()
        # the primary universe: the pre-declared layers, poolings and NLL with every category kept, marked and with
        # its own median
        axes = doc.universe.axes
        layers = {int(o) for o in axes["layer"].options}
        s = doc.specs
        declared = np.array([int(la) in layers and lo is None and p in axes["pooling"].options
                             and k in axes["nll"].options
                             for la, lo, p, k in zip(s.layer, s.left_out, s.pooling, s.nll)])[keep]
        marked = next(ln for ln in top.get_lines() if ln.get_label() == "primary universe")
        np.testing.assert_allclose(marked.get_xdata(), np.flatnonzero(declared))
        np.testing.assert_allclose(marked.get_ydata(), r[declared])
        primary = np.median(r[declared & np.isfinite(r)])
        assert _line(top, "median, primary")[0] == pytest.approx(primary)
        assert f"primary {primary:+.2f}" in top.get_title()
        # the zero line and the two medians are told apart by colour and dash
        styles = {ln.get_label(): (ln.get_color(), ln.get_linestyle()) for ln in top.get_lines()}
        assert len({styles["median, all"], styles["median, primary"], ("0.45", "--")}) == 3
        # the permutation null band of the same curve behind it, in the legend
        label = figure_spec.NULL_BAND.format(level=100 * doc.null_band.level)
        assert label.replace("\n", " ") == "95 % of the relabelled curves"
        assert label in [t.get_text() for t in tops[0].get_legend().get_texts()]
        verts = next(c for c in top.collections if c.get_label() == label).get_paths()[0].vertices
        low, high = _values(doc.null_band.low), _values(doc.null_band.high)
        assert len(low) == finite.size
        assert verts[:, 0].min() == 0 and verts[:, 0].max() == finite.size - 1
        assert verts[:, 1].min() == pytest.approx(low.min()) and verts[:, 1].max() == pytest.approx(high.max())
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels[0] == "exact p ≤ 0.05"  # the significant specifications, first row
    for word in ("raw", "z-scored", "ABTT"):
        assert f"representation: {word}" in labels
    assert "position 0: excluded" in labels and not any("zscore" in t or "sink" in t for t in labels)
    assert len(labels) == 1 + len(figure_spec.row_options(list(docs.values())))
    assert any(ax.get_xlabel().startswith("layer depth, %") for ax in fig.axes), "the depth strip has a colour bar"


PRINTED_PT = 7.0
"""The smallest text a figure the paper shows may print at."""


def test_the_figures_the_paper_shows_print_no_text_under_7_pt(tree: Path) -> None:
    """Drawn at a width the PDF scales to :data:`plotting.PRINT_WIDTH_IN`, every visible text of the figures
    the manuscript shows prints at 7 pt or more."""
    from matplotlib.text import Text

    shown = set(re.findall(r'figure_markdown\(out, "(\w+)"', (REPO / "paper" / "paper.qmd").read_text()))
    assert {"specification_curve", "category_scatter"} <= shown
    docs = _docs(tree) | {"specification_curve": read_results(tree, "results/models/tiny-a/specification_curve.json")}
    figures = {"specification_curve": figure_spec.specification_curve_figure(
                   {m: read_results(tree, f"results/models/{m}/specification_curve.json") for m in ("tiny-a", "tiny-b")}),
               "layerwise": DRAWERS["layerwise_sink"](docs),
               "category_scatter": figures_groups.category_scatter_figure(
                   {m: _docs(tree, m)["validation"] for m in ("tiny-a", "tiny-b")})}
    for key in shown:
        fig = figures[key]
        fig.draw_without_rendering()
        scale = plotting.PRINT_WIDTH_IN / fig.get_figwidth()
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        small = [(t.get_text(), t.get_fontsize() * scale) for t in texts if t.get_fontsize() * scale < PRINTED_PT]
        assert texts and not small, (key, small[:5])


def test_the_category_scatter_prints_each_r_and_enlarges_all_but_the_farthest_category(tree: Path) -> None:
    docs = {m: _docs(tree, m)["validation"] for m in ("tiny-a", "tiny-b")}
    fig = figures_groups.category_scatter_figure(docs)
    mains = [ax for ax in fig.axes if "layer" in ax.get_title()]
    assert len(mains) == 2
    for ax, doc in zip(mains, docs.values()):
        r = doc.variants["mean"].global_.r
        assert f"r = {r:+.3f}".replace("-", "\u2212") in ax.get_title()
        insets = [c for c in ax.child_axes]
        n = len(doc.variants["mean"].table)
        if n > 3:
            assert len(insets) == 1 and len(insets[0].collections) == n - 1


def test_the_inset_goes_to_the_first_corner_that_holds_no_point() -> None:
    """A point in the lower right pushes the inset to the upper right; a point in the middle, inside every corner's
    region, leaves none."""
    from matplotlib.figure import Figure
    ax = Figure().subplots()
    x, y = np.array([0.0, 0.9, 0.8, 0.1]), np.array([0.0, 0.3, 0.35, 1.0])
    ax.scatter(x, y)
    assert figures_groups.inset_corner(ax, x, y) == figures_groups.INSET_CORNERS[1]
    ax2 = Figure().subplots()
    xs, ys = np.array([0.0, 1.0, 0.5]), np.array([0.0, 1.0, 0.5])
    ax2.scatter(xs, ys)
    assert figures_groups.inset_corner(ax2, xs, ys) is None
