"""Helpers to run the extract stage (stages/extract.py) on small projects, in-process or as a subprocess."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "stages" / "extract.py"
PROMPTS = ("The capital of France is Paris, which is known for\nOnce upon a time there lived\n"
           "Machine learning models learn patterns from data by\n")


@lru_cache(maxsize=1)
def stage() -> ModuleType:
    """stages/extract.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("uaprobe_stage_extract", STAGE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def real_dataset(pairs_per_category: int | None = None, categories: int | None = None) -> dict[str, Any]:
    """The shipped dataset, optionally cut to the first categories and pairs."""
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    names = list(raw)[:categories] if categories else list(raw)
    return {name: {"description": raw[name]["description"], "pairs": raw[name]["pairs"][:pairs_per_category]}
            for name in names}


def write_project(root: Path, model_dir: Path, *, dataset: dict[str, Any], batch_size: int = 4,
                  drop: str = "special", max_length: int | None = None) -> Path:
    """A project directory: params.yaml with the tiny model as `tiny`, the dataset, three prompts."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "data" / "dataset.json").write_text(json.dumps(dataset, indent=1), encoding="utf-8")
    (root / "data" / "anisotropy_prompts.txt").write_text(PROMPTS, encoding="utf-8")
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = ["tiny"]
    params["catalog"] = {"tiny": {"display": "Tiny-NeoX", "source": "local", "location": str(model_dir),
                                  "params_millions": 0.1}}
    params["extract"].update(batch_size=batch_size, device="cpu", max_length=max_length)
    params["pooling"]["drop"] = drop
    params["analysis"]["bins"].update(k=[3, 4], ci_k=3)  # bins a small dataset allows (checked before the model loads)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return root


def stage_args(project: Path, out: Path, *extra: str) -> list[str]:
    return ["--model", "tiny", "--params", str(project / "params.yaml"),
            "--dataset", str(project / "data" / "dataset.json"),
            "--prompts", str(project / "data" / "anisotropy_prompts.txt"), "--out", str(out), *extra]


def run_stage(project: Path, out: Path, **kwargs: Any) -> Path:
    """The stage's run() in this process."""
    return stage().run(model_id="tiny", params_path=project / "params.yaml",
                       dataset_path=project / "data" / "dataset.json",
                       prompts_path=project / "data" / "anisotropy_prompts.txt", out=out,
                       progress=False, **kwargs)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a stage subprocess: one thread (2-core CI), no colours, the repo's src first."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_in(directory: Path) -> list[str]:
    """Names in ``directory`` (empty if it does not exist), sorted."""
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def one_torch_thread():
    """A fixture body: the tiny model runs fastest on one thread (no thread spin on a busy 2-core machine)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
