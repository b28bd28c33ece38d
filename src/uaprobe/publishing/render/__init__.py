"""Render the Quarto manuscript: with Quarto when there is one, else with a strict fallback.

Two engines turn ``paper/paper.qmd`` into ``paper.html`` (self-contained) and ``paper.pdf``:

``quarto``
    ``quarto render`` with the Jupyter engine, run with the current interpreter
    (``QUARTO_PYTHON``) and freezing and caching off: DVC, not Quarto, decides when the paper is
    stale. It renders a scratch copy of the paper directory made beside it (Quarto leaves its working
    files where it renders, above all when a render fails), and a warning of Quarto or pandoc fails it.
    The executable is taken from ``$UAPROBE_QUARTO`` or ``$QUARTO_PATH``, else ``quarto`` on
    ``PATH``, else the binary of the ``quarto-cli`` Python package.

``fallback``
    For machines without Quarto. It understands exactly the subset of Quarto the manuscript uses
    and raises :class:`ManuscriptSyntaxError` on anything else, so that the manuscript never
    silently renders differently under the two engines:

    * YAML front matter merged over ``_quarto.yml`` (keys listed in :data:`SUPPORTED_KEYS`), with the
      settings that make Quarto render as the fallback does (:data:`REQUIRED_VALUES`: citeproc and
      a resource path for Typst, table columns sized by content);
    * ```` ```{python} ```` cells with ``#|`` options :data:`CELL_OPTIONS`; cells run in order in
      one Jupyter kernel started from *this* interpreter (no installed kernelspec is consulted),
      with the paper's directory as working directory, as Quarto does;
    * inline expressions `` `{python} expr` ``, run in document order in the same kernel, whose value is
      a number or has a Markdown representation (Quarto prints anything else as escaped text);
    * figures: a cell with ``label: fig-…`` and ``fig-cap`` that displays one image, or the
      markdown ``![caption](file.png){#fig-…}`` (also when printed by an ``output: asis`` cell);
    * tables: a cell with ``label: tbl-…`` and ``tbl-cap`` that displays one markdown table (the
      caption read as Quarto reads it: one level of backslash escapes taken off first);
    * section labels ``# Title {#sec-…}``; cross-references ``@fig-…``, ``@tbl-…``, ``@sec-…``
      (numbered "Figure 1", "Table 2", "Section 3.1"), a leading ``-`` (``-@fig-…``) for the bare
      number;
    * citations ``[@key]`` / ``@key`` resolved by pandoc's citeproc from the bibliography.

    Pandoc (from the ``pypandoc-binary`` wheel) writes one HTML file with every image embedded,
    and a Typst source that the ``typst`` wheel compiles to PDF, with the embedded fonts only and
    no document date, so the same inputs give the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from uaprobe.atomic import check_writable
from uaprobe.publishing.render.fallback import render_fallback
from uaprobe.publishing.render.kernel import execute_manuscript
from uaprobe.publishing.render.qmd import (REQUIRED_VALUES, SUPPORTED_KEYS, CodeCell, InlineExpr, MarkdownChunk,
                                           load_project_config, parse_manuscript, split_chunks)
from uaprobe.publishing.render.quarto import find_quarto, render_with_quarto
from uaprobe.publishing.render.result import InlineValueError, ManuscriptSyntaxError, RenderError, RenderResult

Engine = Literal["auto", "quarto", "fallback"]


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


__all__ = [
    "CodeCell",
    "InlineExpr",
    "InlineValueError",
    "ManuscriptSyntaxError",
    "MarkdownChunk",
    "RenderError",
    "RenderResult",
    "REQUIRED_VALUES",
    "SUPPORTED_KEYS",
    "execute_manuscript",
    "find_quarto",
    "parse_manuscript",
    "render_manuscript",
    "split_chunks",
]
