"""The kNN density of the pair-level metrics: each statement's mean cosine distance to its k
nearest statements of the same side, from blocks of the cosine matrix on and above its diagonal.

Memory is linear in n (one block of :data:`KNN_BLOCK_ROWS` rows at a time); the products are float64
GEMMs, and the k nearest of every row are kept as the blocks go by (:func:`_offer_block`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EPS = 1e-10
"""The notebook's guard in every cosine, density and z-score denominator of the pair-level metrics."""
KNN_BLOCK_ROWS = 1024
"""Rows of the cosine-distance matrix held at once by :func:`knn_density` (memory linear in n)."""


@njit(cache=True, boundscheck=False, nogil=True)
def _take(nearest: np.ndarray, farthest: np.ndarray, limit: np.ndarray, row: int,
          d: float) -> None:  # pragma: no cover - compiled
    """Put ``d`` in place of the largest of the row's k nearest distances and find the new largest."""
    nearest[row, farthest[row]] = d
    top = 0
    for s in range(1, nearest.shape[1]):
        if nearest[row, s] > nearest[row, top]:
            top = s
    farthest[row] = top
    limit[row] = nearest[row, top]


@njit(cache=True, boundscheck=False, nogil=True)
def _offer_block(dots: np.ndarray, first_row: int, first_col: int, nearest: np.ndarray,
                 farthest: np.ndarray, limit: np.ndarray) -> None:  # pragma: no cover - compiled
    """Offer the cosine distances ``clip(1 - dots, 0, 2)`` of the block of rows ``first_row..`` by
    columns ``first_col..`` to the k nearest of their rows and, off the diagonal blocks, of their
    columns (the block below the diagonal is this one transposed). ``nearest`` (n, k) holds each
    row's k smallest distances so far, ``farthest`` (n,) the position of the largest of them and
    ``limit`` (n,) its value; a row's distance to itself is 0.

    Per row of the block, one pass computes the distances and flags those below the limits (a loop
    without branches, vectorised), a second takes the flagged ones, checked against the limits as
    they stand then (a limit only falls). The k smallest values of a row do not depend on the order
    they are offered in, so the densities are the same bytes as offering every distance in turn."""
    cols = dots.shape[1]
    diagonal = first_row == first_col
    dist = np.empty(cols)
    flag = np.empty(cols, dtype=np.uint8)
    col_limit = limit[first_col:first_col + cols]
    for a in range(dots.shape[0]):
        i = first_row + a
        own = limit[i]
        x = dots[a]
        if diagonal:
            for b in range(cols):
                d = min(max(1.0 - x[b], 0.0), 2.0)
                dist[b] = d
                flag[b] = d < own
            dist[a] = 0.0
            flag[a] = 0.0 < own
        else:
            for b in range(cols):
                d = min(max(1.0 - x[b], 0.0), 2.0)
                dist[b] = d
                flag[b] = (d < own) | ((d < col_limit[b]) << 1)
        for b in range(cols):
            f = flag[b]
            if f:
                d = dist[b]
                if (f & 1) and d < limit[i]:
                    _take(nearest, farthest, limit, i, d)
                if (f & 2) and d < limit[first_col + b]:
                    _take(nearest, farthest, limit, first_col + b, d)


def _directions(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` (n, D) over their norms, zero rows left 0, in float64."""
    x = np.asarray(x, dtype=float)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def knn_density(x: np.ndarray, *, k: int) -> np.ndarray:
    """(n,) ``1 / (mean cosine distance to the k nearest rows of x, the row itself included + 1e-10)``.

    ``x`` (n, D). Cosine distance ``1 - cos`` clipped to [0, 2], rows normalised without a guard
    (a zero row has distance 1 to everything), the distance of a row to itself 0: the convention
    of scikit-learn's ``NearestNeighbors(metric="cosine")`` the notebook used. The cosines are
    computed in blocks of :data:`KNN_BLOCK_ROWS` on and above the diagonal only (the matrix is
    symmetric: half the products of the full matrix, memory linear in n); each block's distances go
    to the k nearest of its rows and of its columns.
    """
    x = np.asarray(x)
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} neighbours among {n} points")
    u = _directions(x)
    nearest = np.full((n, k), np.inf)
    farthest = np.zeros(n, dtype=np.int64)
    limit = np.full(n, np.inf)
    for first_row in range(0, n, KNN_BLOCK_ROWS):
        rows = u[first_row:first_row + KNN_BLOCK_ROWS]
        for first_col in range(first_row, n, KNN_BLOCK_ROWS):
            dots = rows @ u[first_col:first_col + KNN_BLOCK_ROWS].T
            _offer_block(dots, first_row, first_col, nearest, farthest, limit)
    return 1.0 / (np.sort(nearest, axis=1).mean(axis=1) + EPS)


__all__ = ("EPS", "KNN_BLOCK_ROWS", "knn_density")
