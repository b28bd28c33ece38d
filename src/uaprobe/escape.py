"""Text from the data, escaped for where it lands: one function per target.

Statements, category names, display names and any string read from a results file are data, never
markup. Each place such a string is shown passes it through the function of that place's language:

- :func:`markdown`: the Markdown the renderer reads (pandoc, or Quarto's pandoc); every character that
  starts inline markup (emphasis, code, links and images, raw HTML, math, citations and cross-references,
  attributes, shortcodes, entities) is backslash-escaped and line breaks become spaces, so that the text
  is one run of literal characters: pandoc writes it escaped to HTML and to Typst, and fetches nothing;
- :func:`markdown_code`: the same text as an inline code span, fenced by more backticks than it holds;
- :func:`html`: an HTML page written directly (element text and attribute values);
- :func:`mathtext`: a matplotlib label, whose ``$...$`` would otherwise be read as mathtext (matplotlib
  writes SVG text escaped itself).

Ordinary text (letters, digits, spaces, hyphens, periods, commas, parentheses, apostrophes) passes
unchanged through all of them except :func:`html`, which escapes only ``& < > " '``.
"""

from __future__ import annotations

import html as _html
import re

MARKDOWN_SPECIAL = "\\`*_[]{}<>#|$@~^&!=:\""
"""The characters :func:`markdown` backslash-escapes (pandoc reads any escaped ASCII punctuation as itself)."""

_MARKDOWN = re.compile("([" + re.escape(MARKDOWN_SPECIAL) + "])")
_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")


def markdown(text: object) -> str:
    """``text`` as literal Markdown text: every markup character backslash-escaped, line breaks as spaces."""
    return _MARKDOWN.sub(r"\\\1", _BREAKS.sub(" ", str(text)))


def markdown_code(text: object) -> str:
    """``text`` as an inline code span (literal in Markdown and in every output)."""
    s = _BREAKS.sub(" ", str(text))
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def html(text: object) -> str:
    """``text`` as HTML element text or a quoted attribute value."""
    return _html.escape(str(text), quote=True)


def mathtext(text: object) -> str:
    """``text`` as a matplotlib label shown as written: a dollar sign is escaped, so no ``$...$`` is mathtext."""
    return str(text).replace("$", r"\$")
