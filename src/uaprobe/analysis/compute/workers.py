"""Independent units of work (one layer of one pooling, say) on a small pool of threads.

The analyses pin the BLAS to one thread, so that their bytes do not depend on the machine; numpy
releases the GIL in its matrix products and the compiled ``nogil`` loops do too, so two threads
each running a whole unit keep two cores busy with single-threaded BLAS calls. Every unit runs on
one thread from start to end and its result is placed by its index, so the results do not depend
on the number of workers (the tests compare the bytes on 1, 2 and 3).

A unit must not start numba's parallel kernels (their thread pool takes one caller at a time).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from uaprobe.analysis.compute import kernels

T = TypeVar("T")
R = TypeVar("R")


def worker_count() -> int:
    """Threads of the pool: those the compiled kernels use (numba's setting, ``NUMBA_NUM_THREADS``)."""
    return max(1, kernels.thread_count())


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int | None = None) -> list[R]:
    """``[fn(item) for item in items]`` on ``workers`` threads (default :func:`worker_count`),
    results in the items' order; an exception in a unit is raised here."""
    items = list(items)
    workers = worker_count() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(items) < 2:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))
