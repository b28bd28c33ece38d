"""The reviewer workflow, end to end on the tiny panel: remote cache, same bytes, metrics across commits.

These tests run the real pipeline through `dvc repro` in throw-away git repositories.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline_project import REPO, dvc, git, http_server, make_project, output_digests, run
from tiny_models import build_tiny_neox

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reviewer")


@pytest.fixture(scope="module")
def author(workspace: Path) -> Path:
    """The author's project: `dvc repro`, `dvc push` to the default remote, everything committed."""
    model = build_tiny_neox(workspace / "model", bos=False)
    project = make_project(workspace / "author", model)
    dvc("repro", cwd=project)
    dvc("push", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "results", cwd=project)
    assert (workspace / "uaprobe-dvc-remote").is_dir(), "the default remote is the sibling directory"
    return project


def _clone(author: Path, dest: Path) -> Path:
    run(["git", "clone", "-q", str(author), str(dest)], dest.parent)
    return dest


def test_pipeline_outputs_everything(author: Path) -> None:
    digests = output_digests(author)
    for expected in ("data/embeddings/tiny.h5", "metrics/models/tiny.json", "metrics/panel.json",
                     "results/panel.json", "paper/_output/paper.html", "paper/_output/paper.pdf"):
        assert expected in digests
    assert any(k.startswith("figures/") and k.endswith(".png") for k in digests)
    assert {"plots/layerwise/tiny.csv", "plots/anisotropy/tiny.csv", "plots/panel/tiny.csv"} <= digests.keys()
    status = dvc("status", cwd=author).stdout
    assert "up to date" in status


def test_second_repro_runs_nothing(author: Path) -> None:
    out = dvc("repro", cwd=author).stdout
    assert "Running stage" not in out, out


def test_two_clean_runs_give_identical_bytes(author: Path, workspace: Path) -> None:
    """The same commit built again from scratch in another directory: every output has the same md5."""
    other = _clone(author, workspace / "second")
    git("reset", "-q", "--hard", "HEAD~1", cwd=other)  # the sources the author ran, before any output existed
    assert not (other / "dvc.lock").exists()
    dvc("repro", cwd=other)
    mine, theirs = output_digests(author), output_digests(other)
    assert mine.keys() == theirs.keys()
    differing = sorted(k for k in mine if mine[k] != theirs[k])
    assert differing == [], f"outputs differ between two clean runs: {differing}"


@pytest.fixture(scope="module")
def changed(author: Path, workspace: Path) -> tuple[Path, str]:
    """The README's flow on a clone of the author's project: change a parameter (``pooling.drop: first``,
    which reruns the extraction too), `dvc repro`, commit. Returns the project and the commit before."""
    project = _clone(author, workspace / "author-changed")
    dvc("pull", cwd=project)
    before = git("rev-parse", "HEAD", cwd=project).stdout.strip()
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pooling"]["drop"] = "first"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = dvc("repro", cwd=project).stdout
    assert "Running stage 'extract@tiny'" in out and "Running stage 'paper'" in out
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "pooling.drop: first", cwd=project)
    return project, before


def test_the_committed_paper_renders_again_at_its_own_commit(changed: tuple[Path, str]) -> None:
    """`dvc repro -f -s paper` at the commit of a change, and at a later one, gives the committed paper's
    bytes; the hashes it names are dvc.lock's."""
    project, _ = changed
    committed = output_digests(project)
    html = (project / "paper/_output/paper.html").read_text(encoding="utf-8")
    supplement = (project / "paper/_output/provenance.html").read_text(encoding="utf-8")
    lock = yaml.safe_load((project / "dvc.lock").read_text(encoding="utf-8"))["stages"]["paper"]["deps"]
    for dep in lock:  # the supplement lists every input with dvc.lock's md5, the paper names their digest
        assert dep["md5"] in supplement, dep
    digest = hashlib.md5("".join(f"{d['md5']}  {d['path']}\n" for d in lock).encode("utf-8")).hexdigest()
    assert f"<code>{digest}</code>" in html
    for later in (False, True):
        if later:
            (project / "NOTES.md").write_text("a later commit\n", encoding="utf-8")
            git("add", "NOTES.md", cwd=project)
            git("commit", "-q", "-m", "notes", cwd=project)
        dvc("repro", "-f", "-s", "paper", cwd=project)
        assert output_digests(project) == committed, f"later commit: {later}"
        assert git("status", "--porcelain", cwd=project).stdout == "", f"later commit: {later}"


def test_reviewer_pulls_over_http_read_only(author: Path, workspace: Path) -> None:
    reviewer = _clone(author, workspace / "reviewer-http")
    with http_server(workspace / "uaprobe-dvc-remote") as url:
        dvc("remote", "add", "--local", "-d", "web", url, cwd=reviewer)
        dvc("pull", cwd=reviewer)
    assert output_digests(reviewer) == output_digests(author)
    assert "up to date" in dvc("status", cwd=reviewer).stdout


def test_reviewer_without_model_rebuilds_paper_from_cache(author: Path, workspace: Path) -> None:
    """No model can be loaded: a manuscript edit still rebuilds the paper from pulled outputs."""
    reviewer = _clone(author, workspace / "reviewer-nogpu")
    params = yaml.safe_load((reviewer / "params.yaml").read_text())
    model_dir = Path(params["catalog"]["tiny"]["location"])
    hidden = model_dir.with_name(model_dir.name + "-away")
    model_dir.rename(hidden)
    try:
        qmd = reviewer / "paper" / "paper.qmd"
        qmd.write_text(qmd.read_text(encoding="utf-8") + "\nA reviewer's added sentence.\n", encoding="utf-8")
        out = dvc("repro", "--pull", cwd=reviewer).stdout
    finally:
        hidden.rename(model_dir)
    assert "Running stage 'paper'" in out
    assert "Running stage 'extract@tiny'" not in out
    html = (reviewer / "paper/_output/paper.html").read_text(encoding="utf-8")
    assert "added sentence" in html
    assert (reviewer / "data/embeddings/tiny.h5").is_file(), "the extraction output comes from the cache"


def test_extraction_fails_fast_without_the_model(author: Path, workspace: Path) -> None:
    """The same reviewer forcing the extraction gets the source and the fix, not a traceback."""
    reviewer = _clone(author, workspace / "reviewer-forced")
    params = yaml.safe_load((reviewer / "params.yaml").read_text())
    params["catalog"]["tiny"]["location"] = str(workspace / "nowhere")
    (reviewer / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = run([sys.executable, "stages/extract.py", "--model", "tiny"], reviewer, check=False)
    assert proc.returncode == 2
    assert "nowhere" in proc.stderr and "catalog.tiny.location" in proc.stderr
    assert not (reviewer / "data/embeddings/tiny.h5").exists()


def test_metrics_and_plots_diff_across_commits(changed: tuple[Path, str], workspace: Path) -> None:
    project, before = changed
    diff = json.loads(dvc("metrics", "diff", before, "--json", cwd=project).stdout)
    moved = {f"{path}:{key}" for path, entries in diff.items() for key, v in entries.items()
             if v.get("diff") not in (None, 0)}
    assert any(k.startswith("metrics/models/tiny.json") for k in moved), diff
    text = dvc("metrics", "diff", before, cwd=project).stdout
    assert "metrics/models/tiny.json" in text
    plots = dvc("plots", "diff", before, "-o", str(workspace / "plots-diff"), cwd=project)
    assert (workspace / "plots-diff" / "index.html").is_file(), plots.stdout


def test_exp_run_sets_parameters(author: Path, workspace: Path) -> None:
    project = _clone(author, workspace / "author-exp")
    dvc("pull", cwd=project)
    dvc("exp", "run", "-S", "analysis.bootstrap_resamples=300", "-S", "analysis.ci_level=0.9", cwd=project)
    shown = yaml.safe_load((project / "params.yaml").read_text())["analysis"]
    assert shown["bootstrap_resamples"] == 300 and shown["ci_level"] == 0.9
    out = dvc("status", cwd=project).stdout
    assert "up to date" in out
    shutil.rmtree(project)


def readme_reviewer_commands() -> list[str]:
    """The commands of the README's reviewer section that check a clone (before it edits anything), in order."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## For reviewers", 1)[1].split("\n## ", 1)[0]
    checks = section.split("Edit the manuscript", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", checks, re.S)
    return [line.split(" #", 1)[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def set_up_venv(project: Path) -> None:
    """The clone's .venv is this interpreter's environment (each entry linked) with `make setup`'s stamp newer
    than the files it is made from: `make setup` has nothing to do, as after a first `make setup`."""
    venv = project / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (venv / ".installed").touch()
    before = time.time() - 3600
    for source in ("requirements.lock", "pyproject.toml", "setup.py", "src/uaprobe/repro/_mkl_dispatch.c"):
        os.utime(project / source, (before, before))


def test_the_readme_reviewer_commands_run_as_written(author: Path, workspace: Path) -> None:
    """A clone of what the author pushed: the README's reviewer commands, `make review` first, each exit 0;
    review.html holds the verdict, the commit and every output with its md5. Then real damage is named."""
    commands = readme_reviewer_commands()
    assert commands[0] == "make review" and "make setup" in commands, commands
    assert any(c.startswith(".venv/bin/uaprobe verify --remote") for c in commands), commands
    reviewer = _clone(author, workspace / "reviewer")
    set_up_venv(reviewer)
    for command in commands:
        proc = run(["sh", "-c", command], reviewer, check=False)
        assert proc.returncode == 0, f"{command}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if command == "make review":
            assert "AGREES" in proc.stdout and "wrote" in proc.stdout and "  paper: done in" in proc.stdout, \
                proc.stdout
    # every output recomputed in a scratch copy, the extraction from the model: the same bytes
    page = (reviewer / "review.html").read_text(encoding="utf-8")
    assert "AGREES: every result recomputed from the pulled extractions, and the extractions recomputed from the " \
        "models" in page and "not checked" not in page
    assert git("rev-parse", "HEAD", cwd=reviewer).stdout.strip() in page
    certificate = json.loads((reviewer / "review.json").read_text(encoding="utf-8"))
    lock = yaml.safe_load((reviewer / "dvc.lock").read_text())["stages"]
    recorded = {out["path"]: out["md5"] for stage in lock.values() for out in stage["outs"]}
    assert {o["path"]: o["md5"] for o in certificate["outputs"]} == recorded
    assert {o["status"] for o in certificate["outputs"]} == {"recomputed, same bytes"}, certificate["outputs"]
    assert {s["name"] for s in certificate["stages"]} == set(lock) and all(s["exit"] == 0 for s in certificate["stages"])
    assert certificate["verdict"]["passed"] and certificate["fingerprint"]["passed"]
    for path, md5 in recorded.items():
        assert f"<code>{path}</code></td><td><code>{md5}</code>" in page, path
    assert page.count('"agrees">recomputed, same bytes') == len(recorded)
    assert git("status", "--porcelain", cwd=reviewer).stdout.split() == ["??", "review.html", "??", "review.json"]
    assert "up to date" in dvc("status", cwd=reviewer).stdout
    assert output_digests(reviewer) == output_digests(author)
    # real damage: a `cache: false` file edited, named with git's repair
    metrics = reviewer / "metrics" / "panel.json"
    metrics.write_text(metrics.read_text() + "\n")
    bad = run([".venv/bin/uaprobe", "verify", "--cache", "--remote", "cache"], reviewer, check=False)
    assert bad.returncode == 1 and "metrics/panel.json: its bytes hash to" in bad.stdout, bad.stdout
    assert "`git checkout metrics/panel.json`" in bad.stdout and bad.stdout.count("repair:") == 1, bad.stdout
    git("checkout", "metrics/panel.json", cwd=reviewer)
    # an extraction file made from another dataset is caught too
    dataset = reviewer / "data" / "dataset.json"
    dataset.write_text(dataset.read_text().replace("Gravity", "Levity", 1))
    bad = run([".venv/bin/uaprobe", "verify"], reviewer, check=False)
    assert bad.returncode == 1 and "dataset_sha256" in bad.stdout


def test_readme_commands_in_a_fresh_shell(author: Path, workspace: Path) -> None:
    """`.venv/bin/dvc repro` with no activated environment (PATH without the venv, no python on it):
    the stages run with the project's .venv, pinned, and give the committed bytes."""
    project = _clone(author, workspace / "fresh-shell")
    (project / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    dvc("pull", cwd=project)
    before = (project / "results" / "panel.json").read_bytes()
    fresh = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "DVC_NO_ANALYTICS": "1",
             "LANG": "C.UTF-8"}
    proc = subprocess.run([str(project / ".venv" / "bin" / "dvc"), "repro", "-f", "-s", "compare"], cwd=project,
                          env=fresh, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Running stage 'compare'" in proc.stdout and "Traceback" not in proc.stderr
    assert (project / "results" / "panel.json").read_bytes() == before
    log = json.loads((project / "logs" / "compare.machine.json").read_text())
    assert log["stage"] == "compare" and log["machine"]["cpu_model"]
    panel = json.loads(before)
    assert panel["numerics"]["analysis"]["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    assert log["machine"]["cpu_model"] not in before.decode()
    shutil.rmtree(project)


def test_verify_against_a_revision_compares_every_number(author: Path, workspace: Path) -> None:
    reviewer = _clone(author, workspace / "reviewer-against")
    dvc("pull", cwd=reviewer)
    ok = run([sys.executable, "-m", "uaprobe.cli", "verify", "--against", "HEAD"], reviewer, check=False)
    assert ok.returncode == 0 and "files within tolerance" in ok.stdout, ok.stdout + ok.stderr
    assert "results/models/tiny/layerwise.json" in ok.stdout  # DVC-tracked, read from the cache
    path = reviewer / "results" / "models" / "tiny" / "validation.json"
    doc = json.loads(path.read_text())
    doc["variants"]["mean"]["global"]["mean_ua"] += 1e-3
    path.unlink()  # a DVC-linked file: replace it, do not write through the link
    path.write_text(json.dumps(doc))
    bad = run([sys.executable, "-m", "uaprobe.cli", "verify", "--against", "HEAD"], reviewer, check=False)
    assert bad.returncode == 1, bad.stdout
    assert "FAIL  results/models/tiny/validation.json" in bad.stdout and "variants/mean/global/mean_ua" in bad.stdout
    shutil.rmtree(reviewer)


def _review(project: Path, tmp: Path, *args: str) -> tuple[int, str, dict]:
    """`uaprobe review` in ``project``, its scratch copies under ``tmp``: exit code, output, review.json."""
    tmp.mkdir()
    proc = run([sys.executable, "-m", "uaprobe.cli", "review", *args], project, check=False,
               extra_env={"TMPDIR": str(tmp)})
    assert not list(tmp.glob("uaprobe-review-*")), "the scratch copy is removed afterwards"
    return proc.returncode, proc.stdout + proc.stderr, json.loads((project / "review.json").read_text("utf-8"))


def _set(doc: dict, key: str, value: float) -> None:
    *parents, last = key.split("/")
    for part in parents:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    doc[int(last) if isinstance(doc, list) else last] = value


def test_numbers_the_pipeline_did_not_compute_fail_the_review(author: Path, workspace: Path) -> None:
    """What an author could push with `dvc status` clean and every byte the one dvc.lock records: another run's
    extraction (pooling.drop: first) recorded with `dvc commit` under the lock's parameters and the stages after it
    rerun from it; a result edited by hand (`dvc commit -f compare`, the paper rendered from it). The review names
    each file, the result by its key and both values. Without the model, the extraction is not recomputed and the
    review says why. (An input dvc.yaml does not list: tests/test_review_parts.py.)"""
    from uaprobe.repro.numdiff import leaves
    from uaprobe.repro.recompute import extraction_plan, pipeline

    forger = _clone(author, workspace / "forger")
    dvc("pull", cwd=forger)
    params = forger / "params.yaml"
    doc = yaml.safe_load(params.read_text(encoding="utf-8"))
    doc["pooling"]["drop"] = "first"
    params.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    for out in ("data/embeddings/tiny.h5", "data/embeddings/tiny.control.h5"):
        (forger / out).unlink()
    run(["sh", "stages/run.sh", "python", "stages/extract.py", "--model", "tiny", "--control",
         "data/neutral_control.json"], forger)
    git("checkout", "params.yaml", cwd=forger)
    dvc("commit", "-f", "extract@tiny", cwd=forger)
    dvc("repro", cwd=forger)
    panel = forger / "results" / "panel.json"
    result = json.loads(panel.read_text(encoding="utf-8"))
    key, value = next((k, v) for k, v in leaves(result) if k.endswith("adjusted_p") and v is not None)
    _set(result, key, 0.012)
    panel.unlink()  # a DVC-linked file: replace it, never write through the link
    panel.write_text(json.dumps(result, indent=2), encoding="utf-8")
    dvc("commit", "-f", "compare", cwd=forger)
    dvc("repro", "paper", cwd=forger)
    git("add", "-A", cwd=forger)
    git("commit", "-q", "-m", "another run's extraction, a result edited by hand", cwd=forger)
    dvc("push", cwd=forger)
    assert "up to date" in dvc("status", cwd=forger).stdout

    reviewer = _clone(forger, workspace / "reviewer-forged")
    code, out, certificate = _review(reviewer, workspace / "tmp-forged")
    assert code == 1, out
    assert "verify: agrees" in out, "every byte is what dvc.lock records: only the recomputation fails"
    rows = {o["path"]: o for o in certificate["outputs"]}
    assert rows["data/embeddings/tiny.h5"]["status"] == "recomputed, differs"
    assert "@pooling_drop: 'first' recorded, 'special' recomputed" in rows["data/embeddings/tiny.h5"]["why"]
    assert rows["results/panel.json"]["status"] == "recomputed, differs"
    assert f"{key}: 0.012 at recorded, {value!r} at recomputed" in rows["results/panel.json"]["why"]
    assert "results/panel.json: recomputed, differs: 1 of " in out and f"{key}: 0.012 at recorded" in out
    assert rows["results/models"]["status"] == "recomputed, same bytes", "the results follow from the extraction"
    verdict = certificate["verdict"]["text"]
    assert not certificate["verdict"]["passed"] and verdict.startswith("DOES NOT AGREE")
    assert "data/embeddings/tiny.h5" in verdict and "results/panel.json" in verdict
    page = (reviewer / "review.html").read_text(encoding="utf-8")
    assert "0.012 at recorded" in page and "&#x27;first&#x27; recorded" in page

    # the model out of reach: the extraction is listed as not recomputed, with the reason and the fix
    model = Path(yaml.safe_load((reviewer / "params.yaml").read_text())["catalog"]["tiny"]["location"])
    hidden = model.with_name(model.name + "-away")
    model.rename(hidden)
    try:
        stage = next(s for s in pipeline(reviewer) if s.name == "extract@tiny")
        plan = extraction_plan(reviewer, stage)
    finally:
        hidden.rename(model)
    assert not plan.recompute and plan.why.startswith(f"model 'tiny': local directory {model} not found; fix "
                                                      "`catalog.tiny.location`"), plan.why
    assert "what would recompute it: that fix, then `uaprobe review`" in plan.why
