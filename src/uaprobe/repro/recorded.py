"""Every output a recomputed stage wrote, against the md5 ``dvc.lock`` records for it.

A file output is one comparison; a directory output one per file of the listing the cache holds for it (and per
file the stage wrote that the listing lacks). A file that differs is named with :func:`uaprobe.repro.filediff.describe`
against its recorded bytes, read from the cache (or, for a ``cache: false`` output, from the workspace when its
bytes are the recorded ones).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uaprobe.repro import filediff
from uaprobe.repro.lockfile import Output

SAME = "recomputed, same bytes"
WITHIN = "recomputed, within tolerance"
DIFFERS = "recomputed, differs"
PULLED = "pulled and verified, not recomputed"
FAILED = "not recomputed: its stage did not complete"
STATUSES = (SAME, WITHIN, DIFFERS, PULLED, FAILED)


@dataclass
class FileRow:
    """One file: its recorded and recomputed md5 and, where they differ, how."""

    path: str
    md5: str
    recomputed: str | None
    status: str
    difference: filediff.Difference | None = None


@dataclass
class OutputRow:
    """One output ``dvc.lock`` records: its md5, what the review did with it, and its files."""

    path: str
    md5: str
    stage: str
    status: str
    why: str = ""
    """Why it was not recomputed, or how it differs (one line)."""
    recomputed: str | None = None
    files: list[FileRow] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status in (SAME, WITHIN, PULLED)

    def describe(self) -> str:
        return f"{self.status}" + (f": {self.why}" if self.why else "")


RecordedBytes = Callable[[str, str], bytes | None]
"""``recorded(path, md5)``: the recorded bytes of a file (None where they are not at hand)."""


def recorded_reader(root: Path, cache: Any) -> RecordedBytes:
    """The recorded bytes of a file by its md5: the cache object, else the workspace file if it has that md5."""
    from dvc_data.hashfile.hash import file_md5

    def read(path: str, md5: str) -> bytes | None:
        with contextlib.suppress(OSError, TypeError, ValueError):
            return Path(cache.oid_to_path(md5)).read_bytes()
        local = root / path
        with contextlib.suppress(OSError):
            if local.is_file() and file_md5(str(local)) == md5:
                return local.read_bytes()
        return None
    return read


def compare_output(scratch: Path, out: Output, cache: Any, recorded: RecordedBytes, *, atol: float = 0.0,
                   rtol: float = 0.0) -> OutputRow:
    """``out`` as the stage wrote it in ``scratch``, against ``dvc.lock``; within ``atol``/``rtol`` (non-zero: a
    GPU extraction) numbers that differ in their last digits pass as :data:`WITHIN`."""
    from uaprobe.repro.hashing import hash_with_entries
    from uaprobe.repro.stores import recorded_entries

    try:
        actual, entries = hash_with_entries(scratch, out.path)
    except FileNotFoundError:
        return OutputRow(out.path, out.md5, out.stage, DIFFERS, "the stage did not write it")
    row = OutputRow(out.path, out.md5, out.stage, SAME, recomputed=actual)
    if not out.is_dir:
        if actual != out.md5:
            row.files = [_file_row(scratch, out.path, out.md5, actual, recorded, atol=atol, rtol=rtol)]
    else:
        listing = recorded_entries(cache, out) or {}
        for rel in sorted(listing.keys() | (entries or {}).keys()):
            md5, now = listing.get(rel), (entries or {}).get(rel)
            path = f"{out.path}/{rel}"
            if md5 is None:
                row.files.append(FileRow(path, "", now, DIFFERS, filediff.Difference(
                    path, "written by the recomputed stage, not in the listing dvc.lock records")))
            elif now != md5:
                row.files.append(_file_row(scratch, path, md5, now, recorded, atol=atol, rtol=rtol))
        if actual != out.md5 and not row.files:
            row.files.append(FileRow(out.path, out.md5, actual, DIFFERS, filediff.Difference(
                out.path, f"the directory's md5 is {actual}, dvc.lock records {out.md5} (its listing is not in the "
                          "cache: `dvc fetch` it to see which files differ)")))
    if actual == out.md5:
        return row
    bad = [f for f in row.files if f.status == DIFFERS]
    if not bad:
        row.status = WITHIN
        row.why = f"every number within the tolerance (|a - b| <= {atol:g} + {rtol:g} * max(|a|, |b|))"
        return row
    row.status = DIFFERS
    first = bad[0]
    named = first.difference.summary if first.difference else "other bytes"
    row.why = (f"{first.path}: {named}" if out.is_dir else named) + \
        (f" (and {len(bad) - 1} more file(s))" if len(bad) > 1 else "")
    return row


def _file_row(scratch: Path, path: str, md5: str, actual: str | None, recorded: RecordedBytes, *, atol: float,
              rtol: float) -> FileRow:
    now = (scratch / path).read_bytes() if actual is not None else None
    diff = filediff.describe(path, recorded(path, md5), now, atol=atol, rtol=rtol)
    return FileRow(path, md5, actual, WITHIN if diff.within and (atol or rtol) else DIFFERS, diff)


__all__ = ["DIFFERS", "FAILED", "FileRow", "OutputRow", "PULLED", "SAME", "STATUSES", "WITHIN", "compare_output",
           "recorded_reader"]
