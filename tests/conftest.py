"""Shared fixtures: a tiny random GPT-NeoX (the Pythia code path, no BOS) saved to a local directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
from tiny_models import build_tiny_neox, small_dataset  # noqa: E402


@pytest.fixture(scope="session")
def tiny_neox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-layer GPT-NeoX with random weights (seed 0) and a BPE tokenizer that adds no BOS."""
    return build_tiny_neox(tmp_path_factory.mktemp("tiny-neox"), bos=False)


@pytest.fixture(scope="session")
def tiny_neox_bos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model with a tokenizer that prepends a BOS token (the Gemma convention)."""
    return build_tiny_neox(tmp_path_factory.mktemp("tiny-neox-bos"), bos=True)


@pytest.fixture()
def small_project(tmp_path: Path, tiny_neox: Path) -> Path:
    """A project directory: params.yaml with the tiny model, a 3-category dataset, 3 prompts."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dataset.json").write_text(json.dumps(small_dataset(), indent=1), encoding="utf-8")
    (tmp_path / "data" / "anisotropy_prompts.txt").write_text(
        "The capital of France is Paris, which is known for\nOnce upon a time there lived\n"
        "Machine learning models learn patterns from data by\n", encoding="utf-8")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["models"] = ["tiny"]
    params["catalog"] = {"tiny": {"display": "Tiny-NeoX", "source": "local", "location": str(tiny_neox),
                                  "params_millions": 0.1}}
    params["extract"]["batch_size"] = 4
    params["extract"]["device"] = "cpu"
    params["analysis"].update(bootstrap_resamples=200, permutations=200)
    params["analysis"]["bins"].update(k=[3, 4], partitions=10, ci_k=3)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return tmp_path


@pytest.fixture()
def tmpfs(tmp_path: Path):
    """Mount a tmpfs of a given size at ``tmp_path / name`` or at a given directory; unmounted at the end.
    Skipped, with the reason, where mounting is not possible (not root, no mount command)."""
    mounted: list[Path] = []

    def mount(where: str | Path, size: str) -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a tmpfs needs root and the mount command (CI runs as root)")
        target = where if isinstance(where, Path) else tmp_path / where
        target.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode})")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def remount_read_only(directory: Path) -> None:
    proc = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot remount read-only ({proc.stderr.strip()})")
