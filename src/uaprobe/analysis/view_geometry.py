"""The pair-level metrics of one view that come from centroids and norms, in one compiled pass that
gives numpy's bytes.

:func:`~uaprobe.analysis.option_b._view_metrics` wrote them as numpy expressions over the (n, D)
states of the A and B statements: each cosine, norm and leave-one-out centroid a new (n, D) float64
array, about forty passes over memory per view. :func:`view_geometry` makes the same operations in
the same order, one row at a time, from the states as they are (float32 or float64, any layout):

- a sum over the rows (``x.sum(axis=0)``, ``x.mean(axis=0)``): numpy adds an outer axis row after
  row, from 0;
- a sum along a row (``(x * y).sum(axis=-1)``, ``np.linalg.norm(x, axis=-1)``): numpy's pairwise
  summation of a contiguous axis (:func:`pairwise_sum`, its algorithm step by step), added to 0;
- every other step is one IEEE operation per element, which compiled code rounds as numpy does
  (no fused multiply-adds: numba contracts nothing without ``fastmath``).

So the values are the same bytes (tested against the numpy expressions, and the default run's
outputs did not change), at a fraction of the memory traffic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

GEOMETRY_METRICS: tuple[str, ...] = ("centroid_asymmetry", "cross_centroid", "within_pair_sim", "margin_asymmetry",
                                     "centroid_asymmetry_loo", "cross_centroid_loo", "margin_asymmetry_loo")
"""The rows of :func:`view_geometry`'s result, in order."""

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
def _dot(x: np.ndarray, y: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``np.add.reduce(x * y)`` of two 1-D float64 arrays as numpy makes it: 0 plus the pairwise sum of
    the products (a contiguous axis)."""
    return 0.0 + pairwise_dot(x, y, 0, x.size, nodes, values)


@njit(cache=True, boundscheck=False, nogil=True)
def _norm(x: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``np.linalg.norm(x, axis=-1)`` of a 1-D float64 array: the square root of ``(x * x).sum()``."""
    return np.sqrt(_dot(x, x, nodes, values))


@njit(cache=True, boundscheck=False, nogil=True)
def _margin(a: np.ndarray, b: np.ndarray, centre: np.ndarray, u: np.ndarray, nodes: np.ndarray,
            values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``norm(a - centre) - norm(b - centre)``, each difference made in ``u``."""
    for d in range(a.size):
        u[d] = a[d] - centre[d]
    margin_a = _norm(u, nodes, values)
    for d in range(b.size):
        u[d] = b[d] - centre[d]
    return margin_a - _norm(u, nodes, values)


@njit(cache=True, boundscheck=False, nogil=True)
def view_geometry(xa: np.ndarray, xb: np.ndarray, eps: float) -> np.ndarray:  # pragma: no cover - compiled
    """:data:`GEOMETRY_METRICS` of one view: xa, xb (n, D), n >= 2, the A and B states of the n pairs
    -> (7, n) float64, the bytes of :func:`uaprobe.analysis.option_b._view_metrics`'s numpy expressions
    (``cosine(x, y) = (x * y).sum(-1) / (norm(x) * norm(y) + eps)``; centroids ``x.mean(axis=0)``;
    leave-one-out centroids ``(x.sum(axis=0) - x) / (n - 1)``; margins ``norm(x - (c_A + c_B) / 2)``)."""
    n, dim = xa.shape
    sa = np.zeros(dim)
    sb = np.zeros(dim)
    for i in range(n):
        for d in range(dim):
            sa[d] += np.float64(xa[i, d])
            sb[d] += np.float64(xb[i, d])
    ca = sa / n
    cb = sb / n
    mid = (ca + cb) / 2.0
    a = np.empty(dim)
    b = np.empty(dim)
    u = np.empty(dim)
    ca_loo = np.empty(dim)
    cb_loo = np.empty(dim)
    mid_loo = np.empty(dim)
    w, v = scratch()
    norm_ca = _norm(ca, w, v)
    norm_cb = _norm(cb, w, v)
    out = np.empty((len(GEOMETRY_METRICS), n))
    for i in range(n):
        for d in range(dim):
            a[d] = np.float64(xa[i, d])
            b[d] = np.float64(xb[i, d])
            ca_loo[d] = (sa[d] - a[d]) / (n - 1)
            cb_loo[d] = (sb[d] - b[d]) / (n - 1)
            mid_loo[d] = (ca_loo[d] + cb_loo[d]) / 2.0
        norm_a = _norm(a, w, v)
        norm_b = _norm(b, w, v)
        out[0, i] = _dot(a, ca, w, v) / (norm_a * norm_ca + eps) - _dot(b, cb, w, v) / (norm_b * norm_cb + eps)
        out[1, i] = _dot(a, cb, w, v) / (norm_a * norm_cb + eps) - _dot(b, ca, w, v) / (norm_b * norm_ca + eps)
        out[2, i] = _dot(a, b, w, v) / (norm_a * norm_b + eps)
        out[3, i] = _margin(a, b, mid, u, w, v)
        norm_ca_loo = _norm(ca_loo, w, v)
        norm_cb_loo = _norm(cb_loo, w, v)
        out[4, i] = (_dot(a, ca_loo, w, v) / (norm_a * norm_ca_loo + eps)
                     - _dot(b, cb_loo, w, v) / (norm_b * norm_cb_loo + eps))
        out[5, i] = (_dot(a, cb_loo, w, v) / (norm_a * norm_cb_loo + eps)
                     - _dot(b, ca_loo, w, v) / (norm_b * norm_ca_loo + eps))
        out[6, i] = _margin(a, b, mid_loo, u, w, v)
    return out


__all__ = ("GEOMETRY_METRICS", "pairwise_dot", "scratch", "view_geometry")
