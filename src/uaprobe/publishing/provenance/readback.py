"""The values a rendered HTML page shows, read back out of it: each value's text, file, key and
format, in document order (the supplementary provenance files, the provenance tests and
``uaprobe paper-diff`` read the paper through it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from uaprobe.publishing.prose.primitives.formats import FORMATS



@dataclass(frozen=True)
class Shown:
    """A value as a rendered HTML page shows it."""

    text: str
    file: str
    key: str
    fmt: str
    index: int
    """Position among the page's values (0-based, document order)."""
    in_table: bool
    number: int | None = None
    """The number of its source (the ``N`` of its link ``provenance.html#prov-N``), None without one."""


class _ValueParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[Shown] = []
        self._open: dict[str, str] | None = None
        self._text: list[str] = []
        self._tables = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._tables += 1
        if tag == "a" and "uav" in a.get("class", "").split():
            self._open, self._text = a, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._tables -= 1
        if tag == "a" and self._open is not None:
            a = self._open
            anchor = re.search(r"#prov-(\d+)$", a.get("href", ""))
            self.found.append(Shown(" ".join("".join(self._text).split()), a.get("data-file", ""), a.get("data-key", ""),
                                    a.get("data-fmt", ""), len(self.found), self._tables > 0,
                                    int(anchor.group(1)) if anchor else None))
            self._open = None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)


def parse_values(page: str) -> list[Shown]:
    """Every value a rendered HTML page shows, in document order."""
    parser = _ValueParser()
    parser.feed(page)
    return parser.found


VALUE_TAG = re.compile(r'<a\b[^>]*\bclass="uav"[^>]*>.*?</a>', flags=re.S)
"""A value's element in a rendered HTML page (pandoc writes each as one ``<a class="uav" …>``)."""


def shown_text(value: Any, fmt_name: str) -> str:
    """The text a value is shown as, with runs of white space as one space (as :func:`parse_values` reads it)."""
    return " ".join(FORMATS[fmt_name](value).split())
