"""Reading the results files that ``compare``, ``figures`` and ``paper`` consume: the names the
readers import, kept here; the schema and the checks live in :mod:`uaprobe.schema`.

:func:`read_results` loads a file and checks it against its kind's model before any work, so a
missing, truncated or foreign file ends in one message naming the file, the key and the stage that
rewrites it, instead of a ``KeyError`` deep inside a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uaprobe.schema import WRITER, Record, ResultsFileError, kind_of, load_json, lookup, read_results, validate


def check_results(doc: Any, kind: str, *, shown: str | Path) -> Record:
    """``doc`` (a loaded results file of ``kind``) checked against its schema, as its typed model."""
    return validate(doc, kind, shown=shown)


__all__ = ["ResultsFileError", "WRITER", "check_results", "kind_of", "load_json", "lookup", "read_results"]
