"""`uaprobe verify --against`: every number of two runs within a tolerance, per file."""

from __future__ import annotations

import json
import re
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from uaprobe import cli
from uaprobe.repro import numdiff
from uaprobe.errors import UAProbeError

METRICS = {"model": "tiny", "layerwise": {"mean": {"peak_r": 0.8125, "peak_layer": 2, "p": None}},
           "flags": {"aligned": True}}
RESULTS = {"poolings": {"mean": {"pearson_r": [0.5, -0.25, 0.75], "ua": [1.5e-6, 2.0e-6, None]}},
           "numerics": {"isa": "AVX2"}, "display": "Tiny"}
PLOT = "layer,r_mean,label\n0,0.5,a\n1,-0.25,b\n2,,c\n"


def make_run(root: Path) -> Path:
    for rel, body in (("metrics/models/tiny.json", json.dumps(METRICS, indent=2)),
                      ("results/models/tiny/layerwise.json", json.dumps(RESULTS, indent=2)),
                      ("plots/layerwise/tiny.csv", PLOT)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    return root


def verify(ours: Path, theirs: Path | str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    rc = cli.main(["verify", "--repo", str(ours), "--against", str(theirs), *extra])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def test_leaves_are_every_number_with_its_key_path() -> None:
    assert dict(numdiff.leaves(METRICS)) == {"layerwise/mean/peak_r": 0.8125, "layerwise/mean/peak_layer": 2.0,
                                             "layerwise/mean/p": None}
    assert dict(numdiff.leaves(RESULTS))["poolings/mean/ua/1"] == 2.0e-6
    assert dict(numdiff.csv_leaves(PLOT)) == {"0/layer": 0.0, "0/r_mean": 0.5, "1/layer": 1.0, "1/r_mean": -0.25,
                                              "2/layer": 2.0, "2/r_mean": None}


def test_differences_and_tolerance_against_a_direct_computation() -> None:
    assert numdiff.differences(1.0, 1.001) == pytest.approx((0.001, 0.001 / 1.001))
    assert numdiff.differences(0.0, 0.0) == (0.0, 0.0)
    assert numdiff.differences(0.0, 1e-9)[1] == 1.0
    assert numdiff.differences(math.nan, math.nan) == (0.0, 0.0)
    # |a - b| <= atol + rtol * max(|a|, |b|)
    assert numdiff.within(100.0, 100.009, atol=0.0, rtol=1e-4)
    assert not numdiff.within(100.0, 100.011, atol=0.0, rtol=1e-4)
    assert numdiff.within(0.0, 1e-4, atol=1e-4, rtol=0.0) and not numdiff.within(0.0, 1.1e-4, atol=1e-4, rtol=0.0)


def test_identical_checkouts_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    rc, out = verify(a, b, capsys)
    assert rc == 0, out
    assert "3 of 3 files within tolerance" in out
    assert "pass  metrics/models/tiny.json: 2 numbers, max abs diff 0, max rel diff 0" in out


def test_a_planted_1e_3_change_fails_naming_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    planted = json.loads(json.dumps(METRICS))
    planted["layerwise"]["mean"]["peak_r"] += 1e-3
    (b / "metrics/models/tiny.json").write_text(json.dumps(planted), encoding="utf-8")
    rc, out = verify(a, b, capsys)
    assert rc == 1
    assert "FAIL  metrics/models/tiny.json" in out
    assert "metrics/models/tiny.json: layerwise/mean/peak_r: 0.8125 at" in out
    assert re.search(r"max abs diff 0\.001 \(layerwise/mean/peak_r: 0\.8125 at \S+, 0\.8135 at \S+\)", out), out
    assert "2 of 3 files within tolerance; 1 not: metrics/models/tiny.json" in out
    # a wider stated tolerance accepts it
    assert verify(a, b, capsys, "--atol", "2e-3")[0] == 0


def test_last_digit_differences_pass_and_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    (b / "plots/layerwise/tiny.csv").write_text(PLOT.replace("0.5", "0.500003"), encoding="utf-8")
    rc, out = verify(a, b, capsys)
    assert rc == 0, out
    assert "pass  plots/layerwise/tiny.csv: 5 numbers, max abs diff 3e-06 (0/r_mean: 0.5 at " in out


def test_structure_changes_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    changed = json.loads(json.dumps(RESULTS))
    changed["poolings"]["mean"]["ua"][2] = 3e-6  # null -> number
    changed["poolings"]["mean"]["pearson_r"].append(0.1)  # one more number
    (b / "results/models/tiny/layerwise.json").write_text(json.dumps(changed), encoding="utf-8")
    (b / "metrics/models/tiny.json").unlink()
    rc, out = verify(a, b, capsys)
    assert rc == 1
    assert "poolings/mean/ua/2: None at" in out and "poolings/mean/pearson_r/3: missing at" in out
    assert f"metrics/models/tiny.json: file missing at {b}" in out


def test_bad_input_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      caplog: pytest.LogCaptureFixture) -> None:
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    (b / "metrics/models/tiny.json").write_text("{", encoding="utf-8")
    rc, out = verify(a, b, capsys)
    assert rc == 2 and "metrics/models/tiny.json: not valid JSON" in out + caplog.text
    rc, out = verify(a, b, capsys, "--rtol", "-1")
    assert rc == 2 and "tolerances must be >= 0" in out + caplog.text
    with pytest.raises(UAProbeError, match="no metrics, results or plots files"):
        numdiff.compare_trees(numdiff.Checkout(tmp_path / "empty1"), numdiff.Checkout(tmp_path / "empty2"))


def test_against_a_git_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                caplog: pytest.LogCaptureFixture) -> None:
    repo = make_run(tmp_path / "repo")
    env_git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=repo, check=True, capture_output=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*env_git, "commit", "-q", "-m", "run"], cwd=repo, check=True)
    rc, out = verify(repo, "HEAD", capsys)
    assert rc == 0 and "3 of 3 files within tolerance" in out, out
    layerwise = repo / "results/models/tiny/layerwise.json"
    layerwise.write_text(layerwise.read_text().replace("0.75", "0.751"), encoding="utf-8")
    rc, out = verify(repo, "HEAD", capsys)
    assert rc == 1 and "results/models/tiny/layerwise.json: poolings/mean/pearson_r/2: 0.75" in out, out
    rc, out = verify(repo, "no-such-rev", capsys)
    assert rc == 2 and "cannot open revision 'no-such-rev'" in out + caplog.text
    shutil.rmtree(repo)
