"""The one way every stage writes an output: atomically, with the project's error on failure.

A write goes to a temporary file in the output's own directory (same file system, so the rename
is atomic), is flushed and synced to disk, and only then renamed over the output. On any failure
the temporary file is removed and the output path still holds its earlier content (or nothing).
:func:`write_files` extends this to a set of files: every temporary file is written first and the
renames come last, so a full disk leaves every earlier output untouched, not half of them.

An operating-system failure (disk full, read-only directory, file-size limit, I/O error) becomes
an :class:`OutputError` naming the file and the fix; any other exception passes through unchanged.
:func:`check_writable` is the check a stage runs on each output directory before its computation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from uaprobe.errors import UAProbeError

FILE_MODE = 0o644
"""Mode of every written file (``mkstemp`` creates 0600)."""


class OutputError(UAProbeError):
    """An output cannot be written: its directory is missing, read-only or full."""


def os_errno(exc: BaseException) -> int | None:
    """The operating-system error number of an I/O error, also when HDF5 buried it in its message."""
    number = getattr(exc, "errno", None)
    if not number:
        found = re.search(r"errno = (\d+)", str(exc))
        number = int(found.group(1)) if found else None
    return number or None


def os_reason(exc: BaseException) -> str:
    """The operating-system reason behind an I/O error, also when HDF5 buried it in its message."""
    number = os_errno(exc)
    if number:
        return f"{os.strerror(number)} [errno {number}]"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def locked_by_another_process(exc: BaseException) -> bool:
    """An open refused because another process holds the file's lock: HDF5 locks every file it opens
    (``flock``, exclusive for writing), and the second opener gets EAGAIN (``BlockingIOError``, "unable to
    lock file"). The file itself is intact."""
    return os_errno(exc) in (errno.EAGAIN, errno.EWOULDBLOCK) or "unable to lock file" in str(exc)


def locked_message(path: Path | str, exc: BaseException, *, writing: bool = False) -> str:
    """What to tell the user when :func:`locked_by_another_process`: the file is intact, who holds it, how
    to go on. ``writing``: this process meant to write the file (where the lock must not be switched off)."""
    head = f"{path}: locked by another process that has it open ({os_reason(exc)}); the file is intact"
    if writing:
        return (f"{head}. Another run writing the same output (another `dvc repro` or extract stage) holds it: "
                "let that run finish or stop it, then rerun")
    return (f"{head}. HDF5 locks a file while a process has it open for writing, e.g. a notebook's "
            "`h5py.File(..., 'r+')`: close it there (or end that process) and rerun; if that process only reads "
            "it, `HDF5_USE_FILE_LOCKING=FALSE` in this command's environment reads it beside that process")


def is_io_error(exc: BaseException) -> bool:
    """An operating-system I/O failure, also when h5py reports it as ValueError/RuntimeError (it does for a
    full disk while creating a dataset)."""
    return isinstance(exc, OSError) or (isinstance(exc, (ValueError, RuntimeError)) and "errno = " in str(exc))


def write_error(path: Path, exc: BaseException, doing: str = "writing") -> OutputError:
    """The error for a failed write of ``path``: the reason, the fix, and that nothing was left behind."""
    return OutputError(
        f"{path}: {doing} failed ({os_reason(exc)}); free space on the disk of {path.parent} or make it "
        "writable. No temporary file was left behind and an earlier output is untouched"
    )


def check_writable(directory: str | Path, *, output: str | Path | None = None,
                   fix: str = "make it writable or point the stage's output option elsewhere") -> Path:
    """Prove that files can be written in ``directory`` (or, if it does not exist yet, that it can be made).

    Run before the computation, so a read-only or missing output location fails in a second, not
    after minutes of work. Nothing is left behind: a probe file is created and removed in the
    directory, or in its nearest existing ancestor when the directory is still to be made. The
    message starts with ``output`` (the file to be written; default the directory) and ends with
    ``fix`` (e.g. the option that moves the output).
    """
    directory = Path(directory)
    name = directory if output is None else output
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        reason = f"{os.strerror(errno.ENOTDIR)} [errno {errno.ENOTDIR}]: {existing} is a file"
        raise OutputError(f"{name}: cannot create the output directory {directory} ({reason}); {fix}")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-probe.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        doing = "is not writable" if existing == directory else f"cannot be created in {existing}"
        raise OutputError(f"{name}: the output directory {directory} {doing} ({os_reason(exc)}); {fix}") from None
    return directory


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every file system allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sync_file(path: Path) -> None:
    with open(path, "rb+") as fh:
        fh.flush()
        os.fsync(fh.fileno())


def _temporary(path: Path) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise write_error(path, exc, "creating a temporary file") from None
    os.close(fd)
    return Path(tmp)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def move_into_place(tmp: Path, path: Path) -> Path:
    """Sync a finished file written elsewhere in ``path``'s directory (an HDF5 ``.partial`` file) and rename it
    over ``path``; OS errors pass through to the caller, which knows what to say about its partial file."""
    _sync_file(tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


def _commit(tmp: Path, path: Path) -> None:
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to (for writers that want a file name, such as
    matplotlib or h5py); on a normal exit it is synced and renamed to ``path``, on any failure removed."""
    path = Path(path)
    tmp = _temporary(path)
    try:
        yield tmp
        _sync_file(tmp)
        _commit(tmp, path)
    except BaseException as exc:
        _discard(tmp)
        if is_io_error(exc):
            raise write_error(path, exc) from None
        raise
    _fsync_dir(path.parent)


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _write_temporary(path: Path, data: bytes) -> Path:
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as exc:
        _discard(tmp)
        if is_io_error(exc):
            raise write_error(path, exc) from None
        raise
    return tmp


def write_file(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` (str as UTF-8, newlines as given) to ``path`` atomically; returns ``path``."""
    return next(iter(write_files({Path(path): data})))


def write_files(files: Mapping[str | Path, bytes | str]) -> list[Path]:
    """Write several outputs as one step: every temporary file first, then every rename.

    A failure while writing (a full disk, a read-only directory) removes every temporary file and
    leaves every output as it was. Returns the paths, in the mapping's order.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            staged.append((_write_temporary(path, _as_bytes(data)), path))
        for tmp, path in staged:
            try:
                _commit(tmp, path)
            except OSError as exc:
                raise write_error(path, exc, "moving the finished file into place") from None
    except BaseException:
        for tmp, _ in staged:
            _discard(tmp)
        raise
    for directory in sorted({path.parent for _, path in staged}):
        _fsync_dir(directory)
    return [path for _, path in staged]


def replace_directory(built: Path, target: Path) -> Path:
    """Put the directory ``built`` (made beside ``target``) in place of ``target``, whole.

    The old ``target`` is renamed aside first and deleted only once ``built`` is in place; if the
    swap fails, the old directory is put back.
    """
    old: Path | None = None
    try:
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
            old.rmdir()
            os.replace(target, old)
        os.replace(built, target)
    except OSError as exc:
        if old is not None and not target.exists():
            with contextlib.suppress(OSError):
                os.replace(old, target)
        raise write_error(target, exc, "moving the finished directory into place") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(target.parent)
    return target


__all__ = [
    "FILE_MODE",
    "OutputError",
    "atomic_path",
    "check_writable",
    "is_io_error",
    "move_into_place",
    "os_reason",
    "replace_directory",
    "write_error",
    "write_file",
    "write_files",
]
