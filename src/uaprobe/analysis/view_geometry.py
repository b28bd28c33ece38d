"""The pair-level metrics of one view that come from centroids and norms, in one compiled pass that
gives numpy's bytes.

:func:`~uaprobe.analysis.option_b._view_metrics` wrote them as numpy expressions over the (n, D)
states of the A and B statements: each cosine, norm and leave-one-out centroid a new (n, D) float64
array, about forty passes over memory per view. :func:`view_geometry` makes the same operations in
the same order, one row at a time, from the states as they are (float32 or float64, any layout):

- a sum over the rows (``x.sum(axis=0)``, ``x.mean(axis=0)``): numpy adds an outer axis row after
  row, from 0;
- a sum along a row (``(x * y).sum(axis=-1)``, ``np.linalg.norm(x, axis=-1)``): numpy's pairwise
  summation of a contiguous axis (:mod:`uaprobe.analysis.pairwise`, its algorithm step by step), added to 0;
- every other step is one IEEE operation per element, which compiled code rounds as numpy does
  (no fused multiply-adds: numba contracts nothing without ``fastmath``).

So the values are the same bytes (tested against the numpy expressions, and the default run's
outputs did not change), at a fraction of the memory traffic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from uaprobe.analysis.pairwise import dot, norm, scratch

GEOMETRY_METRICS: tuple[str, ...] = ("centroid_asymmetry", "cross_centroid", "within_pair_sim", "margin_asymmetry",
                                     "centroid_asymmetry_loo", "cross_centroid_loo", "margin_asymmetry_loo")
"""The rows of :func:`view_geometry`'s result, in order."""


@njit(cache=True, boundscheck=False, nogil=True)
def _margin(a: np.ndarray, b: np.ndarray, centre: np.ndarray, u: np.ndarray, nodes: np.ndarray,
            values: np.ndarray) -> float:  # pragma: no cover - compiled
    """``norm(a - centre) - norm(b - centre)``, each difference made in ``u``."""
    for d in range(a.size):
        u[d] = a[d] - centre[d]
    margin_a = norm(u, nodes, values)
    for d in range(b.size):
        u[d] = b[d] - centre[d]
    return margin_a - norm(u, nodes, values)


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
    norm_ca = norm(ca, w, v)
    norm_cb = norm(cb, w, v)
    out = np.empty((len(GEOMETRY_METRICS), n))
    for i in range(n):
        for d in range(dim):
            a[d] = np.float64(xa[i, d])
            b[d] = np.float64(xb[i, d])
            ca_loo[d] = (sa[d] - a[d]) / (n - 1)
            cb_loo[d] = (sb[d] - b[d]) / (n - 1)
            mid_loo[d] = (ca_loo[d] + cb_loo[d]) / 2.0
        norm_a = norm(a, w, v)
        norm_b = norm(b, w, v)
        out[0, i] = dot(a, ca, w, v) / (norm_a * norm_ca + eps) - dot(b, cb, w, v) / (norm_b * norm_cb + eps)
        out[1, i] = dot(a, cb, w, v) / (norm_a * norm_cb + eps) - dot(b, ca, w, v) / (norm_b * norm_ca + eps)
        out[2, i] = dot(a, b, w, v) / (norm_a * norm_b + eps)
        out[3, i] = _margin(a, b, mid, u, w, v)
        norm_ca_loo = norm(ca_loo, w, v)
        norm_cb_loo = norm(cb_loo, w, v)
        out[4, i] = (dot(a, ca_loo, w, v) / (norm_a * norm_ca_loo + eps)
                     - dot(b, cb_loo, w, v) / (norm_b * norm_cb_loo + eps))
        out[5, i] = (dot(a, cb_loo, w, v) / (norm_a * norm_cb_loo + eps)
                     - dot(b, ca_loo, w, v) / (norm_b * norm_ca_loo + eps))
        out[6, i] = _margin(a, b, mid_loo, u, w, v)
    return out


__all__ = ("GEOMETRY_METRICS", "view_geometry")
