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
from uaprobe.publishing.provenance.readback import parse_values

QUARTO_YML = textwrap.dedent("""\
    project:
      type: default
      output-dir: _output
    number-sections: true
    bibliography: refs.bib
    reference-section-title: References
    execute:
      echo: false
      warning: false
      freeze: false
    format:
      html:
        embed-resources: true
      typst:
        papersize: a4
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
    sourced = Value(-0.25, "r", Source("r.json", "a/0"), Ledger(Path(".")))
    ```

    Value `{python} f"{value:.2f}"`; sourced `{python} sourced`; kernel `{python} sys.executable`; see @fig-plot, @tbl-tab,
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
    assert not list((tmp_path / "paper").glob("quarto-*")), "temporary output directory left behind"


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


def test_quarto_and_the_fallback_render_the_same_manuscript_alike(rendered: render.RenderResult,
                                                                    tmp_path: Path) -> None:
    """The promise that the manuscript never renders differently under the two engines, checked with
    the real Quarto where one is installed."""
    quarto = render.find_quarto()
    if quarto is None:
        pytest.skip("no Quarto executable on this machine (none on PATH, $UAPROBE_QUARTO, $QUARTO_PATH or the "
                    "quarto-cli package): the comparison with the fallback needs the real Quarto")
    qmd = write_project(tmp_path / "doc")
    real = render.render_manuscript(qmd, engine="quarto")
    assert real.engine == "quarto"
    assert _features(real.html.read_text(encoding="utf-8")) == _features(rendered.html.read_text(encoding="utf-8"))


def test_the_features_compared_across_engines_are_read_from_the_page(rendered: render.RenderResult) -> None:
    features = _features(rendered.html.read_text(encoding="utf-8"))
    assert features["refs"] == ["Figure 1", "Figure 2", "Section 1", "Section 1.1", "Table 1"]
    assert features["captions"] == [True, True] and features["inline"] is True
    assert features["images"] == 2 and features["tables"] == 1 and len(features["values"]) == 1  # type: ignore[arg-type]


def test_an_inline_string_quarto_would_show_with_escapes_is_refused(tmp_path: Path) -> None:
    """Quarto shows an inline str as its repr without the quotes: a backslash or a quote of both kinds
    would show its escape there, so the fallback refuses it rather than render it differently."""
    body = DOC.replace("Value `{python} f\"{value:.2f}\"`;", "Value `{python} 'it' + chr(39) + 's ' + chr(34)`;")
    with pytest.raises(RenderError, match="Quarto would show as"):
        render.render_manuscript(write_project(tmp_path / "doc", body), engine="fallback")


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
