"""Numbers that know where they come from: every value the paper shows, with its file and key.

A :class:`Value` is one number (or label) read from a tracked file by a key path, with the name
of the format that turns it into text. Shown in the manuscript (an inline `` `{python} …` ``
expression, a table cell, a phrase), it becomes a link to its row of the supplementary file
``provenance.html`` that the paper stage writes next to the paper, carrying the file, the key and
the format as attributes (``data-file``, ``data-key``, ``data-fmt``), and a hover title naming
them. The :class:`Ledger` numbers the sources (each with its format) in the order the paper first
shows them; that number
is the row's anchor (``provenance.html#prov-N``).

The markup is plain Pandoc markdown, a link with attributes, so both engines (Quarto and the
fallback) render it alike: in the HTML a link with a title, in the PDF a link to the supplementary
file. :mod:`uaprobe.publishing.readback` reads the values back out of a rendered HTML page.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uaprobe.errors import UAProbeError
from uaprobe.schema import KeyPathError, resolve

MINUS = "\u2212"


class ValueSourceError(UAProbeError):
    """A value the paper shows is not in the file it names."""


# ------------------------------------------------------------------------------------------------
# Formats: how a stored value becomes the text the paper shows (named, so a reader can redo it)


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt(x: Any, digits: int = 2, *, signed: bool = False, na: str = "n/a") -> str:
    """A number with ``digits`` decimals and a typographic minus; ``na`` for a missing value."""
    if _missing(x):
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
    return na if _missing(x) else str(int(x))


def fmt_p(p: Any) -> str:
    """A p-value: three decimals, ``< 0.001`` below that."""
    if _missing(p):
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
    "thousands": lambda x: fmt_int(x) if _missing(x) else f"{int(x):,}",
    "percent": lambda x: fmt(None if _missing(x) else 100 * float(x), 0),
    "percent_g": lambda x: "n/a" if _missing(x) else f"{100 * float(x):g} %",
    "g": lambda x: "n/a" if _missing(x) else f"{x:g}",
    **{f"f{d}": (lambda x, d=d: fmt(x, d)) for d in range(5)},
    **{f"s{d}": (lambda x, d=d: fmt(x, d, signed=True)) for d in range(5)},
}
"""Every format a value may be shown in, by name (the name travels with the value into the HTML)."""


# ------------------------------------------------------------------------------------------------
# Key paths


def lookup(doc: Any, key: str, *, file: str) -> Any:
    """The value at ``key`` (``/``-separated keys, list indices as integers, ``-1`` the last) of ``doc``;
    or, for a derived key (:func:`median_key`), the summary it names of the columns it names."""
    derived = DERIVED.match(key)
    try:
        if derived:
            return _median_where(doc, derived.group(1), derived.group(2))
        return resolve(doc, key.split("/"))
    except KeyPathError as exc:
        raise ValueSourceError(f"{file}: no key {key!r} (stops at {exc.part!r}); rerun the stage that writes "
                               "it (`dvc repro`)") from None


DERIVED = re.compile(r"^median\(([^\s()]+)(?: where ([^()]+))?\)$")
"""A derived key: ``median(specs/r where representation=raw and left_out=null)`` is the median of the
column ``specs/r`` over the rows whose sibling columns (``specs/representation``, ``specs/left_out``)
hold those values (``null`` for a missing one; values compared as text); missing entries of the
column are left out, and the median of no entry is None."""


def median_key(column: str, **where: Any) -> str:
    """The derived key of the median of ``column`` (a ``/``-path to a list whose siblings are lists of
    the same length) over the rows where each named sibling column holds the given value."""
    cond = " and ".join(f"{k}={'null' if v is None else v}" for k, v in where.items())
    return f"median({column}{' where ' + cond if cond else ''})"


def _median_where(doc: Any, column: str, where: str | None) -> float | None:
    parts = column.split("/")
    values = resolve(doc, parts)
    keep = [True] * len(values)
    for clause in (where.split(" and ") if where else []):
        name, _, wanted = clause.partition("=")
        other = resolve(doc, [*parts[:-1], name.strip()])
        keep = [k and ("null" if o is None else str(o)) == wanted.strip() for k, o in zip(keep, other)]
    chosen = sorted(float(x) for x, k in zip(values, keep) if k and not _missing(x))
    if not chosen:
        return None
    mid = len(chosen) // 2
    return chosen[mid] if len(chosen) % 2 else (chosen[mid - 1] + chosen[mid]) / 2


# ------------------------------------------------------------------------------------------------
# Values and the ledger of what the paper shows


@dataclass(frozen=True)
class Source:
    """Where a value comes from: a file relative to the repository root and a key path in it."""

    file: str
    key: str


@dataclass
class Ledger:
    """The sources the paper has shown, numbered in the order it first shows them."""

    root: Path
    entries: dict[tuple[Source, str], tuple[int, str]] = field(default_factory=dict)
    """(source, format) -> (number, text shown): one number per way a value is shown, so that every
    row of the supplement shows what the links to it show."""

    def cite(self, source: Source, text: str, fmt_name: str) -> int:
        if (source, fmt_name) not in self.entries:
            self.entries[(source, fmt_name)] = (len(self.entries) + 1, text)
        return self.entries[(source, fmt_name)][0]


def file_md5(path: Path) -> str:
    """The md5 of a file's bytes (the hash DVC records for it), or ``missing``."""
    return hashlib.md5(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def _escape(text: str) -> str:
    """Markdown-safe link text (a value's text is data, never markup)."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def _attr(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


SUPPLEMENT_HTML = "provenance.html"
"""The supplementary file, next to the rendered paper, with one row per value the paper shows."""

ANCHOR = "prov-{}"
"""The identifier of a source's row in :data:`SUPPLEMENT_HTML`."""


@dataclass(frozen=True)
class Value:
    """One value the paper shows: the stored value, how it is shown, and where it is stored."""

    raw: Any
    fmt: str
    source: Source
    ledger: Ledger

    @property
    def text(self) -> str:
        return FORMATS[self.fmt](self.raw)

    def markdown(self) -> str:
        n = self.ledger.cite(self.source, self.text, self.fmt)
        s = self.source
        return (f'[{_escape(self.text)}]({SUPPLEMENT_HTML}#{ANCHOR.format(n)} "{_attr(s.file)}: {_attr(s.key)}")'
                f'{{.uav data-file="{_attr(s.file)}" data-key="{_attr(s.key)}" data-fmt="{self.fmt}"}}')

    _repr_markdown_ = markdown
    __str__ = markdown

    def __repr__(self) -> str:  # an inline value's plain-text form is its markup as well
        return self.markdown()

    def __format__(self, spec: str) -> str:
        return self.markdown()


class Prose(str):
    """A phrase of the paper: markdown (it may hold values' markup) that an inline expression shows as
    markdown under both engines, never as a Python repr with escapes."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return str(self)


def prose(fn: Callable[..., str]) -> Callable[..., Prose]:
    """A phrase function whose result is :class:`Prose`."""
    def wrapper(*args: Any, **kwargs: Any) -> Prose:
        return Prose(fn(*args, **kwargs))
    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapper


__all__: Sequence[str] = ("FORMATS", "Ledger", "Source", "Value", "fmt", "fmt_bool",
                          "fmt_int", "fmt_layers", "fmt_p", "fmt_r", "lookup", "pretty")


_MARKUP = re.compile(r'\[((?:\\.|[^\]\\])*)\]\((?:provenance\.html)?#prov-\d+ "(?:\\.|[^"\\])*"\)\{[^}]*\}')


def plain_text(markdown: str) -> str:
    """Markdown with every value's markup replaced by the text it shows."""
    return _MARKUP.sub(lambda m: re.sub(r"\\(.)", r"\1", m.group(1)), markdown)
