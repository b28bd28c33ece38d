"""Drawing every figure of the registry: each one a job, the jobs spread over worker processes, and a
figure whose inputs did not change since it was last drawn taken from the figure store instead of drawn.

A job's **key** is a digest of everything its drawing reads: the bytes of the results files it is drawn
from, the model and the panel's order, the formats, the source of every ``uaprobe`` module loaded (the
drawing code, the schema that reads the results, the style file) and of the stage script, and the
versions of the libraries that render it. Drawing is deterministic (the same inputs give the same
bytes), so a figure stored under its key is the figure the job would draw; the store
(:class:`FigureStore`, a directory outside the stage's outputs) holds the last run's figures, each
checked against its recorded digest before it is used.

The bytes do not depend on the number of workers: every job draws one figure on one process from
start to end, and the results are placed by the job's index (tested on 1 and 2 workers).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from uaprobe.atomic import write_files
from uaprobe.publishing.figures import plotting
from uaprobe.publishing.figures.figure_registry import FigureSpec

RENDERERS = ("matplotlib", "numpy", "pillow", "contourpy", "kiwisolver", "fonttools")
"""The libraries whose versions a key includes (matplotlib and what it draws and writes with)."""


@dataclass(frozen=True)
class Job:
    """One figure to draw: ``spec`` drawn from ``docs`` into ``<out>/<target>.<format>``."""

    spec: FigureSpec
    model: str | None
    target: str
    """The file's path under the output directory, without its suffix (``models/<id>/<key>``, ``panel/<key>``)."""
    sources: tuple[str, ...]
    """The results files it is drawn from, relative to the root (the manifest lists them)."""
    inputs: tuple[str, ...]
    """Every file its documents come from, relative to the root (``sources`` and the reference points)."""
    docs: Mapping[str, Any]


def figure_bytes(job: Job, formats: Sequence[str]) -> dict[str, bytes]:
    """The files of one job, per format."""
    return plotting.figure_bytes(job.spec.draw(job.docs), formats=formats)


def code_digest(extra: Sequence[Path] = ()) -> str:
    """A digest of the source of every loaded ``uaprobe`` module, the figures' style file, ``extra`` files
    (the stage script) and the renderers' versions (:data:`RENDERERS`)."""
    files = {Path(m.__file__).resolve() for name, m in list(sys.modules.items())
             if (name == "uaprobe" or name.startswith("uaprobe.")) and getattr(m, "__file__", None)}
    files |= {plotting.STYLE_FILE.resolve(), *(Path(p).resolve() for p in extra)}
    h = hashlib.sha256()
    for path in sorted(files, key=lambda p: (p.name, str(p))):
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for name in RENDERERS:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name}={version}\0".encode())
    return h.hexdigest()


def job_key(job: Job, *, root: Path, models: Sequence[str], formats: Sequence[str], code: str) -> str:
    """The digest of everything the job's drawing reads (see the module's docstring)."""
    inputs = {path: hashlib.sha256((root / path).read_bytes()).hexdigest() for path in job.inputs}
    body = {"code": code, "key": job.spec.key, "model": job.model, "target": job.target, "models": list(models),
            "formats": list(formats), "inputs": inputs}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class FigureStore:
    """The figures of the last run, by job key: ``<key>.<format>`` and ``<key>.json`` (each file's sha256)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str, formats: Sequence[str]) -> dict[str, bytes] | None:
        """The stored files of ``key``, or None where one is missing or differs from its recorded digest."""
        try:
            digests = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            files = {fmt: (self.folder / f"{key}.{fmt}").read_bytes() for fmt in formats}
        except (OSError, ValueError):
            return None
        if any(digests.get(fmt) != hashlib.sha256(data).hexdigest() for fmt, data in files.items()):
            return None
        return files

    def keep(self, drawn: Mapping[str, Mapping[str, bytes]]) -> None:
        """Store ``drawn`` (key -> files) as the store's whole content (earlier keys are removed). A store
        that cannot be written is left as it is: it only saves time."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            files: dict[Path, bytes] = {}
            for key, by_format in drawn.items():
                for fmt, data in by_format.items():
                    files[self.folder / f"{key}.{fmt}"] = data
                digests = {fmt: hashlib.sha256(data).hexdigest() for fmt, data in by_format.items()}
                files[self.folder / f"{key}.json"] = json.dumps(digests, sort_keys=True).encode()
            write_files(files)
            for path in self.folder.iterdir():
                if path.is_file() and path not in files:
                    path.unlink()
        except OSError:
            pass


_JOBS: Sequence[Job] = ()
_FORMATS: Sequence[str] = ()


def _draw_index(index: int) -> dict[str, bytes]:
    return figure_bytes(_JOBS[index], _FORMATS)


def worker_count() -> int:
    """The processes to draw on by default: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def draw_all(jobs: Sequence[Job], *, formats: Sequence[str], workers: int,
             cost: Callable[[Job], float] = lambda job: 0.0) -> list[dict[str, bytes]]:
    """Every job's files, in the jobs' order, drawn on ``workers`` processes (forked: they share the jobs'
    documents); the costliest jobs (``cost``) start first."""
    global _JOBS, _FORMATS
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(jobs) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [figure_bytes(job, formats) for job in jobs]
    order = sorted(range(len(jobs)), key=lambda i: -cost(jobs[i]))  # sorted() is stable: ties keep job order
    _JOBS, _FORMATS = jobs, formats
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {i: pool.submit(_draw_index, i) for i in order}
            return [futures[i].result() for i in range(len(jobs))]
    finally:
        _JOBS, _FORMATS = (), ()


def drawn_or_stored(jobs: Sequence[Job], *, keys: Sequence[str], store: FigureStore | None,
                    formats: Sequence[str], workers: int,
                    cost: Callable[[Job], float] = lambda job: 0.0) -> tuple[list[dict[str, bytes]], int]:
    """Every job's files: from ``store`` where its key is there intact, else drawn (:func:`draw_all`); the
    store then holds exactly this run's figures. Returns the files in the jobs' order and how many were drawn."""
    stored = [store.get(key, formats) if store is not None else None for key in keys]
    missing = [i for i, files in enumerate(stored) if files is None]
    drawn = draw_all([jobs[i] for i in missing], formats=formats, workers=workers, cost=cost)
    for i, files in zip(missing, drawn):
        stored[i] = files
    result = [files for files in stored if files is not None]
    if store is not None:
        store.keep(dict(zip(keys, result)))
    return result, len(missing)

