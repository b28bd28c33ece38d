"""The extraction on a CUDA GPU in bfloat16 (``extract.device: auto`` and ``extract.dtype: auto`` there),
against the same extraction on the CPU in float32: the path the original Pythia panel takes.

These tests need a CUDA GPU; on a machine without one they are skipped with that reason (CI has none).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from extract_stage import real_dataset, run_stage, write_project
from uaprobe.extraction.store import read_embeddings

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (the bfloat16 extraction path); this machine has none")

BF16_STEP = 2.0 ** -8
"""bfloat16's relative rounding step (8 significant bits)."""


def _project(root: Path, model: Path, *, device: str, dtype: str) -> Path:
    project = write_project(root, model, dataset=real_dataset(pairs_per_category=4), batch_size=8)
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    params["extract"].update(device=device, dtype=dtype)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return project


def _relative_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per statement and layer: |got - want| / |want| over the hidden dimension."""
    return np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1)


def test_auto_on_a_gpu_extracts_in_bfloat16_close_to_the_cpus_float32(tmp_path: Path, tiny_neox: Path) -> None:
    cpu = read_embeddings(run_stage(_project(tmp_path / "cpu", tiny_neox, device="cpu", dtype="float32"),
                                    tmp_path / "cpu" / "tiny.h5"))
    gpu_path = run_stage(_project(tmp_path / "gpu", tiny_neox, device="auto", dtype="auto"), tmp_path / "gpu" / "tiny.h5")
    gpu = read_embeddings(gpu_path)
    assert gpu.attrs["device"] == "cuda" and gpu.attrs["dtype"] == "bfloat16"
    assert cpu.attrs["device"] == "cpu" and cpu.attrs["dtype"] == "float32"
    assert list(gpu.text) == list(cpu.text)
    for pooling in ("mean", "first", "last"):
        g, c = gpu.pooled[pooling], cpu.pooled[pooling]
        assert g.dtype == c.dtype == np.float32 and g.shape == c.shape and np.all(np.isfinite(g))
        # a few layers of bfloat16 rounding: a few steps of 2^-8, far below a different state
        assert _relative_error(g, c).max() < 8 * BF16_STEP, pooling
    nll = np.abs(gpu.nll_mean - cpu.nll_mean) / np.abs(cpu.nll_mean)
    assert nll.max() < 4 * BF16_STEP
    # the states the analyses compare (cosines between statements) keep their order
    a, b = gpu.pooled["mean"][:, -1], cpu.pooled["mean"][:, -1]
    np.testing.assert_allclose(_cosines(a), _cosines(b), atol=8 * BF16_STEP)


def _cosines(x: np.ndarray) -> np.ndarray:
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit @ unit.T


def test_a_gpu_extraction_gives_the_same_bytes_twice(tmp_path: Path, tiny_neox: Path) -> None:
    project = _project(tmp_path / "p", tiny_neox, device="cuda", dtype="bfloat16")
    first = run_stage(project, tmp_path / "a" / "tiny.h5").read_bytes()
    second = run_stage(project, tmp_path / "b" / "tiny.h5").read_bytes()
    assert first == second
