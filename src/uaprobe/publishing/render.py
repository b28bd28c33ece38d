"""Render the Quarto manuscript: with Quarto when there is one, else with a strict fallback.

Two engines turn ``paper/paper.qmd`` into ``paper.html`` (self-contained) and ``paper.pdf``:

``quarto``
    ``quarto render`` with the Jupyter engine, run with the current interpreter
    (``QUARTO_PYTHON``) and freezing and caching off: DVC, not Quarto, decides when the paper is
    stale. The executable is taken from ``$UAPROBE_QUARTO`` or ``$QUARTO_PATH``, else ``quarto`` on
    ``PATH``, else the binary of the ``quarto-cli`` Python package.

``fallback``
    For machines without Quarto. It understands exactly the subset of Quarto the manuscript uses
    and raises :class:`ManuscriptSyntaxError` on anything else, so that the manuscript never
    silently renders differently under the two engines:

    * YAML front matter merged over ``_quarto.yml`` (keys listed in :data:`SUPPORTED_KEYS`);
    * ```` ```{python} ```` cells with ``#|`` options :data:`CELL_OPTIONS`; cells run in order in
      one Jupyter kernel started from *this* interpreter (no installed kernelspec is consulted),
      with the paper's directory as working directory, as Quarto does;
    * inline expressions `` `{python} expr` ``, run in document order in the same kernel;
    * figures: a cell with ``label: fig-…`` and ``fig-cap`` that displays one image, or the
      markdown ``![caption](file.png){#fig-…}`` (also when printed by an ``output: asis`` cell);
    * tables: a cell with ``label: tbl-…`` and ``tbl-cap`` that displays one markdown table;
    * section labels ``# Title {#sec-…}``; cross-references ``@fig-…``, ``@tbl-…``, ``@sec-…``
      (numbered "Figure 1", "Table 2", "Section 3.1"), a leading ``-`` (``-@fig-…``) for the bare
      number;
    * citations ``[@key]`` / ``@key`` resolved by pandoc's citeproc from the bibliography.

    Pandoc (from the ``pypandoc-binary`` wheel) writes one HTML file with every image embedded,
    and a Typst source that the ``typst`` wheel compiles to PDF, with the embedded fonts only and
    no document date, so the same inputs give the same bytes.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from uaprobe.atomic import check_writable, write_files
from uaprobe.errors import UAProbeError
from uaprobe.publishing.outputs import FIGURES_DIR, FIGURES_DIR_ENV

Engine = Literal["auto", "quarto", "fallback"]


class RenderError(UAProbeError):
    """The manuscript could not be rendered (a cell failed, a tool is missing, pandoc refused)."""


class ManuscriptSyntaxError(RenderError):
    """The manuscript uses Quarto syntax the fallback renderer does not support."""


# --------------------------------------------------------------------------------------------
# What the fallback understands
# --------------------------------------------------------------------------------------------

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
    "jupyter": None,
    "execute": {"echo": None, "warning": None, "freeze": None, "cache": None},
    "format": {
        "html": {"embed-resources": None, "output-file": None, "css": None, "toc": None,
                 "grid": {"body-width": None}},
        "typst": {"output-file": None, "papersize": None, "fontsize": None, "margin": None,
                  "section-numbering": None, "keep-typ": None, "include-in-header": None},
    },
}
"""Front-matter / ``_quarto.yml`` keys the fallback honours or may ignore (``None`` = a leaf)."""

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
    (re.compile(r"^\s*:::"), "fenced divs (::: — callouts, layouts, panels)"),
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


@dataclass(frozen=True)
class RenderResult:
    """What a render wrote and which engine wrote it."""

    html: Path
    pdf: Path
    engine: Literal["quarto", "fallback"]


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def render_manuscript(
    qmd: str | Path,
    *,
    output_dir: str | Path | None = None,
    engine: Engine = "auto",
    timeout: int = 900,
    environ: Mapping[str, str] | None = None,
) -> RenderResult:
    """Render ``qmd`` to ``<output_dir>/<stem>.html`` and ``<output_dir>/<stem>.pdf``.

    ``engine="auto"`` uses Quarto when :func:`find_quarto` finds one, else the fallback.
    ``output_dir`` defaults to ``project.output-dir`` of ``_quarto.yml`` (relative to the paper
    directory), else ``_output``. ``timeout`` bounds each cell (seconds).
    """
    qmd = Path(qmd).resolve()
    if not qmd.is_file():
        raise RenderError(f"{qmd}: manuscript not found")
    env = dict(os.environ if environ is None else environ)
    project = load_project_config(qmd.parent)
    if output_dir is None:
        output_dir = qmd.parent / str(project.get("project", {}).get("output-dir", "_output"))
    out = Path(output_dir).resolve()
    if engine not in ("auto", "quarto", "fallback"):
        raise RenderError(f"engine: got {engine!r}, expected 'auto', 'quarto' or 'fallback'")
    check_writable(out, fix="make it writable or point the output directory (--out) elsewhere")
    quarto = find_quarto(env) if engine in ("auto", "quarto") else None
    if engine == "quarto" and quarto is None:
        raise RenderError(
            "engine 'quarto': no quarto executable found (set UAPROBE_QUARTO or QUARTO_PATH, put "
            "quarto on PATH, or install the quarto-cli Python package)"
        )
    if quarto is not None:
        return render_with_quarto(quarto, qmd, output_dir=out, environ=env)
    return render_fallback(qmd, output_dir=out, timeout=timeout)


# --------------------------------------------------------------------------------------------
# Quarto
# --------------------------------------------------------------------------------------------


def find_quarto(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Quarto executable to use, or None: ``$UAPROBE_QUARTO``, ``$QUARTO_PATH``, PATH, quarto-cli."""
    env = os.environ if environ is None else environ
    for var in ("UAPROBE_QUARTO", "QUARTO_PATH"):
        value = env.get(var)
        if value:
            path = Path(value)
            if path.is_dir():
                path = path / "bin" / "quarto"
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise RenderError(f"${var}={value!r} is not an executable quarto; fix or unset it")
            return path
    on_path = shutil.which("quarto", path=env.get("PATH"))
    if on_path:
        return Path(on_path)
    try:
        import importlib.util

        spec = importlib.util.find_spec("quarto_cli")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            for candidate in (Path(location) / "bin" / "quarto", Path(location) / "quarto"):
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return candidate
    return None


def quarto_command(quarto: Path, qmd: Path) -> list[str]:
    """The ``quarto render`` command line: every format, executed afresh (``_quarto.yml`` sets
    ``execute.freeze: false``, so nothing is frozen either)."""
    return [str(quarto), "render", qmd.name, "--execute", "--no-cache"]


def render_with_quarto(
    quarto: Path, qmd: Path, *, output_dir: Path, environ: Mapping[str, str]
) -> RenderResult:
    """Run ``quarto render`` in the paper directory and move its outputs to ``output_dir``."""
    env = dict(environ)
    env.setdefault("QUARTO_PYTHON", sys.executable)
    # Quarto compiles Typst with the Quarto project (the paper directory) as root, so images
    # outside it cannot be read: figures are copied in for the render and removed afterwards.
    staged = _stage_figures(qmd.parent)
    if staged is not None:
        env[FIGURES_DIR_ENV] = str(staged)
    try:
        return _run_quarto(quarto, qmd, output_dir=output_dir, env=env)
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


STAGED_FIGURES = "_figures"
"""Directory inside the paper directory that holds the figures while Quarto renders."""


def _stage_figures(paper_dir: Path) -> Path | None:
    for candidate in (paper_dir, *paper_dir.parents):
        if (candidate / "params.yaml").is_file():
            source = candidate / FIGURES_DIR
            if not source.is_dir():
                return None
            target = paper_dir / STAGED_FIGURES
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
            return target
    return None


def _run_quarto(quarto: Path, qmd: Path, *, output_dir: Path, env: Mapping[str, str]) -> RenderResult:
    with tempfile.TemporaryDirectory(prefix="quarto-", dir=qmd.parent) as tmp:
        command = quarto_command(quarto, qmd) + ["--output-dir", tmp]
        proc = subprocess.run(command, cwd=qmd.parent, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RenderError(
                f"{qmd}: `{' '.join(command)}` failed with exit code {proc.returncode}:\n"
                f"{proc.stderr[-4000:]}"
            )
        produced = {p.suffix: p for p in Path(tmp).rglob(f"{qmd.stem}.*") if p.suffix in (".html", ".pdf")}
        missing = {".html", ".pdf"} - set(produced)
        if missing:
            raise RenderError(
                f"{qmd}: quarto wrote no {', '.join(sorted(missing))}; check `format:` in _quarto.yml "
                "(html with embed-resources, and typst)"
            )
        html = output_dir / f"{qmd.stem}.html"
        pdf = output_dir / f"{qmd.stem}.pdf"
        write_files({html: produced[".html"].read_bytes(), pdf: produced[".pdf"].read_bytes()})
    return RenderResult(html=html, pdf=pdf, engine="quarto")


# --------------------------------------------------------------------------------------------
# Fallback: parse
# --------------------------------------------------------------------------------------------


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


def parse_manuscript(qmd: Path) -> Manuscript:
    """Read ``qmd`` and its ``_quarto.yml``; split it into chunks; reject unsupported syntax."""
    text = qmd.read_text(encoding="utf-8")
    front, body, body_line = split_front_matter(text, where=str(qmd))
    project = load_project_config(qmd.parent)
    check_metadata(project, where=str(qmd.parent / "_quarto.yml"))
    check_metadata(front, where=f"{qmd} (front matter)")
    metadata = merge_metadata(project, front)
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


# --------------------------------------------------------------------------------------------
# Fallback: execute
# --------------------------------------------------------------------------------------------

_INLINE_HELPER = '''\
def __uaprobe_inline__(value):
    markdown = getattr(value, "_repr_markdown_", None)
    if markdown is not None:
        return markdown()
    if isinstance(value, str):
        shown = repr(value)[1:-1]
        if shown != value:  # Quarto shows an inline str as its repr without the quotes
            raise ValueError("an inline string that Quarto would show as " + repr(shown)
                             + ": give a number, or wrap the text in IPython.display.Markdown")
        return value
    return repr(value)
'''


@dataclass
class CellOutput:
    """What one executed cell or inline expression produced."""

    stdout: str = ""
    stderr: str = ""
    markdown: list[str] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)
    """(extension, bytes) of every image displayed, in order."""
    text: list[str] = field(default_factory=list)
    """``text/plain`` of results that had no richer representation."""


def _kernel_manager() -> Any:
    """A kernel manager that starts ipykernel with *this* interpreter, whatever kernelspecs exist."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = KernelSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        display_name=f"Python ({sys.executable})",
        language="python",
        env={"PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "Agg"},
    )

    class CurrentInterpreterSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:  # noqa: ARG002 - one spec
            return spec

    return KernelManager(kernel_name="uaprobe-current-python", kernel_spec_manager=CurrentInterpreterSpecs())


def execute_manuscript(manuscript: Manuscript, *, timeout: int = 900) -> dict[int, CellOutput]:
    """Run every cell and inline expression in document order; outputs keyed by ``id()`` of the item.

    Cells run in one kernel whose working directory is the manuscript's directory.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.v4.new_notebook()
    items: list[tuple[int, str]] = []
    notebook.cells.append(nbformat.v4.new_code_cell(_INLINE_HELPER))
    items.append((0, "setup"))
    for chunk in manuscript.chunks:
        if isinstance(chunk, CodeCell):
            notebook.cells.append(nbformat.v4.new_code_cell(chunk.code))
            items.append((id(chunk), chunk.where))
        else:
            for part in chunk.parts:
                if isinstance(part, InlineExpr):
                    source = f"print(__uaprobe_inline__(({part.expr})), end='')"
                    notebook.cells.append(nbformat.v4.new_code_cell(source))
                    items.append((id(part), f"inline expression at line {part.line}: `{part.expr}`"))
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index}"
    client = NotebookClient(
        notebook,
        km=_kernel_manager(),
        timeout=timeout,
        allow_errors=False,
        record_timing=False,
        resources={"metadata": {"path": str(manuscript.path.parent)}},
    )
    where = "setup"
    # The kernel's own log (start-up notices, crashes) goes to a file, quoted if the kernel dies.
    with tempfile.TemporaryFile(mode="w+b") as kernel_log:
        try:
            with client.setup_kernel(stderr=kernel_log, stdout=kernel_log):
                for index, cell in enumerate(notebook.cells):
                    where = items[index][1]
                    client.execute_cell(cell, index)
        except CellExecutionError as exc:
            if exc.ename in _project_error_names():  # the project's own message says it all: no traceback
                raise RenderError(f"{manuscript.path}: {where}: {exc.evalue}") from None
            raise RenderError(f"{manuscript.path}: {where} raised {exc.ename}: {exc.evalue}\n"
                              f"{_strip_ansi(exc.traceback)[-3000:]}") from None
        except CellTimeoutError:
            raise RenderError(f"{manuscript.path}: {where} did not finish within {timeout} s") from None
        except (DeadKernelError, RuntimeError) as exc:
            kernel_log.seek(0)
            log_tail = kernel_log.read().decode("utf-8", "replace")[-3000:]
            raise RenderError(f"{manuscript.path}: the kernel failed while running {where}: {exc}\n"
                              f"kernel log:\n{log_tail}") from None
    results: dict[int, CellOutput] = {}
    for (key, _where), cell in zip(items, notebook.cells):
        results[key] = _collect_outputs(cell.get("outputs", []))
    return results


def _project_error_names() -> set[str]:
    """Class names of :class:`~uaprobe.errors.UAProbeError` and its subclasses (as a kernel reports them)."""
    names, todo = set(), [UAProbeError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _collect_outputs(outputs: Sequence[Mapping[str, Any]]) -> CellOutput:
    collected = CellOutput()
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            if output.get("name") == "stdout":
                collected.stdout += output.get("text", "")
            else:
                collected.stderr += output.get("text", "")
        elif kind in ("display_data", "execute_result"):
            data = output.get("data", {})
            if "text/markdown" in data:
                collected.markdown.append(_joined(data["text/markdown"]))
            elif "image/png" in data:
                collected.images.append(("png", base64.b64decode(_joined(data["image/png"]))))
            elif "image/svg+xml" in data:
                collected.images.append(("svg", _joined(data["image/svg+xml"]).encode("utf-8")))
            elif "text/plain" in data:
                collected.text.append(_joined(data["text/plain"]))
    return collected


def _joined(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


# --------------------------------------------------------------------------------------------
# Fallback: assemble markdown
# --------------------------------------------------------------------------------------------


def assemble_markdown(
    manuscript: Manuscript, outputs: Mapping[int, CellOutput], *, build_dir: Path
) -> str:
    """The pandoc markdown of the executed manuscript; images are copied into ``build_dir``."""
    execute = manuscript.metadata.get("execute", {}) or {}
    default_echo = bool(execute.get("echo", True))
    default_warning = bool(execute.get("warning", True))
    images = _ImageStore(build_dir)
    pieces: list[str] = []
    for chunk in manuscript.chunks:
        if isinstance(chunk, MarkdownChunk):
            for part in chunk.parts:
                pieces.append(outputs[id(part)].stdout if isinstance(part, InlineExpr) else part)
            continue
        output = outputs[id(chunk)]
        options = chunk.options
        if options.get("include", True) is False:
            continue
        block: list[str] = []
        if options.get("echo", default_echo):
            block.append(f"``` python\n{chunk.code.rstrip()}\n```")
        if options.get("warning", default_warning) and output.stderr.strip():
            block.append(_code_block(output.stderr))
        mode = options.get("output", True)
        label = options.get("label")
        if mode is False:
            pass
        elif mode == "asis":
            if output.images or output.text:
                raise RenderError(f"{manuscript.path}: {chunk.where} has `output: asis` but displayed "
                                  "images or objects; print markdown instead")
            block.append(output.stdout + "".join(output.markdown))
        elif label is not None and label.startswith("fig-"):
            if len(output.images) != 1:
                raise RenderError(
                    f"{manuscript.path}: figure {chunk.where} displayed {len(output.images)} images; "
                    "exactly one is supported (no sub-figures)"
                )
            name = images.add(*output.images[0])
            alt = options.get("fig-alt")
            attrs = f'#{label} width="100%"' + (f' fig-alt="{_attr(alt)}"' if alt else "")
            block.append(f"![{options['fig-cap'].strip()}]({name}){{{attrs}}}")
        elif label is not None and label.startswith("tbl-"):
            tables = output.markdown
            if len(tables) != 1 or output.images:
                raise RenderError(
                    f"{manuscript.path}: table {chunk.where} must display exactly one markdown table "
                    f"(IPython.display.Markdown); it displayed {len(tables)} markdown and "
                    f"{len(output.images)} image outputs"
                )
            block.append(f"::: {{#{label}}}\n{tables[0].strip()}\n\n: {options['tbl-cap'].strip()}\n:::")
        else:
            if output.stdout.strip():
                block.append(_code_block(output.stdout))
            block.extend(output.markdown)
            for ext, data in output.images:
                block.append(f"![]({images.add(ext, data)})")
            block.extend(_code_block(t) for t in output.text)
        if block:
            pieces.append("\n\n" + "\n\n".join(b.strip("\n") for b in block) + "\n\n")
    return "".join(pieces)


def _code_block(text: str) -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return f"{ticks}\n{text.rstrip()}\n{ticks}"


def _attr(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


class _ImageStore:
    """Images of cell outputs, written into the build directory under content-derived names."""

    def __init__(self, build_dir: Path) -> None:
        self.build_dir = build_dir

    def add(self, ext: str, data: bytes) -> str:
        name = f"cell-{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        (self.build_dir / name).write_bytes(data)
        return name


# --------------------------------------------------------------------------------------------
# Fallback: cross-references on the pandoc AST
# --------------------------------------------------------------------------------------------


def _stringify(inlines: Any) -> str:
    if isinstance(inlines, list):
        return "".join(_stringify(x) for x in inlines)
    if isinstance(inlines, dict):
        kind = inlines.get("t")
        if kind == "Str":
            return inlines["c"]
        if kind in ("Space", "SoftBreak", "LineBreak"):
            return " "
        if "c" in inlines:
            return _stringify(inlines["c"])
    return ""


def _walk_blocks(blocks: list[Any]) -> Iterator[dict[str, Any]]:
    """Every block in document order, depth first (divs, figures, lists, quotes)."""
    for block in blocks:
        if not isinstance(block, dict):
            continue
        yield block
        kind, content = block.get("t"), block.get("c")
        if kind in ("Div",):
            yield from _walk_blocks(content[1])
        elif kind == "BlockQuote":
            yield from _walk_blocks(content)
        elif kind in ("BulletList",):
            for item in content:
                yield from _walk_blocks(item)
        elif kind == "OrderedList":
            for item in content[1]:
                yield from _walk_blocks(item)


def _section_numbers(blocks: list[Any]) -> dict[str, str]:
    """Pandoc's ``--number-sections`` numbers of the headers with ids (unnumbered ones skipped)."""
    counters = [0] * 7
    numbers: dict[str, str] = {}
    for block in _walk_blocks(blocks):
        if block.get("t") != "Header":
            continue
        level, (ident, classes, _kv), _inl = block["c"]
        if "unnumbered" in classes:
            if ident.startswith("sec-"):
                numbers[ident] = ""
            continue
        counters[level] += 1
        for deeper in range(level + 1, 7):
            counters[deeper] = 0
        if ident:
            numbers[ident] = ".".join(str(c) for c in counters[1:level + 1])
    return numbers


def resolve_crossrefs(document: dict[str, Any], *, number_sections: bool, where: str) -> dict[str, Any]:
    """Number figures, tables and sections; turn ``@fig-…``/``@tbl-…``/``@sec-…`` into links.

    Captions get their "Figure N:" / "Table N:" prefix here, so both writers show the same numbers.
    Raises :class:`ManuscriptSyntaxError` for an unknown or unsupported reference.
    """
    document = copy.deepcopy(document)
    blocks = document["blocks"]
    targets: dict[str, str] = {}
    counts = {"fig": 0, "tbl": 0}

    def prefix_caption(caption: list[Any], text: str) -> None:
        label = [{"t": "Str", "c": text.replace(" ", "\u00a0") + ":"}, {"t": "Space"}]
        body = caption[1]
        if body and body[0].get("t") in ("Plain", "Para"):
            body[0]["c"] = label + body[0]["c"]
        else:
            body.insert(0, {"t": "Plain", "c": label[:1]})

    def number(blocks_: list[Any]) -> None:
        for index, block in enumerate(blocks_):
            kind = block.get("t")
            if kind == "Figure":
                ident = block["c"][0][0]
                if ident.startswith("fig-"):
                    counts["fig"] += 1
                    text = f"Figure {counts['fig']}"
                    _register(targets, ident, text, where)
                    prefix_caption(block["c"][1], text)
            elif kind == "Div":
                ident = block["c"][0][0]
                inner = block["c"][1]
                if ident.startswith("tbl-"):
                    tables = [b for b in inner if b.get("t") == "Table"]
                    if len(tables) != 1:
                        raise ManuscriptSyntaxError(f"{where}: {ident} holds {len(tables)} tables; expected one")
                    table = tables[0]
                    counts["tbl"] += 1
                    text = f"Table {counts['tbl']}"
                    _register(targets, ident, text, where)
                    table["c"][0] = [ident, table["c"][0][1], table["c"][0][2]]
                    prefix_caption(table["c"][1], text)
                    blocks_[index] = table
                elif ident.startswith(tuple(f"{p}-" for p in QUARTO_CROSSREF_PREFIXES)):
                    raise ManuscriptSyntaxError(f"{where}: a div labelled {ident} is not supported")
                else:
                    number(inner)
            elif kind == "Para" or kind == "Plain":
                for inline in block["c"]:
                    if inline.get("t") == "Image" and inline["c"][0][0].startswith("fig-"):
                        raise ManuscriptSyntaxError(
                            f"{where}: image {inline['c'][0][0]} is not a figure: put it alone in its "
                            "paragraph with a caption"
                        )
            elif kind == "BlockQuote":
                number(block["c"])

    number(blocks)
    sections = _section_numbers(blocks)
    for ident, num in sections.items():
        if ident.startswith("sec-"):
            if not number_sections or not num:
                targets[ident] = ""
            else:
                _register(targets, ident, f"Section {num}", where)

    def replace(node: Any) -> Any:
        if isinstance(node, list):
            out: list[Any] = []
            for item in node:
                replaced = replace(item)
                if isinstance(replaced, tuple):
                    out.extend(replaced)
                else:
                    out.append(replaced)
            return out
        if not isinstance(node, dict):
            return node
        if node.get("t") == "Cite":
            citations = node["c"][0]
            kinds = {c["citationId"].split("-", 1)[0] if "-" in c["citationId"] else "" for c in citations}
            crossref = {k for k in kinds if k in QUARTO_CROSSREF_PREFIXES}
            if not crossref:
                return node
            if crossref - set(SUPPORTED_CROSSREF_PREFIXES):
                raise ManuscriptSyntaxError(
                    f"{where}: cross-reference(s) {[c['citationId'] for c in citations]} are not supported "
                    f"(supported: {', '.join(f'@{p}-…' for p in SUPPORTED_CROSSREF_PREFIXES)})"
                )
            if kinds - crossref:
                raise ManuscriptSyntaxError(
                    f"{where}: {_stringify(node['c'][1])!r} mixes cross-references and citations"
                )
            links: list[Any] = []
            for i, citation in enumerate(citations):
                ident = citation["citationId"]
                if ident not in targets:
                    raise ManuscriptSyntaxError(f"{where}: unresolved cross-reference @{ident}")
                if targets[ident] == "":
                    raise ManuscriptSyntaxError(
                        f"{where}: @{ident} points at an unnumbered section (set number-sections: true)"
                    )
                text = targets[ident]
                if citation["citationMode"]["t"] == "SuppressAuthor":
                    text = text.split(" ", 1)[1]
                if i:
                    links.extend([{"t": "Str", "c": ","}, {"t": "Space"}])
                content = [{"t": "Str", "c": text.replace(" ", "\u00a0")}]
                links.append({"t": "Link", "c": [["", ["crossref"], []], content, ["#" + ident, ""]]})
            return tuple(links)
        return {key: replace(value) for key, value in node.items()}

    document["blocks"] = replace(blocks)
    return document


def _register(targets: dict[str, str], ident: str, text: str, where: str) -> None:
    if ident in targets:
        raise ManuscriptSyntaxError(f"{where}: label {ident} is used twice")
    targets[ident] = text


# --------------------------------------------------------------------------------------------
# Fallback: pandoc and typst
# --------------------------------------------------------------------------------------------


def pandoc_path() -> str:
    """The pandoc of the ``pypandoc-binary`` wheel (or one on PATH)."""
    try:
        import pypandoc

        return str(pypandoc.get_pandoc_path())
    except (ImportError, OSError) as exc:
        on_path = shutil.which("pandoc")
        if on_path:
            return on_path
        raise RenderError(f"pandoc not found ({exc}); install the pypandoc-binary wheel") from None


def run_pandoc(args: Sequence[str], *, stdin: str, cwd: Path, what: str) -> str:
    """Run pandoc; any warning is an error (``--fail-if-warnings``)."""
    command = [pandoc_path(), *args, "--fail-if-warnings"]
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "LANG": "C.UTF-8", "SOURCE_DATE_EPOCH": "0"})
    if proc.returncode != 0 or proc.stderr.strip():
        raise RenderError(f"{what}: pandoc failed (exit {proc.returncode}):\n{proc.stderr.strip()[-4000:]}")
    return proc.stdout


def _pandoc_metadata(metadata: Mapping[str, Any], paper_dir: Path, build_dir: Path) -> dict[str, Any]:
    """Metadata passed to pandoc: the document fields, the bibliography copied into the build dir."""
    keep = ("title", "subtitle", "author", "abstract", "keywords", "lang", "link-citations",
            "reference-section-title")
    meta: dict[str, Any] = {k: metadata[k] for k in keep if k in metadata}
    for key in ("bibliography", "csl"):
        if key not in metadata:
            continue
        values = metadata[key] if isinstance(metadata[key], list) else [metadata[key]]
        copied = []
        for value in values:
            source = (paper_dir / str(value)).resolve()
            if not source.is_file():
                raise RenderError(f"{paper_dir / '_quarto.yml'}: {key} {value!r} not found at {source}")
            target = build_dir / f"{key}-{len(copied)}{source.suffix}"
            shutil.copyfile(source, target)
            copied.append(target.name)
        meta[key] = copied if len(copied) > 1 else copied[0]
    return meta


def _copy_images(document: dict[str, Any], *, paper_dir: Path, build_dir: Path, where: str) -> dict[str, Any]:
    """Copy every local image the AST references into ``build_dir`` under a content-derived name."""

    def visit(node: Any) -> Any:
        if isinstance(node, list):
            return [visit(n) for n in node]
        if not isinstance(node, dict):
            return node
        if node.get("t") == "Image":
            target = node["c"][2][0]
            if re.match(r"^[a-z]+:", target):
                raise ManuscriptSyntaxError(f"{where}: image {target!r} is not a local file")
            source = build_dir / target if (build_dir / target).is_file() else (paper_dir / target)
            if not source.is_file():
                raise RenderError(f"{where}: image {target!r} not found (looked in {paper_dir})")
            data = source.read_bytes()
            name = f"img-{hashlib.sha256(data).hexdigest()[:16]}{source.suffix.lower()}"
            (build_dir / name).write_bytes(data)
            node = copy.deepcopy(node)
            node["c"][2][0] = name
            return node
        return {k: visit(v) for k, v in node.items()}

    document = dict(document)
    document["blocks"] = visit(document["blocks"])
    return document


TYPST_PREAMBLE = (
    "#set document(date: none)\n"
    "#set figure(numbering: none)\n"
    "#show figure: set block(breakable: true)\n"
)
"""Typst set rules: no document date (reproducible bytes), captions numbered by the renderer. The
manuscript's own rules (``format.typst.include-in-header``, as under Quarto) follow them."""


def _typst_includes(files: Any, *, paper_dir: Path, where: str) -> str:
    """The text of ``format.typst.include-in-header`` (a file or a list of files, beside the manuscript)."""
    if not files:
        return ""
    text = []
    for name in files if isinstance(files, list) else [files]:
        path = paper_dir / str(name)
        if not path.is_file():
            raise RenderError(f"{where}: format.typst.include-in-header {name!r} not found at {path}")
        text.append(path.read_text(encoding="utf-8"))
    return "\n".join(text)


def render_fallback(qmd: Path, *, output_dir: Path, timeout: int = 900) -> RenderResult:
    """Execute the manuscript in a Jupyter kernel and write HTML (pandoc) and PDF (pandoc + Typst)."""
    manuscript = parse_manuscript(qmd)
    outputs = execute_manuscript(manuscript, timeout=timeout)
    metadata = manuscript.metadata
    number_sections = bool(metadata.get("number-sections", False))
    formats = metadata.get("format", {}) or {}
    html_options = formats.get("html", {}) if isinstance(formats, Mapping) else {}
    typst_options = formats.get("typst", {}) if isinstance(formats, Mapping) else {}
    where = str(qmd)
    with tempfile.TemporaryDirectory(prefix="uaprobe-render-") as tmp:
        build = Path(tmp)
        markdown = assemble_markdown(manuscript, outputs, build_dir=build)
        (build / "meta.yaml").write_text(
            yaml.safe_dump(_pandoc_metadata(metadata, qmd.parent, build), sort_keys=True, allow_unicode=True),
            encoding="utf-8",
        )
        # --columns: pipe tables keep automatic column widths (Typst and browsers fit them to the content)
        ast = json.loads(run_pandoc(["-f", "markdown", "-t", "json", "--columns", "2000", "--metadata-file", "meta.yaml"],
                                    stdin=markdown, cwd=build, what=where))
        ast = resolve_crossrefs(ast, number_sections=number_sections, where=where)
        ast = _copy_images(ast, paper_dir=qmd.parent, build_dir=build, where=where)
        source = json.dumps(ast)
        common = ["-f", "json", "--standalone", "--citeproc"]
        html_args = [*common, "-t", "html5", "--embed-resources", "--resource-path", "."]
        if number_sections:
            html_args.append("--number-sections")
        if html_options.get("toc"):
            html_args.append("--toc")
        body_width = (html_options.get("grid") or {}).get("body-width")
        if body_width:  # Quarto's width of the text column; pandoc's template calls it maxwidth
            html_args += ["-V", f"maxwidth={body_width}"]
        if html_options.get("css"):
            css = (qmd.parent / str(html_options["css"])).resolve()
            if not css.is_file():
                raise RenderError(f"{where}: format.html.css {html_options['css']!r} not found")
            shutil.copyfile(css, build / "style.css")
            # pandoc drops its own document styles when given a stylesheet; keep them underneath
            html_args += ["--css", "style.css", "-V", "document-css=true"]
        html = run_pandoc(html_args, stdin=source, cwd=build, what=f"{where} (HTML)")
        typst_args = [*common, "-t", "typst", "-V", "header-includes=" + TYPST_PREAMBLE + _typst_includes(
            typst_options.get("include-in-header"), paper_dir=qmd.parent, where=where)]
        if number_sections:
            typst_args += ["-V", f"section-numbering={typst_options.get('section-numbering', '1.1.1')}"]
        for key in ("papersize", "fontsize"):
            if key in typst_options:
                typst_args += ["-V", f"{key}={typst_options[key]}"]
        typ = run_pandoc(typst_args, stdin=source, cwd=build, what=f"{where} (Typst)")
        (build / "paper.typ").write_text(typ, encoding="utf-8")
        pdf = compile_typst(build / "paper.typ", root=build, where=where)
        html_path = output_dir / f"{qmd.stem}.html"
        pdf_path = output_dir / f"{qmd.stem}.pdf"
        files: dict[Path, bytes | str] = {html_path: html, pdf_path: pdf}
        if typst_options.get("keep-typ"):
            files[output_dir / f"{qmd.stem}.typ"] = typ
        write_files(files)
    return RenderResult(html=html_path, pdf=pdf_path, engine="fallback")


def compile_typst(source: Path, *, root: Path, where: str) -> bytes:
    """Compile a Typst file to PDF bytes with the embedded fonts only and a fixed timestamp."""
    try:
        import typst
    except ImportError:
        raise RenderError("the typst wheel is not installed (pip install typst)") from None
    try:
        return bytes(typst.compile(str(source), root=str(root), ignore_system_fonts=True, timestamp=0))
    except Exception as exc:  # typst raises its own error types for compile errors
        if "label `<prov-" in str(exc):
            raise RenderError(f"{where}: the manuscript shows sourced values but no appendix of their sources; end it "
                              "with a table cell of `uaprobe.publishing.appendix.provenance_table(out)`") from None
        raise RenderError(f"{where}: Typst could not compile the PDF: {exc}") from None


__all__ = [
    "CELL_OPTIONS",
    "CodeCell",
    "InlineExpr",
    "Manuscript",
    "ManuscriptSyntaxError",
    "MarkdownChunk",
    "RenderError",
    "RenderResult",
    "SUPPORTED_KEYS",
    "assemble_markdown",
    "check_metadata",
    "execute_manuscript",
    "find_quarto",
    "parse_manuscript",
    "quarto_command",
    "render_fallback",
    "render_manuscript",
    "render_with_quarto",
    "resolve_crossrefs",
    "split_chunks",
]

