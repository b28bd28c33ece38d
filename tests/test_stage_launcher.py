"""stages/run.sh: dvc.yaml's stage commands run with the project's interpreter from a fresh shell,
whatever `python` the PATH holds (the README's `.venv/bin/dvc repro` without an activated venv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
FRESH_PATH = "/usr/bin:/bin"
"""A fresh shell's PATH: no project virtual environment on it (at most a system python3)."""


def fresh_env(**extra: str) -> dict[str, str]:
    env = {"PATH": FRESH_PATH, "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    if not (REPO / ".venv" / "bin" / "python").exists():  # the suite runs from another environment
        env["UAPROBE_VENV"] = sys.prefix
    env.update(extra)
    return env


def stage_commands() -> dict[str, str]:
    """Every stage command of dvc.yaml, with the default launcher and a model id filled in."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    out = {}
    for name, stage in stages.items():
        cmd = (stage.get("do") or stage)["cmd"]
        out[name] = cmd.replace("${extract.launcher}", "python").replace("${item}", "smollm2-135m")
    return out


def test_every_stage_command_goes_through_the_launcher() -> None:
    for name, cmd in stage_commands().items():
        assert cmd.startswith("sh stages/run.sh "), f"dvc.yaml stage {name}: {cmd}"


@pytest.mark.parametrize("stage", ["extract", "analyze", "compare", "figures", "paper"])
def test_stage_command_runs_from_a_fresh_shell(stage: str) -> None:
    cmd = stage_commands()[stage] + " --help"
    proc = subprocess.run(["sh", "-c", cmd], cwd=REPO, env=fresh_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "usage:" in proc.stdout and "Traceback" not in proc.stderr


def test_launcher_puts_the_project_environment_first() -> None:
    probe = "import os, sys; print(sys.prefix); print(os.environ['PYTHONHASHSEED'])"
    proc = subprocess.run(["sh", "stages/run.sh", "python", "-c", probe], cwd=REPO,
                          env=fresh_env(PYTHONHASHSEED="123"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    prefix, seed = proc.stdout.split()
    expected = os.environ.get("UAPROBE_VENV") or fresh_env().get("UAPROBE_VENV") or str(REPO / ".venv")
    assert Path(prefix).resolve() == Path(expected).resolve() and seed == "0"


def _copy_launcher(root: Path) -> Path:
    (root / "stages").mkdir(parents=True)
    shutil.copy2(REPO / "stages" / "run.sh", root / "stages" / "run.sh")
    return root


def test_a_dvc_experiment_copy_uses_the_enclosing_projects_environment(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".venv").parent.mkdir(parents=True)
    (project / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    copy = _copy_launcher(project / ".dvc" / "tmp" / "exps" / "tmpabc123")
    proc = subprocess.run(["sh", "stages/run.sh", "python", "-c", "import uaprobe, sys; print(sys.prefix)"],
                          cwd=copy, env={**fresh_env(), "UAPROBE_VENV": ""}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(project / ".venv")


def test_without_an_environment_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    root = _copy_launcher(tmp_path / "clone")
    proc = subprocess.run(["sh", "stages/run.sh", "python", "stages/analyze.py"], cwd=root,
                          env={**fresh_env(), "UAPROBE_VENV": ""}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "run `make setup`" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(["sh", "stages/run.sh", "python", "-V"], cwd=root,
                          env=fresh_env(UAPROBE_VENV=str(tmp_path / "nowhere")), capture_output=True, text=True)
    assert proc.returncode == 2 and f"{tmp_path / 'nowhere'}/bin/python not found" in proc.stderr
