"""The study's own words: the dataset is the original study's only when it is the file data/README.md
documents; the default panel is cited, another is named from params.yaml; counts follow the panel."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from uaprobe.extraction.dataset import sha256_of
from uaprobe.publishing.prose.primitives import study
from outputs_double import InMemory
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.provenance.values import Ledger, plain_text

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sha256_of(REPO / "data" / "dataset.json")


def outputs(models: dict[str, str], *, sha: str, root: Path = REPO, categories: int = 6) -> Outputs:
    params = SimpleNamespace(model=lambda m: SimpleNamespace(display=models[m]))
    layerwise = {"extraction": {"dataset_sha256": sha}, "n_pairs": [5] * categories,
                 "categories": [f"kind_{i}" for i in range(categories)], "permutation_mode": "exact",
                 "permutation_count": 720}
    files = {Outputs.model_file(m, "layerwise"): layerwise for m in models}
    return InMemory(root=root, params=params, models=tuple(models), ledger=Ledger(root), files=files)  # type: ignore[arg-type]


def test_the_shipped_dataset_is_the_original_study_s_and_another_is_the_study_s_own(tmp_path: Path) -> None:
    assert study.documented_sha256(outputs({"a": "A"}, sha=SHIPPED)) == SHIPPED  # the README's "as shipped" line
    original = plain_text(study.dataset_sentence(outputs({"a": "A"}, sha=SHIPPED)))
    assert original == ("The dataset is the original study's: 30 statement pairs in 6 categories (kind 0, kind 1, "
                        "kind 2, kind 3, kind 4, kind 5).")
    own = plain_text(study.dataset_sentence(outputs({"a": "A"}, sha="f" * 64, categories=4)))
    assert own.startswith("The dataset is this study's own (`data/dataset.json`, documented in `data/README.md`; "
                          "not the original study's): 20 statement pairs in 4 categories")
    # one model that read another file is enough to make it not the original's; no README, no claim
    mixed = outputs({"a": "A", "b": "B"}, sha=SHIPPED)
    mixed.files[Outputs.model_file("b", "layerwise")] = {"extraction": {"dataset_sha256": "0" * 64}}
    assert not study.is_documented_dataset(mixed)
    assert not study.is_documented_dataset(outputs({"a": "A"}, sha=SHIPPED, root=tmp_path))


@pytest.mark.parametrize("models,expected", [
    ({"solo": "Solo-7M"}, "the model"), ({"a": "A", "b": "B"}, "both models"),
    ({"a": "A", "b": "B", "c": "C"}, "the three models"), ({f"m{i}": f"M{i}" for i in range(12)}, "the 12 models")])
def test_the_panel_s_count_words(models: dict[str, str], expected: str) -> None:
    out = outputs(models, sha="0" * 64)
    assert study.the_models(out) == expected
    assert study.models_possessive(out) == ("the model's" if len(models) == 1 else "the models'")
    assert study.across_models_clause(out) == ("" if len(models) == 1 else ", corrected across the models,")


def test_the_default_panel_is_cited_and_another_is_named() -> None:
    default = plain_text(study.panel_sentence(outputs({"smollm2-135m": "SmolLM2-135M-Instruct",
                                                       "gemma3-270m": "Gemma-3-270M"}, sha=SHIPPED)))
    assert default.startswith("The default panel uses SmolLM2 [@allal2025smollm2] and Gemma 3 [@gemma2025gemma3]")
    one = plain_text(study.panel_sentence(outputs({"solo": "Solo-7M"}, sha=SHIPPED)))
    assert one.startswith("The panel of `params.yaml` has one model, Solo-7M (@tbl-panel)")
    hostile = plain_text(study.panel_sentence(outputs({"x": "<b>X</b>", "y": "Y", "z": "Z"}, sha=SHIPPED)))
    assert "has three models, \\<b\\>X\\</b\\>, Y and Z" in hostile  # escaped Markdown: shown as the text it is
