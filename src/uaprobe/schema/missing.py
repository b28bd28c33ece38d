"""A missing value and its reason, carried in the value itself until the file is written.

An analysis puts a :class:`Missing` wherever a statistic, verdict or label is undefined, built by
:func:`value`, :func:`series`, :func:`flags`, :func:`flag` or :func:`label` from the computed numbers
and their reasons. No analysis names where in its file a value will stand: :func:`take_reasons`
walks the finished document, replaces every :class:`Missing` by ``None`` (written as ``null``) and
returns each reason under the ``/``-separated path it was found at (``poolings/mean/pearson_r/3``),
the file's ``nan_reasons``. A missing value without a reason is a programming error and raises,
naming that path.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping, MutableSequence
from typing import Any

import numpy as np


class Missing:
    """An undefined value and why it is undefined (written as ``null``, its reason in ``nan_reasons``).

    A field of the schema that may hold a missing value (:data:`uaprobe.schema.base.Stat` and its kin)
    accepts one as it is, and a record dumps it as it is (the writer turns it into ``null`` and its
    reason). Immutable, compared by its reason."""

    __slots__ = ("reason",)
    reason: str

    def __init__(self, reason: str) -> None:
        object.__setattr__(self, "reason", reason)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a missing value is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Missing) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash((Missing, self.reason))

    def __repr__(self) -> str:
        return f"Missing({self.reason!r})"

    def __bool__(self) -> bool:
        raise TypeError(f"a missing value has no truth value (missing: {self.reason})")


def _why(reason: Any) -> str:
    return "" if reason is None else str(reason)


def value(x: Any, reason: Any = None) -> float | Missing:
    """``x`` as a float, or a :class:`Missing` with ``reason`` if it is NaN or infinite."""
    x = float(x)
    return x if math.isfinite(x) else Missing(_why(reason))


def series(values: Any, reasons: Any = None) -> Any:
    """A (nested) list of floats (a float, for a 0-d array) with a :class:`Missing` for each NaN or infinity; ``reasons`` is a str
    or an array that broadcasts to ``values`` (the entry at a NaN's index is its reason)."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        return value(arr, reasons)  # type: ignore[return-value]
    out = arr.tolist()
    bad = np.argwhere(~np.isfinite(arr))
    if bad.size:
        why = np.broadcast_to(np.asarray("" if reasons is None else reasons, dtype=object), arr.shape)
        for idx in map(tuple, bad):
            out = _set(out, idx, Missing(_why(why[idx])))
    return out


def flags(values: Any, *, defined: Any, reasons: Any) -> list[Any]:
    """A (nested) list of bools with a :class:`Missing` where ``defined`` is false."""
    vals = np.asarray(values, dtype=bool)
    ok = np.broadcast_to(np.asarray(defined, dtype=bool), vals.shape)
    listed = series(np.where(ok, vals.astype(float), np.nan), reasons)
    return _map_nested(listed, lambda v: v if isinstance(v, Missing) else bool(v))


def flag(x: Any, *, defined: bool, reason: str) -> bool | Missing:
    """``x`` as a bool, or a :class:`Missing` with ``reason`` where it is not ``defined``."""
    return bool(x) if defined else Missing(_why(reason))


def label(x: str | None, reason: str) -> str | Missing:
    """``x``, or a :class:`Missing` with ``reason`` where it is None."""
    return Missing(_why(reason)) if x is None else x


def take_reasons(doc: Any) -> dict[str, str]:
    """Every :class:`Missing` under ``doc`` replaced, in place, by ``None``; their reasons by path, sorted."""
    found: dict[str, str] = {}
    _take(doc, (), found)
    return dict(sorted(found.items()))


def as_null(doc: Any) -> Any:
    """``doc`` with every :class:`Missing` under it replaced, in place, by ``None``: for the metrics and plot
    series, which record no reasons (their results file does)."""
    take_reasons(doc)
    return doc


def _take(node: Any, path: tuple[str, ...], found: dict[str, str]) -> None:
    if isinstance(node, MutableMapping):
        items: Any = list(node.items())
    elif isinstance(node, MutableSequence):
        items = list(enumerate(node))
    else:
        return
    for key, child in items:
        here = (*path, str(key))
        if isinstance(child, Missing):
            if not child.reason:
                raise ValueError(f"{'/'.join(here)}: missing value without a reason")
            found["/".join(here)] = child.reason
            node[key] = None
        else:
            _take(child, here, found)


def _set(nested: Any, idx: tuple[int, ...], item: Any) -> Any:
    if not idx:
        return item
    target = nested
    for i in idx[:-1]:
        target = target[i]
    target[idx[-1]] = item
    return nested


def _map_nested(obj: Any, fn: Any) -> Any:
    if isinstance(obj, list):
        return [_map_nested(v, fn) for v in obj]
    return fn(obj)


def number(x: Any) -> float:
    """``x`` as a float, NaN for a :class:`Missing` or ``None`` (for arithmetic on values already built)."""
    return math.nan if x is None or isinstance(x, Missing) else float(x)


def count_true(flags: Any) -> int:
    """How many of ``flags`` are true (a missing one is not)."""
    return sum(1 for v in flags if v is True)


def present(x: Any) -> bool:
    """Whether ``x`` is a value: neither a :class:`Missing` nor ``None``."""
    return not (x is None or isinstance(x, Missing))
