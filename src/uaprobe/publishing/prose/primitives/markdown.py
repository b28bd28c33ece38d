"""Markdown and words for the manuscript: pipe tables, intervals, lists and counts, and :class:`Prose`,
the type of a phrase that an inline expression shows as markdown. Cells and words may hold values'
markup (:class:`~uaprobe.publishing.provenance.values.Value`); a table sizes its columns by the text they show."""

from __future__ import annotations

import re

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from uaprobe import escape
from uaprobe.publishing.prose.primitives.formats import pretty
from uaprobe.publishing.provenance.values import Value, plain_text


class Prose(str):
    """A phrase of the paper: markdown (it may hold values' markup) that an inline expression shows as
    markdown under both engines, never as a Python repr with escapes."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return str(self)


POSSESSIVE_AFTER_DIGIT = re.compile(r"(?<=\d)'s\b")
"""``SmolLM2's``: Typst sets an apostrophe after a digit as a prime (2′), and pandoc writes a typographic
apostrophe as a plain one, so a possessive there is written with the modifier letter apostrophe (U+02BC),
which neither changes."""


def prose(fn: Callable[..., str]) -> Callable[..., Prose]:
    """A phrase function whose result is :class:`Prose` (a possessive after a digit with its apostrophe)."""
    def wrapper(*args: Any, **kwargs: Any) -> Prose:
        return Prose(POSSESSIVE_AFTER_DIGIT.sub("\u02bcs", fn(*args, **kwargs)))
    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapper


@prose
def sign_word(r: float | None) -> str:
    """The sign of ``r`` in words: ``positive``, ``negative``, ``zero`` or ``undefined`` (None)."""
    if r is None:
        return "undefined"
    return "positive" if r > 0 else "negative" if r < 0 else "zero"


# ------------------------------------------------------------------------------------------------
# Tables


def _cell(text: Any) -> str:
    return str(text).replace("\n", " ")


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
    shown = [[plain_text(c) for c in row] for row in body]
    # Dashes in proportion to each column's widest shown text (not its markup): pandoc sizes wrapped
    # columns by them once a row's markup is longer than a line, as every row holding values is.
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(header)]

    def rule(a: str, w: int) -> str:
        dashes = "-" * max(3, min(w, 40))
        return {"l": ":" + dashes, "r": dashes + ":", "c": ":" + dashes + ":"}[a]

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule(a, w) for a, w in zip(align, widths)) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in body)
    return "\n".join(lines)


def interval(low: Value, high: Value) -> str:
    """``[low, high]``, or ``n/a`` when either end is missing."""
    return "n/a" if low.raw is None or high.raw is None else f"[{low}, {high}]"


# ------------------------------------------------------------------------------------------------
# Words


def category(name: Any) -> str:
    """A category name of the dataset as Markdown words (``ground_truth_numeric`` -> ``ground truth numeric``),
    escaped: a name is data, never markup."""
    return escape.markdown(pretty(name))


NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
"""Small counts in words (a sentence's numbers are its values)."""


@prose
def join_words(items: Sequence[Any], conjunction: str = "and") -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


@prose
def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``noun`` or its plural, for ``n`` things."""
    return noun if n == 1 else (plural_form or noun + "s")


@prose
def count_phrase(n: Any, noun: str, plural_form: str | None = None) -> str:
    """``no layer``, ``1 layer``, ``3 layers`` (``n`` an int or a value holding one)."""
    k = int(n.raw if isinstance(n, Value) else n)
    return f"no {noun}" if k == 0 else f"{n} {plural(k, noun, plural_form)}"
