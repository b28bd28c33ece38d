"""A researcher's own study, end to end through `dvc repro` on tiny local models: another dataset (4 and 12
categories), a one-model and a three-model panel, and a hostile dataset whose category names, statements and
display names hold markup. The paper renders with the study's own counts, no sentence about two models
outside a two-model panel, and no tag, handler, fetched or embedded file from the data in any page."""

from __future__ import annotations

import base64
import html
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from browser import find_chromium, inspect_page
from own_study import make_study, repro, study_dataset
from pipeline_project import BIN, git, run

pytestmark = pytest.mark.slow

SECRET = b"SECRET-BYTES-OF-A-LOCAL-FILE"
HOSTILE_CATEGORIES = [
    '<img src="secret.png" onerror="console.log(\'PWNED-img\')">',
    "<script>console.log('PWNED-script')</script> claims",
    "money $x^2$ and *stars* [a link](secret.png) ![an image](secret.png)",
    "typst #set page(width: 1cm) & entities &lt;b&gt;",
    "quarto {{< pagebreak >}} `{python} 1 + 1` @fig-x [@key]",
]
HOSTILE_DISPLAY = '<b onmouseover="console.log(\'PWNED-display\')">Evil$M$</b>'
HOSTILE_TEXT = "<i onclick=\"console.log('PWNED-text')\">*</i> "


def _text(page: str) -> str:
    """The text a reader sees (tags dropped, entities decoded, whitespace folded), with pandoc's typographic
    quotes (typography, not markup) as the straight ones they were typed as."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    body = re.sub(r"</?(a|span|em|strong|code|sup|sub)\b[^>]*>", "", body)  # inline: no space of its own
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
    return text.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}))


class _Markup(HTMLParser):
    """Every element and attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def _markup(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Markup()
    parser.feed(page)
    parser.close()
    return parser.elements


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve categories, five of them named with markup, statements that start with markup, three models, one
    with a display name of markup; a local file the markup names beside the paper and at the root; then
    `dvc repro` and `uaprobe paper-diff HEAD` (diff.html)."""
    root = tmp_path_factory.mktemp("hostile")
    names = ["plain one", *HOSTILE_CATEGORIES, *(f"plain {w}" for w in ("b", "c", "d", "e", "f", "g"))]
    dataset = study_dataset(names, pairs=3)
    for body in list(dataset.values())[:2]:
        body["pairs"] = [[HOSTILE_TEXT + a, b] for a, b in body["pairs"]]
    models = {"tiny-a": {"display": "Tiny-A", "layers": 2}, "tiny-b": {"display": HOSTILE_DISPLAY, "layers": 3},
              "tiny-c": {"display": "Tiny-C", "layers": 4}}
    secret = base64.b64encode(SECRET).decode()
    project = make_study(root / "study", models, dataset,
                         files={"paper/secret.png": secret, "secret.png": secret, "data/secret.png": secret})
    repro(project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "results", cwd=project)
    run([str(BIN / "uaprobe"), "paper-diff", "HEAD"], project)
    return project


def _pages(project: Path) -> dict[str, str]:
    out = project / "paper" / "_output"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.glob("*.html"))}


def test_no_tag_handler_or_source_from_the_data_is_live_in_any_page(hostile: Path) -> None:
    pages = _pages(hostile)
    assert {"paper.html", "figures.html", "provenance.html", "diff.html"} <= pages.keys()
    for name, page in pages.items():
        elements = _markup(page)
        handlers = [(tag, a) for tag, attrs in elements for a in attrs if a.startswith("on")]
        assert handlers == [], f"{name}: event handlers {handlers[:3]}"
        assert "PWNED" not in "".join(re.findall(r"<script\b.*?</script>", page, flags=re.S)), name
        sources = [attrs.get("src") or attrs.get("href") or "" for tag, attrs in elements if tag in ("img", "a")]
        assert not [s for s in sources if "secret" in s], f"{name}: {[s for s in sources if 'secret' in s]}"
        # the bytes of the local file the markup names are embedded nowhere, raw or base64
        assert SECRET.decode() not in page and base64.b64encode(SECRET).decode()[:24] not in page, name
        assert all(attrs.get("src", "").startswith("data:image/png;base64,") for tag, attrs in elements
                   if tag == "img"), name


def test_the_markup_is_shown_as_the_text_it_is(hostile: Path) -> None:
    text = _text(_pages(hostile)["paper.html"])
    for name in HOSTILE_CATEGORIES:
        assert " ".join(name.split()) in text, name
    assert HOSTILE_DISPLAY in text and HOSTILE_TEXT.strip() not in text  # statements are not shown in the paper
    provenance = _text(_pages(hostile)["provenance.html"])
    assert HOSTILE_CATEGORIES[1] in provenance


def test_a_browser_runs_nothing_and_fetches_nothing_from_the_data(hostile: Path) -> None:
    if find_chromium() is None:
        pytest.skip("no Chromium on this machine (make test installs Debian's chromium as root)")
    for name in ("paper.html", "diff.html", "provenance.html", "figures.html"):
        report = inspect_page(hostile / "paper" / "_output" / name)
        assert not [m for m in report.console if "PWNED" in m["text"] or "secret" in m["text"]], (name, report.console)
        assert all(i["src"].startswith("data:") for i in report.images), (name, report.images)


def test_figures_hold_the_names_as_text_not_as_markup_or_mathtext(hostile: Path) -> None:
    svgs = sorted((hostile / "figures").rglob("*.svg"))
    assert svgs
    for svg in svgs:
        tree = ET.parse(svg)
        for element in tree.iter():
            tag = element.tag.rsplit("}", 1)[-1]
            assert tag not in ("script", "foreignObject"), svg
            assert not [a for a in element.attrib if a.startswith("on")], svg


def test_the_paper_has_the_study_s_counts_and_the_monte_carlo_test(hostile: Path) -> None:
    text = _text(_pages(hostile)["paper.html"])
    assert "The dataset is this study's own" in text
    assert "36 statement pairs in 12 categories" in text
    assert "both models" not in text and "the two models" not in text
    assert "across the three models" in text
    assert "Monte Carlo" in text and "(b + 1)/(m + 1)" in text
    assert "original study's: " not in text
    pdf = hostile / "paper" / "_output" / "paper.pdf"
    shown = run(["pdftotext", str(pdf), "-"], hostile).stdout if pdf.is_file() else ""
    assert "#set page(width: 1cm)" in " ".join(shown.split())


@pytest.fixture(scope="module")
def one_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("one-model")
    project = make_study(root / "study", {"solo": {"display": "Solo-7M", "layers": 2}},
                         study_dataset(["first kind", "second kind", "third kind", "fourth kind"], pairs=8))
    repro(project)
    return project


def test_one_model_and_four_categories_run_to_the_paper_with_their_own_words(one_model: Path) -> None:
    text = _text(_pages(one_model)["paper.html"])
    assert "32 statement pairs in 4 categories (first kind, second kind, third kind, fourth kind)" in text
    for phrase in ("both models", "across the models", "corrected across models", "the models' ", "one models",
                   "1 models", "split across", "two models"):
        assert phrase not in text, phrase
    assert "The panel of params.yaml has one model, Solo-7M" in text
    assert "exact" in text  # four categories: every one of the 24 orders
