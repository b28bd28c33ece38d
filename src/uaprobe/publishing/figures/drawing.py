"""Drawing the figures of the registry on worker processes: each figure one job, drawn and rendered to bytes
on one process from start to end, the files written by the caller.

The bytes do not depend on the number of workers: a job's figure is drawn from its documents alone, by the
same code, and the results come back in the jobs' order (tested at 1 and 2 workers). The workers are forked
from the caller, so they share its documents, its settings and any module state without pickling them; where
the platform cannot fork, or there is one worker or one job, the jobs run in the caller's process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from uaprobe.publishing.figures import plotting
from uaprobe.publishing.figures.figure_registry import FigureSpec


@dataclass(frozen=True)
class Job:
    """One figure: ``spec`` drawn from ``docs``."""

    spec: FigureSpec
    docs: Mapping[str, Any]


class Planned(NamedTuple):
    """One figure of the stage: its job, its file under the output directory (without its suffix), its model
    (None for a panel figure) and the results files it is drawn from, relative to the root."""

    job: Job
    target: Path
    model: str | None
    sources: list[str]


def plan(figures: Sequence[FigureSpec], docs_by_model: Mapping[str, Mapping[str, Any]],
         panel: Mapping[str, Any]) -> list[Planned]:
    """Every figure of ``figures`` the stage draws, in the manifest's order: each model's figures
    (``models/<id>/<key>``), then the figures of every model together and the panel's (``panel/<key>``)."""
    out = [Planned(Job(spec, docs), Path("models") / model_id / spec.key, model_id,
                   [f"results/models/{model_id}/{n}.json" for n in spec.sources])
           for model_id, docs in docs_by_model.items() for spec in figures if spec.scope == "model"]
    out += [Planned(Job(spec, docs_by_model), Path("panel") / spec.key, None,
                    [f"results/models/{m}/{n}.json" for m in docs_by_model for n in spec.sources])
            for spec in figures if spec.scope == "models"]
    out += [Planned(Job(spec, panel), Path("panel") / spec.key, None, list(spec.sources))
            for spec in figures if spec.scope == "panel"]
    return out


def job_bytes(job: Job, formats: Sequence[str]) -> dict[str, bytes]:
    """One job's files, per format."""
    return plotting.figure_bytes(job.spec.draw(job.docs), formats=formats)


_JOBS: Sequence[Job] = ()
_FORMATS: Sequence[str] = ()


def _draw_index(index: int) -> dict[str, bytes]:
    return job_bytes(_JOBS[index], _FORMATS)


def worker_count() -> int:
    """The processes to draw on by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def draw_all(jobs: Sequence[Job], *, formats: Sequence[str], workers: int) -> list[dict[str, bytes]]:
    """Every job's files, in the jobs' order, drawn on ``workers`` forked processes. An exception in a job is
    raised here; on any exit (SIGTERM included) the jobs not started are cancelled and the workers joined."""
    global _JOBS, _FORMATS
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(jobs) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [job_bytes(job, formats) for job in jobs]
    _JOBS, _FORMATS = jobs, formats
    # a figure of the whole panel draws every model: those start first, so that no long one starts last
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].spec.scope == "model")  # stable: ties keep job order
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=multiprocessing.get_context("fork"))
    try:
        futures = {i: pool.submit(_draw_index, i) for i in order}
        return [futures[i].result() for i in range(len(jobs))]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _JOBS, _FORMATS = (), ()


__all__: Sequence[str] = ("Job", "Planned", "draw_all", "job_bytes", "plan", "worker_count")
