"""The text of every results, metrics and plots file: strict, deterministic JSON and CSV.

One writer for every file the pipeline tracks, so the same values always give the same bytes:
sorted keys, two-space indent, a trailing newline, and never the bare ``NaN`` token (a missing value
is ``null`` in JSON, an empty field in CSV, with its reason recorded beside it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _default(obj: Any) -> Any:
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__} "
                    "(a missing value is written as null by uaprobe.schema.missing.take_reasons)")


def json_text(obj: Any) -> str:
    """Strict, deterministic JSON text (sorted keys, indent 2, trailing newline)."""
    return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False, ensure_ascii=False, default=_default) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    x = float(value)
    return repr(x) if math.isfinite(x) else ""


def csv_text(columns: Mapping[str, Sequence[Any]]) -> str:
    """CSV text of equal-length columns, in the mapping's order (missing values as empty fields)."""
    names = list(columns)
    lengths = {len(columns[n]) for n in names}
    if len(lengths) > 1:
        raise ValueError(f"columns of unequal length: { {n: len(columns[n]) for n in names} }")
    rows = [",".join(names)]
    for i in range(lengths.pop() if lengths else 0):
        rows.append(",".join(_cell(columns[n][i]) for n in names))
    return "\n".join(rows) + "\n"
