"""A content-keyed store of a stage's products, so that a product whose inputs did not change is not made again.

A product (a figure's files, say) is stored under the SHA-256 of everything it is made from: what the caller
declares as its inputs, and :func:`code_digest` (every file of the ``uaprobe`` package and every installed
distribution's version). A caller must key a product on *all* it reads: the figures key each figure on the
documents it is drawn from, and draw it from views that refuse any read the key does not cover. The same key
then means the same bytes, so a stored product is the product: DVC records the outputs as it always does, and
the bytes do not depend on whether they were made or found (tested).

The store lives in the checkout, ``.cache/uaprobe/<name>/`` (ignored by git and DVC), and keeps the products
of the last few runs (:meth:`Memo.prune`). ``UAPROBE_MEMO=off`` turns it off: the review's recomputation runs
with it off, so that it makes every product again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV = "UAPROBE_MEMO"
"""The environment variable that turns the store off (``off``)."""
FOLDER = Path(".cache") / "uaprobe"
"""Where the stores of a checkout live, relative to its root."""


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of the code a product may depend on: the Python version, every file of the ``uaprobe`` package
    (compiled bytecode left out) and every installed distribution's name and version."""
    h = hashlib.sha256(sys.version.encode())
    package = Path(__file__).resolve().parent
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    versions = sorted({(d.metadata["Name"] or "").lower(): d.version for d in importlib.metadata.distributions()}.items())
    h.update(repr(versions).encode())
    return h.hexdigest()


def key(*parts: str | bytes) -> str:
    """The key of a product made from ``parts`` (each one an input's canonical text or bytes) by this code."""
    h = hashlib.sha256(code_digest().encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


class Memo:
    """The store of one kind of product (``folder``; None: off, nothing is found or kept)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    @classmethod
    def at(cls, root: Path, name: str, environ: Mapping[str, str] | None = None) -> Memo:
        """The store ``name`` of the checkout at ``root``, or off where ``UAPROBE_MEMO=off``."""
        environ = os.environ if environ is None else environ
        return cls(None if environ.get(ENV, "").lower() == "off" else root / FOLDER / name)

    def get(self, product: str) -> dict[str, bytes] | None:
        """The files stored under the key ``product`` (name -> bytes), or None."""
        if self.folder is None:
            return None
        entry = self.folder / product
        try:
            files = {p.name: p.read_bytes() for p in sorted(entry.iterdir())}
            os.utime(entry)  # used now: kept by prune
        except OSError:
            return None
        return files or None

    def put(self, product: str, files: Mapping[str, bytes]) -> None:
        """Store ``files`` under the key ``product``, whole or not at all; a store that cannot be written is
        left as it is (it only saves time)."""
        if self.folder is None or (self.folder / product).is_dir():
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.folder))
        except OSError:
            return
        try:
            for name, data in files.items():
                (partial / name).write_bytes(data)
            partial.rename(self.folder / product)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)

    def prune(self, keep: int) -> None:
        """Keep the ``keep`` entries used or stored last, and delete the others (and any partial entry)."""
        if self.folder is None or not self.folder.is_dir():
            return
        entries: Sequence[Path] = sorted(self.folder.iterdir(), key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
        kept = [p for p in entries if not p.name.startswith(".partial-")][:keep]
        for path in entries:
            if path not in kept:
                shutil.rmtree(path, ignore_errors=True)


__all__: Sequence[str] = ("ENV", "FOLDER", "Memo", "code_digest", "key")
