"""The fallback renderer: the Quarto subset it supports, what it refuses, byte-stable output; the
Quarto runner's plumbing with a stand-in executable."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uaprobe.publishing import render
from uaprobe.errors import UAProbeError
from uaprobe.publishing.render import ManuscriptSyntaxError, RenderError
from uaprobe.publishing.render.quarto import render_warnings
from uaprobe.publishing.provenance.readback import parse_values

QUARTO_YML = textwrap.dedent("""\
    project:
      type: default
      output-dir: _output
    number-sections: true
    bibliography: refs.bib
    reference-section-title: References
    tbl-colwidths: false
    execute:
      echo: false
      warning: false
      freeze: false
    format:
      html:
        embed-resources: true
      typst:
        papersize: a4
        citeproc: true
        resource-path: ["."]
    """)

BIB = "@article{smith2020, author={Smith, Jane}, title={A Study}, journal={J}, year={2020}}\n"

DOC = textwrap.dedent('''\
    ---
    title: "Test"
    author: "Someone"
    jupyter: python3
    ---

    # Intro {#sec-intro}

    ```{python}
    import sys
    from IPython.display import Markdown, Image
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2, 2)); fig.subplots().plot([0, 1]); fig.savefig("plot.png", metadata={"Software": None})
    value = 0.125
    from pathlib import Path
    from uaprobe.publishing.provenance.values import Ledger, Source, Value
    from uaprobe.publishing.prose.primitives.markdown import Prose
    sourced = Value(-0.25, "r", Source("r.json", "a/0"), Ledger(Path(".")))
    ```

    Value `{python} Prose(f"{value:.2f}")`; sourced `{python} sourced`; kernel `{python} Prose(sys.executable)`; see @fig-plot, @tbl-tab,
    -@fig-plot, @sec-intro and @sec-more, as in earlier work [@smith2020].

    ```{python}
    #| label: fig-plot
    #| fig-cap: "A *plot*."
    Image(filename="plot.png")
    ```

    ```{python}
    #| label: tbl-tab
    #| tbl-cap: "A table."
    Markdown("| a | b |\\n|---|---:|\\n| 1 | 2 |")
    ```

    ## More {#sec-more}

    ```{python}
    #| output: asis
    print("![Second](plot.png){#fig-second}\\n\\nAnd @fig-second.")
    ```

    ''')


def write_project(root: Path, body: str = DOC, quarto_yml: str = QUARTO_YML) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "_quarto.yml").write_text(quarto_yml, encoding="utf-8")
    (root / "refs.bib").write_text(BIB, encoding="utf-8")
    (root / "doc.qmd").write_text(body, encoding="utf-8")
    return root / "doc.qmd"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> render.RenderResult:
    qmd = write_project(tmp_path_factory.mktemp("doc"))
    return render.render_manuscript(qmd, engine="fallback")


def test_fallback_writes_html_and_pdf(rendered: render.RenderResult) -> None:
    assert rendered.engine == "fallback"
    assert rendered.html.name == "doc.html" and rendered.html.parent.name == "_output"
    assert rendered.pdf.read_bytes().startswith(b"%PDF")
    assert oct(rendered.html.stat().st_mode & 0o777) == "0o644"


def test_numbers_cross_references_citations_and_inline_values(rendered: render.RenderResult) -> None:
    html = rendered.html.read_text(encoding="utf-8")
    # pandoc wraps the HTML at 72 columns, so where a line breaks depends on the interpreter's path;
    # compare with runs of ASCII whitespace as one space (no-break spaces stay: they are asserted)
    text = re.sub(r"[ \t\r\n]+", " ", html)
    assert "Value 0.12;" in text
    assert [(v.text, v.file, v.key, v.fmt) for v in parse_values(html)] == [("\u22120.250", "r.json", "a/0", "r")]
    assert f"kernel {sys.executable};" in text, "cells must run in this interpreter"
    assert ">Figure\u00a01</a>" in html and ">Table\u00a01</a>" in html and ">Figure\u00a02</a>" in html
    assert ">1</a>" in html  # -@fig-plot
    assert ">Section\u00a01</a>" in html and ">Section\u00a01.1</a>" in html
    assert "Figure\u00a01: A <em>plot</em>." in html and "Table\u00a01: A table." in html
    assert "(Smith 2020)" in html and "References" in html
    assert "@fig-" not in html and "??" not in html
    assert "src=\"data:image/png;base64," in html, "images must be embedded"
    assert "import sys" not in html, "echo: false hides code"


def test_rerendering_unchanged_inputs_gives_the_same_bytes(rendered: render.RenderResult, tmp_path: Path) -> None:
    html, pdf = rendered.html.read_bytes(), rendered.pdf.read_bytes()
    again = render.render_manuscript(rendered.html.parent.parent / "doc.qmd", engine="fallback",
                                     output_dir=tmp_path / "again")
    assert again.html.read_bytes() == html
    assert again.pdf.read_bytes() == pdf
    assert b"CreationDate" not in pdf and b"ModDate" not in pdf


UNSUPPORTED = {
    "callout": "::: {.callout-note}\nNote.\n:::\n",
    "shortcode": "{{< pagebreak >}}\n",
    "mermaid": "```{mermaid}\ngraph TD; A-->B;\n```\n",
    "r cell": "```{r}\n1 + 1\n```\n",
    "raw block": "```{=html}\n<b>x</b>\n```\n",
    "equation label": "$$ x = 1 $$ {#eq-one}\n",
    "inline r": "Value `{r} 1 + 1`.\n",
    "equation reference": "See @eq-one.\n",
    "unknown figure": "See @fig-nowhere.\n",
    "unknown section": "See @sec-nowhere.\n",
    "cell option": "```{python}\n#| code-fold: true\n1\n```\n",
    "sub-captions": "```{python}\n#| label: fig-x\n#| fig-cap:\n#|   - a\n#|   - b\n1\n```\n",
    "cell label": "```{python}\n#| label: lst-code\n1\n```\n",
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_quarto_syntax_fails_loudly(tmp_path: Path, name: str) -> None:
    qmd = write_project(tmp_path, '---\ntitle: "T"\n---\n\n# A {#sec-a}\n\n' + UNSUPPORTED[name])
    with pytest.raises(ManuscriptSyntaxError):
        render.render_manuscript(qmd, engine="fallback")


def test_unsupported_metadata_fails_loudly(tmp_path: Path) -> None:
    qmd = write_project(tmp_path, '---\ntitle: "T"\nfilters: [foo.lua]\n---\n\nText.\n')
    with pytest.raises(ManuscriptSyntaxError, match="filters"):
        render.render_manuscript(qmd, engine="fallback")


def test_an_unknown_citation_key_fails(tmp_path: Path) -> None:
    qmd = write_project(tmp_path, '---\ntitle: "T"\n---\n\nAs shown [@nobody1999].\n')
    with pytest.raises(RenderError, match="nobody1999"):
        render.render_manuscript(qmd, engine="fallback")


def test_a_failing_cell_names_the_cell(tmp_path: Path) -> None:
    body = '---\ntitle: "T"\n---\n\n```{python}\n#| label: tbl-bad\n#| tbl-cap: "x"\n1 / 0\n```\n'
    qmd = write_project(tmp_path, body)
    with pytest.raises(RenderError, match=r"tbl-bad.*ZeroDivisionError"):
        render.render_manuscript(qmd, engine="fallback")


def test_a_figure_cell_must_display_one_image(tmp_path: Path) -> None:
    body = '---\ntitle: "T"\n---\n\n```{python}\n#| label: fig-none\n#| fig-cap: "x"\nprint("no image")\n```\n'
    with pytest.raises(RenderError, match="fig-none"):
        render.render_manuscript(write_project(tmp_path, body), engine="fallback")


def test_code_inside_plain_code_blocks_is_not_parsed(tmp_path: Path) -> None:
    body = '---\ntitle: "T"\n---\n\n```\n::: {.callout-note}\n{{< x >}} `{r} 1`\n```\n'
    result = render.render_manuscript(write_project(tmp_path, body), engine="fallback")
    assert "{{&lt; x &gt;}}" in result.html.read_text(encoding="utf-8")


def test_split_chunks_keeps_document_order() -> None:
    chunks = list(render.split_chunks("a `{python} 1`\n\n```{python}\n#| echo: true\nx = 1\n```\n\nb\n"))
    assert isinstance(chunks[0], render.MarkdownChunk) and isinstance(chunks[1], render.CodeCell)
    assert chunks[1].options == {"echo": True} and chunks[1].code == "x = 1\n"
    assert [p for p in chunks[0].parts if isinstance(p, render.InlineExpr)][0].expr == "1"


# -- Quarto -------------------------------------------------------------------------------------


def _fake_quarto(directory: Path) -> Path:
    """A stand-in `quarto` that records its command line and writes the two outputs."""
    script = directory / "quarto"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, sys, pathlib
        args = sys.argv[1:]
        out = pathlib.Path(args[args.index("--output-dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        stem = pathlib.Path(args[1]).stem
        (out / f"{{stem}}.html").write_text("<html>" + " ".join(args) + "|" + os.environ["QUARTO_PYTHON"] + "</html>")
        (out / f"{{stem}}.pdf").write_bytes(b"%PDF-fake")
        """), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_find_quarto_prefers_the_environment_variable(tmp_path: Path) -> None:
    fake = _fake_quarto(tmp_path)
    assert render.find_quarto({"UAPROBE_QUARTO": str(fake), "PATH": ""}) == fake
    assert render.find_quarto({"PATH": str(tmp_path)}) == fake
    with pytest.raises(RenderError, match="UAPROBE_QUARTO"):
        render.find_quarto({"UAPROBE_QUARTO": str(tmp_path / "missing")})


def test_quarto_runs_with_execution_on_and_freezing_off(tmp_path: Path) -> None:
    fake = _fake_quarto(tmp_path / "bin" if (tmp_path / "bin").mkdir() is None else tmp_path)
    qmd = write_project(tmp_path / "paper")
    result = render.render_manuscript(qmd, engine="auto", environ={**os.environ, "UAPROBE_QUARTO": str(fake)})
    assert result.engine == "quarto"
    html = result.html.read_text()
    assert "render doc.qmd --execute --no-cache --output-dir" in html
    assert sys.executable in html, "quarto must run the cells with this interpreter"
    assert result.pdf.read_bytes() == b"%PDF-fake"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "paper"], "scratch copy left behind"
    assert sorted(p.name for p in (tmp_path / "paper").iterdir()) == ["_output", "_quarto.yml", "doc.qmd", "refs.bib"]


def _failing_quarto(directory: Path, *, exit_code: int, message: str) -> Path:
    """A stand-in `quarto` that leaves Quarto's working files in its directory, prints ``message`` and exits."""
    script = directory / "quarto"
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import pathlib, sys
        for name in ("doc.typ", "doc.html", "doc.quarto_ipynb"):
            pathlib.Path(name).write_text("partial")
        pathlib.Path("doc_files/mediabag").mkdir(parents=True)
        pathlib.Path(".quarto").mkdir()
        out = pathlib.Path(sys.argv[sys.argv.index("--output-dir") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "doc.html").write_text("<html></html>")
        (out / "doc.pdf").write_bytes(b"%PDF-fake")
        print({message!r}, file=sys.stderr)
        sys.exit({exit_code})
        """), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize("exit_code, message, match", [
    (1, "ERROR: compile failed", "failed with exit code 1"),
    (0, "\x1b[33m[WARNING] Citeproc: citation sec not found\x1b[39m", r"warned.*\n\[WARNING\] Citeproc: citation sec"),
    (0, "WARNING (/x/y.lua:1) Unable to resolve crossref @fig-x", "Unable to resolve crossref"),
])
def test_a_quarto_render_that_fails_or_warns_leaves_nothing_behind(tmp_path: Path, exit_code: int, message: str,
                                                                   match: str) -> None:
    (tmp_path / "bin").mkdir()
    fake = _failing_quarto(tmp_path / "bin", exit_code=exit_code, message=message)
    qmd = write_project(tmp_path / "paper")
    before = _listing(tmp_path, qmd.parent)
    with pytest.raises(RenderError, match=match):
        render.render_manuscript(qmd, engine="quarto", environ={**os.environ, "UAPROBE_QUARTO": str(fake)})
    assert _listing(tmp_path, qmd.parent) == before
    assert not (qmd.parent / "_output" / "doc.html").exists(), "no output from a failed render"


def test_render_warnings_are_quarto_s_and_pandoc_s_not_the_kernel_s() -> None:
    log = ("Starting python3 kernel...[IPKernelApp] WARNING | Kernel is running over TCP without encryption.\n"
           "\x1b[33mWARN: a Quarto warning\x1b[39m\n[WARNING] Citeproc: citation x not found\n"
           "  WARNING is a word inside a line\nOutput created: doc.html\n")
    assert render_warnings(log) == ["WARN: a Quarto warning", "[WARNING] Citeproc: citation x not found"]


def test_engine_quarto_without_quarto_is_an_error(tmp_path: Path) -> None:
    qmd = write_project(tmp_path)
    with pytest.raises(UAProbeError, match="no quarto executable"):
        render.render_manuscript(qmd, engine="quarto", environ={"PATH": ""})


LONG_PATH_TESTS = ("tests/test_render.py::test_numbers_cross_references_citations_and_inline_values",
                   "tests/test_numdiff.py")


def test_suite_passes_from_a_checkout_whose_path_is_long(tmp_path: Path) -> None:
    """The repository copied to a path of more than 150 characters, its interpreter reached through
    that path (a .venv link, as `make setup` makes one), runs the path-sensitive tests."""
    repo = Path(__file__).resolve().parents[1]
    root = tmp_path / ("a-checkout-path-long-enough-that-pandoc-wraps-the-kernel-path-" * 3) / "uaprobe"
    assert len(str(root)) > 150
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in files:
        if rel.startswith(("src/", "tests/", "paper/", "data/")) or rel in ("pyproject.toml", "params.yaml"):
            if (repo / rel).is_file():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(repo / rel, root / rel)
    (root / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    python = root / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *LONG_PATH_TESTS],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_the_html_column_width_and_stylesheet_reach_the_fallback(tmp_path: Path) -> None:
    config = QUARTO_YML.replace("    embed-resources: true\n",
                                "    embed-resources: true\n    css: extra.css\n    grid:\n      body-width: 1234px\n")
    assert "body-width" in config
    qmd = write_project(tmp_path, quarto_yml=config)
    (tmp_path / "extra.css").write_text("table { outline: 3px solid red; }\n", encoding="utf-8")
    html = render.render_manuscript(qmd, engine="fallback").html.read_text(encoding="utf-8")
    assert "max-width: 36em" not in html
    assert "outline: 3px solid red" in html  # the stylesheet, embedded
    assert re.search(r"body\s*\{[^}]*max-width: 1234px;[^}]*padding-left", html), \
        "the body's width, in pandoc's document styles (dropped when a stylesheet is given, unless kept)"


def test_typst_include_in_header_reaches_the_fallback_s_pdf(tmp_path: Path) -> None:
    config = QUARTO_YML.replace("    papersize: a4\n", "    papersize: a4\n    include-in-header: rules.typ\n"
                                "    keep-typ: true\n")
    assert "rules.typ" in config
    qmd = write_project(tmp_path, quarto_yml=config)
    with pytest.raises(render.RenderError, match="include-in-header 'rules.typ' not found"):
        render.render_manuscript(qmd, engine="fallback")
    (tmp_path / "rules.typ").write_text("// the manuscript's rules\n#show table: set par(justify: false)\n",
                                        encoding="utf-8")
    render.render_manuscript(qmd, engine="fallback")
    typ = (tmp_path / "_output" / "doc.typ").read_text(encoding="utf-8")
    assert "#show table: set par(justify: false)" in typ
    assert typ.index("#set document(date: none)") < typ.index("// the manuscript's rules")


def _features(html: str) -> dict[str, object]:
    """What both engines must agree on: the numbered cross-references and captions, the inline values
    (plain and sourced), the figures and tables, read from the page's text."""
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("\u00a0", " ")
    return {
        "refs": sorted(set(re.findall(r"\b(?:Figure|Table|Section) \d+(?:\.\d+)?", text))),
        "captions": [bool(re.search(r"Figure 1: A plot", text)), bool(re.search(r"Table 1: A table", text))],
        "inline": "Value 0.12;" in text,
        "values": [(v.text, v.file, v.key, v.fmt) for v in parse_values(html)],
        "images": len(re.findall(r"<img\b", html)),
        "tables": len(re.findall(r"<table\b", html)),
    }


ENGINE_DOC = DOC.replace('fig.savefig("plot.png", metadata={"Software": None})',
                         'fig.savefig("plot.png", metadata={"Software": None}); '
                         'fig.savefig("../outside.png", metadata={"Software": None})') + textwrap.dedent("""\
    And `{python} Prose("a reference (@sec-more) and a citation [@smith2020] in an inline value")`.

    ```{python}
    #| label: tbl-escapes
    #| tbl-cap: "Escapes: L\\\\\\\\*, the layer whose L\\\\\\\\* falls; *emphasis*."
    Markdown("| model | dtype |\\n|---|---|\\n| `smollm2-135m` | float32 |")
    ```

    # References {.unnumbered}

    ::: {#refs}
    :::

    # Appendix {#sec-appendix}

    ![An image outside the project directory](../outside.png){#fig-outside}

    Later text, after @fig-outside.
    """)
"""The test manuscript with what the real paper needs of Quarto: an image outside the project directory
(Typst's root), escapes in a table caption, a cross-reference and a citation inside an inline value, and
the references placed before an appendix."""


def _pdf_text(pdf: Path) -> str:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: the PDFs' text cannot be compared")
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    return re.sub(r"\s+", " ", text)


def _pdf_features(pdf: Path) -> dict[str, object]:
    text = _pdf_text(pdf)
    return {
        "citations": re.findall(r"\(Smith 2020\)", text),
        "references_before_appendix": -1 < text.find("References") < text.find("A Study") < text.find("Later text"),
        "no_numbered_citations": "[1]" not in text and "Bibliography" not in text,
        "caption": "Escapes: L*, the layer whose L* falls; emphasis." in text,
        "refs": sorted(set(re.findall(r"\b(?:Figure|Table|Section) \d+(?:\.\d+)?", text))),
    }


def _listing(*directories: Path) -> dict[str, list[str]]:
    return {str(d): sorted(p.name for p in d.iterdir()) for d in directories}


@pytest.fixture(scope="module")
def real_quarto() -> Path:
    quarto = render.find_quarto()
    if quarto is None:
        pytest.skip("no Quarto executable on this machine (none on PATH, $UAPROBE_QUARTO, $QUARTO_PATH or the "
                    "quarto-cli package): these tests run the real Quarto CLI")
    return quarto


def test_quarto_and_the_fallback_render_the_same_manuscript_alike(real_quarto: Path, tmp_path: Path) -> None:
    """The promise that the manuscript never renders differently under the two engines, checked with the real
    Quarto: the same cross-references, captions, inline and sourced values, figures, tables and author-date
    citations in the HTML, and in the PDF; the references where the manuscript puts them; the paper directory
    left as it was."""
    qmd = write_project(tmp_path / "paper", ENGINE_DOC)
    fallback = render.render_manuscript(qmd, engine="fallback", output_dir=tmp_path / "fallback")
    before = _listing(qmd.parent, tmp_path)
    real = render.render_manuscript(qmd, engine="quarto", environ={**os.environ, "UAPROBE_QUARTO": str(real_quarto)})
    assert real.engine == "quarto"
    after = _listing(qmd.parent, tmp_path)
    before[str(qmd.parent)] = sorted({*before[str(qmd.parent)], "_output"})
    assert after == before, "the Quarto render left files behind"
    html_real, html_fallback = (r.html.read_text(encoding="utf-8") for r in (real, fallback))
    assert _features(html_real) == _features(html_fallback)
    for html in (html_real, html_fallback):
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
        assert "a reference (Section 1.1) and a citation (Smith 2020) in an inline value" in text  # \\s: no-break too
        assert "L*, the layer whose L* falls;" in text and "?" + "?" not in text
    features = _pdf_features(real.pdf)
    assert features == _pdf_features(fallback.pdf)
    assert features["citations"] and features["references_before_appendix"] and features["caption"]
    assert features["no_numbered_citations"]


def test_quarto_render_in_the_paper_directory_as_a_user_runs_it(real_quarto: Path, tmp_path: Path) -> None:
    """`quarto render doc.qmd` in the manuscript's directory, as a Quarto user runs it: exit 0, no warning, the
    HTML and a PDF whose image outside the directory Typst could read; no working file left but Quarto's."""
    qmd = write_project(tmp_path / "paper", ENGINE_DOC)
    env = {**os.environ, "QUARTO_PYTHON": sys.executable}
    proc = subprocess.run([str(real_quarto), "render", qmd.name], cwd=qmd.parent, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert render_warnings(proc.stderr + proc.stdout) == [], proc.stderr[-3000:]
    assert (qmd.parent / "_output" / "doc.html").is_file()
    assert (qmd.parent / "_output" / "doc.pdf").read_bytes().startswith(b"%PDF")
    left = set(_listing(qmd.parent)[str(qmd.parent)]) - {"doc.qmd", "_quarto.yml", "refs.bib", "plot.png"}
    assert left <= {"_output", ".quarto"}, f"stray render files: {sorted(left)}"


@pytest.mark.parametrize("fault", ["cell", "citation"])
def test_a_failed_quarto_render_leaves_the_paper_directory_as_it_was(real_quarto: Path, tmp_path: Path,
                                                                     fault: str) -> None:
    """A cell that raises (Quarto exits 1) or a citation the bibliography lacks (Quarto warns, exit 0) fails the
    Quarto engine with Quarto's message, and leaves no file behind."""
    body = DOC + ("\n```{python}\n1 / 0\n```\n" if fault == "cell" else "\nAs shown [@nobody1999].\n")
    qmd = write_project(tmp_path / "paper", body)
    before = _listing(qmd.parent, tmp_path)
    with pytest.raises(RenderError, match="ZeroDivisionError" if fault == "cell" else "nobody1999"):
        render.render_manuscript(qmd, engine="quarto", environ={**os.environ, "UAPROBE_QUARTO": str(real_quarto)})
    assert _listing(qmd.parent, tmp_path) == before


def test_the_features_compared_across_engines_are_read_from_the_page(rendered: render.RenderResult) -> None:
    features = _features(rendered.html.read_text(encoding="utf-8"))
    assert features["refs"] == ["Figure 1", "Figure 2", "Section 1", "Section 1.1", "Table 1"]
    assert features["captions"] == [True, True] and features["inline"] is True
    assert features["images"] == 2 and features["tables"] == 1 and len(features["values"]) == 1  # type: ignore[arg-type]


@pytest.mark.parametrize("expr", ["'(@sec-intro)'", "'0.12'", "['a']", "None"])
def test_an_inline_value_without_markdown_that_is_not_a_number_is_refused(tmp_path: Path, expr: str) -> None:
    """Quarto prints an inline value without a Markdown representation as its plain-text repr escaped as text
    (a str's Markdown shown or misread: `(@sec-intro)` becomes a citation), the fallback would read it as
    Markdown: so the fallback refuses it (a plain str above all), naming the expression, without a traceback."""
    body = DOC.replace('Value `{python} Prose(f"{value:.2f}")`;', f"Value `{{python}} {expr}`;")
    assert body != DOC
    with pytest.raises(RenderError, match=r"inline expression at line \d+: `.*`: an inline") as exc:
        render.render_manuscript(write_project(tmp_path / "doc", body), engine="fallback")
    assert "Traceback" not in str(exc.value) and "Prose" in str(exc.value)


def test_inline_markdown_and_numbers_print_as_under_quarto(tmp_path: Path) -> None:
    body = DOC.replace('Value `{python} Prose(f"{value:.2f}")`;',
                       "Value `{python} 3`, `{python} -0.5`, `{python} Prose('*x* (@sec-intro)')`;")
    html = render.render_manuscript(write_project(tmp_path / "doc", body), engine="fallback").html.read_text("utf-8")
    assert "Value 3, -0.5, <em>x</em> (<a href=\"#sec-intro\"" in re.sub(r"\s+", " ", html)


ATTRIBUTE_VALUES = ["L\\*, whose L\\* falls", "L\\\\* and \\\\", "it's", "a \\a \\é \\\" b", "`code` \\` x", "\\[1\\]"]


@pytest.mark.parametrize("value", ATTRIBUTE_VALUES)
def test_a_table_caption_is_unescaped_as_pandoc_reads_quarto_s_attribute(value: str) -> None:
    """Quarto forwards ``tbl-cap`` as ``tbl-cap='…'`` (a ``'`` written ``\\'``) on the cell's div: the caption
    it reads as Markdown is the value pandoc's reader makes of that attribute."""
    from uaprobe.publishing.render.fallback import pandoc_path, quarto_table_caption

    source = "[x]{tbl-cap='" + value.replace("'", "\\'") + "'}\n"
    proc = subprocess.run([pandoc_path(), "-f", "markdown", "-t", "json"], input=source, capture_output=True,
                          text=True, check=True)
    import json

    attrs = json.loads(proc.stdout)["blocks"][0]["c"][0]["c"][0][2]
    assert quarto_table_caption(value) == dict(attrs)["tbl-cap"]


def test_a_table_caption_s_escapes_read_as_quarto_reads_them(tmp_path: Path) -> None:
    """One backslash in the YAML string is taken off by Quarto's attribute (\\* pairs up as emphasis), two
    leave a literal asterisk, in the fallback as under Quarto."""
    body = DOC.replace('#| tbl-cap: "A table."', r'#| tbl-cap: "A table: L\\\\*, then L\\\\*; \\*a\\* b."')
    assert body != DOC
    html = render.render_manuscript(write_project(tmp_path / "doc", body), engine="fallback").html.read_text("utf-8")
    assert "Table\u00a01: A table: L*, then L*; <em>a</em> b." in html


@pytest.mark.parametrize("setting", ["tbl-colwidths: false", "    citeproc: true", "    resource-path: [\".\"]"])
def test_a_setting_that_makes_quarto_render_as_the_fallback_is_required(tmp_path: Path, setting: str) -> None:
    config = QUARTO_YML.replace(setting + "\n", "")
    assert config != QUARTO_YML
    with pytest.raises(ManuscriptSyntaxError, match=re.escape(setting.strip().split(":")[0]) + ".*Set it in _quarto.yml"):
        render.render_manuscript(write_project(tmp_path, quarto_yml=config), engine="fallback")


def test_the_references_go_where_the_refs_div_stands(tmp_path: Path) -> None:
    """``::: {#refs}`` (Pandoc's and Quarto's) is the one div the fallback accepts: the bibliography is
    placed there, before an appendix that follows it, in the HTML and in the PDF."""
    body = ('---\ntitle: "T"\n---\n\n# Intro {#sec-intro}\n\nAs shown [@smith2020].\n\n'
            "# References {.unnumbered}\n\n::: {#refs}\n:::\n\n# Appendix {#sec-appendix}\n\nLater text.\n")
    result = render.render_manuscript(write_project(tmp_path, body), engine="fallback")
    html = result.html.read_text(encoding="utf-8")
    assert html.index("A Study") < html.index('id="sec-appendix"')
    pdf = subprocess.run(["pdftotext", str(result.pdf), "-"], capture_output=True, text=True).stdout \
        if shutil.which("pdftotext") else ""
    if pdf:
        assert pdf.index("A Study") < pdf.index("Later text")
    with pytest.raises(ManuscriptSyntaxError):  # any other div is still refused
        render.render_manuscript(write_project(tmp_path / "other", body.replace("{#refs}", "{#other}")),
                                 engine="fallback")
