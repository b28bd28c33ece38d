"""Measurements behind ``bench/scale.py``'s floor: this machine's operation rates, and the analyze
computation's wall time split by component.

:func:`measure_rates` times, in the calling process, the four kinds of operation that
:mod:`floor` counts: a float64 GEMM (one-thread BLAS on each of the kernels' worker threads, as the
analyses run it), a float64 sum streaming from L2 (a compiled loop over a 256 KiB block, its additions
spread over SIMD lanes, on every worker thread at once), a float64 sum gathered from a table of Gram
entries at the positions of the pairs inside the groups of random partitions (:func:`gather_rate`,
on every worker thread) and the seeded generator's integers (one stream). Each is the best of a few
rounds, so a moment of load from other processes lowers no rate much.

:class:`ComponentClock` wraps the functions behind each component of :func:`floor.components` for
the duration of a ``with`` block and adds up their wall time on the main thread and on the threads
the analysis runs beside it, each exclusively (a component called inside another is taken out of
the outer one). The wrapping is by attribute name,
so it checks that it took: a target that is no function of its module (renamed, moved) fails before
the block, and one the block never reached (its callers now reach it under another name or from
another module) fails after it, instead of leaving its time to "other".
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np
from numba import njit

from floor import Rates  # bench/floor.py

from uaprobe.analysis import (anisotropy, bins, centroid_score, dimensions, kernels, layerwise, option_b, pairmodels,
                               policy_run, robustness, speccurve)
from uaprobe.analysis.pipeline import BESIDE_THREAD
from uaprobe.analysis.uniformity import GRAM_HELD_BYTES, Cosines
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


@njit(nogil=True, cache=False, boundscheck=False, fastmath=True)
def _gather(x: np.ndarray, n: int, tile: int, tiles: np.ndarray, order: np.ndarray, starts: np.ndarray,
            n_groups: int) -> float:  # pragma: no cover - compiled
    """Sum of the eight lanes of ``x[tri(i, j)]`` over the pairs i < j inside every group of every
    partition, tile pair by tile pair (``tiles``: (K, 2) rows ti <= tj), every partition's runs
    of each tile pair before the next, as :func:`uaprobe.analysis.kernels._gram_sums` reads them;
    ``order``/``starts`` sort each partition's members by (tile, group)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    for t in range(tiles.shape[0]):
        ti, tj = tiles[t, 0], tiles[t, 1]
        for p in range(order.shape[0]):
            row = order[p]
            st = starts[p]
            for g in range(n_groups):
                s_i, e_i = st[ti * n_groups + g], st[ti * n_groups + g + 1]
                s_j, e_j = st[tj * n_groups + g], st[tj * n_groups + g + 1]
                for a in range(s_i, e_i):
                    i = np.int64(row[a])
                    base = i * n - (i * (i + 1)) // 2 - i - 1
                    for b in range(a + 1 if ti == tj else s_j, e_j):
                        k = (base + row[b]) * 8
                        a0 += x[k]
                        a1 += x[k + 1]
                        a2 += x[k + 2]
                        a3 += x[k + 3]
                        a4 += x[k + 4]
                        a5 += x[k + 5]
                        a6 += x[k + 6]
                        a7 += x[k + 7]
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7


GATHER_GROUPS = 20
"""Groups of the gather rate's random partitions (the middle of the bins' k, and their CI partitions' k)."""
GATHER_PAIRS = 2_000_000
"""Pairs (eight entries each) one worker thread sums per round of the gather rate."""
GATHER_L2_TILE = 128
"""Members per tile whose block of eight views (128 x 127 / 2 pairs x 64 bytes, 0.5 MiB) fits a 1 MiB L2."""
GATHER_PARTITIONS = 128
"""Partitions one worker thread runs over each tile of the table, past one tile (as a thread of the
library's kernel takes many partitions over one tile)."""


def _tri_start(i: int, n: int) -> int:
    """Index of pair (i, i + 1) in the strict upper triangle of n members, numbered row by row."""
    return i * n - i * (i + 1) // 2


def gather_members(n_pairs: int, tile: int, cap: int = GRAM_HELD_BYTES) -> int:
    """Members of the gather rate's table: ``n_pairs``, or fewer where the rows its tiles read (one
    tile of rows, eight float64 lanes per pair) would take more than ``cap`` bytes."""
    n = max(n_pairs, 2)
    while n > 2 and _tri_start(min(tile, n), n) * 8 * 8 > cap:
        n -= max(1, n // 64)
    return n


def _group_shares(groups: int, shares: Sequence[float] | None) -> np.ndarray:
    """Each group's probability: ``shares`` (checked), or uniform over ``groups`` where None."""
    p = np.full(groups, 1.0 / groups) if shares is None else np.asarray(shares, dtype=float)
    if p.shape != (groups,) or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"shares must be {groups} probabilities summing to 1, got {p}")
    return p


def _labels(rng: np.random.Generator, groups: int, shares: Sequence[float] | None, size: tuple[int, int]) -> np.ndarray:
    """Random partitions' labels: uniform over ``groups`` (the ``randint`` bins) or by ``shares``."""
    if shares is None:
        return rng.integers(0, groups, size=size)
    return rng.choice(groups, size=size, p=_group_shares(groups, shares))


def gather_work(n_pairs: int, *, groups: int = GATHER_GROUPS, pairs: int = GATHER_PAIRS, seed: int = 0,
                shares: Sequence[float] | None = None, tile: int | None = None
                ) -> tuple[np.ndarray, int, int, np.ndarray, np.ndarray, np.ndarray, int]:
    """What one worker thread of :func:`gather_rate` sums: (table, n, tile, tile pairs, order,
    starts, entries). The partitions are drawn as the ``randint`` bins (every member uniform over
    ``groups``), or, with ``shares`` (one per group, summing to 1), every member in group g with
    probability ``shares[g]`` (the size-matched null's groups of the categories' sizes); their
    members sorted by (tile of :func:`uaprobe.analysis.kernels.gram_tile` members, group), members ascending within a run; the tile pairs are the first ones of the
    library's order, (0, 0), (0, 1), ..., enough for about ``pairs`` pairs. The table holds the
    rows those tiles read, eight lanes per pair, ones (every page written, so every read is real)."""
    tile = kernels.gram_tile(n_pairs) if tile is None else tile
    n = gather_members(n_pairs, tile)
    tile = min(tile, n)
    n_tiles = -(-n // tile)
    p = _group_shares(groups, shares)
    same = float((p * p).sum())  # chance that two members share a group
    diagonal = tile * (tile - 1) / 2.0 * same  # pairs of one partition in a diagonal tile
    if n_tiles == 1:
        parts, k = max(1, int(np.ceil(pairs / diagonal))), 1
    else:
        parts = GATHER_PARTITIONS
        k = min(n_tiles, max(1, int(np.ceil(pairs / (parts * tile * tile * same)))))
    tiles = np.array([(0, tj) for tj in range(k)], dtype=np.int64)
    labels = _labels(np.random.default_rng(seed), groups, shares, (parts, n))
    key = (np.arange(n) // tile)[None, :] * groups + labels
    order = np.argsort(key, axis=1, kind="stable").astype(np.int64)
    counts = np.zeros((parts, n_tiles * groups), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(parts), n), key.ravel()), 1)
    starts = np.concatenate([np.zeros((parts, 1), dtype=np.int64), np.cumsum(counts, axis=1)], axis=1)
    c = counts.reshape(parts, n_tiles, groups)
    entries = int((c[:, 0] * (c[:, 0] - 1) // 2).sum() + (c[:, 0:1] * c[:, 1:k]).sum()) * 8
    table = np.ones(_tri_start(min(tile, n), n) * 8)  # the pairs of the first tile of rows
    return table, n, tile, tiles, order, starts, entries


def gather_rate(*, n_pairs: int, threads: int, groups: int = GATHER_GROUPS,
                shares: Sequence[float] | None = None, tile: int | None = None) -> Callable[[], float]:
    """A round of the gather rate: float64 entries per second summed from a table of Gram entries at
    the positions of the pairs inside the groups of random partitions, on ``threads`` worker
    threads (each its own partitions, all on the same table).

    The table is the kernel's (:func:`uaprobe.analysis.kernels.gram_table`): the strict upper
    triangle of ``n_pairs`` members row by row, eight views per pair in one cache line (one block
    of views), so a scattered read brings eight entries; the reads go one tile at a time (at most
    4 MiB of it), each tile for many partitions, as the library's kernel takes them. Only the
    rows of the first tile of rows are allocated (the others are never read), at most
    :data:`~uaprobe.analysis.uniformity.GRAM_HELD_BYTES` (1 GiB, the library's cap on its tables):
    past it, the table of the largest n under the cap (:func:`gather_members`). ``groups`` and
    ``shares``: the partitions' groups (:func:`gather_work`)."""
    work = [gather_work(n_pairs, groups=groups, seed=t, shares=shares, tile=tile) for t in range(threads)]
    total = sum(w[-1] for w in work)
    small = work[0]
    _gather(small[0], small[1], small[2], small[3][:1], small[4][:1], small[5][:1], groups)  # compile

    def one() -> float:
        start = time.perf_counter()
        ordered_map(lambda w: _gather(w[0], w[1], w[2], w[3], w[4], w[5], groups), work, workers=threads)
        return total / (time.perf_counter() - start)
    return one


def kernel_gather_rate(*, n_pairs: int, groups: int = GATHER_GROUPS, shares: Sequence[float] | None = None,
                       pairs: int = GATHER_PAIRS) -> Callable[[], float]:
    """A round of the library's own Gram kernel (:func:`uaprobe.analysis.kernels.gram_sums`, on the
    kernels' threads) on one block of eight views of a table of ``n_pairs`` members, for random
    partitions drawn as in :func:`gather_work`: float64 entries (eight per pair inside a group) per
    second. :func:`measure_rates` takes the faster of this and :func:`gather_rate`, so that the
    gather kinds are never slower than the library's kernel (the floor stays below it)."""
    n = gather_members(n_pairs, n_pairs)
    p = _group_shares(groups, shares)
    per_partition = n * (n - 1) / 2.0 * float((p * p).sum())
    parts = max(1, min(2000, int(np.ceil(pairs * 2 / max(per_partition, 1.0)))))
    labels = _labels(np.random.default_rng(7), groups, shares, (parts, n))
    counts = np.stack([np.bincount(row, minlength=groups) for row in labels])
    entries = float((counts * (counts - 1) // 2).sum()) * kernels.GRAM_LANES
    table = np.ones((1, n * (n - 1) // 2 * kernels.GRAM_LANES))
    kernels.gram_sums(table, n, labels[:1], n_groups=groups, n_views=kernels.GRAM_LANES)  # compile, pages in

    def one() -> float:
        start = time.perf_counter()
        kernels.gram_sums(table, n, labels, n_groups=groups, n_views=kernels.GRAM_LANES)
        return entries / (time.perf_counter() - start)
    return one


def measure_rates(*, n_pairs: int, category_sizes: Sequence[int], threads: int | None = None,
                  dim: int = 576) -> Rates:
    """Operations per second on this machine, now: GEMM multiply-adds, L2 additions and entries
    gathered from a Gram table of ``n_pairs`` members (:func:`gather_rate`: for the random bins'
    partitions, and for partitions into groups of ``category_sizes``, the size-matched null's) on
    ``threads`` worker threads (default: the kernels' count), random integers on one."""
    threads = worker_count() if threads is None else threads
    sizes = np.asarray(category_sizes, dtype=float)
    # the library's tile, and one whose block of eight views fits a 1 MiB L2 (the faster where the
    # library's 4 MiB tiles spill it): the gather rates are the best of the ways measured
    tiles = sorted({kernels.gram_tile(n_pairs), min(n_pairs, GATHER_L2_TILE)})
    rng = np.random.default_rng(0)
    mats = [(rng.standard_normal((1024, dim)), rng.standard_normal((1024, dim))) for _ in range(threads)]
    blocks = [rng.standard_normal(32768) for _ in range(threads)]  # 256 KiB each
    _sum(blocks[0], 1)  # compile

    def gemm() -> float:
        reps = 6

        def one(pair: tuple[np.ndarray, np.ndarray]) -> None:
            # two distinct matrices: a general GEMM (numpy runs ``m @ m.T`` as a symmetric rank-k
            # update, half the multiply-adds, which would overstate the rate counted per product)
            for _ in range(reps):
                pair[0] @ pair[1].T
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

    def gather(groups: int, shares: Sequence[float] | None) -> float:
        """The best of the emulated reads at every tile and the library's kernel."""
        emulated = [_best(gather_rate(n_pairs=n_pairs, threads=threads, groups=groups, shares=shares, tile=t))
                    for t in tiles]
        return max(emulated + [_best(kernel_gather_rate(n_pairs=n_pairs, groups=groups, shares=shares), rounds=3)])

    return Rates(gemm=_best(gemm), add=_best(add), draw=_best(draw), gather=gather(GATHER_GROUPS, None),
                 gather_null=gather(len(sizes), list(sizes / sizes.sum())))


class ComponentClock:
    """Wall seconds of each component of one analyze run (see :func:`floor.components` for names).

    Components are timed on the main thread and on the threads :func:`~uaprobe.analysis.pipeline.analyze_model`
    runs beside it (:data:`~uaprobe.analysis.pipeline.BESIDE_THREAD`), each thread exclusively (a
    component called inside another is taken out of the outer one); ``beside`` lists the components
    timed (wholly or in part) on those threads, whose seconds overlap the main thread's."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.beside: set[str] = set()
        self._on_main = 0.0
        self._stacks: dict[int, list[tuple[str, float]]] = {}  # thread ident -> its open components
        self._main = threading.main_thread()
        self._timed: dict[str, int] = {}  # target -> calls given a component (on any thread)

    def main_seconds(self) -> float:
        """The seconds of the components timed on the main thread."""
        return self._on_main

    def _add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        if threading.current_thread() is self._main:
            self._on_main += seconds
        else:
            self.beside.add(name)

    def _stack(self) -> list[tuple[str, float]]:
        return self._stacks.setdefault(threading.get_ident(), [])

    def _enter(self, name: str) -> None:
        now = time.perf_counter()
        stack = self._stack()
        if stack:
            outer, since = stack[-1]
            self._add(outer, now - since)
        stack.append((name, now))

    def _exit(self) -> None:
        now = time.perf_counter()
        stack = self._stack()
        name, since = stack.pop()
        self._add(name, now - since)
        if stack:
            stack[-1] = (stack[-1][0], now)

    @staticmethod
    def _timed_thread(thread: threading.Thread, main: threading.Thread) -> bool:
        return thread is main or thread.name.startswith(BESIDE_THREAD)

    def _wrap(self, fn: Callable, name: str | Callable[[], str | None], target: str = "") -> Callable:
        def wrapped(*args, **kwargs):
            label = name() if callable(name) else name
            if label is not None:
                self._timed[target] = self._timed.get(target, 0) + 1
            if label is None or not self._timed_thread(threading.current_thread(), self._main):
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
            (option_b, "option_b_statistics", "bootstrap, permutation tests"),
            (option_b, "pair_metrics", "Option B kNN, metrics"),
            (option_b, "pair_metrics_of_rows", "Option B kNN, metrics"),
            (layerwise, "analyze_layerwise", "bootstrap, permutation tests"),
            (centroid_score, "analyze_centroid_scores", "bootstrap, permutation tests"),
            (anisotropy, "analyze_anisotropy", "anisotropy"),
            (pairmodels, "from_embeddings", "pair-level models"),
            (dimensions, "sweep", "representation sweep"),
            (speccurve, "curve_results", "specification curve"),
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
