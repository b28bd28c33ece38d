"""Measurements behind ``bench/scale.py``'s floor: this machine's operation rates, and the analyze
computation's wall time split by component.

:func:`measure_rates` times, in the calling process, the three kinds of operation that
:mod:`floor` counts: a float64 GEMM (one-thread BLAS on each of the kernels' worker threads, as the
analyses run it), a float64 sum streaming from L2 (a compiled loop over a 256 KiB block, its additions
spread over SIMD lanes, on every worker thread at once), and the seeded generator's integers (one stream).
Each is the best of a few rounds, so a moment of load from other processes lowers no rate much.

:class:`ComponentClock` wraps the functions behind each component of :func:`floor.components` for
the duration of a ``with`` block and adds up their wall time on the main thread, exclusively (a
component called inside another is taken out of the outer one). The wrapping is by attribute name,
so it checks that it took: a target that is no function of its module (renamed, moved) fails before
the block, and one the block never reached (its callers now reach it under another name or from
another module) fails after it, instead of leaving its time to "other".
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
from numba import njit

from floor import Rates  # bench/floor.py

from uaprobe.analysis import anisotropy, bins, layerwise, option_b, centroid_score, policy_run, robustness
from uaprobe.analysis.uniformity import Cosines
from uaprobe.analysis.workers import ordered_map, worker_count


@njit(nogil=True, cache=False, boundscheck=False, fastmath=True)
def _sum(x: np.ndarray, reps: int) -> float:  # pragma: no cover - compiled
    """``reps`` sums of ``x``, the additions reordered into SIMD lanes (fastmath): the machine's best."""
    total = 0.0
    for _ in range(reps):
        for i in range(x.shape[0]):
            total += x[i]
    return total


def _best(fn: Callable[[], float], rounds: int = 5) -> float:
    """Largest of ``rounds`` rates returned by ``fn``."""
    return max(fn() for _ in range(rounds))


def measure_rates(*, threads: int | None = None, dim: int = 576) -> Rates:
    """Operations per second on this machine, now: GEMM multiply-adds and L2 additions on
    ``threads`` worker threads (default: the kernels' count), random integers on one."""
    threads = worker_count() if threads is None else threads
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((1024, dim)) for _ in range(threads)]
    blocks = [rng.standard_normal(32768) for _ in range(threads)]  # 256 KiB each
    _sum(blocks[0], 1)  # compile

    def gemm() -> float:
        reps = 6

        def one(m: np.ndarray) -> None:
            for _ in range(reps):
                m @ m.T
        start = time.perf_counter()
        ordered_map(one, mats, workers=threads)
        return threads * reps * 1024 * 1024 * dim / (time.perf_counter() - start)

    def add() -> float:
        reps = 5000  # about 15 ms of additions per thread at 10 G/s: the thread pool's start is noise
        start = time.perf_counter()
        ordered_map(lambda b: _sum(b, reps), blocks, workers=threads)
        return threads * reps * blocks[0].size / (time.perf_counter() - start)

    def draw() -> float:
        g = np.random.default_rng(1)
        count = 4_000_000
        start = time.perf_counter()
        g.integers(0, 4600, size=count)
        return count / (time.perf_counter() - start)

    return Rates(gemm=_best(gemm), add=_best(add), draw=_best(draw))


class ComponentClock:
    """Wall seconds of each component of one analyze run (see :func:`floor.components` for names)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[tuple[str, float]] = []
        self._main = threading.main_thread()
        self._timed: dict[str, int] = {}  # target -> calls given a component (on any thread)

    def _enter(self, name: str) -> None:
        now = time.perf_counter()
        if self._stack:
            outer, since = self._stack[-1]
            self.seconds[outer] = self.seconds.get(outer, 0.0) + now - since
        self._stack.append((name, now))

    def _exit(self) -> None:
        now = time.perf_counter()
        name, since = self._stack.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - since
        if self._stack:
            self._stack[-1] = (self._stack[-1][0], now)

    def _wrap(self, fn: Callable, name: str | Callable[[], str | None], target: str = "") -> Callable:
        def wrapped(*args, **kwargs):
            label = name() if callable(name) else name
            if label is not None:
                self._timed[target] = self._timed.get(target, 0) + 1
            if label is None or threading.current_thread() is not self._main:
                return fn(*args, **kwargs)
            self._enter(label)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()
        return wrapped

    @contextmanager
    def patched(self) -> Iterator["ComponentClock"]:
        """Wrap the components' functions while the block, one whole ``analyze_model``, runs.

        Raises RuntimeError before the block where a target is not a function of its owner, and
        after it where a target was never called with a component (nothing of it was timed)."""
        null_caller = _function(policy_run, "cosine_pass").__name__

        def null_or_none() -> str | None:  # Cosines.uniformity called by cosine_pass is the null
            return "size-matched null" if sys._getframe(2).f_code.co_name == null_caller else None

        targets = [
            (policy_run, "pooling_cosines", "categories, pair scores"),
            (layerwise, "category_uniformity", "categories, pair scores"),
            (centroid_score, "pair_scores", "categories, pair scores"),
            (bins, "analyze_bins", "random bins"),
            (Cosines, "uniformity", null_or_none),
            (robustness, "lexical_baseline", "lexical baseline"),
            (option_b, "option_b_results", "bootstrap, permutation tests"),
            (option_b, "pair_metrics", "Option B kNN, metrics"),
            (layerwise, "analyze_layerwise", "bootstrap, permutation tests"),
            (centroid_score, "analyze_centroid_scores", "bootstrap, permutation tests"),
            (anisotropy, "analyze_anisotropy", "anisotropy"),
        ]
        saved = [(owner, attr, _function(owner, attr)) for owner, attr, _ in targets]
        self._timed = {}
        try:
            for owner, attr, name in targets:
                setattr(owner, attr, self._wrap(getattr(owner, attr), name, target=_where(owner, attr)))
            yield self
        finally:
            for owner, attr, fn in saved:
                setattr(owner, attr, fn)
        missed = [_where(owner, attr) for owner, attr, _ in targets if not self._timed.get(_where(owner, attr))]
        if missed:
            raise RuntimeError(f"bench/timing.py: {', '.join(missed)} never called with a component during the "
                               "analysis: the wrapper did not take (the library calls it under another name or "
                               "from another module, or its caller was renamed); update ComponentClock.patched")


def _where(owner: object, attr: str) -> str:
    """``module.attr`` or ``Class.attr`` of a target."""
    return f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}"


def _function(owner: object, attr: str) -> Callable:
    """``owner.attr``, which must be a function: else a RuntimeError naming it (renamed or moved)."""
    fn = getattr(owner, attr, None)
    if not callable(fn):
        raise RuntimeError(f"bench/timing.py: {_where(owner, attr)} is not a function (renamed or moved in the "
                           "library?); update the targets of ComponentClock.patched")
    return fn
