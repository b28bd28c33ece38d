"""The HDF5 layout of one model's extraction, described once: the writer and the reader's check use it.

:data:`DATASETS` lists every dataset: its name, the dtype the writer stores, its shape in symbols,
whether it is streamed batch by batch (and from which field of the extraction's batch result), and
whether an older file may lack it. :data:`ATTRIBUTES` lists the file's attributes. Adding a dataset
is one line in :data:`DATASETS`; the writer allocates and fills it, and :func:`check_layout` checks
it in every file that ``analyze`` reads.

Shape symbols: ``N`` statements, ``L`` blocks (``L+1`` hidden states: index 0 = token embeddings),
``D`` hidden size, ``T`` anisotropy tokens (every prompt's tokens, concatenated), ``P`` anisotropy
prompts, ``K`` statement tokens (every statement's tokens, concatenated). ``L`` and ``D`` come from
the attributes ``n_layers`` and ``hidden_size``; the others from the first dataset that has them.
A symbol may carry ``+1`` (``N+1`` offsets into a concatenation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from uaprobe.errors import UAProbeError
from uaprobe.names import POLICIES, POOLINGS

__all__ = ["POLICIES", "POOLINGS"]

KINDS = {"float": "f", "int": "iu", "bool": "b"}
"""Dtype kinds (numpy ``dtype.kind``) a reader accepts for each kind of dataset; ``str`` is HDF5 text."""


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of the extraction file."""

    name: str
    """Path inside the file, e.g. ``pooled/mean``."""
    dtype: str
    """What the writer stores: a numpy dtype name (``float32``, ``int32``, ``int8``, ``bool``) or ``str`` (UTF-8)."""
    shape: tuple[str, ...]
    """Shape in symbols (see the module docstring)."""
    doc: str
    stream: str | None = None
    """Field of the batch result written batch by batch (``pooled.mean`` = ``result.pooled["mean"]``); None: the
    whole dataset is written when the file is created."""
    optional: bool = False
    """An older file may lack it; a reader then has no such array."""
    index_of: str | None = None
    """The values are indices along this symbol's axis (``P``: a prompt number), so each lies in [0, P)."""
    choices: tuple[int, ...] | None = None
    """The only values allowed (``statements/side``: 0 or 1)."""
    offsets_of: str | None = None
    """The values are offsets into a concatenation along this symbol's axis: non-decreasing, from 0 to its size."""

    @property
    def kind(self) -> str:
        if self.dtype == "str":
            return "str"
        dtype = np.dtype(self.dtype)
        return {"f": "float", "i": "int", "u": "int", "b": "bool"}[dtype.kind]


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of the file (root group)."""

    name: str
    kind: str
    """``str``, ``int``, ``float`` or ``bool``."""
    doc: str
    required: bool = False
    """The readers need it; a file without it is refused."""


SINK_STATISTICS = ("norm", "norm_ratio", "mean_share", "top_dim", "top_dim_share")
"""Per-statement, per-layer statistics of :func:`uaprobe.extraction.sink.sink_statistics` (``top_dim`` is an int)."""

_SINK_DOCS = {"norm": "||h_0||, the norm of position 0's state",
              "norm_ratio": "||h_0|| over the median norm of the other positions",
              "mean_share": "position 0's share of the mean over all positions",
              "top_dim": "position 0's largest dimension", "top_dim_share": "that dimension's share of ||h_0||^2"}

DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec("statements/text", "str", ("N",), "row order = dataset order (category, pair, A then B)"),
    DatasetSpec("statements/category", "str", ("N",), "category of the statement"),
    DatasetSpec("statements/pair", "int32", ("N",), "pair index over the whole dataset"),
    DatasetSpec("statements/side", "int8", ("N",), "0 = A, 1 = B", choices=(0, 1)),
    *(spec for suffix, policy in (("", "pooling.drop of the run"),
                                  ("_sink_excluded", "special tokens and position 0 excluded"))
      for p in POOLINGS for spec in (
        DatasetSpec(f"pooled{suffix}/{p}", "float32", ("N", "L+1", "D"), f"{p}-pooled hidden states ({policy}); "
                    "index 0 = token embeddings, L = last block (post final norm)", stream=f"pooled{suffix}.{p}"),
        DatasetSpec(f"prenorm{suffix}/{p}", "float32", ("N", "D"), f"{p}-pooled residual stream of the last block "
                    f"before the final norm ({policy})", stream=f"prenorm{suffix}.{p}"))),
    DatasetSpec("nll/sum", "float64", ("N",), "per-statement negative log-likelihood, summed (nats)", stream="nll_sum"),
    DatasetSpec("nll/mean", "float64", ("N",), "per-statement negative log-likelihood per token (nats)",
                stream="nll_mean"),
    DatasetSpec("n_tokens", "int32", ("N",), "scored tokens (targets) behind nll", stream="n_tokens"),
    DatasetSpec("n_content", "int32", ("N",), "content tokens behind the pooled states", stream="n_content"),
    DatasetSpec("n_content_sink_excluded", "int32", ("N",), "content tokens behind the sink-excluded states",
                stream="n_content_sink_excluded"),
    *(DatasetSpec(f"sink/{k}", "int32" if k == "top_dim" else "float64", ("N", "L+1"),
                  f"{_SINK_DOCS[k]} (uaprobe.extraction.sink)", stream=f"sink.{k}", index_of="D" if k == "top_dim" else None)
      for k in SINK_STATISTICS),
    DatasetSpec("progress/done", "bool", ("N",), "the row is written (resuming an interrupted run)", optional=True),
    DatasetSpec("tokens/ids", "int32", ("K",), "every statement's token ids as the model reads them, concatenated"),
    DatasetSpec("tokens/offsets", "int64", ("N+1",), "statement i = ids[offsets[i]:offsets[i+1]]", offsets_of="K"),
    DatasetSpec("tokens/special", "bool", ("K",), "the token was added by the tokenizer (BOS, EOS)"),
    DatasetSpec("anisotropy/prompt", "str", ("P",), "the anisotropy prompts"),
    DatasetSpec("anisotropy/states", "float32", ("T", "L+1", "D"),
                "every token state of every prompt, prompts concatenated"),
    DatasetSpec("anisotropy/prompt_index", "int32", ("T",), "prompt of each token", index_of="P"),
    DatasetSpec("anisotropy/special", "bool", ("T",), "the token is a special token (e.g. BOS)"),
)
"""Every dataset of ``data/embeddings/<model>.h5`` (names may grow, never shrink), in the order the writer
creates them (the order fixes each dataset's offset in the file, so it is part of the file's bytes)."""

PROGRESS = "progress/done"
"""The writer's own record of written rows (not data; set batch by batch, after the data)."""

ATTRIBUTES: tuple[AttrSpec, ...] = (
    AttrSpec("complete", "bool", "the file was finished (a partial file is never moved into place)", required=True),
    AttrSpec("n_layers", "int", "L: transformer blocks (the file holds L+1 hidden states)", required=True),
    AttrSpec("hidden_size", "int", "D: width of the hidden states", required=True),
    AttrSpec("model_id", "str", "catalog id"),
    AttrSpec("display", "str", "display name"),
    AttrSpec("source", "str", "model source kind (hub, local, gguf, packaged)"),
    AttrSpec("location", "str", "where the weights came from"),
    AttrSpec("revision", "str", "pinned revision (hub models)"),
    AttrSpec("dtype", "str", "compute dtype"),
    AttrSpec("device", "str", "device type"),
    AttrSpec("pooling_drop", "str", "which tokens pooling leaves out"),
    AttrSpec("batch_size", "int", "statements per forward pass, at most"),
    AttrSpec("max_batch_tokens", "int", "padded tokens per forward pass, at most"),
    AttrSpec("dataset_sha256", "str", "sha256 of the dataset file"),
    AttrSpec("prompts_sha256", "str", "sha256 of the anisotropy prompts file"),
    AttrSpec("uaprobe_version", "str", "package version"),
    AttrSpec("torch_version", "str", "torch version"),
    AttrSpec("transformers_version", "str", "transformers version"),
    AttrSpec("bos_added", "bool", "the tokenizer adds a BOS token"),
    AttrSpec("params_millions", "float", "parameter count in millions (0 when unknown)"),
    AttrSpec("numerics", "str", "CPU code paths of the numbers: pins, kernels, versions (uaprobe.repro.numerics, JSON)"),
)

SYMBOL_ATTRS = {"L": "n_layers", "D": "hidden_size"}
"""Shape symbols fixed by an attribute rather than by a dataset."""

FIX = "delete it and rerun the extract stage (`dvc repro`)"

_SYMBOL = re.compile(r"^([A-Z])(\+1)?$")


class LayoutError(UAProbeError):
    """An extraction file does not follow the layout: a dataset missing, of the wrong dtype or shape, or not finite."""


def spec(name: str) -> DatasetSpec:
    """The description of dataset ``name``."""
    for s in DATASETS:
        if s.name == name:
            return s
    raise KeyError(name)


def shape_of(shape: tuple[str, ...], sizes: Mapping[str, int]) -> tuple[int, ...]:
    """A symbolic shape made concrete: ``("N", "L+1", "D")`` with N=4, L=6, D=16 -> ``(4, 7, 16)``."""
    out = []
    for symbol in shape:
        found = _SYMBOL.match(symbol)
        if not found:
            raise ValueError(f"shape symbol {symbol!r} is not a letter with an optional +1")
        out.append(int(sizes[found.group(1)]) + (1 if found.group(2) else 0))
    return tuple(out)


def streamed_value(result: Any, stream: str) -> np.ndarray:
    """The field ``stream`` (``pooled.mean``, ``nll_sum``) of a batch result."""
    field, _, key = stream.partition(".")
    value = getattr(result, field)
    return value[key] if key else value


def _kind_ok(dataset: h5py.Dataset, kind: str) -> bool:
    if kind == "str":
        return h5py.check_string_dtype(dataset.dtype) is not None
    return dataset.dtype.kind in KINDS[kind]


def _attr_ok(value: Any, kind: str) -> bool:
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if kind == "str":
        return isinstance(value, (str, bytes))
    if kind == "bool":
        return isinstance(value, (bool, int)) and value in (0, 1)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))


def check_layout(fh: h5py.File, path: Any) -> dict[str, int]:
    """Check the structure of an open extraction file against :data:`DATASETS` and :data:`ATTRIBUTES`.

    Reads metadata only (dtypes, shapes, attributes), no array. Returns the sizes of the shape
    symbols; raises :class:`LayoutError` naming ``path``, the dataset or attribute, and the fix.
    """
    for attr in ATTRIBUTES:
        if attr.name not in fh.attrs:
            if attr.required:
                raise LayoutError(f"{path}: attribute {attr.name!r} ({attr.doc}) is missing; {FIX}")
            continue
        if not _attr_ok(fh.attrs[attr.name], attr.kind):
            raise LayoutError(f"{path}: attribute {attr.name!r} is {fh.attrs[attr.name]!r}, expected "
                              f"{'a non-negative int' if attr.kind == 'int' else 'a ' + attr.kind}; {FIX}")
    sizes = {symbol: int(np.asarray(fh.attrs[name]).item()) for symbol, name in SYMBOL_ATTRS.items()}
    origin = {symbol: f"attribute {name}" for symbol, name in SYMBOL_ATTRS.items()}
    for ds in DATASETS:
        node = fh.get(ds.name)
        if node is None:
            if ds.optional:
                continue
            raise LayoutError(f"{path}: dataset {ds.name!r} ({ds.doc}) is missing; {FIX}")
        if not isinstance(node, h5py.Dataset):
            raise LayoutError(f"{path}: {ds.name!r} is a group, expected a dataset ({ds.doc}); {FIX}")
        if not _kind_ok(node, ds.kind):
            raise LayoutError(f"{path}: dataset {ds.name!r} is stored as {node.dtype}, expected {ds.kind} "
                              f"({ds.dtype}); {FIX}")
        if len(node.shape) != len(ds.shape):
            raise LayoutError(f"{path}: dataset {ds.name!r} has shape {node.shape}, expected {len(ds.shape)} "
                              f"dimensions ({', '.join(ds.shape)}); {FIX}")
        for axis, (symbol, size) in enumerate(zip(ds.shape, node.shape)):
            found = _SYMBOL.match(symbol)
            assert found, symbol
            base, plus = found.group(1), 1 if found.group(2) else 0
            if base not in sizes:
                sizes[base], origin[base] = size - plus, f"dataset {ds.name}"
            elif size != sizes[base] + plus:
                raise LayoutError(
                    f"{path}: dataset {ds.name!r} has shape {node.shape}, expected "
                    f"{shape_of(ds.shape, sizes)} ({', '.join(ds.shape)}): axis {axis} is {size}, but {symbol} = "
                    f"{sizes[base] + plus} from {origin[base]}; the file is inconsistent, {FIX}")
    return sizes


def first_non_finite(values: np.ndarray) -> tuple[int, ...] | None:
    """Index of the first NaN or inf of ``values`` in C order, or None when all are finite."""
    finite = np.isfinite(values)
    if finite.all():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmin(finite.ravel())), values.shape))


def check_values(arrays: Mapping[str, Any], sizes: Mapping[str, int], path: Any) -> None:
    """The values of the datasets in ``arrays`` (as read): floats finite, indices in range, choices respected.

    ``sizes`` are the symbol sizes :func:`check_layout` returned. The first offending element is named.
    """
    for ds in DATASETS:
        if ds.name not in arrays:
            continue
        values = arrays[ds.name]
        if ds.kind == "float":
            index = first_non_finite(values)
            if index is not None:
                raise LayoutError(f"{path}: dataset {ds.name!r} holds {values[index]} at index {list(index)} "
                                  f"({', '.join(ds.shape)}), the first non-finite value; the extraction is damaged, "
                                  f"{FIX}")
        if ds.index_of is not None:
            limit = sizes[ds.index_of]
            bad = np.flatnonzero((values < 0) | (values >= limit))
            if bad.size:
                raise LayoutError(f"{path}: dataset {ds.name!r} holds {values[bad[0]]} at index {int(bad[0])}, outside "
                                  f"0..{limit - 1} ({ds.index_of} = {limit}); the file is inconsistent, {FIX}")
        if ds.offsets_of is not None:
            limit = sizes[ds.offsets_of]
            steps = np.diff(values)
            if values[0] != 0 or values[-1] != limit or (steps < 0).any():
                where = 0 if values[0] != 0 else (len(values) - 1 if values[-1] != limit
                                                  else int(np.flatnonzero(steps < 0)[0]) + 1)
                raise LayoutError(f"{path}: dataset {ds.name!r} holds {values[where]} at index {where}; offsets must "
                                  f"rise from 0 to {ds.offsets_of} = {limit}; the file is inconsistent, {FIX}")
        if ds.choices is not None:
            bad = np.flatnonzero(~np.isin(values, ds.choices))
            if bad.size:
                raise LayoutError(f"{path}: dataset {ds.name!r} holds {values[bad[0]]} at index {int(bad[0])}, "
                                  f"expected one of {list(ds.choices)}; {FIX}")


def markdown_table() -> str:
    """The layout as a markdown table (``docs/inputs-and-faults.md`` holds exactly this; a test compares)."""
    rows = ["| dataset | dtype | shape | streamed | optional | contents |", "|---|---|---|---|---|---|"]
    for ds in DATASETS:
        notes = ds.doc + (f"; values index {ds.index_of}" if ds.index_of else "")
        notes += f"; values in {{{', '.join(map(str, ds.choices))}}}" if ds.choices else ""
        rows.append(f"| `{ds.name}` | {ds.dtype} | ({', '.join(ds.shape)}) | {'yes' if ds.stream else ''} | "
                    f"{'yes' if ds.optional else ''} | {notes} |")
    rows += ["", "| attribute | kind | required | meaning |", "|---|---|---|---|"]
    rows += [f"| `{a.name}` | {a.kind} | {'yes' if a.required else ''} | {a.doc} |" for a in ATTRIBUTES]
    return "\n".join(rows) + "\n"


__all__ = [
    "ATTRIBUTES",
    "AttrSpec",
    "DATASETS",
    "DatasetSpec",
    "LayoutError",
    "POLICIES",
    "POOLINGS",
    "SINK_STATISTICS",
    "PROGRESS",
    "check_values",
    "markdown_table",
    "check_layout",
    "first_non_finite",
    "shape_of",
    "spec",
    "streamed_value",
]
