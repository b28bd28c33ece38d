"""A researcher's own study: this repository with another dataset and another panel of tiny local models,
run through the real pipeline (`dvc repro`) to the rendered paper, for the end-to-end tests of any
dataset and panel size and of a hostile dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pipeline_project import dvc, git, project_files
from tiny_models import REPO, build_tiny_neox

import json
import shutil


def study_dataset(categories: list[str], *, pairs: int = 3, text: str = "") -> dict[str, Any]:
    """``pairs`` pairs per category, drawn in order from the shipped dataset's statements (so that the tiny
    models' tokenizer knows their words), each category under its own name; ``text`` is prepended to every
    statement (a hostile string, say)."""
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    every = [pair for body in raw.values() for pair in body["pairs"]]
    out: dict[str, Any] = {}
    for i, name in enumerate(categories):
        chosen = every[i * pairs:(i + 1) * pairs]
        out[name] = {"description": f"category {i}",
                     "pairs": [[f"{text}{a}", f"{text}{b}"] for a, b in chosen]}
    return out


def make_study(dest: Path, models: dict[str, dict[str, Any]], dataset: dict[str, Any], *,
               analysis: dict[str, Any] | None = None, files: dict[str, str] | None = None) -> Path:
    """The repository copied to ``dest`` with ``dataset`` as data/dataset.json and ``models`` (id -> ``display``,
    ``layers``) as tiny local GPT-NeoX models, small resampling counts and ``analysis`` merged into the analysis
    parameters; ``files``: further files (path -> text). A git repository with one commit."""
    for rel in project_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    (dest / "data" / "dataset.json").write_text(json.dumps(dataset, indent=1, ensure_ascii=False), encoding="utf-8")
    params = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = list(models)
    for model_id, spec in models.items():
        location = build_tiny_neox(dest.parent / f"model-{model_id}", bos=False, layers=spec["layers"])
        params["catalog"][model_id] = {"display": spec["display"], "source": "local", "location": str(location),
                                       "params_millions": spec.get("params_millions", 0.1)}
    params["extract"]["device"] = "cpu"
    params["analysis"].update(bootstrap_resamples=200, permutations=200)
    params["analysis"]["bins"].update(k=[3, 4], partitions=10, ci_k=3)
    params["analysis"]["robustness"].update(lexical_seeds=2, null_partitions=50, anisotropy_bootstrap=20)
    params["analysis"]["primary"]["left_out"] = next(iter(dataset))
    for key, value in (analysis or {}).items():
        params["analysis"][key] = value
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")
    for rel, text in (files or {}).items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "own study", cwd=dest)
    return dest


def repro(project: Path) -> Path:
    """`dvc repro` of the whole pipeline; the rendered paper's directory."""
    dvc("repro", cwd=project)
    return project / "paper" / "_output"
