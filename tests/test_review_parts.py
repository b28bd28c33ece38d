"""The parts of ``uaprobe review`` on small inputs with known answers: how a difference is named, the order and
concurrency of the recomputed stages, the verdict and the pages."""

from __future__ import annotations

import io
import sys
import json
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from uaprobe.repro import filediff, recompute, recorded
from uaprobe.repro.review import Check, Review
from uaprobe.repro.review_page import certificate, html_page


def _panel(p: float) -> bytes:
    return json.dumps({"primary": {"models": {"gemma3-270m": {"adjusted_p": p, "r": -0.25, "name": "Gemma"}}},
                       "n": 6}, indent=2).encode()


def test_a_forged_number_is_named_with_its_key_and_both_values() -> None:
    d = filediff.describe("results/panel.json", _panel(0.012), _panel(0.457))
    assert not d.within
    assert d.summary.startswith("1 of 3 numbers differ, first primary/models/gemma3-270m/adjusted_p: 0.012 at "
                                "recorded, 0.457 at recomputed (abs 0.445, rel 0.974)"), d.summary
    assert "max abs diff 0.445 (primary/models/gemma3-270m/adjusted_p: 0.012 at recorded, 0.457 at recomputed)" \
        in d.summary


def test_numbers_equal_but_other_bytes_name_the_line() -> None:
    a = b'{"a": 1.0, "name": "x"}\n'
    d = filediff.describe("metrics/m.json", a, a.replace(b'"x"', b'"y"'))
    assert "every number equal (1 numbers" in d.summary and "line 1, column 21" in d.summary, d.summary
    assert d.details == ["recorded:   \'{\"a\": 1.0, \"name\": \"x\"}\'", "recomputed: \'{\"a\": 1.0, \"name\": \"y\"}\'"]


def test_a_csv_series_names_row_and_column() -> None:
    a = b"layer,r_mean\n0,0.5\n1,0.25\n"
    d = filediff.describe("plots/layerwise/m.csv", a, a.replace(b"0.25", b"0.375"))
    assert "first 1/r_mean: 0.25 at recorded, 0.375 at recomputed" in d.summary, d.summary


def test_binary_and_missing_files() -> None:
    assert filediff.describe("figures/a.png", b"\x89PNG\xff\x00", b"\x89PNG\xfe").summary == \
        "the bytes differ (6 bytes recorded, 5 recomputed)"
    assert filediff.describe("figures/a.png", b"x", None).summary == "the stage did not write it"
    assert "only the md5 is known to differ" in filediff.describe("figures/a.png", None, b"x").summary


def _h5(pooled: np.ndarray, drop: str) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f.attrs["pooling_drop"] = drop
        f.create_dataset("pooled/mean", data=pooled)
    return buf.getvalue()


def test_an_extraction_made_otherwise_names_the_attribute_and_the_dataset() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = x.copy()
    y[1, 2] += 0.5
    d = filediff.describe("data/embeddings/m.h5", _h5(x, "first"), _h5(y, "special"))
    assert d.summary == "2 attribute(s)/dataset(s) differ, first @pooling_drop: 'first' recorded, 'special' recomputed"
    assert d.details[1] == ("pooled/mean: 1 of 12 values differ, first at [1, 2]: 6.0 recorded, 6.5 recomputed; "
                            "max abs diff 0.5 at [1, 2]")
    # a GPU's last digits, within the stated tolerance: the numbers agree, the bytes do not
    z = x.copy()
    z[0, 0] += 1e-6
    near = filediff.describe("data/embeddings/m.h5", _h5(x, "special"), _h5(z, "special"), atol=1e-4, rtol=1e-4)
    assert near.within and "within the tolerance" in near.summary
    assert not filediff.describe("data/embeddings/m.h5", _h5(x, "special"), _h5(z, "special")).within


def test_stages_depend_on_the_stages_whose_outputs_they_read() -> None:
    stages = [recompute.Stage("extract@a", "x", ("data/in.json",), ("data/embeddings/a.h5",)),
              recompute.Stage("analyze@a", "x", ("data/embeddings/a.h5", "src"), ("results/models/a",)),
              recompute.Stage("compare", "x", ("results/models",), ("results/panel.json",)),
              recompute.Stage("paper", "x", ("results/panel.json", "results/models"), ("paper/_output/p.html",))]
    assert recompute.upstream(stages) == {"extract@a": set(), "analyze@a": {"extract@a"}, "compare": {"analyze@a"},
                                          "paper": {"compare", "analyze@a"}}
    assert stages[0].is_extraction and stages[0].item == "a" and not stages[1].is_extraction


def _job(tmp: Path, name: str, cmd: str, deps: tuple[str, ...], outs: tuple[str, ...]) -> recompute.Job:
    return recompute.Job(recompute.Stage(name, cmd, deps, outs), tmp, recompute.stage_env(tmp))


def test_independent_stages_run_at_once_and_a_failure_stops_what_reads_it(tmp_path: Path) -> None:
    lines: list[str] = []
    jobs = [_job(tmp_path, "a", "sleep 1; date +%s.%N > a", (), ("a",)),
            _job(tmp_path, "b", "sleep 1; date +%s.%N > b", (), ("b",)),
            _job(tmp_path, "c", "cat a b > c", ("a", "b"), ("c",)),
            _job(tmp_path, "bad", "echo broken >&2; exit 3", (), ("bad",)),
            _job(tmp_path, "after", "touch after", ("bad",), ("after",))]
    started = time.perf_counter()
    runs = recompute.run_jobs(jobs, tmp_path / "logs", workers=3, progress=lines.append)
    assert time.perf_counter() - started < 1.9, "a and b ran one after the other"
    assert [runs[n].code for n in "abc"] == [0, 0, 0] and (tmp_path / "c").read_text().count("\n") == 2
    assert runs["bad"].code == 3 and runs["bad"].tail == ["broken"]
    assert runs["after"].code is None and runs["after"].skipped == \
        "not run: the stage it reads from, bad, did not complete"
    assert not (tmp_path / "after").exists()
    assert "  bad: FAILED (exit 3) in" in "\n".join(lines)


def test_extractions_wait_while_other_stages_are_ready(tmp_path: Path) -> None:
    """The pipeline's copy reads the pulled extraction, the extraction runs in a copy of its own: the analysis
    does not wait for it, and the extraction goes last."""
    order = tmp_path / "order"
    (tmp_path / "extract").mkdir()
    extract = _job(tmp_path / "extract", "extract@m", f"echo extract >> {order}", (), ("e.h5",))
    jobs = [extract, _job(tmp_path, "analyze@m", f"echo analyze >> {order}", ("e.h5",), ("r",))]
    recompute.run_jobs(jobs, tmp_path / "logs", workers=1)
    assert order.read_text().split() == ["analyze", "extract"]


def test_source_files_leave_out_every_output(tmp_path: Path) -> None:
    import subprocess

    for rel in ("dvc.yaml", "src/m.py", "results/panel.json", "plots/a/m.csv", "notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / ".gitignore").write_text("notes.txt\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert recompute.source_files(tmp_path, ["results/panel.json", "plots/a"]) == [".gitignore", "dvc.yaml",
                                                                                  "src/m.py"]
    copy = recompute.scratch_copy(tmp_path, tmp_path.parent / "copy", ["src/m.py"], ["results"])
    assert (copy / "src/m.py").read_text() == "src/m.py" and (copy / "results/panel.json").is_file()


def _review(outputs: list[recorded.OutputRow]) -> Review:
    return Review({"CPU": "x <y>"}, "abc123 (no changes)", [Check("pull", True, "ok"), Check("verify", True, "ok")],
                  outputs, started="2026-12-01T00:00:00+00:00")


def test_the_verdict_says_what_was_recomputed() -> None:
    same = [recorded.OutputRow("data/embeddings/m.h5", "1", "extract@m", recorded.SAME),
            recorded.OutputRow("results/panel.json", "2", "compare", recorded.SAME)]
    assert _review(same).verdict == ("AGREES: every result recomputed from the pulled extractions, and the "
                                     "extractions recomputed from the models: every recomputed output is the bytes "
                                     "dvc.lock records, on this machine")
    pulled = [recorded.OutputRow("data/embeddings/m.h5", "1", "extract@m", recorded.PULLED, "no model"), same[1]]
    review = _review(pulled)
    assert review.passed and "the extractions pulled and verified, not recomputed" in review.verdict
    forged = recorded.OutputRow("results/panel.json", "2", "compare", recorded.DIFFERS,
                                "1 of 3 numbers differ, first primary/models/g/adjusted_p: 0.012 at recorded, 0.457 "
                                "at recomputed")
    review = _review([same[0], forged])
    assert not review.passed
    assert review.verdict == ("DOES NOT AGREE: 1 output(s) not the bytes dvc.lock records: results/panel.json "
                              "recomputed, differs: 1 of 3 numbers differ, first primary/models/g/adjusted_p: 0.012 at "
                              "recorded, 0.457 at recomputed")


def test_the_review_verdict_agrees_only_when_every_check_does() -> None:
    review = _review([])
    assert review.passed and review.verdict.startswith("AGREES")
    review.checks.append(Check("remote", None, "--remote cache: <http://x> cannot be reached"))
    assert not review.passed and review.verdict == "DOES NOT AGREE: not checked: remote"
    review.checks.append(Check("recompute", False, "1 of 4 output(s) differ"))
    assert review.verdict == "DOES NOT AGREE: failed: recompute; not checked: remote"
    assert not Review({}, "abc").passed  # nothing checked is no agreement


def test_the_page_escapes_every_string_and_the_certificate_holds_every_output(tmp_path: Path) -> None:
    row = recorded.OutputRow("results/<b>.json", "2", "compare", recorded.DIFFERS, "x & <y>", "3", [
        recorded.FileRow("results/<b>.json", "2", "3", recorded.DIFFERS,
                         filediff.Difference("results/<b>.json", "<script>alert(1)</script>", ["<i>detail</i>"]))])
    review = _review([row])
    review.checks.append(Check("remote", None, "--remote cache: <http://x> cannot be reached"))
    page = html_page(review)
    for raw in ("<b>", "<script>", "<i>", "<http://x>", "<y>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;http://x&gt;" in page and "abc123" in page
    doc = json.loads(certificate(review, tmp_path))
    assert doc["verdict"]["passed"] is False and doc["commit"] == "abc123 (no changes)"
    assert doc["outputs"][0]["status"] == recorded.DIFFERS and doc["outputs"][0]["files"][0]["recomputed_md5"] == "3"
    assert doc["started"] == "2026-12-01T00:00:00+00:00" and doc["uaprobe_version"]
    assert [c["name"] for c in doc["checks"]] == ["pull", "verify", "remote"]


@pytest.mark.parametrize("jobs", [0, -1])
def test_jobs_below_one_are_refused(tmp_path: Path, jobs: int) -> None:
    from uaprobe.errors import UAProbeError
    from uaprobe.repro.review import run

    (tmp_path / ".dvc").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    with pytest.raises(UAProbeError, match=f"--jobs {jobs}: give at least 1"):
        run(tmp_path, remote=None, out=tmp_path / "review.html", fingerprint=lambda: 0, verify_kwargs={}, jobs=jobs)


def test_an_extraction_recorded_on_a_gpu_is_not_recomputed_without_one(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the extraction would be recomputed and compared within tolerance")
    (tmp_path / "data/embeddings").mkdir(parents=True)
    with h5py.File(tmp_path / "data/embeddings/m.h5", "w") as f:
        f.attrs["device"] = "cuda:0"
    stage = recompute.Stage("extract@m", "x", (), ("data/embeddings/m.h5",))
    plan = recompute.extraction_plan(tmp_path, stage)
    assert not plan.recompute and plan.gpu
    assert plan.why.startswith("recorded on a GPU (cuda:0) and this machine has none; `uaprobe review` on a machine "
                               "with a CUDA GPU recomputes it and compares it within `uaprobe verify --against`'s "
                               "tolerance")


def test_a_model_that_cannot_be_had_is_not_recomputed_with_the_fix(tmp_path: Path) -> None:
    import yaml

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = ["m"]
    params["catalog"]["m"] = {"display": "M", "source": "local", "location": str(tmp_path / "gone"),
                              "params_millions": 0.1}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    plan = recompute.extraction_plan(tmp_path, recompute.Stage("extract@m", "x", (), ("data/embeddings/m.h5",)))
    assert not plan.recompute and not plan.gpu
    assert plan.why == (f"model 'm': local directory {tmp_path / 'gone'} not found; fix `catalog.m.location` (what "
                        "would recompute it: that fix, then `uaprobe review` where the model's weights can be had, "
                        "or `dvc repro -f -s extract@m`)")


def test_the_stages_are_read_from_dvc_yaml_from_any_directory(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text("models: [a, b]\n")
    (project / "dvc.yaml").write_text(
        "stages:\n  extract:\n    foreach: ${models}\n    do:\n      cmd: echo ${item} > e/${item}.h5\n"
        "      outs:\n        - e/${item}.h5\n  compare:\n    cmd: cat e/*.h5 > panel.json\n    deps: [e]\n"
        "    outs: [panel.json]\n")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([str(Path(sys.executable).with_name("dvc")), "init", "-q"], cwd=project, check=True)
    monkeypatch.chdir(tmp_path)
    stages = recompute.pipeline(project)
    assert [(s.name, s.outs) for s in stages] == [("extract@a", ("e/a.h5",)), ("extract@b", ("e/b.h5",)),
                                                  ("compare", ("panel.json",))]
    assert stages[2].deps == ("e",) and stages[0].cmd == "echo a > e/a.h5"
    assert recompute.upstream(stages)["compare"] == {"extract@a", "extract@b"}


def test_an_input_dvc_yaml_does_not_list_changed_after_the_lock_fails_naming_the_output(tmp_path: Path) -> None:
    """A stage reads `data/scale.txt`, which its `deps` do not list; the file changes after `dvc repro` wrote the
    lock: `dvc status` is clean, the recomputed output is not the recorded bytes, and the review names its key."""
    import subprocess

    from uaprobe.repro.lockfile import read_lock
    from uaprobe.repro.review import recompute_check

    dvc = str(Path(sys.executable).with_name("dvc"))

    def sh(*cmd: str) -> str:
        return subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    (tmp_path / "data").mkdir()
    (tmp_path / "data/values.txt").write_text("2\n")
    (tmp_path / "data/scale.txt").write_text("3\n")
    (tmp_path / "total.sh").write_text('echo "{\\"total\\": $(( $(cat data/values.txt) * $(cat data/scale.txt) ))}" '
                                       "> total.json\n")
    (tmp_path / "dvc.yaml").write_text("stages:\n  total:\n    cmd: sh total.sh\n    deps:\n      - total.sh\n"
                                       "      - data/values.txt\n    outs:\n      - total.json\n")
    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    sh(dvc, "repro")
    assert json.loads((tmp_path / "total.json").read_text()) == {"total": 6}
    sh("git", "add", "-A")
    sh("git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "locked")
    recorded_bytes = (tmp_path / "total.json").read_bytes()
    check, runs, rows = recompute_check(tmp_path, read_lock(tmp_path), extract=True, keep=False, jobs=1,
                                        progress=lambda _line: None)
    assert check.passed and [r.status for r in rows] == [recorded.SAME], check.details
    (tmp_path / "data/scale.txt").write_text("4\n")  # after the lock
    assert "up to date" in sh(dvc, "status")
    check, runs, rows = recompute_check(tmp_path, read_lock(tmp_path), extract=True, keep=False, jobs=1,
                                        progress=lambda _line: None)
    assert not check.passed and runs[0].code == 0
    assert rows[0].path == "total.json" and rows[0].status == recorded.DIFFERS
    assert rows[0].why.startswith("1 of 1 numbers differ, first total: 6.0 at recorded, 8.0 at recomputed"), rows[0].why
    assert (tmp_path / "total.json").read_bytes() == recorded_bytes, "the workspace is not written"
