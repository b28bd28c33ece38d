"""The seed-exact preset (``preset: original``) and ``extract.dtype``, on the tiny GPT-NeoX (the Pythia code path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from extract_stage import run_stage
from uaprobe.config import PRESETS, ModelSpec, load_params
from uaprobe.errors import ConfigError, ModelSourceError
from uaprobe.extraction.models import load_model, pick_dtype
from uaprobe.extraction.store import read_embeddings


def edit_params(project: Path, **top) -> Path:
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key, value in top.items():
        section, _, name = key.partition("__")
        if name:
            params[section][name] = value
        else:
            params[section] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def test_preset_original_sets_the_seeds_settings_over_the_file(small_project: Path):
    base = load_params(small_project / "params.yaml")
    assert base.preset == "none" and base.pooling.drop == "special" and base.extract.dtype == "auto"
    p = load_params(edit_params(small_project, preset="original"))
    assert (p.pooling.drop, p.extract.dtype) == ("first", "float16") == (PRESETS["original"]["pooling.drop"],
                                                                         PRESETS["original"]["extract.dtype"])
    assert p.dtype_of("tiny") == "float16"
    assert p.extract.batch_size == base.extract.batch_size and p.analysis == base.analysis


def test_bad_preset_and_dtype_values_name_the_key(small_project: Path):
    with pytest.raises(ConfigError, match=r"preset: got 'seeds', expected one of 'none', 'original'"):
        load_params(edit_params(small_project, preset="seeds"))
    edit_params(small_project, preset="none")
    with pytest.raises(ConfigError, match=r"extract\.dtype: got 'fp16', expected one of 'auto', 'float32'"):
        load_params(edit_params(small_project, extract__dtype="fp16"))


def test_a_catalog_dtype_wins_over_extract_dtype(small_project: Path):
    path = edit_params(small_project, extract__dtype="bfloat16")
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    params["catalog"]["tiny"]["dtype"] = "float32"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    assert load_params(path).dtype_of("tiny") == "float32"


def test_float16_is_refused_for_gemma_whatever_sets_it():
    spec = ModelSpec(display="g", source="local", location="/nonexistent", dtype="float16")
    with pytest.raises(ModelSourceError, match=r"extract\.dtype.*float16 overflows in Gemma"):
        pick_dtype(spec, torch.device("cuda"), "gemma3_text")
    assert pick_dtype(spec, torch.device("cpu"), "gpt_neox") == torch.float16


def test_preset_original_extracts_the_seeds_states_in_float16(small_project: Path, tiny_neox: Path):
    edit_params(small_project, preset="original")
    emb = read_embeddings(run_stage(small_project, small_project / "emb" / "tiny.h5"))
    assert emb.attrs["pooling_drop"] == "first" and emb.attrs["dtype"] == "float16"
    # the seeds' computation, one statement at a time: hidden_states[l][0, 1:].mean(0) of the fp16 model
    model, tokenizer, _, dtype = load_model(
        ModelSpec(display="t", source="local", location=str(tiny_neox), dtype="float16"), "tiny",
        device=torch.device("cpu"))
    assert dtype == torch.float16
    for row in (0, 1, 5):
        ids = tokenizer(emb.text[row], return_tensors="pt")
        with torch.no_grad():
            out = model(**ids, output_hidden_states=True, labels=ids["input_ids"])
        seed = np.stack([h[0, 1:].float().mean(dim=0).numpy() for h in out.hidden_states])
        np.testing.assert_allclose(emb.pooled["mean"][row], seed, atol=2e-3, rtol=0)
        assert emb.nll_mean[row] == pytest.approx(out.loss.item(), abs=2e-3)
    # float16 moves the states only by its rounding relative to float32
    edit_params(small_project, preset="none", pooling={"drop": "first"})
    ref = read_embeddings(run_stage(small_project, small_project / "emb32" / "tiny.h5"))
    assert ref.attrs["dtype"] == "float32"
    assert not np.array_equal(ref.pooled["mean"], emb.pooled["mean"])
    np.testing.assert_allclose(ref.pooled["mean"], emb.pooled["mean"], atol=2e-2, rtol=0)
