"""Git's merge-conflict markers in a file the pipeline reads (``dvc.lock``, ``params.yaml``, ``dvc.yaml``).

After a ``git merge`` of two branches that both changed such a file, git leaves both sides in it between
``<<<<<<<``, ``=======`` and ``>>>>>>>`` lines. The file is then neither damaged nor changed by a stage:
it is an unresolved merge, and the way out is git's (take one side), then DVC's (recompute what the merged
sources change), then git's again (mark it resolved). :func:`check` names it so.
"""

from __future__ import annotations

from pathlib import Path

from uaprobe.errors import UAProbeError

MARKERS = (b"<<<<<<< ", b"=======", b">>>>>>> ")


class MergeConflict(UAProbeError):
    """A file holds git's conflict markers: a merge is unresolved."""


def marker_line(data: bytes) -> int | None:
    """The 1-based line of the first ``<<<<<<<`` conflict marker in ``data`` (None if there is none: a file
    holding only ``=======`` lines, a Markdown underline, is no conflict)."""
    lines = data.splitlines()
    starts = [i for i, line in enumerate(lines, 1) if line.startswith(MARKERS[0]) or line == MARKERS[0].strip()]
    if not starts or not any(line.startswith(MARKERS[2].strip()) for line in lines[starts[0]:]):
        return None
    return starts[0]


def conflict_message(file: str | Path, line: int, *, at: str = "") -> str:
    """The message for ``file`` (at the revision ``at``, if given) holding conflict markers from ``line`` on."""
    name = Path(file).name
    shown = f"{file} at {at}" if at else str(file)
    if name == "dvc.lock":
        way = ("take one side: `git checkout --ours dvc.lock` (or `--theirs`), then `dvc repro` (it recomputes what the "
               "merged sources change and rewrites dvc.lock), then mark it resolved: `git add dvc.lock`")
    else:
        way = (f"keep the values you want (edit out the markers, or take one side: `git checkout --ours {name}` or "
               f"`--theirs`), then `dvc repro` (it recomputes what they change), then mark it resolved: "
               f"`git add {name} dvc.lock`")
    return f"{shown}: an unresolved git merge (conflict markers from line {line}); {way}"


def check_bytes(data: bytes, file: str | Path, *, at: str = "") -> None:
    """Raise :class:`MergeConflict` if ``data``, the bytes of ``file`` (at the revision ``at``, if given),
    hold git's conflict markers."""
    if (line := marker_line(data)) is not None:
        raise MergeConflict(conflict_message(file, line, at=at))


def check(path: Path) -> None:
    """Raise :class:`MergeConflict` if ``path`` holds git's conflict markers (an unreadable file passes: its
    reader names that)."""
    try:
        data = path.read_bytes()
    except OSError:
        return
    check_bytes(data, path)


__all__ = ["MergeConflict", "check", "check_bytes", "conflict_message", "marker_line"]
