"""The neutral control: its data file, its extraction beside the study's pairs, its analysis."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from extract_stage import run_stage
from uaprobe.extraction import extract
from uaprobe.config import ModelSpec
from uaprobe.extraction.dataset import load_control, sha256_of
from uaprobe.errors import DatasetError
from uaprobe.extraction.models import load_model
from uaprobe.extraction.store import read_embeddings
from uaprobe.extraction.tokens import encode, prepare_tokenizer

REPO = Path(__file__).resolve().parents[1]
CONTROL = REPO / "data" / "neutral_control.json"


def test_the_control_file_holds_the_originals_pairs_with_its_source():
    raw = json.loads(CONTROL.read_text(encoding="utf-8"))
    assert "buk81/uniformity-asymmetry" in raw["source"]["repository"] and "MIT" in raw["source"]["licence"]
    ds = load_control(CONTROL)
    assert ds.categories == ("neutral", "political")
    assert ds.n_pairs == 18
    assert ds.texts[:2] == ["The sky is blue during the day.", "Water freezes at zero degrees Celsius."]


def test_a_control_file_without_categories_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "control.json"
    bad.write_text(json.dumps({"neutral": {"description": "x", "pairs": [["a", "b"], ["c", "d"]]}}), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"control\.json: top level: missing key 'categories'"):
        load_control(bad)
    bad.write_text(json.dumps({"categories": {"neutral": {"description": "x", "pairs": [["a", "a"], ["c", "d"]]}}}),
                   encoding="utf-8")
    with pytest.raises(DatasetError, match=r"neutral\.pairs\[0\]: A and B are identical"):
        load_control(bad)


def test_the_extract_stage_writes_the_control_beside_the_study(small_project: Path, tiny_neox: Path):
    out = small_project / "emb" / "tiny.h5"
    run_stage(small_project, out, control_path=CONTROL)
    ctrl_path = out.with_name("tiny.control.h5")
    study, ctrl = read_embeddings(out), read_embeddings(ctrl_path)
    ds = load_control(CONTROL)
    assert ctrl.text == ds.texts
    assert list(ctrl.category[:2]) == ["neutral", "neutral"] and list(ctrl.side[:4]) == [0, 1, 0, 1]
    assert ctrl.attrs["dataset_sha256"] == sha256_of(CONTROL) != study.attrs["dataset_sha256"]
    assert ctrl.attrs["model_id"] == study.attrs["model_id"] and ctrl.attrs["dtype"] == study.attrs["dtype"]
    np.testing.assert_array_equal(ctrl.aniso_states, study.aniso_states)
    model, tokenizer, _, _ = load_model(ModelSpec(display="t", source="local", location=str(tiny_neox)), "tiny",
                                        device=torch.device("cpu"))
    prepare_tokenizer(tokenizer)
    direct = extract.forward_batch(model, encode(tokenizer, ds.texts), drop="special")
    for p in ("mean", "first", "last"):
        np.testing.assert_allclose(ctrl.pooled[p], direct.pooled[p], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ctrl.nll_mean, direct.nll_mean, atol=1e-6)
    # the study's file is the same bytes as without the control
    alone = run_stage(small_project, small_project / "alone" / "tiny.h5")
    assert hashlib.md5(alone.read_bytes()).hexdigest() == hashlib.md5(out.read_bytes()).hexdigest()
    assert not alone.with_name("tiny.control.h5").exists()


def test_verify_checks_a_control_file_against_the_control_pairs(tmp_path: Path):
    import h5py

    from uaprobe.cli import extraction_mismatches

    (tmp_path / "data" / "embeddings").mkdir(parents=True)
    for name in ("dataset.json", "neutral_control.json", "anisotropy_prompts.txt"):
        (tmp_path / "data" / name).write_bytes((REPO / "data" / name).read_bytes())

    def fake(name: str, dataset: str) -> None:
        with h5py.File(tmp_path / "data" / "embeddings" / name, "w") as fh:
            fh.attrs["dataset_sha256"] = sha256_of(tmp_path / "data" / dataset)
            fh.attrs["prompts_sha256"] = sha256_of(tmp_path / "data" / "anisotropy_prompts.txt")
            fh.attrs["complete"] = True

    fake("m.h5", "dataset.json")
    fake("m.control.h5", "neutral_control.json")
    assert extraction_mismatches(tmp_path) == []
    fake("m.control.h5", "dataset.json")
    problems = extraction_mismatches(tmp_path)
    assert len(problems) == 1 and "m.control.h5: dataset_sha256" in problems[0] and "neutral_control.json" in problems[0]


def test_a_bad_control_file_stops_the_stage_before_any_extraction(small_project: Path, tmp_path: Path, caplog):
    from extract_stage import stage, stage_args

    bad = tmp_path / "control.json"
    bad.write_text('{"categories": {"neutral": {"description": "x", "pairs": [["a"], ["b", "c"]]}}}', encoding="utf-8")
    out = small_project / "emb" / "tiny.h5"
    with caplog.at_level("ERROR"):
        rc = stage().main(stage_args(small_project, out, "--control", str(bad)))
    assert rc == 2
    assert f"{bad}: neutral.pairs[0]: expected a list of exactly two strings" in caplog.text
    assert not out.exists() and not out.with_name("tiny.control.h5").exists()
