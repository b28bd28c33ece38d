"""The fallback engine: the executed manuscript assembled as pandoc markdown, cross-referenced on
pandoc's AST, written by pandoc to one self-contained HTML file and to Typst, which the ``typst``
wheel compiles to PDF with its embedded fonts only and no date."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import copy
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from uaprobe.atomic import write_files
from uaprobe.publishing.render.crossref import resolve_crossrefs
from uaprobe.publishing.render.kernel import CellOutput, execute_manuscript
from uaprobe.publishing.render.qmd import InlineExpr, Manuscript, MarkdownChunk, parse_manuscript
from uaprobe.publishing.render.result import ManuscriptSyntaxError, RenderError, RenderResult


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
            caption = quarto_table_caption(options["tbl-cap"].strip())
            block.append(f"::: {{#{label}}}\n{tables[0].strip()}\n\n: {caption}\n:::")
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


_ATTRIBUTE_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def quarto_table_caption(caption: str) -> str:
    """A cell's ``tbl-cap`` as Quarto reads it. Quarto forwards the option as an attribute of the cell's div
    (``tbl-cap='…'``), and pandoc takes one level of backslash escapes (a backslash before ASCII punctuation)
    off an attribute's value before the caption is read as Markdown: ``\\*`` in the option is a bare ``*``
    there (emphasis, with another), ``\\\\*`` a literal asterisk. (``fig-cap`` is not forwarded so: Quarto
    writes it as Markdown text, as it stands.)"""
    return _ATTRIBUTE_ESCAPE.sub(r"\1", caption)


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
    "#show figure.where(kind: table): set block(breakable: true)\n"
)
"""Typst set rules: no document date (reproducible bytes), captions numbered by the renderer, and a
long table may break across pages (a figure with an image stays one block with its caption). The
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
        # the HTML on a thread (pandoc in its own process) while the Typst source is made and compiled here
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="uaprobe-html") as beside:
            html_job = beside.submit(run_pandoc, html_args, stdin=source, cwd=build, what=f"{where} (HTML)")
            typ, pdf = _typst_pdf(source, common=common, typst_options=typst_options, number_sections=number_sections,
                                  paper_dir=qmd.parent, build=build, where=where)
            html = html_job.result()
        html_path = output_dir / f"{qmd.stem}.html"
        pdf_path = output_dir / f"{qmd.stem}.pdf"
        files: dict[Path, bytes | str] = {html_path: html, pdf_path: pdf}
        if typst_options.get("keep-typ"):
            files[output_dir / f"{qmd.stem}.typ"] = typ
        write_files(files)
    return RenderResult(html=html_path, pdf=pdf_path, engine="fallback")


def _typst_pdf(source: str, *, common: Sequence[str], typst_options: Mapping[str, Any], number_sections: bool,
               paper_dir: Path, build: Path, where: str) -> tuple[str, bytes]:
    """The Typst source of the resolved AST ``source`` (pandoc) and its PDF (Typst), compiled in ``build``."""
    typst_args = [*common, "-t", "typst", "-V", "header-includes=" + TYPST_PREAMBLE + _typst_includes(
        typst_options.get("include-in-header"), paper_dir=paper_dir, where=where)]
    if number_sections:
        typst_args += ["-V", f"section-numbering={typst_options.get('section-numbering', '1.1.1')}"]
    for key in ("papersize", "fontsize"):
        if key in typst_options:
            typst_args += ["-V", f"{key}={typst_options[key]}"]
    typ = run_pandoc(typst_args, stdin=source, cwd=build, what=f"{where} (Typst)")
    (build / "paper.typ").write_text(typ, encoding="utf-8")
    return typ, compile_typst(build / "paper.typ", root=build, where=where)


def compile_typst(source: Path, *, root: Path, where: str) -> bytes:
    """Compile a Typst file to PDF bytes with the embedded fonts only and a fixed timestamp."""
    try:
        import typst
    except ImportError:
        raise RenderError("the typst wheel is not installed (pip install typst)") from None
    try:
        try:
            return bytes(typst.compile(str(source), root=str(root), ignore_system_fonts=True, timestamp=0))
        except Exception as exc:
            if "parent group" not in str(exc):
                raise
            # Typst's PDF tagging fails on some page breaks around floating figures ("internal error: parent
            # group"), a known bug of the PDF export: the same document without the accessibility tags
            return bytes(typst.compile(str(source), root=str(root), ignore_system_fonts=True, timestamp=0,
                                       pdf_tags=False))
    except Exception as exc:  # typst raises its own error types for compile errors
        raise RenderError(f"{where}: Typst could not compile the PDF: {exc}") from None
