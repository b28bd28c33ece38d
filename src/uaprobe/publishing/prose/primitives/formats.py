"""Formats: how a stored value becomes the text the paper shows, each by a name that travels with the
value into the HTML, so that a reader can redo it (:data:`FORMATS`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

MINUS = "\u2212"


def is_missing(x: Any) -> bool:
    """Whether ``x`` is no number: None, NaN or an infinity."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt(x: Any, digits: int = 2, *, signed: bool = False, na: str = "n/a") -> str:
    """A number with ``digits`` decimals and a typographic minus; ``na`` for a missing value."""
    if is_missing(x):
        return na
    if isinstance(x, bool):
        return "yes" if x else "no"
    value = float(x)
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    if float(text) == 0:  # no "-0.00"
        text = ("+" if signed else "") + text.lstrip("+-")
    return text.replace("-", MINUS)


def fmt_r(r: Any) -> str:
    """A correlation: signed, three decimals (as the seeds print it)."""
    return fmt(r, 3, signed=True)


def fmt_int(x: Any, na: str = "n/a") -> str:
    return na if is_missing(x) else str(int(x))


def fmt_p(p: Any) -> str:
    """A p-value: three decimals, ``< 0.001`` below that."""
    if is_missing(p):
        return "n/a"
    return "<\u00a00.001" if float(p) < 0.001 else f"{float(p):.3f}"  # a no-break space: never split in a cell


def fmt_bool(x: Any) -> str:
    return "n/a" if x is None else ("yes" if x else "no")


def pretty(name: Any) -> str:
    """A category or key as text: ``ground_truth_numeric`` -> ``ground truth numeric``."""
    return "n/a" if name is None else str(name).replace("_", " ")


def fmt_layers(layers: Any) -> str:
    """A list of layers: ``12–15`` when consecutive, else ``3, 5``; ``none`` when empty."""
    items = [int(x) for x in layers or []]
    if len(items) > 1 and items == list(range(items[0], items[-1] + 1)):
        return f"{items[0]}\u2060–\u2060{items[-1]}"  # word joiners: a range is never split in a cell
    return ", ".join(map(str, items)) or "none"


FORMATS: Mapping[str, Callable[[Any], str]] = {
    "r": fmt_r,
    "p": fmt_p,
    "int": fmt_int,
    "bool": fmt_bool,
    "text": lambda x: "n/a" if x is None else str(x),
    "name": pretty,
    "layers": fmt_layers,
    "count": lambda x: str(len(x or [])),
    "sum": lambda x: str(sum(x or [])),
    "names": lambda x: ", ".join(pretty(v) for v in x or []),
    "list": lambda x: ", ".join(str(v) for v in x or []),
    "count_true": lambda x: str(sum(1 for v in x or [] if v)),
    "thousands": lambda x: fmt_int(x) if is_missing(x) else f"{int(x):,}",
    "percent": lambda x: fmt(None if is_missing(x) else 100 * float(x), 0),
    "percent_g": lambda x: "n/a" if is_missing(x) else f"{100 * float(x):g} %",
    "g": lambda x: "n/a" if is_missing(x) else f"{x:g}",
    **{f"f{d}": (lambda x, d=d: fmt(x, d)) for d in range(5)},
    **{f"s{d}": (lambda x, d=d: fmt(x, d, signed=True)) for d in range(5)},
}
"""Every format a value may be shown in, by name (the name travels with the value into the HTML)."""
