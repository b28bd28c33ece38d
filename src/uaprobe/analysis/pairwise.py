"""numpy's summation order, compiled: sums that give the bytes numpy's reductions give.

numpy adds a contiguous axis (``x.sum(axis=-1)``, ``np.linalg.norm(x, axis=-1)``, ``(x * y).sum(-1)``)
by pairwise summation (``@TYPE@_pairwise_sum``): runs of at most 128 values with eight interleaved
accumulators, longer runs split in two at half their length rounded down to a multiple of 8, the
result added to 0. :func:`pairwise_dot` is that algorithm step by step over the products of two
float64 arrays, so a compiled loop that calls it rounds every addition as numpy does (numba
contracts no multiply-add without ``fastmath``). :func:`unit_rows_into` is
``x / (np.linalg.norm(x, axis=-1, keepdims=True) + eps)`` a row at a time, without its float64
copy, its squares and its norms as whole arrays, and :func:`directions_into` the same without the
guard (zero rows stay zero). Tested against numpy at every run length it treats differently.
One thing is not reproduced: where a sum meets NaNs of both signs, which sign survives depends on
the order each compiler gives an addition's operands; the analyses' states are finite (extraction
refuses others), so their bytes are unaffected.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_PAIRWISE_BLOCK = 128
"""numpy's ``PW_BLOCKSIZE``: runs up to this long are summed with eight accumulators."""


@njit(cache=True, boundscheck=False, nogil=True)
def _leaf_sum(x: np.ndarray, y: np.ndarray, lo: int, n: int) -> float:  # pragma: no cover - compiled
    """numpy's pairwise sum of the products ``x[k] * y[k]`` over a run of at most 128 (each product
    rounded as numpy's ``x * y`` rounds it): fewer than 8 added in turn; else eight interleaved
    accumulators, combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the
    remainder added in turn."""
    xs, ys = x[lo:lo + n], y[lo:lo + n]  # indexed from 0 by unsigned integers: no negative-index checks
    if n < 8:
        res = 0.0
        for k in range(n):
            res += xs[k] * ys[k]
        return res
    r0, r1, r2, r3 = xs[0] * ys[0], xs[1] * ys[1], xs[2] * ys[2], xs[3] * ys[3]
    r4, r5, r6, r7 = xs[4] * ys[4], xs[5] * ys[5], xs[6] * ys[6], xs[7] * ys[7]
    for block in range(1, n // 8):
        i = np.uint64(8 * block)
        r0 += xs[i] * ys[i]
        r1 += xs[i + 1] * ys[i + 1]
        r2 += xs[i + 2] * ys[i + 2]
        r3 += xs[i + 3] * ys[i + 3]
        r4 += xs[i + 4] * ys[i + 4]
        r5 += xs[i + 5] * ys[i + 5]
        r6 += xs[i + 6] * ys[i + 6]
        r7 += xs[i + 7] * ys[i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for k in range(n - n % 8, n):
        res += xs[k] * ys[k]
    return res


@njit(cache=True, boundscheck=False, nogil=True)
def pairwise_dot(x: np.ndarray, y: np.ndarray, lo: int, n: int, nodes: np.ndarray,
                 values: np.ndarray) -> float:  # pragma: no cover - compiled
    """numpy's pairwise sum (``@TYPE@_pairwise_sum``) of the products ``x[k] * y[k]``, k in ``lo..lo + n``,
    as ``(x * y)[lo:lo + n].sum()`` adds them (numpy's sum of ``a`` is this with ``y = 1``): a run longer than 128 is
    split at half its length, rounded down to a multiple of 8, and the two halves' sums added; shorter
    runs are :func:`_leaf_sum`. The recursion is walked with an explicit stack (compiled code caches
    no recursive function) in ``nodes`` (3, 64) int64 and ``values`` (64,) float64, scratch space
    (:func:`scratch`); the tree, hence every addition, is numpy's."""
    if n <= _PAIRWISE_BLOCK:
        return _leaf_sum(x, y, lo, n)
    starts, lengths, stage = nodes[0], nodes[1], nodes[2]
    depth, held = 0, 0
    starts[0], lengths[0], stage[0] = lo, n, 0
    while depth >= 0:
        start, length = starts[depth], lengths[depth]
        if length <= _PAIRWISE_BLOCK:
            values[held] = _leaf_sum(x, y, start, length)
            held += 1
            depth -= 1
            continue
        half = length // 2
        half -= half % 8
        if stage[depth] == 0:
            stage[depth] = 1
            depth += 1
            starts[depth], lengths[depth], stage[depth] = start, half, 0
        elif stage[depth] == 1:
            stage[depth] = 2
            depth += 1
            starts[depth], lengths[depth], stage[depth] = start + half, length - half, 0
        else:
            held -= 1
            values[held - 1] = values[held - 1] + values[held]
            depth -= 1
    return values[0]


@njit(cache=True, nogil=True)
def scratch() -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The scratch space of :func:`pairwise_dot` (enough for any run below 2**60 values)."""
    return np.empty((3, 64), dtype=np.int64), np.empty(64)


@njit(cache=True, boundscheck=False, nogil=True)
def dot(x: np.ndarray, y: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``np.add.reduce(x * y)`` of two 1-D float64 arrays as numpy makes it: 0 plus the pairwise sum of
    the products (a contiguous axis)."""
    return 0.0 + pairwise_dot(x, y, 0, x.size, nodes, values)


@njit(cache=True, boundscheck=False, nogil=True)
def norm(x: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``np.linalg.norm(x, axis=-1)`` of a 1-D float64 array: the square root of ``(x * x).sum()``."""
    return np.sqrt(dot(x, x, nodes, values))


@njit(cache=True, boundscheck=False, nogil=True)
def _rows_over_norms(x: np.ndarray, eps: float, zero_unless_positive: bool,
                     out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out[i] = x[i] / (norm(x[i]) + eps)`` for every row of ``x`` (R, D), float32 or float64, any
    strides, into the float64 ``out`` (R, D): each row converted to float64, its norm the square root
    of numpy's pairwise sum of its squares, each entry divided as ``/`` divides; with
    ``zero_unless_positive`` a row whose norm is not positive is left 0 instead."""
    rows, dim = x.shape
    row = np.empty(dim)
    w, v = scratch()
    for i in range(rows):
        xi, oi = x[i], out[i]
        for d in range(dim):
            row[d] = np.float64(xi[d])
        length = norm(row, w, v)
        if zero_unless_positive and not length > 0.0:
            for d in range(dim):
                oi[d] = 0.0
            continue
        denominator = length + eps
        for d in range(dim):
            oi[d] = row[d] / denominator


@njit(cache=True, boundscheck=False, nogil=True)
def unit_rows_into(x: np.ndarray, eps: float, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``x / (np.linalg.norm(x, axis=-1, keepdims=True) + eps)`` of the rows of ``x`` (R, D), as numpy makes
    it on a row-ordered array, into ``out`` (:func:`_rows_over_norms`)."""
    _rows_over_norms(x, eps, False, out)


@njit(cache=True, boundscheck=False, nogil=True)
def directions_into(x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``np.divide(x, norm, out=zeros, where=norm > 0)`` of the rows of ``x`` (R, D) with numpy's norm of a
    row-ordered array, into ``out`` (:func:`_rows_over_norms` with no guard: a zero or NaN norm leaves
    the row 0; an infinite one divides, as numpy does; ``norm + 0.0`` is the norm itself)."""
    _rows_over_norms(x, 0.0, True, out)


def rows_in_order(x: np.ndarray) -> bool:
    """Whether ``x`` is float32/float64 rows of at least two entries that numpy's norm sums pairwise
    along the row: C-contiguous, or 2-D with contiguous rows that follow one another."""
    if x.dtype not in (np.float32, np.float64) or x.ndim == 0 or x.shape[-1] < 2 or x.size == 0:
        return False
    if x.flags.c_contiguous:
        return True
    return x.ndim == 2 and x.strides[1] == x.itemsize and x.strides[0] >= x.shape[1] * x.itemsize


__all__ = ("directions_into", "dot", "norm", "pairwise_dot", "rows_in_order", "scratch", "unit_rows_into")
