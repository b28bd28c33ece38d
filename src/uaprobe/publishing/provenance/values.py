"""Numbers that know where they come from: every value the paper shows, with its file and key.

A :class:`Value` is one number (or label) read from a tracked file by a key path, with the name
of the format that turns it into text (:data:`~uaprobe.publishing.prose.primitives.formats.FORMATS`). Shown in the
manuscript (an inline `` `{python} …` `` expression, a table cell, a phrase), it becomes a link to its
row of the supplementary file ``provenance.html`` that the paper stage writes next to the paper,
carrying the file, the key and the format as attributes (``data-file``, ``data-key``, ``data-fmt``),
and a hover title naming them. The :class:`Ledger` numbers the sources (each with its format) in the
order the paper first shows them; that number is the row's anchor (``provenance.html#prov-N``).

The markup is plain Pandoc markdown, a link with attributes, so both engines (Quarto and the
fallback) render it alike: in the HTML a link with a title, in the PDF a link to the supplementary
file. :mod:`uaprobe.publishing.provenance.readback` reads the values back out of a rendered HTML page.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uaprobe import escape
from uaprobe.errors import UAProbeError
from uaprobe.publishing.prose.primitives.formats import FORMATS, is_missing
from uaprobe.schema import KeyPathError, resolve


class ValueSourceError(UAProbeError):
    """A value the paper shows is not in the file it names."""


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
    chosen = sorted(float(x) for x, k in zip(values, keep) if k and not is_missing(x))
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
        return (f'[{escape.markdown(self.text)}]({SUPPLEMENT_HTML}#{ANCHOR.format(n)} "{_attr(s.file)}: {_attr(s.key)}")'
                f'{{.uav data-file="{_attr(s.file)}" data-key="{_attr(s.key)}" data-fmt="{self.fmt}"}}')

    _repr_markdown_ = markdown
    __str__ = markdown

    def __repr__(self) -> str:  # an inline value's plain-text form is its markup as well
        return self.markdown()

    def __format__(self, spec: str) -> str:
        return self.markdown()


_MARKUP = re.compile(r'\[((?:\\.|[^\]\\])*)\]\((?:provenance\.html)?#prov-\d+ "(?:\\.|[^"\\])*"\)\{[^}]*\}')


def plain_text(markdown: str) -> str:
    """Markdown with every value's markup replaced by the text it shows."""
    return _MARKUP.sub(lambda m: re.sub(r"\\(.)", r"\1", m.group(1)), markdown)
