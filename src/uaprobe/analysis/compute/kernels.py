"""Compiled kernels of the resampling work: group sums of unit vectors, group sums of Gram entries.

The unit-vector kernel (:func:`vector_squares`) takes the groups as labels (P, n) and works on one
output view at a time, packed as ``(C, n, 16)`` blocks of 16 float64 lanes per member (two cache
lines): 16 coordinates of one side's view, or, for side ``diff``, 8 coordinates of the A view beside
the same 8 of the B view, so that one pass serves both sides and their difference is taken from
the squared norms of the two halves. The members of every partition are counting-sorted by
(block of :data:`BLOCK_MEMBERS` members, group); a thread takes :data:`PART_BLOCK` partitions and,
for each block of lanes, runs them over one block of members at a time (128 KiB, in its core's
L2 whatever the number of pairs), each group's run summed in registers and added to the group's
accumulators in memory, then the squared norms.

The Gram kernel sums the entries of a table of the strict upper triangles, eight views per cache
line, over the pairs of every group. Its members are sorted the same way, by (tile of
:data:`GRAM_TILE` members, group), and it takes the table one tile at a time (a tile's rows by a
tile's columns, at most 4 MiB of one block of views) for every partition, so its random reads stay
in cache whatever the number of pairs; up to :data:`GRAM_ONE_TILE` members the table is one tile.

Determinism: every output element is computed by one thread, in an order fixed by the inputs
alone (the partitions are spread over the threads, never the additions of one element; the blocks
of members and the tiles are added in ascending order), so the bytes do not depend on the number of threads.
LLVM vectorises the register sums only with its SLP vectoriser, which numba leaves off by default;
:func:`_slp` switches it on while the kernels compile (it changes speed, not results).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numba
import numpy as np
from numba import njit, prange
from numba.core import config as numba_config

LANES = 16
"""float64 lanes per member and packed block (two 64-byte cache lines): 16 coordinates of one view,
or 8 coordinates of each view of a ``diff`` pair."""
GRAM_LANES = 8
"""Views per block of the Gram table (one 64-byte cache line of float64)."""


@contextmanager
def _slp() -> Iterator[None]:
    saved = numba_config.SLP_VECTORIZE
    numba_config.SLP_VECTORIZE = True
    try:
        yield
    finally:
        numba_config.SLP_VECTORIZE = saved


@njit(parallel=True, cache=True, boundscheck=False)
def _pack_view(both: np.ndarray, low: int, high: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Pack one output view's unit vectors into ``out`` (C, n, 16), zero past D.

    ``low != high`` (side ``diff``): block c holds coordinates 8c..8c+7 of view ``low`` in lanes
    0-7 and the same coordinates of view ``high`` in lanes 8-15. ``low == high`` (one side): block c
    holds coordinates 16c..16c+15 of that view."""
    n = both.shape[0]
    dim = both.shape[2]
    blocks = out.shape[0]
    half = LANES // 2
    for i in prange(n):
        for c in range(blocks):
            for w in range(LANES):
                if low == high:
                    view, d = low, c * LANES + w
                elif w < half:
                    view, d = low, c * half + w
                else:
                    view, d = high, c * half + w - half
                out[c, i, w] = both[i, view, d] if d < dim else 0.0


_ONE = np.uint64(1)
_LANES_U = np.uint64(LANES)
_GRAM_LANES_U = np.uint64(GRAM_LANES)


@njit(cache=True, boundscheck=False)
def _add_runs(x: np.ndarray, row: np.ndarray, starts: np.ndarray, base: int, n_groups: int,
              acc: np.ndarray) -> None:  # pragma: no cover - compiled
    """``acc[16 g:16 g + 16] +=`` the sum of the 16-lane rows of x (flat (n * 16,)) over the members
    ``row[starts[base + g]:starts[base + g + 1]]`` (one member block's part of group g), for every
    group g. The sum of a run is held in registers as two partial sums, the members at even and at
    odd positions of the run (two chains of additions in flight: twice the loads and adds per
    cycle of one chain), added together at the end of the run. A kernel written out for speed: its
    length is the unrolled loop, not several concepts."""
    for g in range(n_groups):
        s = np.uint64(starts[base + g])
        e = np.uint64(starts[base + g + 1])
        if e == s:
            continue
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        a4 = 0.0
        a5 = 0.0
        a6 = 0.0
        a7 = 0.0
        a8 = 0.0
        a9 = 0.0
        a10 = 0.0
        a11 = 0.0
        a12 = 0.0
        a13 = 0.0
        a14 = 0.0
        a15 = 0.0
        b0 = 0.0
        b1 = 0.0
        b2 = 0.0
        b3 = 0.0
        b4 = 0.0
        b5 = 0.0
        b6 = 0.0
        b7 = 0.0
        b8 = 0.0
        b9 = 0.0
        b10 = 0.0
        b11 = 0.0
        b12 = 0.0
        b13 = 0.0
        b14 = 0.0
        b15 = 0.0
        pairs_end = s + ((e - s) // np.uint64(2)) * np.uint64(2)
        for t in range(s, pairs_end, np.uint64(2)):
            j = np.uint64(row[t]) * _LANES_U
            m = np.uint64(row[t + _ONE]) * _LANES_U
            a0 += x[j + np.uint64(0)]
            a1 += x[j + np.uint64(1)]
            a2 += x[j + np.uint64(2)]
            a3 += x[j + np.uint64(3)]
            a4 += x[j + np.uint64(4)]
            a5 += x[j + np.uint64(5)]
            a6 += x[j + np.uint64(6)]
            a7 += x[j + np.uint64(7)]
            a8 += x[j + np.uint64(8)]
            a9 += x[j + np.uint64(9)]
            a10 += x[j + np.uint64(10)]
            a11 += x[j + np.uint64(11)]
            a12 += x[j + np.uint64(12)]
            a13 += x[j + np.uint64(13)]
            a14 += x[j + np.uint64(14)]
            a15 += x[j + np.uint64(15)]
            b0 += x[m + np.uint64(0)]
            b1 += x[m + np.uint64(1)]
            b2 += x[m + np.uint64(2)]
            b3 += x[m + np.uint64(3)]
            b4 += x[m + np.uint64(4)]
            b5 += x[m + np.uint64(5)]
            b6 += x[m + np.uint64(6)]
            b7 += x[m + np.uint64(7)]
            b8 += x[m + np.uint64(8)]
            b9 += x[m + np.uint64(9)]
            b10 += x[m + np.uint64(10)]
            b11 += x[m + np.uint64(11)]
            b12 += x[m + np.uint64(12)]
            b13 += x[m + np.uint64(13)]
            b14 += x[m + np.uint64(14)]
            b15 += x[m + np.uint64(15)]
        if pairs_end < e:
            j = np.uint64(row[pairs_end]) * _LANES_U
            a0 += x[j + np.uint64(0)]
            a1 += x[j + np.uint64(1)]
            a2 += x[j + np.uint64(2)]
            a3 += x[j + np.uint64(3)]
            a4 += x[j + np.uint64(4)]
            a5 += x[j + np.uint64(5)]
            a6 += x[j + np.uint64(6)]
            a7 += x[j + np.uint64(7)]
            a8 += x[j + np.uint64(8)]
            a9 += x[j + np.uint64(9)]
            a10 += x[j + np.uint64(10)]
            a11 += x[j + np.uint64(11)]
            a12 += x[j + np.uint64(12)]
            a13 += x[j + np.uint64(13)]
            a14 += x[j + np.uint64(14)]
            a15 += x[j + np.uint64(15)]
        k = g * LANES  # 16 consecutive stores: the adds above are vectorised from them
        acc[k + 0] += a0 + b0
        acc[k + 1] += a1 + b1
        acc[k + 2] += a2 + b2
        acc[k + 3] += a3 + b3
        acc[k + 4] += a4 + b4
        acc[k + 5] += a5 + b5
        acc[k + 6] += a6 + b6
        acc[k + 7] += a7 + b7
        acc[k + 8] += a8 + b8
        acc[k + 9] += a9 + b9
        acc[k + 10] += a10 + b10
        acc[k + 11] += a11 + b11
        acc[k + 12] += a12 + b12
        acc[k + 13] += a13 + b13
        acc[k + 14] += a14 + b14
        acc[k + 15] += a15 + b15


@njit(parallel=True, cache=True, boundscheck=False)
def _view_squares(packed: np.ndarray, order: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
                  block_members: int, high_sign: float, out: np.ndarray,
                  part_block: int) -> None:  # pragma: no cover - compiled
    """``out[p, g] += ||low lanes of S||^2 + high_sign * ||high lanes of S||^2``, S the sum of the
    rows of one packed view (C, n * 16) over group g of partition p, for the groups of two or more.

    The threads take blocks of ``part_block`` partitions. For each block of coordinates, a thread
    runs its partitions over one block of ``block_members`` members at a time (in cache), adding
    each group's run into its accumulators; the member blocks are added in ascending order."""
    n_parts = sizes.shape[0]
    n_groups = sizes.shape[1]
    n = order.shape[1]
    n_member_blocks = (n + block_members - 1) // block_members
    n_chunks = (n_parts + part_block - 1) // part_block
    for chunk in prange(n_chunks):
        first = chunk * part_block
        stop = min(n_parts, first + part_block)
        acc = np.empty((stop - first, n_groups * LANES))
        for c in range(packed.shape[0]):
            x = packed[c]
            acc[:] = 0.0
            for b in range(n_member_blocks):
                for p in range(first, stop):
                    _add_runs(x, order[p], starts[p], b * (n_groups + 1), n_groups, acc[p - first])
            for p in range(first, stop):
                a = acc[p - first]
                for g in range(n_groups):
                    if sizes[p, g] < 2:
                        continue
                    low = 0.0
                    high = 0.0
                    for w in range(LANES // 2):
                        low += a[g * LANES + w] * a[g * LANES + w]
                        high += a[g * LANES + LANES // 2 + w] * a[g * LANES + LANES // 2 + w]
                    out[p, g] += low + high_sign * high


@njit(parallel=True, cache=True, boundscheck=False)
def _block_order(labels: np.ndarray, n_groups: int, block_members: int, order: np.ndarray,
                 starts: np.ndarray) -> None:  # pragma: no cover - compiled
    """Counting sort of every partition's members by (member block, group), members ascending
    within each run; label -1 (left out) counts as group ``n_groups``. ``starts[p, b (G + 1) + g]``
    is the start of block b's run of group g in ``order[p]``; the last column is n."""
    n_parts, n = labels.shape
    width = n_groups + 1
    for p in prange(n_parts):
        counts = np.zeros(starts.shape[1], dtype=np.int64)
        for i in range(n):
            lab = labels[p, i]
            counts[(i // block_members) * width + (lab if lab >= 0 else n_groups) + 1] += 1
        for k in range(1, counts.size):
            counts[k] += counts[k - 1]
        starts[p] = counts
        for i in range(n):
            lab = labels[p, i]
            k = (i // block_members) * width + (lab if lab >= 0 else n_groups)
            order[p, counts[k]] = i
            counts[k] += 1


PART_BLOCK = 128
"""Partitions one thread runs over a block of coordinates before the next block (the sums of each
partition are added block after block in the same order whatever this is, so it changes no result)."""
BLOCK_MEMBERS = 1024
"""Members whose packed rows (16 lanes, 128 KiB in all) a thread keeps in cache while it runs its
partitions over them: the reads stay in the core's L2 whatever the number of pairs."""


def vector_squares(both: np.ndarray, labels: np.ndarray, sizes: np.ndarray, *, views: list[tuple[int, int]],
                   signed: bool, block_members: int = BLOCK_MEMBERS) -> np.ndarray:
    """Squared norms of group sums of unit vectors, one output view per entry of ``views``.

    Args:
        both: (n, W, D) float64 unit rows, C-contiguous.
        labels: (P, n) int64 group of each member in each partition, -1 to leave it out.
        sizes: (P, G) int64 members per group.
        views: ``(low, high)`` views of ``both`` per output view. With ``signed`` (side ``diff``)
            ``out[o] = ||S_g(both[:, low])||^2 - ||S_g(both[:, high])||^2``, the two views' coordinates
            packed side by side in one block; otherwise ``low == high`` and ``out[o] = ||S_g(both[:, low])||^2``.
        block_members: members per cache block (changes the speed, and the results only by rounding).

    Returns:
        (len(views), P, G) float64; 0 for groups of fewer than two members.
    """
    n, _, dim = both.shape
    n_parts, n_groups = sizes.shape
    per_block = LANES // 2 if signed else LANES
    blocks = -(-dim // per_block)
    for low, high in views:
        if (low != high) != signed:
            raise ValueError("views must pair two views on a signed call and repeat one otherwise")
    member_blocks = -(-n // block_members)
    order = np.empty((n_parts, n), dtype=np.int32)
    starts = np.empty((n_parts, member_blocks * (n_groups + 1) + 1), dtype=np.int64)
    out = np.zeros((len(views), n_parts, n_groups))
    packed = np.empty((blocks, n, LANES))
    part_block = max(1, min(PART_BLOCK, -(-n_parts // (4 * thread_count()))))
    with _slp():
        _block_order(np.ascontiguousarray(labels, dtype=np.int64), n_groups, block_members, order, starts)
        for target, (low, high) in enumerate(views):
            _pack_view(both, low, high, packed)
            _view_squares(packed.reshape(blocks, n * LANES), order, starts, np.ascontiguousarray(sizes, dtype=np.int64),
                          block_members, -1.0 if signed else 1.0, out[target], part_block)
    return out


@njit(parallel=True, cache=True, boundscheck=False)
def _gram_sums(table: np.ndarray, n: int, tile: int, t0: int, t1: int, k0: int, lane0: int,
               order: np.ndarray, starts: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[p, g, 8 b + w] += sum of table[b, 8 tri(i, j) + w]`` over the pairs i < j of group g of
    partition p; ``tri(i, j) = i n - i (i + 1) / 2 + j - i - 1`` numbers the strict upper triangle
    row by row; table (B, T * 8) holds blocks of eight views.

    ``order``/``starts`` sort each partition's members by (tile of ``tile`` members, group), as
    :func:`_block_order` does. The pairs are taken one tile of the table at a time (rows of tile
    ``ti``, columns of tile ``tj >= ti``: at most ``tile^2`` entries, in cache) for every
    partition, so the random reads of the table stay in cache whatever n; each group's sum over a
    tile is added to ``out`` in the fixed order of the tiles."""
    n_parts = order.shape[0]
    n_groups = out.shape[1]
    width = n_groups + 1
    n_tiles = (n + tile - 1) // tile
    for blk in range(table.shape[0]):  # one block of eight views at a time
        x = table[blk]
        w = lane0 + blk * GRAM_LANES
        for ti in range(t0, t1):
            for tj in range(ti, n_tiles):
                for p in prange(n_parts):
                    row = order[p]
                    st = starts[p]
                    for g in range(n_groups):
                        s_i = st[ti * width + g]
                        e_i = st[ti * width + g + 1]
                        s_j = st[tj * width + g]
                        e_j = st[tj * width + g + 1]
                        if e_i == s_i or e_j == s_j:
                            continue
                        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
                        for a in range(s_i, e_i):
                            i = np.int64(row[a])
                            base = np.uint64(i * n - (i * (i + 1)) // 2 - i - 1 - k0)
                            for b in range(a + 1 if ti == tj else s_j, e_j):
                                k = (base + np.uint64(row[b])) * _GRAM_LANES_U
                                a0 += x[k]
                                a1 += x[k + np.uint64(1)]
                                a2 += x[k + np.uint64(2)]
                                a3 += x[k + np.uint64(3)]
                                a4 += x[k + np.uint64(4)]
                                a5 += x[k + np.uint64(5)]
                                a6 += x[k + np.uint64(6)]
                                a7 += x[k + np.uint64(7)]
                        out[p, g, w] += a0
                        out[p, g, w + 1] += a1
                        out[p, g, w + 2] += a2
                        out[p, g, w + 3] += a3
                        out[p, g, w + 4] += a4
                        out[p, g, w + 5] += a5
                        out[p, g, w + 6] += a6
                        out[p, g, w + 7] += a7


@njit(cache=True, boundscheck=False)
def _put_upper(gram: np.ndarray, minus: np.ndarray, subtract: bool, table: np.ndarray,
               lane: int) -> None:  # pragma: no cover - compiled
    """``table[tri(i, j), lane] = gram[i, j] (- minus[i, j])`` for i < j (upper triangles of dsyrk)."""
    n = gram.shape[0]
    k = 0
    for i in range(n):
        for j in range(i + 1, n):
            table[k, lane] = gram[i, j] - minus[i, j] if subtract else gram[i, j]
            k += 1


def gram_table(grams: Iterator[tuple[np.ndarray, np.ndarray | None]], *, n: int, n_views: int) -> np.ndarray:
    """The kernel's table of Gram entries: ``grams`` yields, per view, a Gram matrix (n, n) whose upper
    triangle holds the entries (and one to subtract, or None); returns (B, n (n-1) / 2 * 8), blocks
    of eight views, zero past the last view."""
    table = np.zeros((-(-n_views // GRAM_LANES), n * (n - 1) // 2, GRAM_LANES))
    for v, (gram, minus) in enumerate(grams):
        _put_upper(gram, gram if minus is None else minus, minus is not None, table[v // GRAM_LANES], v % GRAM_LANES)
    return table.reshape(table.shape[0], -1)


GRAM_TILE = 256
"""Members per tile of the Gram table: a tile of one block of eight views is at most 4 MiB (in
cache; timed best at 920 and 1840 pairs among 64 to 1024)."""
GRAM_ONE_TILE = 512
"""Up to this many members the table is one tile: a block of eight views (8.2 MiB at 512) stays in
cache, and a single tile adds each group's pairs in one run (the fastest order there)."""


def gram_tile(n: int) -> int:
    """Members per tile of the Gram kernel for n members."""
    return n if n <= GRAM_ONE_TILE else GRAM_TILE


def gram_sums(table: np.ndarray, n: int, labels: np.ndarray, *, n_groups: int, n_views: int,
              tile: int | None = None) -> np.ndarray:
    """Sums of Gram entries over the pairs of every group: table from :func:`gram_table`, labels (P, n)
    (-1 leaves a member out) -> (V, P, G); 0 for groups of fewer than two members. ``tile``: members
    per tile (default :func:`gram_tile`; changes the speed, and the results only by rounding)."""
    n_parts = labels.shape[0]
    tile = gram_tile(n) if tile is None else tile
    n_tiles = -(-n // tile)
    order = np.empty((n_parts, n), dtype=np.int32)
    starts = np.empty((n_parts, n_tiles * (n_groups + 1) + 1), dtype=np.int64)
    out = np.zeros((n_parts, n_groups, table.shape[0] * GRAM_LANES))
    with _slp():
        _block_order(np.ascontiguousarray(labels, dtype=np.int64), n_groups, tile, order, starts)
        _gram_sums(table, n, tile, 0, n_tiles, 0, 0, order, starts, out)
    return np.ascontiguousarray(np.moveaxis(out[:, :, :n_views], 2, 0))


def thread_count() -> int:
    """Threads the kernels use (numba's setting)."""
    return int(numba.get_num_threads())
