"""Data-parallel extraction on torch.distributed: deterministic shards, per-rank shard files, one merge.

Launched with ``torchrun --nproc_per_node=N stages/extract.py --model ID`` (or ``accelerate
launch``), every rank loads the model, takes the batches ``i`` with ``i % world == rank`` of the
same length-sorted batching the single process uses, and streams its results into
``<out>.shard<rank>of<world>``. After a barrier, rank 0 merges the shards into the usual
:class:`~uaprobe.extraction.store.ExtractionWriter`. Each batch holds the same statements as in a
single-process run, so the merged file holds the same values -- and, with the writer's fixed
layout, the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from uaprobe.extraction.extract import BatchResult


@dataclass(frozen=True)
class Rank:
    rank: int
    world: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def current_rank() -> Rank:
    """This process's place in a torchrun/accelerate launch (rank 0 of 1 when not launched)."""
    return Rank(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                int(os.environ.get("LOCAL_RANK", 0)))


def shard_batches(batches: Sequence[np.ndarray], *, rank: int, world: int) -> list[tuple[int, np.ndarray]]:
    """The (batch index, rows) this rank computes: round-robin over the length-sorted batches.

    Round-robin keeps the shards balanced in tokens, since neighbouring batches have similar lengths.
    """
    return [(i, rows) for i, rows in enumerate(batches) if i % world == rank]


def shard_path(out: Path, rank: int, world: int) -> Path:
    return out.with_name(f"{out.name}.shard{rank}of{world}")


class ShardWriter:
    """Appends one rank's batch results to its shard file (memory bounded by one batch)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fh = h5py.File(path, "w")
        self.count = 0

    def write(self, index: int, rows: np.ndarray, result: BatchResult) -> None:
        group = self.fh.create_group(f"batch{index:08d}")
        group["rows"] = np.asarray(rows)
        for name, values in result.datasets().items():
            group[name] = values
        self.fh.flush()
        self.count += 1

    def close(self) -> None:
        self.fh.close()


def read_shard(path: Path) -> Iterator[tuple[np.ndarray, BatchResult]]:
    """The (rows, result) batches of one shard file, one at a time."""
    with h5py.File(path, "r") as fh:
        for name in sorted(fh):
            g = fh[name]
            arrays: dict[str, np.ndarray] = {}
            g.visititems(lambda key, obj: arrays.__setitem__(key, obj[()]) if isinstance(obj, h5py.Dataset) else None)
            yield arrays.pop("rows"), BatchResult.from_datasets(arrays)
