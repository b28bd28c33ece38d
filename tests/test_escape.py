"""Text from the data is text: each target's escape, checked by the reader of that target (pandoc for the
Markdown, an HTML parser, matplotlib's mathtext detection)."""

from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser

import pytest

from uaprobe import escape
from uaprobe.publishing.render.fallback import pandoc_path

HOSTILE = [
    '<img src="secret.txt" onerror="alert(1)">',
    "<script>alert(2)</script>x",
    "a $x^2$ *em* **strong** [link](http://e.x) ![i](secret.png) `{python} 1+1`",
    "b_&amp;#set page(width: 1cm) &#60;b&#62;",
    "{{< pagebreak >}} @fig-x [@key] ~sub~ ^sup^ <!-- c --> \\*",
    "line one\n# heading\n\n- item\n::: {.callout}\n",
    "ends with a backslash \\",
    "`` two ` ticks ``",
]
ORDINARY = ["ground truth numeric", "SmolLM2-135M-Instruct", "Gemma-3-270M", "a (b), c. d's e"]


def _inline_text(node: object) -> str:
    """The text of pandoc's inline AST, failing on any node that is not literal text."""
    if isinstance(node, list):
        return "".join(_inline_text(n) for n in node)
    assert isinstance(node, dict)
    kind = node["t"]
    if kind == "Str":
        return node["c"]
    if kind in ("Space", "SoftBreak"):
        return " "
    if kind == "Code":
        return node["c"][1]
    raise AssertionError(f"pandoc read markup from escaped text: {node}")


def _pandoc_inlines(markdown: str) -> object:
    proc = subprocess.run([pandoc_path(), "-f", "markdown", "-t", "json"], input=markdown, capture_output=True,
                          text=True, check=True)
    blocks = json.loads(proc.stdout)["blocks"]
    assert len(blocks) == 1 and blocks[0]["t"] == "Para", blocks
    return blocks[0]["c"]


@pytest.mark.parametrize("text", HOSTILE + ORDINARY)
def test_pandoc_reads_escaped_markdown_as_the_literal_text(text: str) -> None:
    shown = " ".join(text.split())  # line breaks are spaces; pandoc folds runs of spaces
    read = " ".join(_inline_text(_pandoc_inlines(f"Before {escape.markdown(text)} after.")).split())
    # pandoc's typography (not markup): -- and --- as dashes, an apostrophe curled
    assert read.replace("\u2014", "---").replace("\u2013", "--").replace("\u2019", "'") == f"Before {shown} after."


@pytest.mark.parametrize("text", HOSTILE + ORDINARY)
def test_a_code_span_holds_the_literal_text(text: str) -> None:
    inlines = _pandoc_inlines(f"x {escape.markdown_code(text)} y")
    codes = [n for n in inlines if n["t"] == "Code"]
    assert len(codes) == 1 and codes[0]["c"][1].split() == text.split()


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_passes_unchanged(text: str) -> None:
    assert escape.markdown(text) == text
    assert escape.mathtext(text) == text


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.parametrize("text", HOSTILE)
def test_html_escape_leaves_no_tag_and_shows_the_text(text: str) -> None:
    parser = _Tags()
    parser.feed(f"<p title=\"{escape.html(text)}\">{escape.html(text)}</p>")
    parser.close()
    assert parser.tags == ["p"]
    assert "".join(parser.text) == text


@pytest.mark.parametrize("text", ["$x^2$", "cost: $5 and $6", r"a \$ b"])
def test_mathtext_escape_shows_dollars_as_written(text: str) -> None:
    from matplotlib import cbook
    from matplotlib.text import Text

    label = escape.mathtext(text)
    assert not cbook.is_math_text(label)
    assert Text(text=label)._preprocess_math(label) == (text, False)
