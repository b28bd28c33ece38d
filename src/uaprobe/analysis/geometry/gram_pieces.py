"""The Gram form in bounded memory: the table of Gram entries built and summed one piece at a time.

:func:`~uaprobe.analysis.compute.kernels.gram_sums` sums a table of the strict upper triangles of every
view's Gram matrix, which takes ``n (n - 1) / 2 * 8`` bytes per view: past a few thousand pairs more
than the unit vectors themselves. :func:`piece_sums` gives the same sums without ever holding that
table: it cuts it into pieces of one block of eight views (:data:`~uaprobe.analysis.compute.kernels.GRAM_LANES`)
by a range of the kernel's row tiles, each at most ``piece_bytes`` (:data:`GRAM_PIECE_BYTES`), builds
a piece from the unit vectors (a float64 product of ``tile`` rows against the columns right of them,
one view per worker thread, then its upper entries copied into the piece), sums it for every
partition, and drops it. The kernel adds the pieces of one output element in the order of the whole
table, so the result differs from the held table's only where the products round differently (a
product of row tiles rather than one ``U U^T``): the two agree to rounding, not to the byte.
The products are recomputed on every call (no table is held): the cost model
(:meth:`~uaprobe.analysis.geometry.uniformity.Cosines.costs`) counts them each time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from uaprobe.analysis.compute import kernels
from uaprobe.analysis.compute.workers import ordered_map

GRAM_PIECE_BYTES = 1 << 30
"""The most bytes one piece of the Gram table takes (1 GiB): with the products of one row tile per
worker, the memory the streamed Gram form adds at any number of pairs."""


def tri_start(row: int, n: int) -> int:
    """Index of the entry (row, row + 1) in the row-by-row numbering of the strict upper triangle."""
    return row * n - row * (row + 1) // 2


def piece_rows(n: int, tile: int, piece_bytes: int) -> list[tuple[int, int]] | None:
    """The ranges ``[t0, t1)`` of row tiles that cut one block of views into pieces of at most
    ``piece_bytes``, in order; None where one row tile alone exceeds it."""
    n_tiles = -(-n // tile)
    per_entry = kernels.GRAM_LANES * 8
    out, t0 = [], 0
    while t0 < n_tiles:
        t1 = t0
        while t1 < n_tiles and (tri_start(min((t1 + 1) * tile, n), n) - tri_start(t0 * tile, n)) * per_entry <= piece_bytes:
            t1 += 1
        if t1 == t0:
            return None
        out.append((t0, t1))
        t0 = t1
    return out


@njit(cache=True, nogil=True, boundscheck=False)
def _put_rows(rows: np.ndarray, minus: np.ndarray, subtract: bool, r0: int, k0: int, n: int,
              piece: np.ndarray, lane: int) -> None:  # pragma: no cover - compiled
    """``piece[tri(i, j) - k0, lane] = rows[i - r0, j - r0] (- minus[i - r0, j - r0])`` for the rows
    ``i = r0 ..`` of ``rows`` (m, n - r0) and every ``j > i``."""
    for a in range(rows.shape[0]):
        i = r0 + a
        k = i * n - (i * (i + 1)) // 2 - k0
        for j in range(i + 1, n):
            piece[k, lane] = rows[a, j - r0] - minus[a, j - r0] if subtract else rows[a, j - r0]
            k += 1


def build_piece(units: np.ndarray, views: list[tuple[int, int | None]], *, n: int, tile: int,
                t0: int, t1: int) -> np.ndarray:
    """One piece of the table: rows of tiles ``t0 .. t1`` of up to eight views, each ``(low, high)``
    a view of ``units`` (n, W, D) and the view to subtract (None for one side): (1, entries * 8)."""
    r_lo, r_hi = t0 * tile, min(t1 * tile, n)
    k0 = tri_start(r_lo, n)
    piece = np.zeros((tri_start(r_hi, n) - k0, kernels.GRAM_LANES))

    def fill(lane: int) -> None:
        low, high = views[lane]
        for r0 in range(r_lo, r_hi, tile):
            r1 = min(r0 + tile, r_hi)
            u = units[r0:, low]
            rows = u[: r1 - r0] @ u.T  # one GEMM of a row tile against the columns right of it
            if high is None:
                _put_rows(rows, rows, False, r0, k0, n, piece, lane)
            else:
                w = units[r0:, high]
                _put_rows(rows, w[: r1 - r0] @ w.T, True, r0, k0, n, piece, lane)

    ordered_map(fill, range(len(views)))
    return piece.reshape(1, -1)


def piece_sums(units: np.ndarray, views: list[tuple[int, int | None]], labels: np.ndarray, *,
               n_groups: int, pieces: list[tuple[int, int]], tile: int) -> np.ndarray:
    """Sums of Gram entries (``G_low - G_high`` where a view has ``high``) over the pairs of every group,
    one output view per entry of ``views``: labels (P, n) -> (len(views), P, G), 0 for groups of fewer
    than two members; ``pieces`` from :func:`piece_rows` at ``tile`` members per tile."""
    n = units.shape[0]
    n_parts = labels.shape[0]
    n_tiles = -(-n // tile)
    order = np.empty((n_parts, n), dtype=np.int32)
    starts = np.empty((n_parts, n_tiles * (n_groups + 1) + 1), dtype=np.int64)
    lanes = kernels.GRAM_LANES
    out = np.zeros((n_parts, n_groups, -(-len(views) // lanes) * lanes))
    with kernels._slp():
        kernels._block_order(np.ascontiguousarray(labels, dtype=np.int64), n_groups, tile, order, starts)
        for first in range(0, len(views), lanes):
            block = views[first:first + lanes]
            for t0, t1 in pieces:
                piece = build_piece(units, block, n=n, tile=tile, t0=t0, t1=t1)
                kernels._gram_sums(piece, n, tile, t0, t1, tri_start(t0 * tile, n), first, order, starts, out)
                del piece
    return np.ascontiguousarray(np.moveaxis(out[:, :, :len(views)], 2, 0))
