"""Compiled kernels of the resampling work: group sums of unit vectors, group sums of Gram entries.

Both kernels take the members of every group of every partition as one ``order`` (P, n) array
(each partition's members sorted by group, left-out members last) and ``bounds`` (P, G + 1) (group
g of partition p is ``order[p, bounds[p, g]:bounds[p, g + 1]]``), so a group is a contiguous run.

Determinism: every output element is computed by one thread, in an order fixed by the inputs
alone (the partitions are spread over the threads, never the additions of one element), so the
bytes do not depend on the number of threads.

The unit-vector kernel works on one view at a time, packed as ``(C, n, 8)`` blocks of eight
coordinates (one cache line per member): a block (``n x 64`` bytes) stays in cache while every
partition runs over it, and each group's sum of its eight coordinates is held in registers (two
interleaved accumulators, so the additions of consecutive members do not wait on each other).
LLVM vectorises those register sums only with its SLP vectoriser, which numba leaves off by
default; :func:`_slp` switches it on while the kernels compile (it changes speed, not results).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numba
import numpy as np
from numba import njit, prange
from numba.core import config as numba_config

LANES = 8
"""Coordinates per packed block: one 64-byte cache line of float64."""


@contextmanager
def _slp() -> Iterator[None]:
    saved = numba_config.SLP_VECTORIZE
    numba_config.SLP_VECTORIZE = True
    try:
        yield
    finally:
        numba_config.SLP_VECTORIZE = saved


@njit(cache=True, boundscheck=False)
def _pack_view(both: np.ndarray, view: int, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``both[:, view, :]`` (n, D) -> ``out`` (C, n, 8), zero-padded past D."""
    n = both.shape[0]
    dim = both.shape[2]
    blocks = out.shape[0]
    for i in range(n):
        for c in range(blocks):
            for w in range(LANES):
                d = c * LANES + w
                out[c, i, w] = both[i, view, d] if d < dim else 0.0


_ONE = np.uint64(1)
_TWO = np.uint64(2)
_LANES_U = np.uint64(LANES)


@njit(cache=True, boundscheck=False)
def _block_squares(x: np.ndarray, order: np.ndarray, bounds: np.ndarray, sign: float, out: np.ndarray,
                   first: int, stop: int) -> None:  # pragma: no cover - compiled
    """``out[p, g] += sign * ||sum of the rows of x over group g of partition p||^2`` for the
    partitions ``first <= p < stop``; x is the flat (n * 8,) block of one view. Two accumulators
    take alternate members (an odd one goes first)."""
    n_groups = bounds.shape[1] - 1
    for p in range(first, stop):
        row = order[p]
        for g in range(n_groups):
            s = np.uint64(bounds[p, g])
            e = np.uint64(bounds[p, g + 1])
            if e <= s + _ONE:
                continue
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
            c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = 0.0
            t = s
            if (e - s) % _TWO == _ONE:
                j = np.uint64(row[t]) * _LANES_U
                c0 = x[j]
                c1 = x[j + np.uint64(1)]
                c2 = x[j + np.uint64(2)]
                c3 = x[j + np.uint64(3)]
                c4 = x[j + np.uint64(4)]
                c5 = x[j + np.uint64(5)]
                c6 = x[j + np.uint64(6)]
                c7 = x[j + np.uint64(7)]
                t += _ONE
            while t < e:
                i = np.uint64(row[t]) * _LANES_U
                j = np.uint64(row[t + _ONE]) * _LANES_U
                a0 += x[i]
                a1 += x[i + np.uint64(1)]
                a2 += x[i + np.uint64(2)]
                a3 += x[i + np.uint64(3)]
                a4 += x[i + np.uint64(4)]
                a5 += x[i + np.uint64(5)]
                a6 += x[i + np.uint64(6)]
                a7 += x[i + np.uint64(7)]
                c0 += x[j]
                c1 += x[j + np.uint64(1)]
                c2 += x[j + np.uint64(2)]
                c3 += x[j + np.uint64(3)]
                c4 += x[j + np.uint64(4)]
                c5 += x[j + np.uint64(5)]
                c6 += x[j + np.uint64(6)]
                c7 += x[j + np.uint64(7)]
                t += _TWO
            a0 += c0
            a1 += c1
            a2 += c2
            a3 += c3
            a4 += c4
            a5 += c5
            a6 += c6
            a7 += c7
            sq = ((a0 * a0 + a1 * a1) + (a2 * a2 + a3 * a3)) + ((a4 * a4 + a5 * a5) + (a6 * a6 + a7 * a7))
            out[p, g] += sign * sq


@njit(parallel=True, cache=True, boundscheck=False)
def _view_squares(packed: np.ndarray, order: np.ndarray, bounds: np.ndarray, sign: float, out: np.ndarray,
                  part_block: int) -> None:  # pragma: no cover - compiled
    """:func:`_block_squares` over every block of one view (packed (C, n * 8)): the threads take
    blocks of ``part_block`` partitions, and each runs its partitions over one block of
    coordinates (in cache) before the next."""
    n_parts = bounds.shape[0]
    n_chunks = (n_parts + part_block - 1) // part_block
    for chunk in prange(n_chunks):
        first = chunk * part_block
        stop = min(n_parts, first + part_block)
        for c in range(packed.shape[0]):
            _block_squares(packed[c], order, bounds, sign, out, first, stop)


PART_BLOCK = 32
"""Partitions one thread runs over a block of coordinates before the next block (the sums of each
partition are added block after block in the same order whatever this is, so it changes no result)."""


def vector_squares(both: np.ndarray, order: np.ndarray, bounds: np.ndarray, *,
                   terms: list[tuple[int, int, float]], n_out: int) -> np.ndarray:
    """Signed squared norms of group sums of unit vectors, summed per output view.

    Args:
        both: (n, W, D) float64 unit rows, C-contiguous.
        order, bounds: the groups (see the module docstring); order int32 (P, n), bounds int64 (P, G + 1).
        terms: ``(view of both, output view, sign)``: ``out[o] += sign * ||S_g(both[:, view])||^2``.
        n_out: number of output views.

    Returns:
        (n_out, P, G) float64; 0 for groups of fewer than two members.
    """
    n, _, dim = both.shape
    n_parts, n_groups = bounds.shape[0], bounds.shape[1] - 1
    blocks = -(-dim // LANES)
    out = np.zeros((n_out, n_parts, n_groups))
    packed = np.empty((blocks, n, LANES))
    part_block = max(1, min(PART_BLOCK, -(-n_parts // (4 * thread_count()))))
    with _slp():
        for view, target, sign in terms:
            _pack_view(both, view, packed)
            _view_squares(packed.reshape(blocks, n * LANES), order, bounds, float(sign), out[target], part_block)
    return out


@njit(parallel=True, cache=True, boundscheck=False)
def _gram_sums(table: np.ndarray, n: int, order: np.ndarray, bounds: np.ndarray,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[p, g, 8 b + w] = sum of table[b, 8 tri(i, j) + w]`` over the pairs i < j of group g of
    partition p; ``tri(i, j) = i n - i (i + 1) / 2 + j - i - 1`` numbers the strict upper triangle
    row by row; table (B, T * 8) holds blocks of eight views."""
    n_parts = bounds.shape[0]
    n_groups = bounds.shape[1] - 1
    n_blocks = table.shape[0]
    for blk in range(n_blocks):  # one block of the table at a time, so that it stays in cache for all partitions
        x = table[blk]
        w = blk * LANES
        for p in prange(n_parts):
            row = order[p]
            for g in range(n_groups):
                s = np.uint64(bounds[p, g])
                e = np.uint64(bounds[p, g + 1])
                if e <= s + _ONE:
                    continue
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
                for a in range(s, e - _ONE):
                    i = np.int64(row[a])
                    base = np.uint64(i * n - (i * (i + 1)) // 2 - i - 1)
                    for b in range(a + _ONE, e):
                        k = (base + np.uint64(row[b])) * _LANES_U
                        a0 += x[k]
                        a1 += x[k + np.uint64(1)]
                        a2 += x[k + np.uint64(2)]
                        a3 += x[k + np.uint64(3)]
                        a4 += x[k + np.uint64(4)]
                        a5 += x[k + np.uint64(5)]
                        a6 += x[k + np.uint64(6)]
                        a7 += x[k + np.uint64(7)]
                out[p, g, w] = a0
                out[p, g, w + 1] = a1
                out[p, g, w + 2] = a2
                out[p, g, w + 3] = a3
                out[p, g, w + 4] = a4
                out[p, g, w + 5] = a5
                out[p, g, w + 6] = a6
                out[p, g, w + 7] = a7


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
    table = np.zeros((-(-n_views // LANES), n * (n - 1) // 2, LANES))
    for v, (gram, minus) in enumerate(grams):
        _put_upper(gram, gram if minus is None else minus, minus is not None, table[v // LANES], v % LANES)
    return table.reshape(table.shape[0], -1)


def gram_sums(table: np.ndarray, n: int, order: np.ndarray, bounds: np.ndarray, *, n_views: int) -> np.ndarray:
    """Sums of Gram entries over the pairs of every group: table from :func:`gram_table` -> (V, P, G).

    Members within a group must be in increasing order (a stable sort by group gives it)."""
    out = np.zeros((bounds.shape[0], bounds.shape[1] - 1, table.shape[0] * LANES))
    with _slp():
        _gram_sums(table, n, order, bounds, out)
    return np.ascontiguousarray(np.moveaxis(out[:, :, :n_views], 2, 0))


def thread_count() -> int:
    """Threads the kernels use (numba's setting)."""
    return int(numba.get_num_threads())
