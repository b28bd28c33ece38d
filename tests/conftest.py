"""Shared fixtures: a tiny random GPT-NeoX (the Pythia code path, no BOS) saved to a local directory,
and a project tree of analysis outputs made by the real ``analyze`` and ``compare`` stages from
synthetic extraction files."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from uaprobe.repro import numerics

# The stages' pins, before numpy, scipy or torch load in this process (nothing above, pytest and its
# plugins included, imports one of them): the tests then compute on the CPU code paths the stages
# compute on, whatever the machine offers beyond AVX2 (test_numerics checks it). The analysis
# stages' pins, one BLAS thread included: the analyses run in this process, and the extraction's
# bytes do not depend on the thread count.
numerics.pin(analysis=True)

REPO = Path(__file__).resolve().parents[1]
from synthetic_h5 import CATEGORIES, CONTROL_CATEGORIES, PAIRS_PER_CATEGORY, SYNTHETIC_MODELS, synthetic_params, write_synthetic_h5  # noqa: E402
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


def _stage(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"conftest_stage_{name}", REPO / "stages" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_synthetic_project(root: Path, *, models: dict[str, dict[str, Any]] | None = None, seed: int = 0) -> Path:
    """params.yaml, the published reference files and synthetic extraction files (the six categories
    of the dataset, and two control categories) under ``root``, then ``results/``, ``metrics/`` and
    ``plots/`` written by the ``analyze`` and ``compare`` stages themselves, run as DVC runs them (from
    ``root``, with relative paths), and a ``dvc.lock`` whose outs are those files."""
    models = SYNTHETIC_MODELS if models is None else models
    params = synthetic_params(models)
    root.mkdir(parents=True, exist_ok=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    for name in ("pythia-6-9b.json", "reference-models.json"):
        target = root / "data" / "published" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((REPO / "data" / "published" / name).read_bytes())
    for i, (model_id, spec) in enumerate(models.items()):
        common = dict(n_layers=spec["n_layers"], hidden=spec["hidden"], model_id=model_id, display=spec["display"],
                      bos_added=spec["bos_added"])
        write_synthetic_h5(root / "data" / "embeddings" / f"{model_id}.h5", pairs_per_category=PAIRS_PER_CATEGORY,
                           seed=seed + i, kind=spec["kind"], category_names=CATEGORIES,
                           **common)
        write_synthetic_h5(root / "data" / "embeddings" / f"{model_id}.control.h5", pairs_per_category=(6, 4),
                           seed=seed + 100 + i, category_names=CONTROL_CATEGORIES, **common)
    analyze, compare = _stage("analyze"), _stage("compare")
    with contextlib.chdir(root):
        assert analyze.main([arg for m in models for arg in ("--model", m)] + ["--controls"]) == 0
        assert compare.main([]) == 0
    _write_dvc_lock(root)
    return root


def _write_dvc_lock(root: Path) -> None:
    stages: dict[str, Any] = {}
    for path in sorted((root / "results").rglob("*.json")) + sorted((root / "metrics").rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        stage = "compare" if "panel" in rel else "analyze"
        stages.setdefault(stage, {"cmd": f"python stages/{stage.split('@')[0]}.py", "outs": []})
        stages[stage]["outs"].append({"path": rel, "hash": "md5", "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                                      "size": path.stat().st_size})
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False),
                                   encoding="utf-8")


@pytest.fixture(scope="session")
def synthetic_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-model synthetic project (:data:`synthetic_h5.SYNTHETIC_MODELS`), built once per session.
    Read it; a test that writes into a project takes :func:`synthetic_project` instead."""
    return build_synthetic_project(tmp_path_factory.mktemp("synthetic-tree") / "tree")


@pytest.fixture()
def synthetic_project(synthetic_tree: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`synthetic_tree`."""
    return Path(shutil.copytree(synthetic_tree, tmp_path / "project"))


@pytest.fixture(scope="session")
def make_synthetic_project() -> Callable[..., Path]:
    """:func:`build_synthetic_project`, for a project of other synthetic models."""
    return build_synthetic_project
