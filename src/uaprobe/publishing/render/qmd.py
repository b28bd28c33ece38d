"""The manuscript as the fallback reads it: the subset of Quarto it understands, parsed into
metadata, markdown chunks with inline expressions, and python cells; anything else is refused."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from uaprobe.publishing.render.result import ManuscriptSyntaxError, RenderError

SUPPORTED_KEYS: Mapping[str, Any] = {
    "project": {"type": None, "output-dir": None, "render": None},
    "title": None,
    "subtitle": None,
    "author": None,
    "abstract": None,
    "keywords": None,
    "lang": None,
    "bibliography": None,
    "csl": None,
    "link-citations": None,
    "reference-section-title": None,
    "number-sections": None,
    "tbl-colwidths": None,
    "jupyter": None,
    "execute": {"echo": None, "warning": None, "freeze": None, "cache": None},
    "format": {
        "html": {"embed-resources": None, "output-file": None, "css": None, "toc": None,
                 "grid": {"body-width": None}},
        "typst": {"output-file": None, "papersize": None, "fontsize": None, "margin": None,
                  "section-numbering": None, "keep-typ": None, "include-in-header": None,
                  "citeproc": None, "resource-path": None},
    },
}
"""Front-matter / ``_quarto.yml`` keys the fallback honours or may ignore (``None`` = a leaf)."""

REQUIRED_VALUES: Mapping[tuple[str, ...], tuple[object, str]] = {
    ("tbl-colwidths",): (
        False,
        "the fallback sizes every table's columns by their content; without it Quarto fixes the columns of a "
        "pipe table wider than 72 characters in proportion to its dashes (cells wrap mid-word)",
    ),
    ("format", "typst", "citeproc"): (
        True,
        "the fallback formats citations with pandoc's citeproc in the PDF as in the HTML; without it Quarto "
        "leaves them to Typst (numbered, with the list under its own heading at the end)",
    ),
    ("format", "typst", "resource-path"): (
        ["."],
        "images are found relative to the paper directory; under Quarto this also copies each image into "
        "the render's media directory, inside the root Typst may read (figures live outside it)",
    ),
}
"""Settings that make Quarto render as the fallback does, each with why: the fallback refuses a
manuscript that sets them otherwise or leaves them out (``format.typst`` ones only where it renders
Typst), rather than render it differently from Quarto."""

CELL_OPTIONS = frozenset({"label", "fig-cap", "fig-alt", "tbl-cap", "echo", "output", "include", "warning"})
"""``#|`` cell options the fallback supports."""

QUARTO_CROSSREF_PREFIXES = frozenset({
    "fig", "tbl", "sec", "eq", "lst", "thm", "lem", "cor", "prp", "cnj", "def", "exm", "exr",
    "sol", "rem", "alg",
})
"""Label prefixes Quarto treats as cross-references."""

SUPPORTED_CROSSREF_PREFIXES = {"fig": "Figure", "tbl": "Table", "sec": "Section"}
"""Cross-reference kinds the fallback numbers, with the word that precedes the number."""

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
_INLINE_EXPR = re.compile(r"`\{(?P<lang>[^}\s]+)\}\s+(?P<expr>[^`]+?)\s*`")
_UNSUPPORTED_TEXT = (
    (re.compile(r"\{\{<"), "shortcodes ({{< … >}})"),
    # the one div allowed: ``::: {#refs}`` and its closing ``:::``, where the references go (Pandoc's and Quarto's)
    (re.compile(r"^\s*:::(?!\s*(?:\{#refs\})?\s*$)", flags=re.M), "fenced divs (::: — callouts, layouts, panels)"),
    (re.compile(r"\{#(?!fig-|sec-)(?:" + "|".join(sorted(QUARTO_CROSSREF_PREFIXES)) + r")-"),
     "labels other than {#fig-…} on an image and {#sec-…} on a heading"),
    (re.compile(r"^\s*<!--\s*quarto-"), "Quarto processing comments"),
)


@dataclass(frozen=True)
class InlineExpr:
    """An inline expression `` `{python} expr` `` of the manuscript."""

    expr: str
    line: int


@dataclass(frozen=True)
class MarkdownChunk:
    """A run of markdown between code cells: text with inline expressions interleaved."""

    parts: tuple[str | InlineExpr, ...]
    line: int


@dataclass(frozen=True)
class CodeCell:
    """A ```` ```{python} ```` cell: its ``#|`` options and its code."""

    options: Mapping[str, Any]
    code: str
    line: int

    @property
    def where(self) -> str:
        label = self.options.get("label")
        return f"cell at line {self.line}" + (f" ({label})" if label else "")


Chunk = MarkdownChunk | CodeCell


@dataclass(frozen=True)
class Manuscript:
    """A parsed ``.qmd``: its merged metadata and its chunks in document order."""

    path: Path
    metadata: Mapping[str, Any]
    chunks: tuple[Chunk, ...]


def load_project_config(paper_dir: Path) -> dict[str, Any]:
    """``_quarto.yml`` of ``paper_dir`` as a mapping ({} when there is none)."""
    path = paper_dir / "_quarto.yml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RenderError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise RenderError(f"{path}: expected a mapping at the top level")
    return data


def merge_metadata(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` (front matter) over ``base`` (``_quarto.yml``), as Quarto does."""
    merged: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_metadata(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def check_metadata(metadata: Mapping[str, Any], *, where: str) -> None:
    """Raise :class:`ManuscriptSyntaxError` for a metadata key outside :data:`SUPPORTED_KEYS`."""

    def walk(node: Mapping[str, Any], allowed: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            name = f"{prefix}{key}"
            if key not in allowed:
                raise ManuscriptSyntaxError(
                    f"{where}: metadata key `{name}` is not supported by the fallback renderer; "
                    f"supported here: {sorted(allowed)}. Remove it, or render with Quarto."
                )
            sub = allowed[key]
            if sub is not None:
                if isinstance(value, Mapping):
                    walk(value, sub, name + ".")
                elif not (key == "format" and isinstance(value, str) and value in sub):
                    raise ManuscriptSyntaxError(f"{where}: `{name}` must be a mapping, got {value!r}")

    walk(metadata, SUPPORTED_KEYS, "")


def check_required_values(metadata: Mapping[str, Any], *, where: str) -> None:
    """Raise :class:`ManuscriptSyntaxError` where merged ``metadata`` misses a :data:`REQUIRED_VALUES` setting."""
    formats = metadata.get("format")
    for path, (expected, why) in REQUIRED_VALUES.items():
        if path[:2] == ("format", "typst") and not (isinstance(formats, Mapping) and "typst" in formats):
            continue
        node: Any = metadata
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if node != expected:
            name = ".".join(path)
            shown = "absent" if node is None else f"{node!r}"
            raise ManuscriptSyntaxError(
                f"{where}: `{name}` must be {json.dumps(expected)} "
                f"(it is {shown}): {why}. Set it in _quarto.yml."
            )


def parse_manuscript(qmd: Path) -> Manuscript:
    """Read ``qmd`` and its ``_quarto.yml``; split it into chunks; reject unsupported syntax."""
    text = qmd.read_text(encoding="utf-8")
    front, body, body_line = split_front_matter(text, where=str(qmd))
    project = load_project_config(qmd.parent)
    check_metadata(project, where=str(qmd.parent / "_quarto.yml"))
    check_metadata(front, where=f"{qmd} (front matter)")
    metadata = merge_metadata(project, front)
    check_required_values(metadata, where=str(qmd.parent / "_quarto.yml"))
    return Manuscript(path=qmd, metadata=metadata, chunks=tuple(split_chunks(body, first_line=body_line, where=str(qmd))))


def split_front_matter(text: str, *, where: str) -> tuple[dict[str, Any], str, int]:
    """(front matter, body, line number of the body's first line)."""
    if not text.startswith("---"):
        return {}, text, 1
    lines = text.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            try:
                front = yaml.safe_load("".join(lines[1:index])) or {}
            except yaml.YAMLError as exc:
                raise ManuscriptSyntaxError(f"{where}: front matter is not valid YAML ({exc})") from None
            if not isinstance(front, dict):
                raise ManuscriptSyntaxError(f"{where}: front matter must be a mapping")
            return front, "".join(lines[index + 1:]), index + 2
    raise ManuscriptSyntaxError(f"{where}: front matter opened with --- is never closed")


def split_chunks(body: str, *, first_line: int = 1, where: str = "<manuscript>") -> Iterator[Chunk]:
    """Markdown chunks and python cells, in order; unsupported syntax raises."""
    lines = body.splitlines(keepends=True)
    markdown: list[tuple[str, int]] = []
    index = 0

    def flush() -> Iterator[Chunk]:
        if markdown:
            yield parse_markdown("".join(t for t, _ in markdown), line=markdown[0][1], where=where)
            markdown.clear()

    while index < len(lines):
        line = lines[index]
        lineno = first_line + index
        match = _FENCE.match(line.rstrip("\n"))
        if match is None:
            markdown.append((line, lineno))
            index += 1
            continue
        fence, info = match["fence"], match["info"].strip()
        end = _closing_fence(lines, index + 1, fence)
        if end is None:
            raise ManuscriptSyntaxError(f"{where}:{lineno}: code block opened with {fence} is never closed")
        if info.startswith("{"):
            engine = re.match(r"\{\s*([^\s},]+)", info)
            name = engine.group(1) if engine else info
            if name != "python" or not re.fullmatch(r"\{\s*python\s*\}", info):
                raise ManuscriptSyntaxError(
                    f"{where}:{lineno}: code block ```{info} is not supported by the fallback renderer "
                    "(only ```{python} cells, options as #| lines; no mermaid, dot, ojs, r or raw blocks)"
                )
            yield from flush()
            options, code = parse_cell_options("".join(lines[index + 1:end]), line=lineno + 1, where=where)
            yield CodeCell(options=options, code=code, line=lineno)
        else:  # a plain code block: verbatim, neither scanned nor evaluated
            yield from flush()
            yield MarkdownChunk(parts=("".join(lines[index:end + 1]),), line=lineno)
        index = end + 1
    yield from flush()


def _closing_fence(lines: Sequence[str], start: int, fence: str) -> int | None:
    for index in range(start, len(lines)):
        stripped = lines[index].strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            return index
    return None


def parse_markdown(text: str, *, line: int, where: str) -> MarkdownChunk:
    """Split a markdown run into text and inline expressions; reject unsupported syntax."""
    in_code = False
    fence = ""
    for offset, raw in enumerate(text.splitlines()):
        match = _FENCE.match(raw)
        if match and (not in_code or (set(match["fence"]) == {fence[0]} and len(match["fence"]) >= len(fence)
                                      and not match["info"].strip())):
            in_code, fence = (not in_code), match["fence"]
            continue
        if in_code:
            continue
        for pattern, what in _UNSUPPORTED_TEXT:
            if pattern.search(raw):
                raise ManuscriptSyntaxError(
                    f"{where}:{line + offset}: {what} are not supported by the fallback renderer: {raw.strip()!r}"
                )
    parts: list[str | InlineExpr] = []
    position = 0
    for match in _INLINE_EXPR.finditer(text):
        lineno = line + text.count("\n", 0, match.start())
        if match["lang"] != "python":
            raise ManuscriptSyntaxError(
                f"{where}:{lineno}: inline `{{{match['lang']}}}` expressions are not supported; use `{{python}}`"
            )
        parts.append(text[position:match.start()])
        parts.append(InlineExpr(expr=match["expr"], line=lineno))
        position = match.end()
    parts.append(text[position:])
    return MarkdownChunk(parts=tuple(p for p in parts if p != ""), line=line)


def parse_cell_options(source: str, *, line: int, where: str) -> tuple[dict[str, Any], str]:
    """The ``#|`` options at the top of a cell (YAML) and the remaining code."""
    lines = source.splitlines(keepends=True)
    option_lines: list[str] = []
    index = 0
    while index < len(lines) and lines[index].startswith("#|"):
        option_lines.append(lines[index][2:].removeprefix(" "))
        index += 1
    options: dict[str, Any] = {}
    if option_lines:
        try:
            parsed = yaml.safe_load("".join(option_lines)) or {}
        except yaml.YAMLError as exc:
            raise ManuscriptSyntaxError(f"{where}:{line}: cell options are not valid YAML ({exc})") from None
        if not isinstance(parsed, dict):
            raise ManuscriptSyntaxError(f"{where}:{line}: cell options must be `#| key: value` lines")
        options = parsed
    unknown = sorted(set(options) - CELL_OPTIONS)
    if unknown:
        raise ManuscriptSyntaxError(
            f"{where}:{line}: cell option(s) {unknown} not supported by the fallback renderer; "
            f"supported: {sorted(CELL_OPTIONS)}"
        )
    label = options.get("label")
    if label is not None:
        prefix = str(label).split("-", 1)[0]
        if not isinstance(label, str) or "-" not in label or prefix not in ("fig", "tbl"):
            raise ManuscriptSyntaxError(
                f"{where}:{line}: cell label {label!r} is not supported; use fig-… or tbl-…"
            )
        if prefix == "fig" and "fig-cap" not in options:
            raise ManuscriptSyntaxError(f"{where}:{line}: figure cell {label} needs a `fig-cap`")
        if prefix == "tbl" and "tbl-cap" not in options:
            raise ManuscriptSyntaxError(f"{where}:{line}: table cell {label} needs a `tbl-cap`")
    for key in ("fig-cap", "tbl-cap"):
        if key in options and not (isinstance(options[key], str) and options[key].strip()):
            raise ManuscriptSyntaxError(
                f"{where}:{line}: `{key}` must be one caption string (sub-captions are not supported)"
            )
        if key in options and (label is None or not label.startswith(key[:3])):
            raise ManuscriptSyntaxError(f"{where}:{line}: `{key}` needs a `label: {key[:3]}-…`")
    if "output" in options and options["output"] not in (True, False, "asis"):
        raise ManuscriptSyntaxError(f"{where}:{line}: `output: {options['output']!r}` not supported (true, false, asis)")
    for key in ("echo", "include", "warning"):
        if key in options and not isinstance(options[key], bool):
            raise ManuscriptSyntaxError(f"{where}:{line}: `{key}` must be true or false")
    return options, "".join(lines[index:])
