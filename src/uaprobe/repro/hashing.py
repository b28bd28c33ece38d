"""The md5 DVC records for a file or a directory, computed from every byte (DVC's own hashing from ``dvc_data``,
never its state database, which trusts a file whose size and modification time it has seen before), and
the md5 of an object streamed from any DVC file system (a local cache, a remote: HTTP servers without
range requests included)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

Progress = Callable[[int], None]
"""Called with a number of bytes just hashed."""

STREAMED = ("http", "https")
"""Protocols whose files are read as a stream: fsspec's HTTP files otherwise read in ranges, which a static
server such as ``python -m http.server`` does not answer (DVC's own downloads stream too)."""


@functools.lru_cache(maxsize=8)
def _ignore(root: str) -> Any:
    from dvc.ignore import DvcIgnoreFilter
    from dvc_objects.fs.local import LocalFileSystem

    return DvcIgnoreFilter(LocalFileSystem(), root)


def _callback(progress: Progress | None) -> Any:
    if progress is None:
        return None
    from fsspec.callbacks import Callback

    class Bytes(Callback):  # type: ignore[misc]
        def set_size(self, size: int | None) -> None:
            pass

        def relative_update(self, inc: int = 1) -> None:
            progress(inc)

    return Bytes()


def workspace_hash(root: Path, path: str, *, progress: Progress | None = None) -> str:
    """The md5 DVC records for ``root/path`` (``<md5>.dir`` for a directory), computed from every byte;
    FileNotFoundError if it is absent."""
    return hash_with_entries(root, path, progress=progress)[0]


def hash_with_entries(root: Path, path: str, *, progress: Progress | None = None
                      ) -> tuple[str, dict[str, str] | None]:
    """:func:`workspace_hash`, and for a directory the md5 of each of its files (by relative path)."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_data.hashfile.hash import file_md5
    from dvc_objects.fs import localfs
    from dvc_objects.fs.memory import MemoryFileSystem

    root = Path(os.path.abspath(root))
    full = root / path
    if full.is_dir():
        staging = HashFileDB(MemoryFileSystem(), "/uaprobe-verify")  # no state: nothing is taken on trust
        _, _, obj = build(staging, os.fspath(full), localfs, "md5", dry_run=True, ignore=_ignore(os.fspath(root)))
        return str(obj.hash_info.value), {"/".join(key): str(hi.value) for key, _, hi in obj}
    if not full.exists():
        raise FileNotFoundError(path)
    return file_md5(os.fspath(full), localfs, callback=_callback(progress), name="md5",
                    size=full.stat().st_size if progress else None), None


def stream_md5(fs: Any, path: str, progress: Progress | None = None) -> str:
    """The md5 of the object ``path`` on the DVC file system ``fs``, read once from its start;
    FileNotFoundError if it is not there."""
    from dvc_data.hashfile.hash import fobj_md5

    streamed = {"block_size": 0} if fs.protocol in STREAMED else {}
    with fs.open(path, "rb", **streamed) as fobj:
        if progress is not None:
            from tqdm.utils import CallbackIOWrapper

            fobj = CallbackIOWrapper(progress, fobj)
        return fobj_md5(fobj)


__all__ = ["Progress", "hash_with_entries", "stream_md5", "workspace_hash"]
