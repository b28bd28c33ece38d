"""What every figure of the paper shares: the palette, the matplotlib settings (scoped, never global),
the layer axis, labels placed clear of the data, and writing a figure with its metadata stripped,
so that reruns give identical bytes.

Palette: Okabe & Ito's colour-blind-safe set; line styles and markers double every colour, so the
figures read in grey scale too.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from uaprobe import escape
from uaprobe.atomic import write_files
from uaprobe.errors import UAProbeError

OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
"""Okabe & Ito (2008) colour-blind-safe palette."""


POOLING_STYLE: Mapping[str, Mapping[str, Any]] = {
    "mean": {"color": OKABE_ITO[0], "marker": "o", "linestyle": "-"},
    "last": {"color": OKABE_ITO[1], "marker": "s", "linestyle": "--"},
    "first": {"color": OKABE_ITO[2], "marker": "^", "linestyle": ":"},
}
"""Colour, marker and line style of each pooling, shared by every figure."""

MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES: tuple[str, ...] = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)), "-")

R_LABEL = "r(UA, preference) (Pearson r, unitless)"
PRINT_WIDTH_IN = 5.75
"""The width, in inches, at which the PDF prints a full-width figure (A4 less 1.25 in margins): a figure
drawn at this width prints its fonts at their nominal size."""

OPTION_WORDS: Mapping[str, Mapping[object, str]] = {
    "policy": {"special": "default", "first": "default", "sink_excluded": "excluded"},
    "representation": {"raw": "raw", "zscore": "z-scored", "abtt": "ABTT"},
    "pooling": {"mean": "mean", "last": "last token", "first": "first token"},
    "nll": {"mean": "mean", "sum": "summed"},
    "left_out": {None: "none"},
}
"""The words the paper uses for each option of a choice (figures, tables and text alike)."""


def option_words(choice: str, option: object) -> str:
    """The paper's word for ``option`` of ``choice`` (a category: its name with spaces)."""
    words = OPTION_WORDS.get(choice, {})
    return words[option] if option in words else str(option).replace("_", " ")
LAYER_LABEL = "layer (0 = token embeddings)"
DEPTH_LABEL = "depth (% of layers)"

STRIPPED_METADATA: Mapping[str, Mapping[str, Any]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
}
"""Metadata removed per format: no dates, no software versions."""

STYLE_FILE = Path(__file__).with_name("uaprobe.mplstyle")
"""The figures' matplotlib settings (fonts, sizes, grid, palette, SVG hash salt)."""


class FigureDataError(UAProbeError):
    """A results document lacks what a figure needs."""


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The figures' matplotlib settings, scoped to a ``with`` block (no global change)."""
    with matplotlib.rc_context(fname=STYLE_FILE):
        yield


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def arr(values: Any) -> np.ndarray:
    """A float array from a JSON list in which ``null`` is a missing value (NaN)."""
    if values is None:
        return np.array([], dtype=float)
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def pick(mapping: Mapping[str, Any], key: str, *, where: str, of: str) -> Any:
    """``mapping[key]`` of a results file's per-pooling (or per-variant) mapping; a key the file
    does not have is a :class:`FigureDataError` naming it."""
    if key not in mapping:
        raise FigureDataError(f"results of {of}: missing key {f'{where}/{key}'!r} (it has "
                              f"{', '.join(sorted(mapping)) or 'none'}; see docs/results.md)")
    return mapping[key]


def zero_line(ax: Axes, *, axis: str = "y") -> None:
    (ax.axhline if axis == "y" else ax.axvline)(0.0, color="0.45", linewidth=0.8, linestyle="--", zorder=1)


def layer_axis(ax: Axes, layers: np.ndarray) -> None:
    """Label an x axis of layer indices: integer ticks only, and the axis spans the model's layers
    (half a layer either side), not a rounder number past the last."""
    ax.set_xlabel(LAYER_LABEL)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(layers):
        ax.set_xlim(float(np.min(layers)) - 0.5, float(np.max(layers)) + 0.5)


def data_label(text: Any) -> str:
    """A name from the data (a model's display name, a category) as a matplotlib label: shown as written,
    never as mathtext; a category's underscores as spaces."""
    return escape.mathtext(str(text).replace("_", " "))


def model_title(doc: Any) -> str:
    """The model's display name as a matplotlib label (:func:`data_label`, underscores kept)."""
    return escape.mathtext(str(doc.display or doc.model))


POINT_LABEL_GID = "point-label"
"""``gid`` of the labels :func:`place_point_labels` draws (tests find them by it)."""


def place_point_labels(ax: Axes, labels: Sequence[tuple[str, float, float]], *, fontsize: float = 7,
                       offset: float = 4.0, step: float = 7.0, rings: int = 10) -> None:
    """Label points (text, x, y in data coordinates) so that no label overlaps another label, a
    plotted marker or the legend.

    Each label tries positions around its point, nearest first (up-right, down-right, up-left,
    down-left, above, below, right, left, at ``offset`` points and then ``step`` points further
    out per ring), and takes the first that is free and inside the axes; a label away from its
    point is joined to it by a leader line. Sizes are measured on the laid-out figure, so the
    labels stay apart in the saved image. Deterministic: the same points give the same places."""
    if not labels:
        return
    fig = ax.get_figure()
    fig.draw_without_rendering()  # the final layout and limits, before measuring
    renderer = fig._get_renderer()
    pt = fig.dpi / 72.0  # pixels per point
    frame = ax.get_window_extent(renderer)
    obstacles: list[tuple[float, float, float, float]] = []  # x0, y0, x1, y1 in pixels
    for collection in ax.collections:  # every scatter marker, labelled or not, with a point of margin
        sizes = collection.get_sizes()
        radius = (float(np.sqrt(sizes.max())) / 2 + 1.5 if len(sizes) else 4.0) * pt
        for mx, my in collection.get_offset_transform().transform(collection.get_offsets()):
            if np.isfinite(mx) and np.isfinite(my):
                obstacles.append((mx - radius, my - radius, mx + radius, my + radius))
    legend = ax.get_legend()
    if legend is not None:
        obstacles.append(tuple(legend.get_window_extent(renderer).extents))

    def free(b: tuple[float, float, float, float]) -> bool:
        inside = frame.x0 <= b[0] and b[2] <= frame.x1 and frame.y0 <= b[1] and b[3] <= frame.y1
        return inside and not any(b[0] < o[2] and o[0] < b[2] and b[1] < o[3] and o[1] < b[3] for o in obstacles)

    directions = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))
    for text, x, y in labels:
        px, py = ax.transData.transform((x, y))
        probe = ax.text(0, 0, text, fontsize=fontsize)
        extent = probe.get_window_extent(renderer)
        probe.remove()
        w, h = extent.width, extent.height
        choice = None
        for ring in range(rings):
            d = (offset + ring * step) * pt
            for cx, cy in directions:
                x0 = px + cx * d - (w if cx < 0 else w / 2 if cx == 0 else 0)
                y0 = py + cy * d - (h if cy < 0 else h / 2 if cy == 0 else 0)
                if free((x0, y0, x0 + w, y0 + h)):
                    choice = (x0, y0, ring)
                    break
            if choice is not None:
                break
        if choice is None:  # nowhere free: the nearest place, up and to the right
            choice = (px + offset * pt, py + offset * pt, 0)
        x0, y0, ring = choice
        obstacles.append((x0, y0, x0 + w, y0 + h))
        # the leader line runs from the point to the nearest corner or edge midpoint of the label
        rx = 0.0 if x0 >= px else 1.0 if x0 + w <= px else 0.5
        ry = 0.0 if y0 >= py else 1.0 if y0 + h <= py else 0.5
        ax.annotate(text, (x, y), xytext=((x0 - px) / pt, (y0 - py) / pt), textcoords="offset points",
                    fontsize=fontsize, ha="left", va="bottom", gid=POINT_LABEL_GID, annotation_clip=False,
                    in_layout=False,
                    arrowprops=dict(arrowstyle="-", color="0.35", linewidth=0.6, shrinkA=0, shrinkB=4,
                                    relpos=(rx, ry)) if ring > 0 else None)


def figure_bytes(fig: Figure, *, formats: Sequence[str] = ("png", "svg")) -> dict[str, bytes]:
    """The files of ``fig`` in each of ``formats``, rendered in memory; metadata (dates, software) stripped."""
    files: dict[str, bytes] = {}
    with style():
        for fmt in formats:
            if fmt not in STRIPPED_METADATA:
                raise UAProbeError(f"save_figure: format {fmt!r} not supported; use png, svg or pdf")
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, metadata=dict(STRIPPED_METADATA[fmt]))
            files[fmt] = buffer.getvalue()
    return files


def write_figure(files: Mapping[str, bytes], path: str | Path) -> list[Path]:
    """Write a figure's ``files`` (format -> bytes, :func:`figure_bytes`) as ``path`` with each format's suffix.

    ``path`` may carry a suffix; it is replaced. Returns the written paths, in the formats' order. Writes are
    atomic, all of them or none."""
    base = Path(path)
    base = base.with_suffix("") if base.suffix.lower() in (".png", ".svg", ".pdf") else base
    return write_files({base.with_name(f"{base.name}.{fmt}"): data for fmt, data in files.items()})


def save_figure(fig: Figure, path: str | Path, *, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Write ``fig`` as ``path`` with each suffix in ``formats`` (:func:`figure_bytes`, :func:`write_figure`)."""
    return write_figure(figure_bytes(fig, formats=formats), path)
