"""How two versions of one output file differ, in numbers: the review's report of a recomputed file that is not
the bytes ``dvc.lock`` records.

* a JSON or CSV file: every number compared key by key (:func:`uaprobe.repro.numdiff.compare_numbers`), the first
  differing keys with both values, and the largest absolute and relative differences;
* an HDF5 file (an extraction): every attribute and every dataset, the first that differ with their values and the
  largest difference of each differing dataset;
* any other file: the first differing line of a text, or the sizes of a binary file.

``atol``/``rtol`` 0 (the default) name every number that moved; a GPU extraction is compared within
``uaprobe verify --against``'s tolerances (:data:`~uaprobe.repro.numdiff.DEFAULT_ATOL`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from uaprobe.errors import UAProbeError
from uaprobe.repro import numdiff

LABELS = ("recorded", "recomputed")
SHOWN = 5
"""How many differing keys a difference names."""


@dataclass
class Difference:
    """What differs between the recorded and the recomputed file: ``summary`` in one line, ``details`` below it."""

    path: str
    summary: str
    details: list[str] = field(default_factory=list)
    within: bool = False
    """Every number within the stated tolerance (only the bytes differ)."""


def describe(path: str, recorded: bytes | None, recomputed: bytes | None, *, atol: float = 0.0,
             rtol: float = 0.0) -> Difference:
    """The difference of ``path`` between its ``recorded`` bytes (None: not at hand) and its ``recomputed`` ones
    (None: the stage did not write it)."""
    if recomputed is None:
        return Difference(path, "the stage did not write it")
    if recorded is None:
        return Difference(path, "its recorded bytes are not at hand (neither the workspace nor the cache holds "
                          "them): only the md5 is known to differ")
    if path.endswith(numdiff.SUFFIXES):
        return _numbers(path, recorded, recomputed, atol=atol, rtol=rtol)
    if path.endswith((".h5", ".hdf5")):
        return _hdf5(path, recorded, recomputed, atol=atol, rtol=rtol)
    return _other(path, recorded, recomputed)


def _numbers(path: str, recorded: bytes, recomputed: bytes, *, atol: float, rtol: float) -> Difference:
    try:
        ours = numdiff.numbers(path, recorded.decode("utf-8"))
        theirs = numdiff.numbers(path, recomputed.decode("utf-8"))
    except (UnicodeDecodeError, UAProbeError):
        return _other(path, recorded, recomputed)
    diff = numdiff.compare_numbers(path, ours, theirs, atol=atol, rtol=rtol, labels=LABELS)
    if diff.passed:
        what = "every number equal" if diff.max_abs == 0 else \
            f"every number within |a - b| <= {atol:g} + {rtol:g} * max(|a|, |b|)"
        text = _other(path, recorded, recomputed)
        return Difference(path, f"{what} ({diff.compared} numbers, {numdiff.largest(diff, LABELS)}); "
                          f"{text.summary}", text.details, within=True)
    first = diff.failures[:SHOWN]
    more = [f"... {len(diff.failures) - SHOWN} more"] if len(diff.failures) > SHOWN else []
    return Difference(path, f"{len(diff.failures)} of {len(set(ours) | set(theirs))} numbers differ, first "
                      f"{first[0]}; {numdiff.largest(diff, LABELS)}", first + more)


def _first_line(recorded: bytes, recomputed: bytes) -> int | None:
    a, b = recorded.splitlines(), recomputed.splitlines()
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                None if len(a) == len(b) else min(len(a), len(b)))


def _other(path: str, recorded: bytes, recomputed: bytes) -> Difference:
    try:
        a, b = recorded.decode("utf-8").splitlines(), recomputed.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return Difference(path, f"the bytes differ ({len(recorded)} bytes recorded, {len(recomputed)} recomputed)")
    line = _first_line(recorded, recomputed)
    if line is None:
        return Difference(path, "the bytes differ only in line endings")

    x, y = (a[line] if line < len(a) else ""), (b[line] if line < len(b) else "")
    col = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
    start = max(0, col - 60)

    def at(lines: list[str], text: str) -> str:
        if line >= len(lines):
            return "(no such line)"
        return ("..." if start else "") + repr(text[start:col + 60]) + ("..." if len(text) > col + 60 else "")

    return Difference(path, f"the text differs from line {line + 1}, column {col + 1}",
                      [f"recorded:   {at(a, x)}", f"recomputed: {at(b, y)}"])


def _hdf5(path: str, recorded: bytes, recomputed: bytes, *, atol: float, rtol: float) -> Difference:
    import h5py

    lines: list[str] = []
    with h5py.File(io.BytesIO(recorded), "r") as ours, h5py.File(io.BytesIO(recomputed), "r") as theirs:
        a, b = _h5_items(ours), _h5_items(theirs)
        for key in sorted(a.keys() | b.keys()):
            if key not in a or key not in b:
                lines.append(f"{key}: not in the recomputed file" if key not in b else
                             f"{key}: only in the recomputed file")
                continue
            differs = _h5_value(key, a[key], b[key], atol=atol, rtol=rtol)
            if differs:
                lines.append(differs)
    if not lines:
        return Difference(path, "every attribute and dataset equal" + (" within the tolerance" if atol or rtol else "")
                          + "; the bytes differ (HDF5 layout)", within=True)
    shown = lines[:SHOWN] + ([f"... {len(lines) - SHOWN} more"] if len(lines) > SHOWN else [])
    return Difference(path, f"{len(lines)} attribute(s)/dataset(s) differ, first {lines[0]}", shown)


def _h5_items(f: Any) -> dict[str, Any]:
    """Every attribute (``@name``, ``group/@name``) and dataset (``group/name``) of an HDF5 file, by name."""
    import h5py

    out: dict[str, Any] = {f"@{k}": v for k, v in f.attrs.items()}

    def visit(name: str, obj: Any) -> None:
        out.update({f"{name}/@{k}": v for k, v in obj.attrs.items()})
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]
    f.visititems(visit)
    return out


def _h5_value(key: str, a: Any, b: Any, *, atol: float, rtol: float) -> str | None:
    import numpy as np

    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind not in "fiub" or y.dtype.kind not in "fiub":
        return None if x.shape == y.shape and np.array_equal(x, y) else f"{key}: {_short(a)} recorded, " \
            f"{_short(b)} recomputed"
    if x.shape != y.shape:
        return f"{key}: shape {x.shape} recorded, {y.shape} recomputed"
    xf, yf = x.astype(np.float64), y.astype(np.float64)
    same = np.isclose(xf, yf, atol=atol, rtol=rtol, equal_nan=True) if atol or rtol else \
        (xf == yf) | (np.isnan(xf) & np.isnan(yf))
    if same.all():
        return None
    gap = np.where(same, 0.0, np.abs(xf - yf))
    worst = np.unravel_index(int(np.argmax(gap)), gap.shape) if gap.ndim else ()
    first = np.unravel_index(int(np.argmin(same)), same.shape) if same.ndim else ()
    return (f"{key}: {int((~same).sum())} of {same.size} values differ, first at {list(map(int, first))}: "
            f"{float(xf[first])!r} recorded, {float(yf[first])!r} recomputed; max abs diff {gap[worst]:.3g} at "
            f"{list(map(int, worst))}")


def _short(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = repr(value.tolist() if hasattr(value, "tolist") else value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = ["Difference", "LABELS", "describe"]
