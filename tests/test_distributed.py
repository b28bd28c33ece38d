"""Data-parallel extraction: two CPU processes (gloo) give the single-process file, value for value."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from uaprobe.config import load_params
from uaprobe.extraction.distributed import shard_batches
from uaprobe.extraction.store import read_embeddings

REPO = Path(__file__).resolve().parents[1]


def test_shards_partition_the_batches() -> None:
    batches = [np.arange(i * 3, i * 3 + 3) for i in range(7)]
    shards = [shard_batches(batches, rank=r, world=3) for r in range(3)]
    indices = sorted(i for shard in shards for i, _ in shard)
    assert indices == list(range(7))
    assert [len(s) for s in shards] == [3, 2, 2]


def _extract(project: Path, out: Path, nproc: int) -> Path:
    args = ["--model", "tiny", "--params", str(project / "params.yaml"), "--dataset", str(project / "data/dataset.json"),
            "--prompts", str(project / "data/anisotropy_prompts.txt"), "--out", str(out)]
    script = str(REPO / "stages" / "extract.py")
    if nproc == 1:
        cmd = [sys.executable, script, *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", script, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("budget", [None, 60], ids=["default-budget", "binding-budget"])
def test_two_processes_equal_one(small_project: Path, budget: int | None) -> None:
    if budget is not None:
        # 60 padded tokens cut the 18 statements into batches of 4, 3, 2, 2, 2, 2, 2 and 1 (tiny tokenizer)
        params = yaml.safe_load((small_project / "params.yaml").read_text(encoding="utf-8"))
        params["extract"]["max_batch_tokens"] = budget
        (small_project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    single = read_embeddings(_extract(small_project, small_project / "one" / "tiny.h5", 1))
    merged_path = _extract(small_project, small_project / "two" / "tiny.h5", 2)
    merged = read_embeddings(merged_path)
    assert list(merged_path.parent.iterdir()) == [merged_path], "shard files must be cleaned up"
    for p in ("mean", "first", "last"):
        np.testing.assert_array_equal(merged.pooled[p], single.pooled[p])
        np.testing.assert_array_equal(merged.prenorm[p], single.prenorm[p])
    np.testing.assert_array_equal(merged.nll_sum, single.nll_sum)
    np.testing.assert_array_equal(merged.n_tokens, single.n_tokens)
    np.testing.assert_array_equal(merged.aniso_states, single.aniso_states)
    assert merged.text == single.text
    limits = load_params(small_project / "params.yaml").extract
    assert merged.attrs["max_batch_tokens"] == single.attrs["max_batch_tokens"] == limits.max_batch_tokens
    one = hashlib.md5((small_project / "one" / "tiny.h5").read_bytes()).hexdigest()
    two = hashlib.md5(merged_path.read_bytes()).hexdigest()
    assert one == two
