"""A small project tree of analysis outputs, made by the real analysis on synthetic extraction files.

Each synthetic model is an extraction file from :mod:`synthetic_h5` (the six categories of the
dataset, random or planted geometry) run through :func:`uaprobe.analysis.pipeline.analyze_model`
and :func:`~uaprobe.analysis.pipeline.compare_panel`, written as the ``analyze`` and ``compare``
stages write them. So the figure, manuscript and rendering tests read exactly the layout the
pipeline produces, without the models.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from synthetic_h5 import write_synthetic_h5
from uaprobe.analysis.pipeline import analyze_control, analyze_model, compare_panel
from uaprobe.schema.text import csv_text
from uaprobe.config import params_from_mapping
from uaprobe.extraction.store import read_embeddings
from uaprobe.schema import Record, read_results, results_text

REPO = Path(__file__).resolve().parents[1]

CATEGORIES = ("ground_truth_numeric", "ground_truth_nonnumeric", "tech_philosophy", "lifestyle",
              "business", "scientific_facts")
SYNTHETIC_MODELS: dict[str, dict[str, Any]] = {
    "tiny-a": {"display": "Tiny-A", "n_layers": 6, "params_millions": 1.5, "hidden": 16, "kind": "random",
               "bos_added": False},
    "tiny-b": {"display": "Tiny-B", "n_layers": 4, "params_millions": 3.0, "hidden": 12, "kind": "planted",
               "bos_added": True},
}
PAIRS_PER_CATEGORY = (7, 6, 8, 6, 7, 6)


def synthetic_params(models: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The project's params.yaml with a catalog of synthetic models and small analysis settings."""
    models = SYNTHETIC_MODELS if models is None else models
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = list(models)
    params["catalog"] = {m: {"display": s["display"], "source": "local", "location": f"/models/{m}",
                             "params_millions": s["params_millions"]} for m, s in models.items()}
    params["analysis"].update(bootstrap_resamples=1000, permutations=1000)
    params["analysis"]["bins"].update(k=[3, 4], partitions=10, ci_k=3)
    params["analysis"]["robustness"].update(lexical_seeds=2, null_partitions=50, anisotropy_bootstrap=20)
    return params


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_synthetic_results(root: Path, *, seed: int = 0, models: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write params.yaml, results/, metrics/, plots/ and a dvc.lock under ``root`` (every results file checked
    against its schema as the stages check it); return the documents."""
    models = SYNTHETIC_MODELS if models is None else models
    params = synthetic_params(models)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    published = root / "data" / "published" / "pythia-6-9b.json"
    published.parent.mkdir(parents=True, exist_ok=True)
    published.write_bytes((REPO / "data" / "published" / "pythia-6-9b.json").read_bytes())
    reference = root / "data" / "published" / "reference-models.json"
    reference.write_bytes((REPO / "data" / "published" / "reference-models.json").read_bytes())
    analysis = params_from_mapping(params).analysis
    docs: dict[str, dict[str, Any]] = {}
    for i, (model_id, spec) in enumerate(models.items()):
        h5 = write_synthetic_h5(root / "data" / "embeddings" / f"{model_id}.h5", pairs_per_category=PAIRS_PER_CATEGORY,
                                n_layers=spec["n_layers"], hidden=spec["hidden"], seed=seed + i, kind=spec["kind"],
                                model_id=model_id, display=spec["display"], category_names=CATEGORIES,
                                bos_added=spec["bos_added"])
        out = analyze_model(read_embeddings(h5), params=analysis, model_id=model_id, display=spec["display"])
        # the control pairs: two small categories, as data/neutral_control.json has
        ctrl_h5 = write_synthetic_h5(root / "data" / "embeddings" / f"{model_id}.control.h5",
                                     pairs_per_category=(6, 4), n_layers=spec["n_layers"], hidden=spec["hidden"],
                                     seed=seed + 100 + i, model_id=model_id, display=spec["display"],
                                     category_names=("neutral", "political"), bos_added=spec["bos_added"])
        ctrl = analyze_control(read_embeddings(ctrl_h5), params=analysis, model_id=model_id, display=spec["display"])
        out.results["neutral_control"] = ctrl["results"]
        out.metrics["neutral_control"] = ctrl["metrics"]
        docs[model_id] = out.results
        for stem, doc in out.results.items():
            path = root / "results" / "models" / model_id / f"{stem}.json"
            _write(path, results_text(doc, kind=Path(stem).name, shown=path))
        path = root / "metrics" / "models" / f"{model_id}.json"
        _write(path, results_text(out.metrics, kind="metrics", shown=path))
        for stem, cols in out.plots.items():
            _write(root / "plots" / stem / f"{model_id}.csv", csv_text(cols))
    typed = {m: {stem: read_results(root, f"results/models/{m}/{stem}.json")
                 for stem in ("layerwise", "anisotropy", "sink_excluded/layerwise")} for m in docs}
    panel = compare_panel(model_ids=list(models), layerwise_results={m: d["layerwise"] for m, d in typed.items()},
                          anisotropy_results={m: d["anisotropy"] for m, d in typed.items()},
                          sink_excluded_results={m: d["sink_excluded/layerwise"] for m, d in typed.items()},
                          params_millions={m: s["params_millions"] for m, s in models.items()}, params=analysis)
    _write(root / "results" / "panel.json", results_text(panel.results["panel"], kind="panel", shown="results/panel.json"))
    _write(root / "metrics" / "panel.json", results_text(panel.metrics, kind="panel_metrics", shown="metrics/panel.json"))
    write_dvc_lock(root)
    return {"params": params, "models": docs, "panel": panel.results["panel"]}


def write_dvc_lock(root: Path) -> None:
    """A dvc.lock in DVC's layout whose outs are the results and metrics files under ``root``."""
    stages: dict[str, Any] = {}
    for path in sorted((root / "results").rglob("*.json")) + sorted((root / "metrics").rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        if "panel" in rel:
            stage = "compare"
        elif rel.startswith("results/models/"):
            stage = f"analyze@{rel.split('/')[2]}"
        else:
            stage = f"analyze@{path.stem}"
        stages.setdefault(stage, {"cmd": f"python stages/{stage.split('@')[0]}.py", "outs": []})
        stages[stage]["outs"].append({"path": rel, "hash": "md5", "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                                      "size": path.stat().st_size})
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False), encoding="utf-8")


def load_results(root: Path, model_id: str, name: str) -> Record:
    """A results file of the synthetic tree, read through its schema."""
    return read_results(root, f"results/models/{model_id}/{name}.json")
