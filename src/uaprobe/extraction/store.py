"""One model's extraction in HDF5: atomic, deterministic, resumable writes and a checked reader.

The layout of ``data/embeddings/<model>.h5`` -- every dataset with its dtype and shape, every
attribute -- is described once, in :mod:`uaprobe.extraction.layout`; :class:`ExtractionWriter` allocates and
fills what it describes, and :func:`read_embeddings` checks every file against it before anything
is read (present, dtype kind, shapes consistent with each other and the attributes, values finite).
``docs/inputs-and-faults.md`` lists it as a table.

Writes go to ``<name>.h5.partial`` in the same directory and are moved into place with
:func:`os.replace` only once the file is complete, so the output path holds either a complete file
(the previous one, or the new one) or nothing. Bytes are deterministic: no timestamps, sorted
attributes, contiguous datasets.

Faults: every dataset's storage is allocated when the partial file is created, so a full disk
shows at creation, before any batch is computed. A failed write (disk full, read-only directory,
I/O error) removes the partial file and raises :class:`~uaprobe.errors.UAProbeError` naming the
file and the fix. An interrupted run (Ctrl-C, SIGTERM, SIGKILL) leaves the partial file, which the
next run with the same inputs resumes from its last complete batch.
"""

from __future__ import annotations

import errno
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np

from uaprobe.extraction import layout
from uaprobe.atomic import (check_writable, is_io_error, locked_by_another_process, locked_message, move_into_place,
                            os_errno, os_reason)
from uaprobe.errors import UAProbeError
from uaprobe.extraction.layout import POLICIES, POOLINGS, SINK_STATISTICS

__all__ = ["POLICIES", "POOLINGS", "SINK_STATISTICS", "Embeddings", "ExtractionWriter", "check_output_path",
           "partial_path", "read_embeddings"]

log = logging.getLogger(__name__)

STR = h5py.string_dtype("utf-8")
LIBVER = ("earliest", "v110")
"""HDF5 format bounds of every extraction file, at creation and when a partial file is resumed (the
same bounds give the same object-header layout, so a resumed file has the uninterrupted run's bytes)."""


def partial_path(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def _write_error(path: Path, exc: BaseException, doing: str) -> UAProbeError:
    return UAProbeError(
        f"{path}: {doing} failed ({os_reason(exc)}); free space on the disk of {path.parent} or point --out "
        "at a writable directory. No partial file was left behind and an earlier complete file is untouched"
    )


def check_output_path(path: str | Path) -> None:
    """Fail early, before any model loads, if ``path`` cannot be written: its directory cannot be
    created, is read-only, or ``path`` itself is a directory."""
    path = Path(path)
    if path.is_dir():
        raise UAProbeError(f"{path}: is a directory; remove it or point --out at a file path")
    check_writable(path.parent, output=path, fix="point --out at a writable directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UAProbeError(f"{path}: cannot create the output directory {path.parent} ({os_reason(exc)}); "
                           "point --out at a writable directory") from None


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
    pooled_sink_excluded: dict[str, np.ndarray]
    """pooling -> (N, L+1, D) float32, special tokens and position 0 excluded"""
    prenorm_sink_excluded: dict[str, np.ndarray]
    n_content_sink_excluded: np.ndarray
    sink: dict[str, np.ndarray]
    """:data:`SINK_STATISTICS` -> (N, L+1)"""
    token_ids: np.ndarray
    """(total,) int: every statement's token ids, flat"""
    token_offsets: np.ndarray
    """(N+1,) int"""
    token_special: np.ndarray
    """(total,) bool"""
    nll_sum: np.ndarray
    nll_mean: np.ndarray
    n_tokens: np.ndarray
    n_content: np.ndarray
    prompts: list[str]
    aniso_states: np.ndarray
    """(T, L+1, D) float32"""
    aniso_prompt_index: np.ndarray
    aniso_special: np.ndarray
    arrays: Mapping[str, Any] = field(default_factory=dict)
    """Every dataset of :data:`uaprobe.extraction.layout.DATASETS` the file holds, by name (str datasets as lists of
    str); an optional dataset an older file lacks is absent."""

    @property
    def n_layers(self) -> int:
        return int(self.attrs["n_layers"])

    def policy(self, name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """(pooled, prenorm) of a policy of :data:`POLICIES`."""
        if name == "default":
            return self.pooled, self.prenorm
        if name == "sink_excluded":
            return self.pooled_sink_excluded, self.prenorm_sink_excluded
        raise ValueError(f"unknown pooling policy {name!r}; expected one of {POLICIES}")


def _strings(ds: h5py.Dataset) -> list[str]:
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in ds[()]]


def read_embeddings(path: str | Path) -> Embeddings:
    """Load one extraction file after checking it against :mod:`uaprobe.extraction.layout`.

    A missing, partial, foreign or damaged file -- a dataset missing, of the wrong dtype kind (an int
    ``pooled/mean``), of a shape that disagrees with the others or the attributes, a NaN or inf -- is
    a :class:`~uaprobe.errors.UAProbeError` naming the file, the dataset, the first bad index and the fix.
    """
    path = Path(path)
    if not path.exists():
        raise UAProbeError(f"{path}: not found; run `dvc repro` (the extract stage writes it)")
    if path.is_dir():
        raise UAProbeError(f"{path}: is a directory, expected an extraction file (.h5); check --embeddings")
    try:
        fh = h5py.File(path, "r")
    except OSError as exc:
        if locked_by_another_process(exc):
            raise UAProbeError(locked_message(path, exc)) from None
        if os_errno(exc):  # the system refused the read (permissions, the disk): nothing says the file is bad
            raise UAProbeError(f"{path}: cannot be read ({os_reason(exc)}); the system refused the read, which says "
                               "nothing against the file itself: check its permissions and the disk, then rerun "
                               "(do not delete it)") from None
        raise UAProbeError(f"{path}: not a readable HDF5 file ({os_reason(exc)}); delete it and rerun the extract "
                           "stage") from None
    with fh:
        if not fh.attrs.get("complete", False):
            raise UAProbeError(f"{path}: incomplete extraction file (attribute 'complete' is not true); delete it "
                               "and rerun the extract stage")
        sizes = layout.check_layout(fh, path)
        attrs = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in fh.attrs.items()}
        try:
            arrays = {ds.name: (_strings(fh[ds.name]) if ds.kind == "str" else fh[ds.name][()])
                      for ds in layout.DATASETS if ds.name in fh}
        except (OSError, ValueError) as exc:
            raise UAProbeError(f"{path}: damaged, a dataset cannot be read ({os_reason(exc)}); delete it and rerun "
                               "the extract stage") from None
    layout.check_values(arrays, sizes, path)
    return _embeddings(attrs, arrays)


def _embeddings(attrs: dict[str, Any], arrays: dict[str, Any]) -> Embeddings:
    return Embeddings(
        attrs=attrs,
        text=arrays["statements/text"],
        category=np.array(arrays["statements/category"]),
        pair=arrays["statements/pair"].astype(np.int64),
        side=arrays["statements/side"].astype(np.int64),
        pooled={p: arrays[f"pooled/{p}"] for p in POOLINGS},
        prenorm={p: arrays[f"prenorm/{p}"] for p in POOLINGS},
        nll_sum=arrays["nll/sum"],
        nll_mean=arrays["nll/mean"],
        n_tokens=arrays["n_tokens"].astype(np.int64),
        n_content=arrays["n_content"].astype(np.int64),
        pooled_sink_excluded={p: arrays[f"pooled_sink_excluded/{p}"] for p in POOLINGS},
        prenorm_sink_excluded={p: arrays[f"prenorm_sink_excluded/{p}"] for p in POOLINGS},
        n_content_sink_excluded=arrays["n_content_sink_excluded"].astype(np.int64),
        sink={k: arrays[f"sink/{k}"] for k in SINK_STATISTICS},
        token_ids=arrays["tokens/ids"].astype(np.int64),
        token_offsets=arrays["tokens/offsets"].astype(np.int64),
        token_special=arrays["tokens/special"].astype(bool),
        prompts=arrays["anisotropy/prompt"],
        aniso_states=arrays["anisotropy/states"],
        aniso_prompt_index=arrays["anisotropy/prompt_index"].astype(np.int64),
        aniso_special=arrays["anisotropy/special"].astype(bool),
        arrays=arrays,
    )


def _stored(values: Any, spec: layout.DatasetSpec) -> tuple[Any, Any]:
    """``values`` as the data and dtype the layout stores for ``spec``."""
    if spec.kind == "str":
        return np.array(list(values), dtype=object), STR
    return np.ascontiguousarray(values, dtype=np.dtype(spec.dtype)), None


def _bytes_needed(fixed: Mapping[str, Any], sizes: Mapping[str, int]) -> int:
    """An upper estimate of the file's size: every dataset's bytes, plus HDF5's metadata and string heaps."""
    total = 64 * 1024
    for spec in layout.DATASETS:
        if spec.name in fixed and spec.kind == "str":
            total += sum(len(str(v).encode("utf-8")) + 32 for v in fixed[spec.name])
        elif spec.stream is not None or spec.name == layout.PROGRESS or spec.name in fixed:
            total += int(np.prod(layout.shape_of(spec.shape, sizes))) * np.dtype(spec.dtype).itemsize + 2048
    return total + total // 50


def _free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


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
    Streamed datasets (:attr:`~uaprobe.extraction.layout.DatasetSpec.stream`) are filled by :meth:`write` from each
    batch result; the others are written at creation from the arguments (``tokens``: the flat
    ``tokens/ids``, ``tokens/offsets`` and ``tokens/special``).
    """

    def __init__(self, path: str | Path, *, texts: list[str], categories: list[str], pairs: np.ndarray,
                 sides: np.ndarray, n_layers: int, hidden_size: int, prompts: list[str],
                 aniso_states: np.ndarray, aniso_prompt_index: np.ndarray, aniso_special: np.ndarray,
                 tokens: tuple[np.ndarray, np.ndarray, np.ndarray], attrs: Mapping[str, Any],
                 resume: bool = True) -> None:
        self.path = Path(path)
        ids, offsets, special = tokens
        self.sizes = {"N": len(texts), "L": n_layers, "D": hidden_size, "T": len(aniso_prompt_index),
                      "P": len(prompts), "K": len(ids)}
        self.tmp = partial_path(self.path)
        check_output_path(self.path)
        self.attrs = {k: _plain(v) for k, v in attrs.items()}
        self.fh: h5py.File | None = None
        if self.tmp.exists():  # an interrupted run's partial file, or one another run is writing now
            self.fh = self._try_resume(resume)
        if self.fh is None:
            try:
                self.tmp.unlink(missing_ok=True)
            except OSError as exc:
                raise UAProbeError(f"{self.path}: cannot remove the old {self.tmp} ({os_reason(exc)}); delete it "
                                   "by hand, or point --out at a writable directory") from None
            fixed = {"statements/text": texts, "statements/category": categories, "statements/pair": pairs,
                     "statements/side": sides, "anisotropy/prompt": prompts, "anisotropy/states": aniso_states,
                     "anisotropy/prompt_index": aniso_prompt_index, "anisotropy/special": aniso_special,
                     "tokens/ids": ids, "tokens/offsets": offsets, "tokens/special": special}
            self.fh = self._create(fixed, self.sizes)
        try:
            self.done = self.fh["progress/done"][()].astype(bool)
        except Exception as exc:
            self.discard()
            if is_io_error(exc):
                raise _write_error(self.path, exc, "reading the progress of the partial file") from None
            raise

    def _try_resume(self, resume: bool = True) -> h5py.File | None:
        """The partial file of an interrupted run with the same inputs, open for writing; else None (without
        ``resume``: None). A partial file another process holds open (another run writing it) is an error:
        it is neither resumed nor removed."""
        try:
            fh = h5py.File(self.tmp, "r+", libver=LIBVER)
        except OSError as exc:
            if locked_by_another_process(exc):
                raise UAProbeError(locked_message(self.tmp, exc, writing=True)) from None
            log.warning("%s is unreadable (%s), probably killed while being created; starting over",
                        self.tmp, os_reason(exc))
            return None
        if not resume:
            _close_quietly(fh)
            return None
        try:
            reason = _resume_mismatch(fh, self.attrs, self.sizes)
        except Exception as exc:  # noqa: BLE001 - a damaged file can fail in many ways; none may stop a fresh start
            reason = f"it is damaged ({exc})"
        if reason:
            log.info("not resuming %s: %s; starting over", self.tmp, reason)
            _close_quietly(fh)
            return None
        return fh

    def _create(self, fixed: Mapping[str, Any], sizes: Mapping[str, int]) -> h5py.File:
        """A new partial file: the fixed datasets written, the streamed ones allocated (see :mod:`uaprobe.extraction.layout`).

        The disk's free space is compared with the file's size first: HDF5 can crash the process when
        it closes a file whose creation ran out of space, so a full disk is found before HDF5 writes.
        """
        need, free = _bytes_needed(fixed, sizes), _free_bytes(self.tmp.parent)
        if free is not None and need > free:
            raise UAProbeError(
                f"{self.path}: creating the output file failed ({os_reason(OSError(errno.ENOSPC, ''))}: it needs "
                f"{need / 2**20:.1f} MiB, {free / 2**20:.1f} MiB are free); free space on the disk of {self.path.parent} "
                "or point --out at a writable directory. No partial file was left behind and an earlier complete "
                "file is untouched")
        try:
            fh = h5py.File(self.tmp, "w", libver=LIBVER, track_order=False)
        except Exception as exc:
            if not is_io_error(exc):
                raise
            self.tmp.unlink(missing_ok=True)
            raise _write_error(self.path, exc, "creating the output file") from None
        try:
            for spec in layout.DATASETS:
                if spec.stream is not None or spec.name == layout.PROGRESS:
                    _allocated(fh, spec.name, layout.shape_of(spec.shape, sizes), np.dtype(spec.dtype))
                elif spec.name in fixed:
                    data, dtype = _stored(fixed[spec.name], spec)
                    _dataset(fh, spec.name, data, dtype=dtype)
                elif not spec.optional:
                    raise ValueError(f"ExtractionWriter: no data for the dataset {spec.name}")
            write_attrs(fh, dict(self.attrs, complete=False))
            fh.flush()
        except BaseException as exc:
            _close_quietly(fh)
            self.tmp.unlink(missing_ok=True)
            if is_io_error(exc):
                raise _write_error(self.path, exc, "creating the output file") from None
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
        try:
            # Data first, then the progress flags: a run killed in between redoes the batch.
            for spec in layout.DATASETS:
                if spec.stream is not None:
                    self.fh[spec.name][idx] = layout.streamed_value(result, spec.stream)[order]
            self.fh[layout.PROGRESS][idx] = True
            self.fh.flush()
        except Exception as exc:
            self.discard()
            if is_io_error(exc):
                raise _write_error(self.path, exc, "writing a batch") from None
            raise
        self.done[idx] = True

    def finish(self) -> Path:
        """Mark the file complete and move it into place."""
        assert self.fh is not None
        if not self.done.all():
            raise UAProbeError(f"{self.path}: {int((~self.done).sum())} statements were not written")
        try:
            if not self.fh.attrs.get("complete", False):  # already set if a run died just before the move
                self.fh.attrs.modify("complete", True)  # in place: no message moves in the header
            self.fh.close()
            self.fh = None
            move_into_place(self.tmp, self.path)
        except Exception as exc:
            self.discard()
            if is_io_error(exc):
                raise _write_error(self.path, exc, "moving the finished file into place") from None
            raise
        return self.path

    def close(self) -> None:
        """Close without finishing: the partial file stays for a later resume (after an interruption)."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None

    def discard(self) -> None:
        """Close and delete the partial file (after an error: it is not worth resuming)."""
        if self.fh is not None:
            _close_quietly(self.fh)
            self.fh = None
        try:
            self.tmp.unlink(missing_ok=True)
        except OSError as exc:
            log.error("could not remove %s (%s); delete it by hand", self.tmp, os_reason(exc))


def _resume_mismatch(fh: h5py.File, attrs: Mapping[str, Any], sizes: Mapping[str, int]) -> str:
    """Why the partial file ``fh`` cannot be resumed by a run with ``attrs`` (empty string: it can)."""
    for key, value in attrs.items():
        if not _same(fh.attrs.get(key), value):
            return f"it was written with {key}={fh.attrs.get(key)!r}, this run has {value!r}"
    for spec in layout.DATASETS:
        if spec.stream is not None or spec.name in (layout.PROGRESS, "statements/text"):
            shape = layout.shape_of(spec.shape, sizes)
            if spec.name not in fh or fh[spec.name].shape != shape:
                return f"{spec.name} is missing or not of shape {shape}"
        elif spec.name not in fh and not spec.optional:
            return f"{spec.name} is missing"
    return ""


def _close_quietly(fh: h5py.File) -> None:
    """Close a file whose last write failed; closing flushes and can fail again for the same reason."""
    try:
        fh.close()
    except Exception:  # noqa: BLE001 - the first error is the one reported
        pass


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, bytes):
        stored = stored.decode("utf-8")
    if isinstance(stored, np.generic):
        stored = stored.item()
    return bool(stored == wanted)
