"""The HDF5 layout of one model's extraction: atomic, deterministic writes and a typed reader.

Layout of ``data/embeddings/<model>.h5`` (names may grow, never shrink)::

    statements/text      (N,)            utf-8 str   row order = dataset order (category, pair, A then B)
    statements/category  (N,)            utf-8 str
    statements/pair      (N,)            int32       pair index over the whole dataset
    statements/side      (N,)            int8        0 = A, 1 = B
    pooled/mean          (N, L+1, D)     float32     index 0 = token embeddings, L = last block (post final norm)
    pooled/last          (N, L+1, D)     float32     last content token
    pooled/first         (N, L+1, D)     float32     first content token
    prenorm/mean|last|first (N, D)       float32     last block's residual stream before the final norm
    nll/sum, nll/mean    (N,)            float64     per-statement negative log-likelihood (nats)
    n_tokens             (N,)            int32       scored tokens (targets) behind nll
    n_content            (N,)            int32       content tokens behind the pooled states
    anisotropy/prompt    (P,)            utf-8 str
    anisotropy/states    (T, L+1, D)     float32     every token state of every prompt, prompts concatenated
    anisotropy/prompt_index (T,)         int32
    anisotropy/special   (T,)            bool        the token is a special token (e.g. BOS)
    attrs: model_id, display, source, location, revision, dtype, device, pooling_drop,
           dataset_sha256, prompts_sha256, uaprobe_version, torch_version, transformers_version,
           n_layers, hidden_size, bos_added, complete

Writes go to ``<name>.h5.partial`` in the same directory and are moved into place with
:func:`os.replace` only once the file is complete, so the output path holds either a complete file
or nothing. Bytes are deterministic: no timestamps, sorted attributes, contiguous datasets.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import h5py
import numpy as np

from uaprobe.errors import UAProbeError

POOLINGS = ("mean", "last", "first")
STR = h5py.string_dtype("utf-8")


def partial_path(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def _dataset(group: h5py.Group, name: str, data: Any = None, *, shape: tuple[int, ...] | None = None,
             dtype: Any = None) -> h5py.Dataset:
    """Create a contiguous, uncompressed dataset with no timestamps (deterministic bytes)."""
    return group.create_dataset(name, data=data, shape=shape, dtype=dtype, track_times=False)


def write_attrs(obj: h5py.HLObject, attrs: Mapping[str, Any]) -> None:
    for key in sorted(attrs):
        value = attrs[key]
        obj.attrs[key] = "" if value is None else value


@contextmanager
def open_new(path: str | Path) -> Iterator[h5py.File]:
    """Create ``path`` atomically: yield a file open at ``<path>.partial``; move it into place on success.

    On any exception the partial file is removed and the previous file at ``path`` (if any) is
    left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(path)
    try:
        fh = h5py.File(tmp, "w", libver=("earliest", "v110"), track_order=False)
    except OSError as exc:
        raise UAProbeError(f"{path}: cannot create the output file ({exc}); check the directory is writable "
                           "and the disk has space") from None
    try:
        with fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Embeddings:
    """Everything one extraction file holds, loaded into memory (the analyses need all of it)."""

    attrs: dict[str, Any]
    text: list[str]
    category: np.ndarray
    """(N,) str"""
    pair: np.ndarray
    """(N,) int"""
    side: np.ndarray
    """(N,) int, 0 = A, 1 = B"""
    pooled: dict[str, np.ndarray]
    """pooling -> (N, L+1, D) float32"""
    prenorm: dict[str, np.ndarray]
    """pooling -> (N, D) float32"""
    nll_sum: np.ndarray
    nll_mean: np.ndarray
    n_tokens: np.ndarray
    n_content: np.ndarray
    prompts: list[str]
    aniso_states: np.ndarray
    """(T, L+1, D) float32"""
    aniso_prompt_index: np.ndarray
    aniso_special: np.ndarray

    @property
    def n_layers(self) -> int:
        return int(self.attrs["n_layers"])


def _strings(ds: h5py.Dataset) -> list[str]:
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in ds[()]]


def read_embeddings(path: str | Path) -> Embeddings:
    """Load one extraction file; a missing, partial or foreign file is a clear error."""
    path = Path(path)
    if not path.exists():
        raise UAProbeError(f"{path}: not found; run `dvc repro` (the extract stage writes it)")
    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        raise UAProbeError(f"{path}: not a readable HDF5 file ({exc}); delete it and rerun the extract stage") from None
    with fh:
        attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in fh.attrs.items()}
        if not attrs.get("complete"):
            raise UAProbeError(f"{path}: incomplete extraction file; delete it and rerun the extract stage")
        return Embeddings(
            attrs=attrs,
            text=_strings(fh["statements/text"]),
            category=np.array(_strings(fh["statements/category"])),
            pair=fh["statements/pair"][()].astype(np.int64),
            side=fh["statements/side"][()].astype(np.int64),
            pooled={p: fh[f"pooled/{p}"][()] for p in POOLINGS},
            prenorm={p: fh[f"prenorm/{p}"][()] for p in POOLINGS},
            nll_sum=fh["nll/sum"][()],
            nll_mean=fh["nll/mean"][()],
            n_tokens=fh["n_tokens"][()].astype(np.int64),
            n_content=fh["n_content"][()].astype(np.int64),
            prompts=_strings(fh["anisotropy/prompt"]),
            aniso_states=fh["anisotropy/states"][()],
            aniso_prompt_index=fh["anisotropy/prompt_index"][()].astype(np.int64),
            aniso_special=fh["anisotropy/special"][()].astype(bool),
        )
