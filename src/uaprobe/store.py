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
        obj.attrs[key] = _plain(attrs[key])


def _plain(value: Any) -> Any:
    """Attribute values as plain Python scalars (str subclasses such as torch's version become str)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return str(value)
    return value


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


def _allocated(group: h5py.Group, name: str, shape: tuple[int, ...], dtype: Any) -> h5py.Dataset:
    """A contiguous dataset whose storage is allocated (and zero-filled) at creation.

    Early allocation fixes every dataset's offset in the file at creation time, so the bytes do
    not depend on the order in which batches are written (or resumed).
    """
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_ALLOC)
    dcpl.set_obj_track_times(False)
    return group.create_dataset(name, shape=shape, dtype=dtype, dcpl=dcpl)


class ExtractionWriter:
    """Streams one model's extraction into ``<path>.partial`` batch by batch; :meth:`finish` moves it into place.

    A partial file left by an interrupted run is resumed when its fingerprint (every provenance
    attribute) matches the new run; otherwise it is discarded and the extraction starts over.
    """

    def __init__(self, path: str | Path, *, texts: list[str], categories: list[str], pairs: np.ndarray,
                 sides: np.ndarray, n_layers: int, hidden_size: int, prompts: list[str],
                 aniso_states: np.ndarray, aniso_prompt_index: np.ndarray, aniso_special: np.ndarray,
                 attrs: Mapping[str, Any], resume: bool = True) -> None:
        self.path = Path(path)
        self.tmp = partial_path(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.attrs = {k: _plain(v) for k, v in attrs.items()}
        n = len(texts)
        self.fh: h5py.File | None = None
        if resume and self.tmp.exists():
            self.fh = self._try_resume(n)
        if self.fh is None:
            self.tmp.unlink(missing_ok=True)
            self.fh = self._create(texts, categories, pairs, sides, n_layers, hidden_size, prompts,
                                   aniso_states, aniso_prompt_index, aniso_special)
        self.done = self.fh["progress/done"][()].astype(bool)

    def _try_resume(self, n: int) -> h5py.File | None:
        try:
            fh = h5py.File(self.tmp, "r+")
        except OSError:
            return None  # killed mid-write: the metadata is not consistent; start over
        same = all(_same(fh.attrs.get(k), v) for k, v in self.attrs.items()) and fh["progress/done"].shape == (n,)
        if not same:
            fh.close()
            return None
        return fh

    def _create(self, texts: list[str], categories: list[str], pairs: np.ndarray, sides: np.ndarray,
                n_layers: int, hidden_size: int, prompts: list[str], aniso_states: np.ndarray,
                aniso_prompt_index: np.ndarray, aniso_special: np.ndarray) -> h5py.File:
        try:
            fh = h5py.File(self.tmp, "w", libver=("earliest", "v110"), track_order=False)
        except OSError as exc:
            raise UAProbeError(f"{self.path}: cannot create the output file ({exc}); check the directory "
                               "is writable and the disk has space") from None
        try:
            n, shape = len(texts), (len(texts), n_layers + 1, hidden_size)
            _dataset(fh, "statements/text", np.array(texts, dtype=object), dtype=STR)
            _dataset(fh, "statements/category", np.array(categories, dtype=object), dtype=STR)
            _dataset(fh, "statements/pair", np.asarray(pairs, dtype=np.int32))
            _dataset(fh, "statements/side", np.asarray(sides, dtype=np.int8))
            for p in POOLINGS:
                _allocated(fh, f"pooled/{p}", shape, np.float32)
                _allocated(fh, f"prenorm/{p}", (n, hidden_size), np.float32)
            _allocated(fh, "nll/sum", (n,), np.float64)
            _allocated(fh, "nll/mean", (n,), np.float64)
            _allocated(fh, "n_tokens", (n,), np.int32)
            _allocated(fh, "n_content", (n,), np.int32)
            _allocated(fh, "progress/done", (n,), np.bool_)
            _dataset(fh, "anisotropy/prompt", np.array(prompts, dtype=object), dtype=STR)
            _dataset(fh, "anisotropy/states", np.ascontiguousarray(aniso_states, dtype=np.float32))
            _dataset(fh, "anisotropy/prompt_index", np.asarray(aniso_prompt_index, dtype=np.int32))
            _dataset(fh, "anisotropy/special", np.asarray(aniso_special, dtype=np.bool_))
            write_attrs(fh, dict(self.attrs, complete=False))
            fh.flush()
        except BaseException:
            fh.close()
            self.tmp.unlink(missing_ok=True)
            raise
        return fh

    @property
    def pending(self) -> np.ndarray:
        """Row indices not yet written."""
        return np.flatnonzero(~self.done)

    def write(self, rows: np.ndarray, result: Any) -> None:
        """Write one batch (rows in any order; ``result`` fields are aligned with ``rows``)."""
        assert self.fh is not None
        order = np.argsort(rows)
        idx = np.asarray(rows)[order]
        for p in POOLINGS:
            self.fh[f"pooled/{p}"][idx] = result.pooled[p][order]
            self.fh[f"prenorm/{p}"][idx] = result.prenorm[p][order]
        self.fh["nll/sum"][idx] = result.nll_sum[order]
        self.fh["nll/mean"][idx] = result.nll_mean[order]
        self.fh["n_tokens"][idx] = result.n_tokens[order]
        self.fh["n_content"][idx] = result.n_content[order]
        self.done[idx] = True
        self.fh["progress/done"][idx] = True
        self.fh.flush()

    def finish(self) -> Path:
        """Mark the file complete and move it into place."""
        assert self.fh is not None
        if not self.done.all():
            raise UAProbeError(f"{self.path}: {int((~self.done).sum())} statements were not written")
        self.fh.attrs["complete"] = True
        self.fh.close()
        self.fh = None
        os.replace(self.tmp, self.path)
        return self.path

    def close(self) -> None:
        """Close without finishing: the partial file stays for a later resume."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, bytes):
        stored = stored.decode("utf-8")
    if isinstance(stored, np.generic):
        stored = stored.item()
    return bool(stored == wanted)
