"""Values that know their source: formats against direct computations, the markup through pandoc to
HTML (parsed back, with the number of each link's row in the supplementary file) and to a PDF, and the
paper-diff CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pypandoc
import pytest

from uaprobe.publishing.prose.primitives.formats import FORMATS
from uaprobe.publishing.prose.primitives.markdown import markdown_table
from uaprobe.publishing.provenance.readback import parse_values, shown_text
from uaprobe.publishing.provenance.values import SUPPLEMENT_HTML, Ledger, Source, Value, lookup, median_key, plain_text

MINUS = "\u2212"


@pytest.mark.parametrize("name,raw,expected", [
    ("r", 0.97249, "+0.972"), ("r", -0.0004, "+0.000"), ("r", None, "n/a"), ("r", float("nan"), "n/a"),
    ("p", 0.0004, "<\u00a00.001"), ("p", 0.0123, "0.012"), ("f2", -1.005, f"{MINUS}1.00"), ("s1", 0.5, "+0.5"),
    ("int", 31.0, "31"), ("percent", 0.125, "12"), ("percent_g", 0.95, "95 %"), ("thousands", 10000, "10,000"),
    ("layers", [12, 13, 14], "12\u2060–\u206014"), ("layers", [3, 5], "3, 5"), ("layers", [], "none"),
    ("count", [1, 2, 3], "3"), ("count_true", [True, False, True], "2"), ("sum", [30, 20], "50"),
    ("names", ["a_b", "c"], "a b, c"), ("bool", True, "yes"), ("g", 0.05, "0.05"),
])
def test_formats_against_a_direct_rendering(name: str, raw: object, expected: str) -> None:
    assert FORMATS[name](raw) == expected


def test_lookup_follows_keys_and_indices_and_names_what_is_missing() -> None:
    doc = {"a": {"b": [1, 2, {"c": 3}]}}
    assert lookup(doc, "a/b/2/c", file="f.json") == 3 and lookup(doc, "a/b/-1/c", file="f.json") == 3
    with pytest.raises(Exception, match=r"f\.json: no key 'a/x' \(stops at 'x'\)"):
        lookup(doc, "a/x", file="f.json")


def test_a_derived_median_is_the_median_of_the_rows_its_key_names() -> None:
    rng = np.random.default_rng(0)
    n = 41
    doc = {"specs": {"r": [float(x) for x in rng.normal(size=n)], "kind": [["raw", "z"][i % 2] for i in range(n)],
                     "out": [None if i % 3 == 0 else "c" for i in range(n)]}}
    doc["specs"]["r"][4] = None  # a missing r is left out
    key = median_key("specs/r", kind="raw", out=None)
    assert key == "median(specs/r where kind=raw and out=null)"
    direct = [r for r, k, o in zip(doc["specs"]["r"], doc["specs"]["kind"], doc["specs"]["out"])
              if k == "raw" and o is None and r is not None]
    assert lookup(doc, key, file="f.json") == pytest.approx(float(np.median(direct)))
    assert lookup(doc, median_key("specs/r"), file="f.json") == pytest.approx(
        float(np.median([r for r in doc["specs"]["r"] if r is not None])))
    assert lookup(doc, median_key("specs/r", kind="none"), file="f.json") is None
    with pytest.raises(Exception, match="no key"):
        lookup(doc, median_key("specs/r", missing="raw"), file="f.json")


def test_markup_survives_pandoc_and_every_link_names_its_row_of_the_supplement(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"x": [0.5, -0.25]}', encoding="utf-8")
    ledger = Ledger(tmp_path)
    a = Value(0.5, "r", Source("r.json", "x/0"), ledger)
    b = Value(-0.25, "s2", Source("r.json", "x/1"), ledger)
    text = f"In the text {a}, again {a}.\n\n" + markdown_table(["m", "v"], [["one", b], ["two", f"[{a}, {b}]"]])
    assert plain_text(text).startswith("In the text +0.500, again +0.500.")
    html = pypandoc.convert_text(text, "html5", format="markdown")
    shown = parse_values(html)
    assert [(v.text, v.file, v.key, v.fmt, v.in_table, v.number) for v in shown] == [
        ("+0.500", "r.json", "x/0", "r", False, 1), ("+0.500", "r.json", "x/0", "r", False, 1),
        ("\u22120.25", "r.json", "x/1", "s2", True, 2), ("+0.500", "r.json", "x/0", "r", True, 1),
        ("\u22120.25", "r.json", "x/1", "s2", True, 2)]
    assert all(v.text == shown_text(lookup({"x": [0.5, -0.25]}, v.key, file=v.file), v.fmt) for v in shown)
    assert 'title="r.json: x/0"' in html and html.count(f'href="{SUPPLEMENT_HTML}#prov-1"') == 3
    typst = pytest.importorskip("typst")
    source = tmp_path / "p.typ"
    source.write_text(pypandoc.convert_text(text, "typst", format="markdown", extra_args=["--standalone"]),
                      encoding="utf-8")
    assert typst.compile(str(source)).startswith(b"%PDF")  # links to the supplementary file, not to a label


def _dvc_project(root: Path) -> tuple[Callable[..., subprocess.CompletedProcess[str]], Callable[..., None]]:
    """An empty git + DVC project at ``root`` with no stages: a runner of commands in it, and a git that
    asserts each call succeeds."""
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=root, capture_output=True, text=True)

    def git(*args: str) -> None:
        assert run("git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args).returncode == 0

    git("init", "-q")
    assert run(sys.executable, "-m", "dvc", "init", "-q").returncode == 0
    (root / "dvc.yaml").write_text("stages: {}\n", encoding="utf-8")
    return run, git


def test_paper_diff_names_a_revision_that_does_not_exist(tmp_path: Path) -> None:
    run, _ = _dvc_project(tmp_path)
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "no-such-rev")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot open revision 'no-such-rev'" in lines[0] and "Traceback" not in proc.stderr


def test_paper_diff_reads_a_revision_through_git_and_the_dvc_cache(tmp_path: Path) -> None:
    """A revision's results come from the DVC cache; the same revision twice is "no change"; one
    planted change in the working tree is the one marked number."""
    run, git = _dvc_project(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text('{"a": {"r": 0.5}, "b": 2}', encoding="utf-8")
    page = tmp_path / "paper" / "_output" / "paper.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html><body><p>r is " + "".join(
        f'<a href="#prov-{i}" class="uav" data-file="results/r.json" data-key="{k}" data-fmt="{f}">{t}</a> '
        for i, (k, f, t) in enumerate([("a/r", "r", "+0.500"), ("b", "int", "2")])) + "</p></body></html>",
        encoding="utf-8")
    assert run(sys.executable, "-m", "dvc", "add", "-q", "results").returncode == 0
    git("add", "-A")
    git("commit", "-qm", "base")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", "HEAD")
    assert proc.returncode == 0 and proc.stdout.startswith("no change"), proc.stdout + proc.stderr
    (tmp_path / "results" / "r.json").write_text('{"a": {"r": 0.25}, "b": 2}', encoding="utf-8")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "1 value(s) and 0 figure(s) differ" in proc.stdout and "+0.500 → +0.250 (50 %)" in proc.stdout
    diff = (tmp_path / "paper" / "_output" / "diff.html").read_text(encoding="utf-8")
    assert diff.count('<mark class="uav-diff"') == 1
    # the revision's results in no cache (nor remote): the diff goes on without them, and names the file,
    # the revision and the command that fetches it
    shutil.rmtree(tmp_path / ".dvc" / "cache")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    named = [line for line in proc.stdout.splitlines() if line.startswith("not compared: results/r.json at HEAD")]
    assert len(named) == 1 and "dvc fetch" in named[0], proc.stdout
    # ... and the first line counts them: what could not be read is neither the same nor changed
    assert proc.stdout.splitlines()[0] == ("no difference in what could be compared between HEAD and working tree; "
                                           "2 value(s) and 0 figure(s) could not be compared (a file unreadable at "
                                           "one side, listed below)"), proc.stdout
    # a results file that is not JSON at one revision
    (tmp_path / "results" / "r.json").write_text("{not json", encoding="utf-8")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", "--repo", ".")
    assert proc.returncode == 2 and "results/r.json at working tree: not a valid results file" in proc.stderr


def test_a_summary_of_a_list_differs_only_when_the_summary_does() -> None:
    from uaprobe.repro.paperdiff import compare

    page = ('<p><a href="#prov-1" class="uav" data-file="r.json" data-key="rows" data-fmt="count">2</a> '
            '<a href="#prov-2" class="uav" data-file="r.json" data-key="x" data-fmt="r">+0.500</a></p>')
    old = b'{"rows": [1, 2], "x": 0.5}'
    same_count = b'{"rows": [3, 4], "x": 0.5000000000000001}'
    changes = compare(page, lambda _: old, lambda _: same_count)
    assert [(c.key, c.old, c.new) for c in changes] == [("x", "+0.500", "+0.500")]  # below the shown precision
    more_rows = b'{"rows": [1, 2, 3], "x": 0.5}'
    assert [(c.key, c.old, c.new) for c in compare(page, lambda _: old, lambda _: more_rows)] == [("rows", "2", "3")]


def test_what_one_side_cannot_read_is_counted_as_not_compared_never_as_changed() -> None:
    """After ``dvc gc -w -f`` the older revision's objects are gone: its values and figures are "not
    compared", counted on the first line, and no figure is called changed for want of its bytes."""
    import json

    from uaprobe.repro import paperdiff

    page = ('<html><body><p><a href="#prov-1" class="uav" data-file="r.json" data-key="x" data-fmt="r">+0.500</a> '
            '<a href="#prov-2" class="uav" data-file="s.json" data-key="y" data-fmt="r">+0.250</a></p></body></html>')
    manifest = json.dumps({"figures": [{"png": "a.png"}, {"png": "b.png"}]}).encode()
    new = {"r.json": b'{"x": 0.5}', "s.json": b'{"y": 0.25}', paperdiff.MANIFEST: manifest, "a.png": b"A", "b.png": b"B2"}
    old = {"s.json": b'{"y": 0.75}', paperdiff.MANIFEST: manifest, "b.png": b"B1"}  # r.json, a.png: objects gone
    gone = {(0, "r.json"), (0, "a.png")}

    def unreadable(side: int, file: str) -> bool:
        return (side, file) in gone

    changes = paperdiff.compare(page, old.get, new.get, labels=("HEAD~1", "working tree"), unreadable=unreadable)
    assert [(c.file, c.status) for c in changes] == [("s.json", "changed"), ("r.json", paperdiff.NOT_COMPARED)]
    figures = paperdiff.changed_figures(old.get, new.get, unreadable=unreadable)
    assert [(f.png, f.status) for f in figures] == [("a.png", paperdiff.NOT_COMPARED), ("b.png", "changed")]
    lines = paperdiff.summary_lines(changes, figures, ("HEAD~1", "working tree"))
    assert lines[0] == ("1 value(s) and 1 figure(s) differ between HEAD~1 and working tree; 1 value(s) and 1 "
                        "figure(s) could not be compared (a file unreadable at one side, listed below) (largest "
                        "relative change first):")
    assert not any("a.png" in line or "r.json" in line for line in lines[1:])
    marked = paperdiff.diff_page(page, changes, figures, ("HEAD~1", "working tree"))
    assert marked.count('<mark class="uav-diff"') == 1 and "a.png" not in marked
    # the older side's manifest itself unreadable: no figure is compared, none is called added or changed
    old.pop(paperdiff.MANIFEST)
    figures = paperdiff.changed_figures(old.get, new.get, unreadable=lambda side, f: side == 0)
    assert {f.status for f in figures} == {paperdiff.NOT_COMPARED} and len(figures) == 2
    # a file absent from a side that could read everything is still added / removed
    figures = paperdiff.changed_figures(old.get, new.get)
    assert {(f.png, f.status) for f in figures} == {("a.png", "added"), ("b.png", "added")}


def test_paper_diff_names_a_merge_conflict_in_params_yaml_and_the_option_for_an_unwritable_page(tmp_path: Path
                                                                                                 ) -> None:
    run, git = _dvc_project(tmp_path)
    (tmp_path / "params.yaml").write_text("analysis:\n  seed: 42\n", encoding="utf-8")
    page = tmp_path / "paper" / "_output" / "paper.html"
    page.parent.mkdir(parents=True)
    page.write_text('<html><body><a href="#prov-1" class="uav" data-file="params.yaml" data-key="analysis/seed" '
                    'data-fmt="int">42</a></body></html>', encoding="utf-8")
    git("add", "-A")
    git("commit", "-qm", "base")
    (tmp_path / "params.yaml").write_text("analysis:\n<<<<<<< HEAD\n  seed: 42\n=======\n  seed: 7\n"
                                          ">>>>>>> other\n", encoding="utf-8")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "params.yaml at working tree: an unresolved git merge" in proc.stderr, proc.stderr
    assert "git checkout --ours params.yaml" in proc.stderr and "git add params.yaml" in proc.stderr
    assert "not a valid results file" not in proc.stderr
    git("checkout", "params.yaml")
    # the diff page cannot be written where --out points: the message names --out
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", "--out", str(blocker / "diff.html"))
    assert proc.returncode == 2 and "point --out at a writable path" in proc.stderr, proc.stderr
    proc = run(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", "HEAD")
    assert proc.returncode == 0 and proc.stdout.startswith("no change"), proc.stdout + proc.stderr


# ------------------------------------------------------------------ a record read by attribute


def test_a_value_read_by_attribute_carries_the_key_path_the_file_resolves() -> None:
    from uaprobe.publishing.provenance.trace import Trace, traced
    from uaprobe.schema import resolve
    from uaprobe.schema.pairmodels import Mixed, MixedTests

    tests = MixedTests(policy=["default", "sink_excluded"], pooling=["mean", "last"], metric=["a", "b"],
                       slope=[0.5, None], se=[0.1, None], p=[0.01, None], low=[0.3, None], high=[0.7, None],
                       sd_intercept=[0.0, None], sd_slope=[0.1, None], converged=[True, False], method=["lbfgs", ""])
    mixed = Mixed(model="m", layer=3, ci_level=0.95, alpha=0.05, n_groups=6, n_converged=1, n_below_alpha=1,
                  tests=tests)
    raw, key = traced(Trace(mixed).tests.slope[0])
    assert (raw, key) == (0.5, "tests/slope/0") and resolve(mixed, key.split("/")) == 0.5
    assert traced(Trace(mixed).tests.method[-1]) == ("", "tests/method/-1")
    # an alias is the file's key, not the attribute's name
    from uaprobe.schema.categories import ValidationVariant
    assert traced(Trace(ValidationVariant.model_construct(global_={})).global_)[1] == "global"
    # a field the record lacks fails where it is read, naming it and where; a value computed from a field is refused
    with pytest.raises(AttributeError, match=r"MixedTests at tests has no field 'slopes'"):
        Trace(mixed).tests.slopes
    with pytest.raises(TypeError, match="a getter returns the field it read"):
        traced(0.5)
    with pytest.raises(AttributeError):
        Trace(mixed).layer = 4
