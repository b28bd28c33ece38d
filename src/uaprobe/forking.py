"""Independent jobs of a stage (a figure, a model's analyses) on forked worker processes, each job from start to
end on one process, the results returned in the jobs' order.

The workers are forked from the caller, so they share its inputs, its settings (the numeric pins among them:
environment variables every child inherits) and any module state without pickling them; only each job's result
travels back. Where the platform cannot fork, or there is one worker or one job, the jobs run in the caller's
process. A job's result does not depend on the process it ran on, so neither do the bytes the caller writes
(each stage using this tests them at 1 and 2 workers).

A fork cannot carry a thread pool the caller started: where numba's parallel kernels already ran in this
process (their OpenMP threads; :func:`can_fork`), the jobs run in the caller's process, one after another, to
the same bytes. The stages pin the BLAS to one thread and run no compiled kernel before their jobs, so they fork.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from uaprobe.errors import UAProbeError

T = TypeVar("T")

_CALL: Callable[[int], Any] | None = None


def _run(index: int) -> Any:
    assert _CALL is not None
    return _CALL(index)


def worker_count() -> int:
    """The processes to run on by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether this process may fork workers: the platform can, and numba's threading layer (OpenMP threads,
    which a forked child cannot use) has not been started here."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return False
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return not getattr(parallel, "_is_initialized", False)


def forks(n: int, workers: int) -> bool:
    """Whether :func:`forked_map` runs ``n`` jobs on ``workers`` forked processes (else in the caller's
    process, one after another)."""
    return workers > 1 and n > 1 and can_fork()


def forked_map(call: Callable[[int], T], n: int, *, workers: int, first: Sequence[int] = (),
               what: str = "jobs") -> list[T]:
    """``[call(i) for i in range(n)]`` on ``workers`` forked processes, results in index order; ``first``: the
    indices to start before the others (the longest jobs, so that none starts last). An exception in a job is
    raised here; a worker that dies (killed, out of memory) raises :class:`UAProbeError` naming ``what`` and
    the fix. On any exit (SIGTERM included) the jobs not started are cancelled and the workers joined."""
    global _CALL
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if not forks(n, workers):
        return [call(i) for i in range(n)]
    order = list(dict.fromkeys([*first, *range(n)]))
    _CALL = call
    pool = ProcessPoolExecutor(max_workers=min(workers, n), mp_context=multiprocessing.get_context("fork"))
    try:
        futures = {i: pool.submit(_run, i) for i in order}
        return [futures[i].result() for i in range(n)]
    except BrokenProcessPool:
        raise UAProbeError(f"a worker process running the {what} died (killed, or out of memory); nothing was "
                           "written: run the stage again with `--workers 1`") from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _CALL = None


__all__: Sequence[str] = ("can_fork", "forked_map", "forks", "worker_count")
