"""The manuscript end to end: synthetic results -> figures stage -> paper rendered by the fallback;
the HTML checked in headless Chromium, the PDF through pdftoppm, numbers traced to the results."""

from __future__ import annotations

import base64
import csv
import hashlib
import html as html_module
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from browser import find_chromium, inspect_page, pdf_overprinted_words, pdf_pages
from uaprobe.publishing.prose.panel import abstract
from uaprobe.publishing.figures import embed, figure_registry
from uaprobe.publishing.provenance import reproducibility as ap
from uaprobe.schema import read_results
from uaprobe.repro import paperdiff
from uaprobe.publishing.render import render_manuscript
from uaprobe.publishing.provenance.readback import parse_values, shown_text
from uaprobe.publishing.provenance.outputs import load_outputs
from uaprobe.publishing.prose.primitives.formats import FORMATS, fmt, fmt_r
from uaprobe.publishing.provenance.values import lookup

REPO = Path(__file__).resolve().parents[1]
PAPER_FILES = ("_quarto.yml", "paper.qmd", "references.bib", "chicago-author-date.csl", "paper.css", "tables.typ")


SOURCE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def make_project(tree: Path, root: Path) -> Path:
    """A copy of the synthetic project ``tree`` at ``root`` with the real manuscript, ``dvc.yaml`` and the
    paper stage's other sources (code, dataset files), and drawn figures: every input of the paper."""
    shutil.copytree(tree, root)
    (root / "paper").mkdir()
    for name in PAPER_FILES:
        shutil.copyfile(REPO / "paper" / name, root / "paper" / name)
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copyfile(REPO / name, root / name)
    for dep in ap.stage_dependencies(REPO):
        source, target = REPO / dep, root / dep
        if target.exists() or dep.startswith(("figures", "results/")):  # the tree's own, or drawn below
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=SOURCE_IGNORE)
        else:
            shutil.copyfile(source, target)
    sys.path.insert(0, str(REPO / "stages"))
    from figures import run  # stages/figures.py

    run(params_path=root / "params.yaml", root=root, out=root / "figures")
    return root


def render_with_supplement(qmd: Path, **kwargs: object) -> Path:
    """Render as the paper stage does: the paper, then its supplementary files beside it."""
    from paper import write_supplement  # stages/paper.py

    result = render_manuscript(qmd, engine="fallback", **kwargs)  # type: ignore[arg-type]
    write_supplement(qmd.parent.parent, result.html, result.html.parent, load_outputs(qmd.parent.parent))
    return result.html


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, synthetic_tree: Path) -> Path:
    root = make_project(synthetic_tree, tmp_path_factory.mktemp("project") / "tree")
    render_with_supplement(root / "paper" / "paper.qmd")
    return root


def rendered(root: Path) -> tuple[Path, Path]:
    return root / "paper" / "_output" / "paper.html", root / "paper" / "_output" / "paper.pdf"


def supplementary(root: Path) -> tuple[str, list[dict[str, str]]]:
    """``provenance.html`` and the rows of ``provenance.csv``."""
    out = root / "paper" / "_output"
    with (out / "provenance.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    return (out / "provenance.html").read_text(encoding="utf-8"), rows


def expected_tables() -> list[str]:
    return re.findall(r"^#\| label: (tbl-[\w-]+)$", (REPO / "paper" / "paper.qmd").read_text(), flags=re.M)


def expected_figures(root: Path) -> list[str]:
    """The labels of the figures the manuscript shows (the keys it passes to ``figure_markdown``)."""
    keys = set(re.findall(r'figure_markdown\(out, "(\w+)"', (REPO / "paper" / "paper.qmd").read_text()))
    manifest = json.loads((root / "figures" / "manifest.json").read_text())
    return [embed.figure_label(e["key"], e["model"]) for e in manifest["figures"] if e["key"] in keys]


def test_the_paper_stage_renders_html_and_pdf(project: Path) -> None:
    html, pdf = rendered(project)
    assert html.is_file() and pdf.read_bytes().startswith(b"%PDF")
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text.lower() or "data:" in text  # self-contained
    assert 'src="../' not in text and 'src="figures' not in text, "an image is linked, not embedded"


def test_html_in_headless_chromium(project: Path) -> None:
    if find_chromium() is None:
        pytest.skip("chromium is not installed (Debian package `chromium`); the browser check needs it")
    report = inspect_page(rendered(project)[0])
    assert report.images, "no images on the page"
    broken = [i for i in report.images if not (i["complete"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, f"images that did not load: {broken}"
    assert sorted(report.figures) == sorted(expected_figures(project))
    assert len(report.images) == len(report.figures)
    assert sorted(report.tables) == sorted(expected_tables())
    assert "??" not in report.text
    assert not re.search(r"@(fig|tbl|sec)-", report.text), "a raw cross-reference reached the page"
    unresolved = [link for link in report.links if not link["resolves"]]
    assert not unresolved, f"links to missing targets: {unresolved}"
    refs = [link["text"] for link in report.links]
    assert any(t.startswith("Figure") for t in refs) and any(t.startswith("Table") for t in refs)
    assert any(t.startswith("Section") for t in refs)
    assert not report.errors, f"console errors: {report.errors}"
    assert not report.clipped_tables, f"tables wider than the text column: {report.clipped_tables}"


def test_pdf_pages_are_rendered_and_not_blank(project: Path, tmp_path: Path) -> None:
    if shutil.which("pdftoppm") is None or shutil.which("pdfinfo") is None:
        pytest.skip("poppler-utils is not installed (Debian package `poppler-utils`): no pdftoppm/pdfinfo")
    from PIL import Image

    pdf = rendered(project)[1]
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    n_pages = int(re.search(r"^Pages:\s+(\d+)", info, flags=re.M).group(1))
    pages = pdf_pages(pdf, tmp_path)
    assert len(pages) == n_pages >= 8
    for page in pages:
        gray = Image.open(page).convert("L")
        dark = sum(gray.histogram()[:200]) / (gray.width * gray.height)
        assert dark > 0.002, f"{page.name} is blank"


def test_a_changed_metric_changes_the_rendered_number(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "changed"
    shutil.copytree(project, root, ignore=shutil.ignore_patterns("_output"))
    path = root / "results" / "models" / "tiny-a" / "validation.json"
    doc = json.loads(path.read_text())
    doc["variants"]["mean"]["global"]["mean_ua"] = 0.98765
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    path = root / "results" / "models" / "tiny-b" / "layerwise.json"
    doc = json.loads(path.read_text())
    doc["poolings"]["mean"]["pearson_r"][-1] = -0.4321
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")

    before = rendered(project)[0].read_text(encoding="utf-8")
    result = render_manuscript(root / "paper" / "paper.qmd", engine="fallback")
    after = result.html.read_text(encoding="utf-8")
    for text in (fmt(0.98765, 4, signed=True), fmt_r(-0.4321)):
        assert text not in before
        assert text in after, text


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_rerendering_the_paper_gives_the_same_bytes(project: Path, tmp_path: Path) -> None:
    """Again from the same inputs, here once committed to git with a dirty working tree and an untracked
    file (the first render had no git at all): the same bytes."""
    html, pdf = rendered(project)
    root = tmp_path / "committed"
    shutil.copytree(project, root, ignore=shutil.ignore_patterns("_output"))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "the inputs")
    (root / "NOTES.md").write_text("not an input\n", encoding="utf-8")
    (root / "dvc.lock").write_text((root / "dvc.lock").read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert _git(root, "status", "--porcelain")
    again = render_manuscript(root / "paper" / "paper.qmd", engine="fallback", output_dir=tmp_path / "out")
    assert again.html.read_bytes() == html.read_bytes()
    assert again.pdf.read_bytes() == pdf.read_bytes()


ABSTRACT_WORDS, ABSTRACT_NUMBERS = abstract.WORDS, abstract.NUMBERS
"""The abstract a reader finishes in a minute: at most 150 words and 6 numbers."""


def test_the_abstract_is_short_and_sparing_with_numbers(project: Path) -> None:
    """Rendered from the outputs, the abstract stays within its word and number budget: every phrase
    function it calls writes its longest wording for some data, so the synthetic tree's is a real case."""
    text = rendered(project)[0].read_text(encoding="utf-8")
    start = text.index('id="abstract"')
    body = text[text.index(">", start) + 1:text.index("<h1", start)]
    plain = re.sub(r"<[^>]+>", " ", body.split("</h1>", 1)[1])
    words = [w for w in plain.split() if re.search(r"\w", w)]
    numbers = re.findall(r"(?<![\w.])[−-]?\d+(?:\.\d+)?", plain)
    assert 50 < len(words) <= ABSTRACT_WORDS, (len(words), plain)
    assert 0 < len(numbers) <= ABSTRACT_NUMBERS, numbers


REPEAT_WORDS = 15
"""No sentence of this many words or more may appear twice in the paper."""


def sentences(text: str) -> list[str]:
    """The sentences of a plain text: split after ., ? or ! followed by a space and a capital or a digit."""
    flat = re.sub(r"\s+", " ", text)
    return [s.strip() for s in re.split(r"(?<=[.?!])\s+(?=[A-Z0-9(])", flat) if s.strip()]


def test_sentences_splits_where_a_reader_would() -> None:
    assert sentences("One two. Three (four) five?\nSix e.g. seven. 8 nine") == [
        "One two.", "Three (four) five?", "Six e.g. seven.", "8 nine"]


def test_no_long_sentence_appears_twice(project: Path) -> None:
    """The rendered text (HTML body, captions and tables included) holds no sentence of 15 or more words
    twice: a finding is stated once and referred to after."""
    page = rendered(project)[0].read_text(encoding="utf-8")
    body = page.split('id="sec-reproducibility"')[0]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    text = html_module.unescape(re.sub(r"<[^>]+>", " ", body))
    seen: dict[str, int] = {}
    for sentence in sentences(text):
        if len(sentence.split()) >= REPEAT_WORDS:
            seen[sentence] = seen.get(sentence, 0) + 1
    assert not [s for s, n in seen.items() if n > 1]


PHRASE_WORDS, PHRASE_LIMIT = 5, 2
"""No phrase of this many words may be printed more than this many times (a paragraph or caption at a time; a
table's cells are data, which rows may repeat)."""


def paragraphs(page: str) -> list[str]:
    """The plain text of every paragraph and caption of the paper's body (the reproducibility appendix
    and everything after it left out)."""
    body = page.split('id="sec-reproducibility"')[0]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    blocks = re.findall(r"<(p|figcaption|caption|li)\b[^>]*>(.*?)</\1>", body, flags=re.S)
    return [re.sub(r"\s+", " ", html_module.unescape(re.sub(r"<[^>]+>", " ", inner))).strip() for _, inner in blocks]


def repeated_phrases(blocks: list[str], *, n: int = PHRASE_WORDS, limit: int = PHRASE_LIMIT) -> dict[str, int]:
    """Every phrase of ``n`` words (punctuation ending a word ends the phrase) printed more than ``limit`` times
    over ``blocks``, with its count; a phrase counts once per block it is in."""
    seen: dict[str, int] = {}
    for block in blocks:
        found = set()
        for run in re.split(r"[.;:,()?!\u2013\u2014]\s", block):
            words = run.lower().split()
            found.update(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))
        for phrase in found:
            seen[phrase] = seen.get(phrase, 0) + 1
    return {k: v for k, v in seen.items() if v > limit}


def test_repeated_phrases_counts_each_block_once_and_stops_at_punctuation() -> None:
    blocks = ["the pairs within each category, and so on.", "The pairs within each category here.",
              "the pairs within each category again; the pairs within each category twice in one block"]
    assert repeated_phrases(blocks) == {"the pairs within each category": 3}
    assert repeated_phrases(["a b c d, e f"] * 5) == {}


def test_no_five_word_phrase_is_printed_more_than_twice(project: Path) -> None:
    """A term is defined once and a finding stated once: no phrase of five or more words is printed in more than two
    paragraphs or captions."""
    page = rendered(project)[0].read_text(encoding="utf-8")
    repeats = repeated_phrases(paragraphs(page))
    assert not repeats, sorted(repeats.items(), key=lambda kv: -kv[1])[:20]


def test_one_apostrophe_character(project: Path) -> None:
    """The modifier-letter apostrophe (U+02BC) is never printed beside the typographic one."""
    page = rendered(project)[0].read_text(encoding="utf-8")
    assert "\u02bc" not in " ".join(paragraphs(page))


def test_every_figure_the_pipeline_draws_is_shown(project: Path) -> None:
    """Each figure of the manifest is in the paper or in the supplement ``figures.html`` the paper stage
    writes, with its caption, its data and its image."""
    manifest = read_results(project, "figures/manifest.json")
    page = (project / "paper" / "_output" / "figures.html").read_text(encoding="utf-8")
    figures = re.findall(r"<figure id=\"S\d+\">(.*?)</figure>", page, flags=re.S)
    assert len(figures) == len(manifest.figures) > 0
    for entry, figure in zip(manifest.figures, figures):
        png = (project / entry.png).read_bytes()
        assert base64.b64encode(png).decode("ascii") in figure, entry.png
        assert hashlib.md5(png).hexdigest() in figure
        assert figure_registry.BY_KEY[entry.key].caption.split("{display}")[-1][:40] in html_module.unescape(figure)
        data = figure_registry.data_line(entry).removeprefix("Data: ").replace("`", "")
        assert data and data in html_module.unescape(figure), entry


def test_the_paper_states_its_provenance(project: Path) -> None:
    """The paper names its inputs by their digest and points to the supplementary files, which list every
    input with its hash, the dvc.lock hashes of the outputs read, the software and the CPU code paths."""
    text = rendered(project)[0].read_text(encoding="utf-8")
    # the arrays a figure plots are named in the supplement (figures.html, provenance.html), not in the paper's
    # captions, and no caption of the paper names a results file
    assert expected_figures(project) and not re.findall(r"Data:\s+<code>(results|data)/", text)
    captions = " ".join(re.findall(r"<(?:figcaption|caption)\b[^>]*>(.*?)</(?:figcaption|caption)>", text, flags=re.S))
    assert "results/models/" not in captions and ".json" not in captions
    assert "10.5281/zenodo.18110161" in text and "10.5281/zenodo.18142454" in text
    inputs = ap.input_hashes(project)
    assert {h.path for h in inputs} == set(ap.stage_dependencies(REPO)) and "missing" not in {h.md5 for h in inputs}
    assert f"<code>{ap.inputs_digest(inputs)}</code>" in text
    section = text[text.index('id="sec-reproducibility"'):]
    assert "<code>provenance.html</code>" in section and "<code>provenance.csv</code>" in section
    assert "tracked sources" not in section and not re.search(r"commit <code>", section)
    page, _ = supplementary(project)
    for h in inputs:
        assert f"<td>{h.path}</td><td>{h.md5}</td>" in page, h
    assert ap.inputs_digest(inputs) in page
    assert "<td>matches</td>" in page, "the dvc.lock table should confirm the hashes of the files read"
    assert "CPU code paths of the numbers" in page and "logs/&lt;stage&gt;.machine.json" in page
    assert "<h2>Software</h2>" in page and "<h2>Parameters</h2>" in page


def test_the_paper_stage_command_line(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "cli"
    shutil.copytree(project, root, ignore=shutil.ignore_patterns("_output"))
    proc = subprocess.run([sys.executable, str(REPO / "stages" / "paper.py"), "--engine", "fallback"],
                          cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "rendered paper/paper.qmd with fallback" in proc.stderr
    assert (root / "paper" / "_output" / "paper.html").is_file()
    assert (root / "paper" / "_output" / "paper.pdf").is_file()
    assert (root / "paper" / "_output" / "provenance.html").is_file()
    assert (root / "paper" / "_output" / "provenance.csv").is_file()


def test_l_star_is_shown_as_text_not_read_as_emphasis(project: Path) -> None:
    html = rendered(project)[0].read_text(encoding="utf-8")
    for text in ("L*, the layer of the largest share", "L*, all", "before and after L*"):
        assert text in html, text
    body = html.split('id="refs"')[0]
    stray = [e for e in re.findall(r"<em>(.*?)</em>", body, flags=re.S) if re.search(r"^[\s/,)+=]|[\s/,(+=]$", e)]
    assert not stray, f"emphasis that starts or ends in punctuation (a stray asterisk): {stray}"
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(rendered(project)[1]), "-"], capture_output=True, text=True,
                              check=True).stdout
        assert "L*, the layer" in text


def test_the_author_line_is_the_project_from_quarto_yml(project: Path) -> None:
    import yaml

    config = yaml.safe_load((REPO / "paper" / "_quarto.yml").read_text(encoding="utf-8"))
    author = config["author"]
    assert "uaprobe" in author and "authors" not in author
    front = (REPO / "paper" / "paper.qmd").read_text(encoding="utf-8").split("---")[1]
    assert "author" not in front, "one author line: paper/_quarto.yml"
    html = rendered(project)[0].read_text(encoding="utf-8")
    shown = re.search(r'<p class="author">(.*?)</p>', html, flags=re.S)
    assert shown and re.sub(r"<[^>]+>|`", "", shown.group(1)).split() == author.replace("`", "").split()


def test_the_html_column_is_wide_and_keeps_pandoc_s_styles(project: Path) -> None:
    import yaml

    config = yaml.safe_load((REPO / "paper" / "_quarto.yml").read_text(encoding="utf-8"))
    width = config["format"]["html"]["grid"]["body-width"]
    html = rendered(project)[0].read_text(encoding="utf-8")
    assert re.search(rf"body\s*\{{[^}}]*max-width: {width};[^}}]*padding-left", html), "pandoc's body rule"
    assert "max-width: 36em" not in html
    assert "overflow-x: auto" in html  # paper.css: a wide table scrolls inside the column


def test_no_text_of_the_pdf_is_set_over_other_text(project: Path) -> None:
    if shutil.which("pdftotext") is None:
        pytest.skip("poppler-utils is not installed (Debian package `poppler-utils`): no pdftotext")
    overprinted = pdf_overprinted_words(rendered(project)[1])
    assert not overprinted, f"(page, word, word) set over each other: {overprinted[:10]}"


def _inputs_lines(hashes: object) -> str:
    """The supplement's rows of the paper's inputs, one line each: ``| path | md5 | files | bytes |``."""
    from uaprobe.publishing.provenance.supplement import inputs_rows

    return "\n".join(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} |" for r in inputs_rows(hashes))  # type: ignore[arg-type]


def _inputs_text(root: Path) -> str:
    """What the reproducibility appendix prints about the paper's inputs, and the supplement's rows of them."""
    inputs = ap.input_hashes(root)
    return ap.inputs_paragraph(inputs) + "\n\n" + _inputs_lines(inputs)


def _small_project(root: Path) -> Path:
    """A project whose paper stage depends on a file, a directory (with a cache .dvcignore leaves out) and
    an output of another stage; its command writes the appendix's inputs text, as the render does."""
    (root / "src" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("X = 1\n", encoding="utf-8")
    (root / "src" / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"machine-local")
    (root / "params.yaml").write_text("analysis:\n  preference: mean\n", encoding="utf-8")
    (root / ".dvcignore").write_text("__pycache__/\n", encoding="utf-8")
    write = ("from pathlib import Path; from uaprobe.publishing.provenance import reproducibility as ap; "
             "from uaprobe.publishing.provenance.supplement import inputs_rows; "
             "h = ap.input_hashes(Path('.')); "
             "Path('paper.md').write_text(ap.inputs_paragraph(h) + chr(10) + chr(10).join("
             "'| ' + ' | '.join(r) + ' |' for r in inputs_rows(h)))")
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "analyze": {"cmd": f"{sys.executable} -c \"open('results.json', 'w').write('{{}}')\"",
                    "deps": ["params.yaml"], "outs": ["results.json"]},
        "paper": {"cmd": f"{sys.executable} -c \"{write}\"",
                  "deps": ["src", "params.yaml", "results.json"], "outs": ["paper.md"]},
    }}, sort_keys=False), encoding="utf-8")
    return root


def test_the_appendix_names_the_inputs_by_the_hashes_dvc_lock_records(tmp_path: Path) -> None:
    """``dvc repro`` runs the stage, whose command computes the hashes (its own lock entry does not exist
    yet), then writes dvc.lock: the paper's hashes are dvc.lock's, path for path, in dvc.lock's order."""
    root = _small_project(tmp_path / "p")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(REPO / "src")}
    dvc = str(Path(sys.executable).parent / "dvc")
    for args in (["init", "--no-scm", "-q"], ["repro", "-q"]):
        proc = subprocess.run([dvc, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    lock = yaml.safe_load((root / "dvc.lock").read_text(encoding="utf-8"))["stages"]["paper"]["deps"]
    inputs = ap.input_hashes(root)
    assert [(h.path, h.md5, h.size) for h in inputs] == [(d["path"], d["md5"], d["size"]) for d in lock]
    assert [h.nfiles for h in inputs] == [d.get("nfiles") for d in lock] == [None, None, 1]  # the cache left out
    assert inputs[2].md5.endswith(".dir")
    written = (root / "paper.md").read_text(encoding="utf-8")
    assert written == _inputs_text(root).replace("\n\n", "\n", 1)
    assert f"`{ap.inputs_digest(inputs)}`" in written
    proc = subprocess.run([dvc, "status", "paper"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert "up to date" in proc.stdout, proc.stdout + proc.stderr


def test_the_inputs_text_ignores_git_state_and_changes_with_any_input(tmp_path: Path) -> None:
    """The same inputs give the same text outside git, committed, under later commits and with a dirty
    tree; a change to a dependency (a file, a file in a directory) changes it, in that dependency's row."""
    root = _small_project(tmp_path / "p")
    (root / "results.json").write_text("{}\n", encoding="utf-8")
    plain = _inputs_text(root)
    assert "| src |" in plain and "| params.yaml |" in plain and "| results.json |" in plain
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "inputs")
    assert _inputs_text(root) == plain
    (root / "dvc.lock").write_text("schema: '2.0'\n", encoding="utf-8")
    _git(root, "add", "dvc.lock")
    _git(root, "commit", "-qm", "outputs")
    head = _git(root, "rev-parse", "HEAD")
    (root / "README.md").write_text("not an input\n", encoding="utf-8")  # untracked
    (root / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n", encoding="utf-8")  # modified, not an input
    (root / "src" / "pkg" / "__pycache__" / "other.pyc").write_bytes(b"ignored by .dvcignore")
    assert _git(root, "status", "--porcelain")
    assert _inputs_text(root) == plain and head[:7] not in plain

    def rows(text: str) -> set[str]:
        return {line for line in text.splitlines() if line.startswith("| ")}

    (root / "params.yaml").write_text("analysis:\n  preference: sum\n", encoding="utf-8")
    changed = _inputs_text(root)
    assert changed != plain and {r.split(" | ")[0] for r in rows(changed) ^ rows(plain)} == {"| params.yaml"}
    (root / "src" / "pkg" / "mod.py").write_text("X = 2\n", encoding="utf-8")
    again = _inputs_text(root)
    assert {r.split(" | ")[0] for r in rows(again) ^ rows(changed)} == {"| src"}
    assert len({ap.inputs_digest(ap.input_hashes(root)), *re.findall(r"is `([0-9a-f]{32})`", plain + changed)}) == 3


def test_without_a_paper_stage_the_inputs_are_unknown(tmp_path: Path) -> None:
    assert ap.input_hashes(tmp_path) == ()
    assert "declares no dependencies" in ap.inputs_paragraph(())
    (tmp_path / "dvc.yaml").write_text("stages:\n  paper:\n    deps: [absent.txt]\n", encoding="utf-8")
    (inputs,) = ap.input_hashes(tmp_path)
    assert inputs == ap.InputHash("absent.txt", "missing", None, None)
    assert "Missing at the time of rendering: `absent.txt`" in ap.inputs_paragraph((inputs,))


def _overlaps(path: str, out: str) -> bool:
    """Whether ``path`` is, holds or lies in the output ``out``."""
    path, out = path.rstrip("/"), out.rstrip("/")
    return path == out or path.startswith(out + "/") or out.startswith(path + "/")


def stage_sources(root: Path) -> dict[str, tuple[str, ...]]:
    """Each ``dvc.yaml`` stage's dependencies that no stage writes (a templated output such as
    ``data/embeddings/${item}.h5`` counts up to its first ``${``)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    bodies = {str(name): stage.get("do", stage) for name, stage in stages.items()}

    def paths(body: dict, key: str) -> list[str]:  # a list entry is a path or {path: options}
        return [str(p) for e in body.get(key, []) for p in (e if isinstance(e, dict) else [e])]

    written = [p.split("${")[0] for body in bodies.values() for key in ("outs", "metrics", "plots")
               for p in paths(body, key)]
    return {name: tuple(d for d in paths(body, "deps") if not any(_overlaps(d, w) for w in written))
            for name, body in bodies.items()}


def test_every_source_of_every_stage_is_a_dependency_of_the_paper() -> None:
    """The paper names its inputs by hash; with every source of every stage among them, those hashes
    identify the code, parameters and data of the whole pipeline, not only of the render."""
    sources = stage_sources(REPO)
    paper = sources["paper"]
    assert set(paper) <= set(ap.stage_dependencies(REPO))
    for name, deps in sources.items():
        for dep in deps:
            assert (REPO / dep).exists(), f"dvc.yaml stage {name}: dependency {dep} does not exist"
            assert any(dep == p or dep.startswith(p.rstrip("/") + "/") for p in paper), \
                f"dvc.yaml stage {name} depends on {dep}, which the paper stage does not"
    for source in ("src", "stages", "params.yaml", "requirements.lock", "paper/paper.qmd"):
        assert source in paper
    assert "stages/extract.py" in sources["extract"]
    for written in ("figures", "results/models", "results/panel.json"):  # outputs of other stages, read by it
        assert written not in paper and written in ap.stage_dependencies(REPO)


def test_a_directory_dependency_hashes_only_tracked_files() -> None:
    """DVC hashes every file of a directory dependency that ``.dvcignore`` does not name; an untracked
    file there (the editable install's ``src/uaprobe.egg-info``, Python's caches) would give this
    checkout's dvc.lock other hashes than a fresh clone's."""
    from dvc.repo import Repo

    proc = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout: nothing tells tracked from untracked files")
    tracked = set(proc.stdout.splitlines())
    deps = {d for stage in stage_sources(REPO).values() for d in stage}
    repo = Repo(str(REPO))
    try:
        ignore, fs = repo.dvcignore, repo.fs
        for dep in sorted(d for d in deps if (REPO / d).is_dir()):
            for path in sorted((REPO / dep).rglob("*")):
                if path.is_file() and not ignore.is_ignored(fs, str(path)):
                    rel = path.relative_to(REPO).as_posix()
                    assert rel in tracked, f"{rel}: untracked, yet part of dependency {dep}'s hash (add it to .dvcignore)"
    finally:
        repo.close()


def _doc(root: Path, file: str) -> object:
    import yaml

    text = (root / file).read_text(encoding="utf-8")
    return yaml.safe_load(text) if file.endswith(".yaml") else json.loads(text)


def test_every_number_names_a_file_and_key_that_hold_it(project: Path) -> None:
    """Each value of the HTML (inline and in tables) names a file and key of the project that hold
    exactly the number shown, and links to its row of the supplementary ``provenance.html``; that row,
    and the same row of ``provenance.csv``, say the same, with the file's md5."""
    page = rendered(project)[0].read_text(encoding="utf-8")
    values = parse_values(page)
    assert len(values) > 150 and sum(v.in_table for v in values) > 100 and sum(not v.in_table for v in values) > 30
    docs: dict[str, object] = {}
    for v in values:
        docs.setdefault(v.file, _doc(project, v.file))
        assert v.fmt in FORMATS, v
        assert v.text == shown_text(lookup(docs[v.file], v.key, file=v.file), v.fmt), v
    assert all(v.number is not None for v in values), "every value links to a row of the supplement"
    assert not re.search(r'href="#prov-', page), "no value links into the paper itself"
    supplement_page, rows = supplementary(project)
    by_number = {r["number"]: r for r in rows if r["format"] != "png"}
    assert sorted(int(n) for n in by_number) == list(range(1, len(by_number) + 1))
    for v in values:
        row = by_number[str(v.number)]
        assert (row["value"], row["file"], row["key"], row["format"]) == (v.text, v.file, v.key, v.fmt), v
        assert row["file_md5"] == hashlib.md5((project / v.file).read_bytes()).hexdigest()
    anchors = set(re.findall(r'<tr id="(prov-\d+)">', supplement_page))
    assert anchors == {f"prov-{n}" for n in by_number}
    figures = [r["number"] for r in rows if r["format"] == "png"]
    assert figures == expected_figures(project)
    assert "Where every number comes from" not in rendered(project)[0].read_text(encoding="utf-8").split(
        'id="sec-reproducibility"')[0]


def test_every_table_cell_with_a_number_carries_a_value(project: Path) -> None:
    page = rendered(project)[0].read_text(encoding="utf-8")
    exempt = ("tbl-panel",)
    bare, checked = [], 0
    for table in re.finditer(r'<table id="(tbl-[\w-]+)".*?</table>', page, flags=re.S):
        if table.group(1).startswith(exempt):
            continue
        checked += 1
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(0), flags=re.S):
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)[1:]:  # the first names the row
                text = re.sub(r"position 0", "", re.sub(r"<[^>]+>", "", cell))  # a name, not a number
                if re.search(r"\d", text) and 'class="uav"' not in cell:
                    bare.append((table.group(1), cell))
    assert checked == len(expected_tables()) - len(exempt), "every table of values is checked"
    assert not bare, bare[:5]


def _reader(root: Path):
    return lambda path: (root / path).read_bytes() if (root / path).is_file() else None


def test_paper_diff_marks_exactly_the_planted_change(project: Path, tmp_path: Path) -> None:
    page = rendered(project)[0].read_text(encoding="utf-8")
    same = paperdiff.compare(page, _reader(project), _reader(project), old_page=page)
    assert same == [] and paperdiff.summary_lines(same, [], ("a", "b"))[0].startswith("no change")
    old = tmp_path / "old"
    shutil.copytree(project, old, ignore=shutil.ignore_patterns("_output"))
    path = old / "results" / "models" / "tiny-a" / "robustness.json"
    doc = json.loads(path.read_text())
    new_value = doc["loco"]["final_r_with"]  # shown in the text and in @tbl-confound
    doc["loco"]["final_r_with"] = new_value / 2
    path.write_text(json.dumps(doc))
    changes = paperdiff.compare(page, _reader(old), _reader(project), old_page=page)
    assert [(c.file, c.key, c.status) for c in changes] == [
        ("results/models/tiny-a/robustness.json", "loco/final_r_with", "changed")]
    assert changes[0].relative == pytest.approx(1.0)
    marked = paperdiff.diff_page(page, changes, [], ("old", "new"))
    n_shown = sum(1 for v in parse_values(page) if (v.file, v.key) == (changes[0].file, changes[0].key))
    assert marked.count('<mark class="uav-diff"') == n_shown >= 1
    assert "This table changed" in marked and f"{fmt_r(new_value / 2)} → {fmt_r(new_value)}" in marked


def _expand(doc: object, key: str) -> list[object]:
    """The values at ``key``, ``*`` standing for every key of a mapping or index of a list."""
    nodes = [doc]
    for part in key.split("/"):
        nxt: list[object] = []
        for node in nodes:
            if part == "*":
                nxt += list(node.values()) if isinstance(node, dict) else list(node)  # type: ignore[arg-type]
            elif isinstance(node, dict) and part in node:
                nxt.append(node[part])
        nodes = nxt
    return nodes


def test_every_array_a_figure_caption_names_is_in_its_results_file(project: Path) -> None:
    manifest = read_results(project, "figures/manifest.json")
    assert {e.key for e in manifest.figures} == set(figure_registry.BY_KEY)
    for e in manifest.figures:
        caption = figure_registry.data_line(e)
        for part in caption.removeprefix("Data: ").rstrip(".").split("; "):
            file, keys = part.split(": ", 1)
            doc = _doc(project, file.strip("`"))
            for key in keys.split(", "):
                assert _expand(doc, key.strip("`")), f"{e.key}: {file} has no {key}"
