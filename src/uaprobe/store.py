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
    pooled_sink_excluded/mean|last|first  (N, L+1, D) float32  the same, special tokens and position 0 excluded
    prenorm_sink_excluded/mean|last|first (N, D)      float32
    n_content_sink_excluded (N,)         int32       content tokens behind the sink-excluded states
    sink/norm, sink/norm_ratio, sink/mean_share, sink/top_dim_share (N, L+1) float64
                                                     position 0's dominance per layer (uaprobe.sink)
    sink/top_dim         (N, L+1)        int32       its largest dimension
    tokens/ids           (total,)        int32       every statement's token ids as the model reads them
    tokens/offsets       (N+1,)          int64       statement i = ids[offsets[i]:offsets[i+1]]
    tokens/special       (total,)        bool        the token was added by the tokenizer (BOS, EOS)
    nll/sum, nll/mean    (N,)            float64     per-statement negative log-likelihood (nats)
    n_tokens             (N,)            int32       scored tokens (targets) behind nll
    n_content            (N,)            int32       content tokens behind the pooled states
    anisotropy/prompt    (P,)            utf-8 str
    anisotropy/states    (T, L+1, D)     float32     every token state of every prompt, prompts concatenated
    anisotropy/prompt_index (T,)         int32
    anisotropy/special   (T,)            bool        the token is a special token (e.g. BOS)
    attrs: model_id, display, source, location, revision, dtype, device, pooling_drop, batch_size,
           max_batch_tokens, dataset_sha256, prompts_sha256, uaprobe_version, torch_version,
           transformers_version, n_layers, hidden_size, bos_added, params_millions, complete

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

import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np

from uaprobe.errors import UAProbeError

log = logging.getLogger(__name__)

POOLINGS = ("mean", "last", "first")
POLICIES = ("default", "sink_excluded")
"""Pooling policies in every file: ``default`` is ``pooled/*`` (the ``pooling.drop`` of the run),
``sink_excluded`` is ``pooled_sink_excluded/*`` (special tokens and position 0 excluded)."""
SINK_STATISTICS = ("norm", "norm_ratio", "mean_share", "top_dim", "top_dim_share")
"""Per-statement, per-layer statistics of :func:`uaprobe.sink.sink_statistics` (``top_dim`` is an int)."""
STR = h5py.string_dtype("utf-8")


def batch_datasets(n: int, n_layers: int, hidden_size: int) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Dataset path -> (shape, dtype) of every dataset written batch by batch (rows = statements)."""
    out: dict[str, tuple[tuple[int, ...], Any]] = {}
    for prefix in ("", "_sink_excluded"):
        for p in POOLINGS:
            out[f"pooled{prefix}/{p}"] = ((n, n_layers + 1, hidden_size), np.float32)
            out[f"prenorm{prefix}/{p}"] = ((n, hidden_size), np.float32)
    out.update({"nll/sum": ((n,), np.float64), "nll/mean": ((n,), np.float64), "n_tokens": ((n,), np.int32),
                "n_content": ((n,), np.int32), "n_content_sink_excluded": ((n,), np.int32)})
    for name in SINK_STATISTICS:
        out[f"sink/{name}"] = ((n, n_layers + 1), np.int32 if name == "top_dim" else np.float64)
    return out


def partial_path(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def os_reason(exc: BaseException) -> str:
    """The operating-system reason behind an I/O error, also when HDF5 buried it in its message."""
    number = getattr(exc, "errno", None)
    if not number:
        found = re.search(r"errno = (\d+)", str(exc))
        number = int(found.group(1)) if found else None
    if number:
        return f"{os.strerror(number)} [errno {number}]"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def is_io_error(exc: BaseException) -> bool:
    """An operating-system I/O failure, also when h5py reports it as ValueError/RuntimeError (it does for a
    full disk while creating a dataset)."""
    return isinstance(exc, OSError) or (isinstance(exc, (ValueError, RuntimeError)) and "errno = " in str(exc))


def _write_error(path: Path, exc: BaseException, doing: str) -> UAProbeError:
    return UAProbeError(
        f"{path}: {doing} failed ({os_reason(exc)}); free space on the disk of {path.parent} or point --out "
        "at a writable directory. No partial file was left behind and an earlier complete file is untouched"
    )


def check_output_path(path: str | Path) -> None:
    """Fail early, before any model loads, if ``path`` cannot be written: its directory cannot be
    created, is read-only, or ``path`` itself is a directory."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UAProbeError(f"{path}: cannot create the output directory {path.parent} ({os_reason(exc)}); "
                           "point --out at a writable directory") from None
    if path.is_dir():
        raise UAProbeError(f"{path}: is a directory; remove it or point --out at a file path")
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UAProbeError(f"{path}: the output directory {path.parent} is not writable ({os_reason(exc)}); "
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
        try:
            return _read(fh, attrs)
        except (KeyError, OSError, ValueError) as exc:
            raise UAProbeError(f"{path}: not an extraction file of this layout or damaged ({exc}); delete it "
                               "and rerun the extract stage") from None


def _read(fh: h5py.File, attrs: dict[str, Any]) -> Embeddings:
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
        pooled_sink_excluded={p: fh[f"pooled_sink_excluded/{p}"][()] for p in POOLINGS},
        prenorm_sink_excluded={p: fh[f"prenorm_sink_excluded/{p}"][()] for p in POOLINGS},
        n_content_sink_excluded=fh["n_content_sink_excluded"][()].astype(np.int64),
        sink={k: fh[f"sink/{k}"][()] for k in SINK_STATISTICS},
        token_ids=fh["tokens/ids"][()].astype(np.int64),
        token_offsets=fh["tokens/offsets"][()].astype(np.int64),
        token_special=fh["tokens/special"][()].astype(bool),
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
                 tokens: tuple[np.ndarray, np.ndarray, np.ndarray], attrs: Mapping[str, Any],
                 resume: bool = True) -> None:
        self.path = Path(path)
        self.tmp = partial_path(self.path)
        check_output_path(self.path)
        self.attrs = {k: _plain(v) for k, v in attrs.items()}
        n = len(texts)
        self.fh: h5py.File | None = None
        if resume and self.tmp.exists():
            self.fh = self._try_resume(n, n_layers, hidden_size)
        if self.fh is None:
            try:
                self.tmp.unlink(missing_ok=True)
            except OSError as exc:
                raise UAProbeError(f"{self.path}: cannot remove the old {self.tmp} ({os_reason(exc)}); delete it "
                                   "by hand, or point --out at a writable directory") from None
            self.fh = self._create(texts, categories, pairs, sides, n_layers, hidden_size, prompts,
                                   aniso_states, aniso_prompt_index, aniso_special, tokens)
        try:
            self.done = self.fh["progress/done"][()].astype(bool)
        except Exception as exc:
            self.discard()
            if is_io_error(exc):
                raise _write_error(self.path, exc, "reading the progress of the partial file") from None
            raise

    def _try_resume(self, n: int, n_layers: int, hidden_size: int) -> h5py.File | None:
        """The partial file of an interrupted run with the same inputs, open for writing; else None."""
        try:
            fh = h5py.File(self.tmp, "r+")
        except OSError as exc:
            log.warning("%s is unreadable (%s), probably killed while being created; starting over",
                        self.tmp, os_reason(exc))
            return None
        try:
            reason = _resume_mismatch(fh, self.attrs, n, n_layers, hidden_size)
        except Exception as exc:  # noqa: BLE001 - a damaged file can fail in many ways; none may stop a fresh start
            reason = f"it is damaged ({exc})"
        if reason:
            log.info("not resuming %s: %s; starting over", self.tmp, reason)
            _close_quietly(fh)
            return None
        return fh

    def _create(self, texts: list[str], categories: list[str], pairs: np.ndarray, sides: np.ndarray,
                n_layers: int, hidden_size: int, prompts: list[str], aniso_states: np.ndarray,
                aniso_prompt_index: np.ndarray, aniso_special: np.ndarray,
                tokens: tuple[np.ndarray, np.ndarray, np.ndarray]) -> h5py.File:
        try:
            fh = h5py.File(self.tmp, "w", libver=("earliest", "v110"), track_order=False)
        except Exception as exc:
            if not is_io_error(exc):
                raise
            self.tmp.unlink(missing_ok=True)
            raise _write_error(self.path, exc, "creating the output file") from None
        try:
            n = len(texts)
            _dataset(fh, "statements/text", np.array(texts, dtype=object), dtype=STR)
            _dataset(fh, "statements/category", np.array(categories, dtype=object), dtype=STR)
            _dataset(fh, "statements/pair", np.asarray(pairs, dtype=np.int32))
            _dataset(fh, "statements/side", np.asarray(sides, dtype=np.int8))
            for name, (shape, dtype) in batch_datasets(n, n_layers, hidden_size).items():
                _allocated(fh, name, shape, dtype)
            _allocated(fh, "progress/done", (n,), np.bool_)
            ids, offsets, special = tokens
            _dataset(fh, "tokens/ids", np.asarray(ids, dtype=np.int32))
            _dataset(fh, "tokens/offsets", np.asarray(offsets, dtype=np.int64))
            _dataset(fh, "tokens/special", np.asarray(special, dtype=np.bool_))
            _dataset(fh, "anisotropy/prompt", np.array(prompts, dtype=object), dtype=STR)
            _dataset(fh, "anisotropy/states", np.ascontiguousarray(aniso_states, dtype=np.float32))
            _dataset(fh, "anisotropy/prompt_index", np.asarray(aniso_prompt_index, dtype=np.int32))
            _dataset(fh, "anisotropy/special", np.asarray(aniso_special, dtype=np.bool_))
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
            for name, values in result.datasets().items():
                self.fh[name][idx] = values[order]
            self.fh["progress/done"][idx] = True
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
                self.fh.attrs["complete"] = True
            self.fh.close()
            self.fh = None
            os.replace(self.tmp, self.path)
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


def _resume_mismatch(fh: h5py.File, attrs: Mapping[str, Any], n: int, n_layers: int, hidden_size: int) -> str:
    """Why the partial file ``fh`` cannot be resumed by a run with ``attrs`` (empty string: it can)."""
    for key, value in attrs.items():
        if not _same(fh.attrs.get(key), value):
            return f"it was written with {key}={fh.attrs.get(key)!r}, this run has {value!r}"
    shapes = {name: shape for name, (shape, _) in batch_datasets(n, n_layers, hidden_size).items()}
    shapes.update({name: (n,) for name in ("progress/done", "statements/text")})
    shapes["tokens/offsets"] = (n + 1,)
    for name, shape in shapes.items():
        if name not in fh or fh[name].shape != shape:
            return f"{name} is missing or not of shape {shape}"
    for name in ("anisotropy/states", "anisotropy/prompt", "anisotropy/prompt_index", "anisotropy/special",
                 "tokens/ids", "tokens/special"):
        if name not in fh:
            return f"{name} is missing"
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
