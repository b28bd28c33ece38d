"""Why each missing number of a results file is missing: every ``null`` the analyses write has a
recorded reason (the files' text is written by :mod:`uaprobe.schema.text`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class NanReasons:
    """Collects, while a results object is built, why each missing number is missing.

    Paths are slash-separated keys and indices relative to the results file's top level, e.g.
    ``poolings/mean/pearson_r/3``. A NaN without a reason is a programming error and raises.
    """

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def value(self, path: str, x: Any, reason: Any = None) -> float | None:
        """A float, or None (recording ``reason``) if ``x`` is NaN or infinite."""
        x = float(x)
        if math.isfinite(x):
            return x
        why = str(reason) if reason is not None else ""
        if not why:
            raise ValueError(f"{path}: missing value without a reason")
        self.reasons[path] = why
        return None

    def series(self, path: str, values: Any, reasons: Any = None) -> list[Any]:
        """A (nested) list of floats with None for NaN; ``reasons`` is a str or an array that
        broadcasts to ``values`` (the entry at a NaN's index is its reason)."""
        arr = np.asarray(values, dtype=float)
        out = arr.tolist()
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            why = np.broadcast_to(np.asarray("" if reasons is None else reasons, dtype=object), arr.shape)
            for idx in map(tuple, bad):
                reason = str(why[idx]) if why[idx] is not None else ""
                key = "/".join([path, *map(str, idx)])
                if not reason:
                    raise ValueError(f"{key}: missing value without a reason")
                self.reasons[key] = reason
                _set(out, idx, None)
        return out

    def flags(self, path: str, values: Any, *, defined: Any, reasons: Any) -> list[Any]:
        """A (nested) list of bools with None where ``defined`` is false (reason recorded)."""
        vals = np.asarray(values, dtype=bool)
        ok = np.broadcast_to(np.asarray(defined, dtype=bool), vals.shape)
        as_float = np.where(ok, vals.astype(float), np.nan)
        listed = self.series(path, as_float, reasons)
        return _map_nested(listed, lambda v: None if v is None else bool(v))

    def scalar_flag(self, path: str, value: Any, *, defined: bool, reason: str) -> bool | None:
        if defined:
            return bool(value)
        if not reason:
            raise ValueError(f"{path}: missing value without a reason")
        self.reasons[path] = reason
        return None

    def label(self, path: str, value: str | None, reason: str) -> str | None:
        """A string, or None (recording ``reason``)."""
        if value is None:
            if not reason:
                raise ValueError(f"{path}: missing value without a reason")
            self.reasons[path] = reason
        return value

    def sub(self, prefix: str) -> "_Prefixed":
        """A view that prepends ``prefix/`` to every path."""
        return _Prefixed(self, prefix)


class _Prefixed:
    def __init__(self, base: NanReasons, prefix: str) -> None:
        self._base = base
        self._prefix = prefix.rstrip("/")

    def _p(self, path: str) -> str:
        return f"{self._prefix}/{path}" if path else self._prefix

    def value(self, path: str, x: Any, reason: Any = None) -> float | None:
        return self._base.value(self._p(path), x, reason)

    def series(self, path: str, values: Any, reasons: Any = None) -> list[Any]:
        return self._base.series(self._p(path), values, reasons)

    def flags(self, path: str, values: Any, *, defined: Any, reasons: Any) -> list[Any]:
        return self._base.flags(self._p(path), values, defined=defined, reasons=reasons)

    def scalar_flag(self, path: str, value: Any, *, defined: bool, reason: str) -> bool | None:
        return self._base.scalar_flag(self._p(path), value, defined=defined, reason=reason)

    def label(self, path: str, value: str | None, reason: str) -> str | None:
        return self._base.label(self._p(path), value, reason)

    def sub(self, prefix: str) -> "_Prefixed":
        return _Prefixed(self._base, self._p(prefix))


Reasons = NanReasons | _Prefixed


def _set(nested: Any, idx: tuple[int, ...], value: Any) -> Any:
    if not idx:
        return value
    target = nested
    for i in idx[:-1]:
        target = target[i]
    target[idx[-1]] = value
    return nested


def _map_nested(obj: Any, fn: Any) -> Any:
    if isinstance(obj, list):
        return [_map_nested(v, fn) for v in obj]
    return fn(obj)
