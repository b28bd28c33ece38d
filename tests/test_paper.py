"""The manuscript end to end: synthetic results -> figures stage -> paper rendered by the fallback;
the HTML checked in headless Chromium, the PDF through pdftoppm, numbers traced to the results."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from browser import find_chromium, inspect_page, pdf_overprinted_words, pdf_pages
from uaprobe.publishing import appendix as ap
from uaprobe.publishing import paperdiff
from uaprobe.publishing.render import render_manuscript
from uaprobe.publishing.values import FORMATS, fmt, fmt_r, lookup, parse_values, shown_text

REPO = Path(__file__).resolve().parents[1]
PAPER_FILES = ("_quarto.yml", "paper.qmd", "references.bib", "paper.css", "tables.typ")


def make_project(tree: Path, root: Path) -> Path:
    """A copy of the synthetic project ``tree`` at ``root`` with the real manuscript sources and drawn figures."""
    shutil.copytree(tree, root)
    (root / "paper").mkdir()
    for name in PAPER_FILES:
        shutil.copyfile(REPO / "paper" / name, root / "paper" / name)
    sys.path.insert(0, str(REPO / "stages"))
    from figures import run  # stages/figures.py

    run(params_path=root / "params.yaml", root=root, out=root / "figures")
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, synthetic_tree: Path) -> Path:
    root = make_project(synthetic_tree, tmp_path_factory.mktemp("project") / "tree")
    render_manuscript(root / "paper" / "paper.qmd", engine="fallback")
    return root


def rendered(root: Path) -> tuple[Path, Path]:
    return root / "paper" / "_output" / "paper.html", root / "paper" / "_output" / "paper.pdf"


def expected_tables() -> list[str]:
    return re.findall(r"^#\| label: (tbl-[\w-]+)$", (REPO / "paper" / "paper.qmd").read_text(), flags=re.M)


def expected_figures(root: Path) -> list[str]:
    manifest = json.loads((root / "figures" / "manifest.json").read_text())
    return [ap.figure_label(e["key"], e["model"]) for e in manifest["figures"]]


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


def test_rerendering_the_paper_gives_the_same_bytes(project: Path, tmp_path: Path) -> None:
    html, pdf = rendered(project)
    again = render_manuscript(project / "paper" / "paper.qmd", engine="fallback", output_dir=tmp_path)
    assert again.html.read_bytes() == html.read_bytes()
    assert again.pdf.read_bytes() == pdf.read_bytes()


def test_the_paper_states_its_provenance(project: Path) -> None:
    text = rendered(project)[0].read_text(encoding="utf-8")
    assert len(re.findall(r"Data:\s+<code>(results|data)/", text)) == len(expected_figures(project))
    assert "10.5281/zenodo.18110161" in text and "10.5281/zenodo.18142454" in text
    assert "matches" in text, "the dvc.lock table should confirm the hashes of the files read"
    assert "CPU code paths of the numbers" in text and "logs/&lt;stage&gt;.machine.json" in text


def test_the_paper_stage_command_line(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "cli"
    shutil.copytree(project, root, ignore=shutil.ignore_patterns("_output"))
    proc = subprocess.run([sys.executable, str(REPO / "stages" / "paper.py"), "--engine", "fallback"],
                          cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "rendered paper/paper.qmd with fallback" in proc.stderr
    assert (root / "paper" / "_output" / "paper.html").is_file()
    assert (root / "paper" / "_output" / "paper.pdf").is_file()


def test_l_star_is_shown_as_text_not_read_as_emphasis(project: Path) -> None:
    html = rendered(project)[0].read_text(encoding="utf-8")
    for text in ("(0, L*/2, L*, (L* + L)/2, L;", "L* is", "L*, all", "dashed: L*."):
        assert text in html, text
    body = html.split('id="refs"')[0]
    stray = [e for e in re.findall(r"<em>(.*?)</em>", body, flags=re.S) if re.search(r"^[\s/,)+=]|[\s/,(+=]$", e)]
    assert not stray, f"emphasis that starts or ends in punctuation (a stray asterisk): {stray}"
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(rendered(project)[1]), "-"], capture_output=True, text=True,
                              check=True).stdout
        assert "L*/2" in text and "L* is" in text


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


def test_the_paper_names_the_last_commit_of_its_sources_not_head(tmp_path: Path) -> None:
    """Committing the outputs (dvc.lock, metrics) after the render must not change what the paper says;
    the sources are the paper stage's dependencies in dvc.yaml, and a dependency some stage writes is
    not one of them even where an old commit held it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    assert ap.git_commit(tmp_path)["commit"].startswith("unavailable (dvc.yaml declares no paper stage")
    (tmp_path / "dvc.yaml").write_text("stages:\n  analyze:\n    outs: [results/models]\n"
                                       "  paper:\n    deps: [params.yaml, results/models]\n", encoding="utf-8")
    (tmp_path / "params.yaml").write_text("models: []\n", encoding="utf-8")
    git("add", "params.yaml", "dvc.yaml")
    git("commit", "-qm", "sources")
    sources = git("rev-parse", "HEAD")
    (tmp_path / "results" / "models").mkdir(parents=True)
    (tmp_path / "results" / "models" / "x.json").write_text("{}\n", encoding="utf-8")
    git("add", "results")
    git("commit", "-qm", "an output once committed")
    git("rm", "-rq", "--cached", "results")
    git("commit", "-qm", "the output untracked")
    (tmp_path / "results" / "models" / ".gitignore").write_text("/x.json\n", encoding="utf-8")
    git("add", "results/models/.gitignore")
    git("commit", "-qm", "DVC's .gitignore in the output directory, tracked")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n", encoding="utf-8")
    git("add", "dvc.lock")
    git("commit", "-qm", "outputs")
    assert git("rev-parse", "HEAD") != sources
    assert ap.git_commit(tmp_path) == {"commit": sources, "state": "clean"}
    (tmp_path / "params.yaml").write_text("models: [x]\n", encoding="utf-8")
    assert ap.git_commit(tmp_path) == {"commit": sources, "state": "modified sources"}


def test_every_source_of_every_stage_is_a_dependency_of_the_paper() -> None:
    """The paper names the last commit that changed one of its dependencies; were a source of another
    stage not among them, a commit of that source alone would leave the committed paper naming an
    older commit than a fresh clone's render (``.ci/run`` compares the bytes)."""
    sources = ap.stage_sources(REPO)
    paper = ap.source_paths(REPO)
    assert paper == sources["paper"]
    for name, deps in sources.items():
        for dep in deps:
            assert (REPO / dep).exists(), f"dvc.yaml stage {name}: dependency {dep} does not exist"
            assert any(dep == p or dep.startswith(p.rstrip("/") + "/") for p in paper), \
                f"dvc.yaml stage {name} depends on {dep}, which the paper stage does not"
    for source in ("src", "stages", "params.yaml", "requirements.lock", "paper/paper.qmd"):
        assert source in paper
    assert "stages/extract.py" in sources["extract"]
    for written in ("figures", "results/models", "results/panel.json"):  # outputs of other stages
        assert written not in paper


def test_a_directory_dependency_hashes_only_tracked_files() -> None:
    """DVC hashes every file of a directory dependency that ``.dvcignore`` does not name; an untracked
    file there (the editable install's ``src/uaprobe.egg-info``, Python's caches) would give this
    checkout's dvc.lock other hashes than a fresh clone's."""
    from dvc.repo import Repo

    proc = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout: nothing tells tracked from untracked files")
    tracked = set(proc.stdout.splitlines())
    deps = {d for stage in ap.stage_sources(REPO).values() for d in stage}
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
    exactly the number shown, links to its row of the provenance appendix, and that row says the same."""
    page = rendered(project)[0].read_text(encoding="utf-8")
    values = parse_values(page)
    assert len(values) > 300 and sum(v.in_table for v in values) > 200 and sum(not v.in_table for v in values) > 30
    docs: dict[str, object] = {}
    for v in values:
        docs.setdefault(v.file, _doc(project, v.file))
        assert v.fmt in FORMATS, v
        assert v.text == shown_text(lookup(docs[v.file], v.key, file=v.file), v.fmt), v
    rows = set(re.findall(r'<span id="(prov-\d+)"', page))
    links = set(re.findall(r'<a href="#(prov-\d+)"[^>]*class="uav"', page))
    assert links and links <= set(rows), "every value links to a row of the appendix"


def test_every_table_cell_with_a_number_carries_a_value(project: Path) -> None:
    page = rendered(project)[0].read_text(encoding="utf-8")
    exempt = ("tbl-dvc-lock", "tbl-packages", "tbl-numerics", "tbl-provenance", "tbl-panel")
    bare, checked = [], 0
    for table in re.finditer(r'<table id="(tbl-[\w-]+)".*?</table>', page, flags=re.S):
        if table.group(1).startswith(exempt):
            continue
        checked += 1
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(0), flags=re.S):
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)[1:]:  # the first names the row
                if re.search(r"\d", re.sub(r"<[^>]+>", "", cell)) and 'class="uav"' not in cell:
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
    new_value = doc["policies"]["default"]["final_r"]
    doc["policies"]["default"]["final_r"] = new_value / 2
    path.write_text(json.dumps(doc))
    changes = paperdiff.compare(page, _reader(old), _reader(project), old_page=page)
    assert [(c.file, c.key, c.status) for c in changes] == [
        ("results/models/tiny-a/robustness.json", "policies/default/final_r", "changed")]
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
    manifest = json.loads((project / "figures" / "manifest.json").read_text())
    assert {e["key"] for e in manifest["figures"]} == set(ap.FIGURE_DATA)
    for e in manifest["figures"]:
        caption = ap.figure_data(e)
        for part in caption.removeprefix("Data: ").rstrip(".").split("; "):
            file, keys = part.split(": ", 1)
            doc = _doc(project, file.strip("`"))
            for key in keys.split(", "):
                assert _expand(doc, key.strip("`")), f"{e['key']}: {file} has no {key}"
