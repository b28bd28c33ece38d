"""The Freedman-Lane permutation test of a partial r, within categories: the metric's residuals on the covariates
permuted within each category and added back to its fitted values, the partial r recomputed under every draw.

Vectorised: with ``R P e = P e - Q Q^T P e`` (``Q`` an orthonormal basis of the covariates) every permuted r
needs only the products of ``e`` with the inversely permuted ``R y`` and columns of ``Q``, one
matrix product for all draws (:class:`PermutedProjections`). The pair-level models
(:mod:`uaprobe.analysis.pairs.pairmodels`) and their incremental families
(:mod:`uaprobe.analysis.pairs.incremental`) test with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import njit

from uaprobe.analysis.inference import controls, stats

ROW_BLOCK = 64
"""Rows (metric x layer) whose permuted r are held at once: ``ROW_BLOCK x B x (k + 2)`` floats."""


def within_category_orders(rng: np.random.Generator, *, category_of_pair: np.ndarray,
                           permutations: int) -> np.ndarray:
    """(B, n) permutations that move each pair only among the pairs of its category.

    ``v[orders[b]]`` is ``v`` permuted; ``orders[b, i]`` is in the category of ``i``. Categories
    are drawn in ascending order, each as ``rng.permuted`` of its pair indices for all draws.
    """
    cat = np.asarray(category_of_pair)
    n = cat.size
    orders = np.empty((permutations, n), dtype=np.int64)
    for c in np.unique(cat):
        idx = np.flatnonzero(cat == c)
        orders[:, idx] = rng.permuted(np.broadcast_to(idx, (permutations, idx.size)), axis=1)
    return orders


def covariate_basis(covariates: np.ndarray) -> np.ndarray:
    """(n, 1 + rank) orthonormal basis of the column space of ``[1, covariates]``: the constant
    ``1 / sqrt(n)`` first, then the left singular vectors of the centred covariates (rank-deficient
    covariates give fewer columns)."""
    z = np.asarray(covariates, dtype=float)
    n = z.shape[0]
    centred = z.reshape(n, -1) - z.reshape(n, -1).mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    scale = max(float(np.abs(z).max(initial=0.0)), 1.0) * np.sqrt(n)
    keep = s > scale * max(centred.shape) * np.finfo(float).eps
    return np.column_stack([np.full(n, 1.0 / np.sqrt(n)), u[:, keep]])


@dataclass(frozen=True)
class PartialTest:
    """Partial r and Freedman-Lane permutation p of rows of metrics (reasons ``""`` where defined)."""

    r: np.ndarray
    p: np.ndarray
    reason: np.ndarray


@njit(cache=True, boundscheck=False, nogil=True)
def _inversely_permuted(w: np.ndarray, orders: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    n, m = w.shape
    draws = orders.shape[0]
    inverse = np.empty((n, draws), dtype=np.int32)  # inverse[i, b] = t where orders[b, t] = i
    for b in range(draws):
        for t in range(n):
            inverse[orders[b, t], b] = t
    out = np.empty((n, m * draws))
    for i in range(n):
        for j in range(m):
            for b in range(draws):
                out[i, j * draws + b] = w[inverse[i, b], j]
    return out


def _r_of_projections(numerator: np.ndarray, squares: np.ndarray, ee: Any, yy: float) -> np.ndarray:
    """The permuted partial r from a permuted residual's projections: ``numerator`` its product with ``R y``,
    ``squares`` the sum of its squared products with the covariate basis, ``ee`` its squared norm, ``yy`` that of
    ``R y`` (NaN where the residual left by the covariates vanishes)."""
    den2 = ee - squares
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = den2 > 1e-24 * np.maximum(ee, 1e-300)
        return np.where(ok, numerator / np.sqrt(np.where(ok, den2, 1.0) * yy), np.nan)


class PermutedProjections:
    """What the permuted partial r of any metric needs from the preference, the covariates and the
    permutations, computed once.

    For a metric residual ``e`` (zero on the covariates' span), ``P_b`` the permutation ``v ->
    v[orders[b]]``, ``w_b = w[inverse(orders[b])]`` and ``e . w_b = (P_b e) . w``:
    ``r*_b = (e . (R y)_b) / (sqrt(|e|^2 - sum_j (e . q_j,b)^2) |R y|)``, the sum over the basis
    columns ``q_j`` of :func:`covariate_basis` but the constant (``P_b e`` sums to 0 as ``e`` does).
    """

    def __init__(self, y: np.ndarray, covariates: np.ndarray, orders: np.ndarray) -> None:
        self.y = np.asarray(y, dtype=float)
        self.covariates = np.asarray(covariates, dtype=float).reshape(self.y.size, -1)
        self.q = covariate_basis(self.covariates)
        self.ry = self.y - self.q @ (self.q.T @ self.y)
        self.w = np.column_stack([self.ry, self.q[:, 1:]])  # (n, m): the constant column projects to 0
        self.m = self.w.shape[1]
        self.orders = np.ascontiguousarray(orders, dtype=np.int64)
        self.permutations = int(self.orders.shape[0])
        if self.orders.size and (self.orders.min() < 0 or self.orders.max() >= self.y.size):
            raise ValueError(f"orders must index the {self.y.size} rows of w")
        self._w_perm: np.ndarray | None = None

    @property
    def w_perm(self) -> np.ndarray:
        """(n, m B): column j B + b holds column j of ``w`` inversely permuted by draw b (built once, when first
        asked for: only a test of more rows than ``m`` reads it)."""
        if self._w_perm is None:
            self._w_perm = _inversely_permuted(self.w, self.orders)
        return self._w_perm

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """(R, n) residuals of every row of ``x`` on the covariates."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        return x - (x @ self.q) @ self.q.T

    def permuted_r(self, x: np.ndarray) -> np.ndarray:
        """(R, B) partial r of every row of ``x`` (R, n) under every permutation of its residuals
        (NaN where a permuted residual vanishes)."""
        e = self.residuals(x)
        if e.shape[0] <= self.m:  # few rows: permute them instead of the m columns
            return self._permuted_rows_r(e)
        out = np.empty((e.shape[0], self.permutations))
        yy = float(self.ry @ self.ry)
        for lo in range(0, e.shape[0], ROW_BLOCK):
            block = e[lo:lo + ROW_BLOCK]
            proj = (block @ self.w_perm).reshape(block.shape[0], self.m, self.permutations)
            out[lo:lo + ROW_BLOCK] = _r_of_projections(proj[:, 0], (proj[:, 1:] ** 2).sum(axis=1),
                                                       (block * block).sum(axis=1)[:, None], yy)
        return np.clip(out, -1.0, 1.0)

    def _permuted_rows_r(self, e: np.ndarray) -> np.ndarray:
        """:meth:`permuted_r` of the residual rows ``e`` (R, n), each row permuted by every draw and projected on
        ``w`` by one product (B, n) by (n, m): ``(P_b e) . w`` is ``e . w_b``."""
        out = np.empty((e.shape[0], self.permutations))
        yy = float(self.ry @ self.ry)
        for i, row in enumerate(e):
            proj = row[self.orders] @ self.w  # (B, m)
            out[i] = _r_of_projections(proj[:, 0], (proj[:, 1:] ** 2).sum(axis=1), float(row @ row), yy)
        return np.clip(out, -1.0, 1.0)

    def test(self, x: np.ndarray) -> PartialTest:
        """Partial r (:func:`uaprobe.analysis.inference.controls.partial_r_rows`) and its permutation p for
        every row of ``x`` (R, n)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        observed = controls.partial_r_rows(x, self.y, self.covariates)
        r = np.array([c.r for c in observed])
        reason = np.array([c.reason for c in observed], dtype=object)
        p = np.full(r.shape, np.nan)
        ok = np.isfinite(r)
        if ok.any():
            p[ok] = stats.tail_p(r[ok], self.permuted_r(x[ok]), mode="random")
        reason = np.where(ok & ~np.isfinite(p), "every permuted r is undefined", reason)
        return PartialTest(r=r, p=p, reason=reason)


__all__: Sequence[str] = ("PartialTest", "PermutedProjections", "covariate_basis", "within_category_orders")
