"""The reviewer workflow, end to end on the tiny panel: remote cache, same bytes, metrics across commits.

These tests run the real pipeline through `dvc repro` in throw-away git repositories.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_project import dvc, git, http_server, make_project, output_digests, run
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


def test_reviewer_pulls_the_same_paper(author: Path, workspace: Path) -> None:
    reviewer = _clone(author, workspace / "reviewer")
    dvc("pull", cwd=reviewer)
    assert "up to date" in dvc("status", cwd=reviewer).stdout
    assert "Running stage" not in dvc("repro", cwd=reviewer).stdout
    assert output_digests(reviewer) == output_digests(author)


def test_the_committed_paper_renders_again_at_its_own_commit(author: Path, workspace: Path) -> None:
    """The README's flow: change a parameter, `dvc repro`, commit. `dvc repro -f -s paper` at that commit,
    and at a later one, gives the committed paper's bytes; the hashes it names are dvc.lock's."""
    project = _clone(author, workspace / "author-rerender")
    dvc("pull", cwd=project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["analysis"]["preference"] = "sum" if params["analysis"]["preference"] != "sum" else "mean"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert "Running stage 'paper'" in dvc("repro", cwd=project).stdout
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "analysis.preference changed", cwd=project)
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


def test_metrics_and_plots_diff_across_commits(author: Path, workspace: Path) -> None:
    project = _clone(author, workspace / "author-diff")
    dvc("pull", cwd=project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pooling"]["drop"] = "first"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = dvc("repro", cwd=project).stdout
    assert "Running stage 'extract@tiny'" in out
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "pooling.drop: first", cwd=project)
    diff = json.loads(dvc("metrics", "diff", "HEAD~1", "--json", cwd=project).stdout)
    changed = {f"{path}:{key}" for path, entries in diff.items() for key, v in entries.items()
               if v.get("diff") not in (None, 0)}
    assert any(k.startswith("metrics/models/tiny.json") for k in changed), diff
    text = dvc("metrics", "diff", "HEAD~1", cwd=project).stdout
    assert "metrics/models/tiny.json" in text
    plots = dvc("plots", "diff", "HEAD~1", "-o", str(workspace / "plots-diff"), cwd=project)
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


def test_verify_checks_outputs_against_the_lock(author: Path, workspace: Path) -> None:
    reviewer = _clone(author, workspace / "reviewer-verify")
    dvc("pull", cwd=reviewer)
    ok = run([sys.executable, "-m", "uaprobe.cli", "verify"], reviewer, check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    metrics = reviewer / "metrics" / "panel.json"
    metrics.write_text(metrics.read_text() + "\n")  # any change of bytes
    bad = run([sys.executable, "-m", "uaprobe.cli", "verify"], reviewer, check=False)
    assert bad.returncode == 1 and "metrics/panel.json" in bad.stdout, bad.stdout
    # an extraction file made from another dataset is caught too
    dataset = reviewer / "data" / "dataset.json"
    dataset.write_text(dataset.read_text().replace("Gravity", "Levity", 1))
    bad = run([sys.executable, "-m", "uaprobe.cli", "verify"], reviewer, check=False)
    assert "dataset_sha256" in bad.stdout


def test_readme_commands_in_a_fresh_shell(author: Path, workspace: Path) -> None:
    """`.venv/bin/dvc repro` with no activated environment (PATH without the venv, no python on it):
    the stages run with the project's .venv, pinned, and give the committed bytes."""
    project = _clone(author, workspace / "fresh-shell")
    (project / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    dvc("pull", cwd=project)
    before = (project / "results" / "panel.json").read_bytes()
    fresh = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp"), "DVC_NO_ANALYTICS": "1",
             "LANG": "C.UTF-8"}
    proc = subprocess.run([str(project / ".venv" / "bin" / "dvc"), "repro", "-f", "compare"], cwd=project,
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
