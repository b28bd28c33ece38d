"""Uniformity (mean pairwise cosine similarity) of sets of embeddings, through Gram matrices.

The seeds' definition: rows normalised by ``norm + 1e-10``, then the mean of the strict upper
triangle of the cosine matrix. With unit rows ``u_i`` the sum over the upper triangle is
``(||sum_i u_i||^2 - sum_i ||u_i||^2) / 2``, so a set's uniformity needs only the Gram matrix
``G = U U^T`` of its members: for a group ``g``, ``U(g) = sum_{i<j in g} G_ij / (|g|(|g|-1)/2)``.
Computing ``G`` once per layer (n x n, n = number of pairs) makes every later grouping --
categories, thousands of random bins, bootstrap resamples -- independent of the hidden size.
"""

from __future__ import annotations

import numpy as np

NORM_EPS = 1e-10
"""Added to each row's norm before dividing (the seeds)."""


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows (last axis) of ``x`` (..., D) divided by ``norm + 1e-10``, in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + NORM_EPS)


def uniformity(x: np.ndarray) -> np.ndarray:
    """Uniformity of the set ``x`` (..., n, D) -> (...) through the sum-of-unit-vectors identity.

    NaN where n < 2 (a set of fewer than two has no pairs).
    """
    u = unit_rows(x)
    n = u.shape[-2]
    if n < 2:
        return np.full(u.shape[:-2], np.nan)
    total = u.sum(axis=-2)
    pair_sum = ((total * total).sum(axis=-1) - (u * u).sum(axis=(-2, -1))) / 2.0
    return pair_sum / (n * (n - 1) / 2.0)


def gram(x: np.ndarray) -> np.ndarray:
    """Cosine Gram matrices of unit-normalised rows: x (L, n, D) -> (L, n, n) float64."""
    u = unit_rows(x)
    return u @ np.swapaxes(u, -1, -2)


class FlatGram:
    """Gram matrices (L, n, n) laid out as (n*n, L): one contiguous row of L values per entry
    (i, j), so gathering the entries of many groups reads whole rows. Build once, reuse for every
    partition of the same matrices."""

    def __init__(self, g: np.ndarray) -> None:
        g = np.asarray(g, dtype=np.float64)
        self.n_layers, self.n, _ = g.shape
        self.table = np.ascontiguousarray(g.reshape(self.n_layers, self.n * self.n).T)


def group_uniformity(g: np.ndarray | FlatGram, labels: np.ndarray, *,
                     n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniformity of every group of every partition, from Gram matrices.

    Args:
        g: (L, n, n) Gram matrices (or any linear combination of them, e.g. ``G_A - G_B``, which
            gives the difference of uniformities directly), or their :class:`FlatGram`.
        labels: (P, n) int, the group of each member in each partition; -1 leaves a member out.
        n_groups: number of groups G per partition (labels < G).

    Returns:
        ``(values (L, P, G), sizes (P, G))``: the mean of ``g`` over the strict upper triangle of
        each group, NaN for groups with fewer than two members.

    Only the within-group entries are visited (about ``n^2 / (2G)`` per partition per layer,
    gathered in one indexing operation per distinct group size), never an ``n x n`` mask per group.
    """
    flat_g = g if isinstance(g, FlatGram) else FlatGram(g)
    labels = np.asarray(labels, dtype=np.int64)
    n_layers, n = flat_g.n_layers, flat_g.n
    n_parts = labels.shape[0]
    if labels.shape[1] != n:
        raise ValueError(f"labels cover {labels.shape[1]} members, the Gram matrices {n}")
    if labels.size and (labels.max() >= n_groups or labels.min() < -1):
        raise ValueError("labels must lie in -1..n_groups-1")
    keyed = np.where(labels < 0, n_groups, labels)  # left-out members sort last
    order = np.argsort(keyed, axis=1, kind="stable")
    flat_labels = (keyed + (n_groups + 1) * np.arange(n_parts)[:, None]).ravel()
    sizes_all = np.bincount(flat_labels, minlength=n_parts * (n_groups + 1)).reshape(n_parts, n_groups + 1)
    sizes = sizes_all[:, :n_groups]
    starts = np.cumsum(sizes_all, axis=1) - sizes_all
    out = np.full((n_layers, n_parts, n_groups), np.nan)
    for size in np.unique(sizes[sizes >= 2]):
        part_idx, group_idx = np.nonzero(sizes == size)
        pos = starts[part_idx, group_idx][:, None] + np.arange(size)[None, :]  # (m, size)
        members = order[part_idx[:, None], pos]  # (m, size) member indices
        iu, ju = np.triu_indices(int(size), k=1)
        flat = members[:, iu] * n + members[:, ju]  # (m, t)
        sums = flat_g.table[flat].sum(axis=1)  # (m, L)
        out[:, part_idx, group_idx] = (sums / iu.size).T
    return out, sizes


def group_means(values: np.ndarray, labels: np.ndarray, *, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``values`` (n,) over each group of each partition: labels (P, n) -> ((P, G), sizes (P, G)).

    Empty groups give NaN; -1 leaves a member out.
    """
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    n_parts = labels.shape[0]
    keyed = np.where(labels < 0, n_groups, labels)
    flat = (keyed + (n_groups + 1) * np.arange(n_parts)[:, None]).ravel()
    total = np.bincount(flat, weights=np.broadcast_to(values, labels.shape).ravel(),
                        minlength=n_parts * (n_groups + 1)).reshape(n_parts, n_groups + 1)[:, :n_groups]
    sizes = np.bincount(flat, minlength=n_parts * (n_groups + 1)).reshape(n_parts, n_groups + 1)[:, :n_groups]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(sizes > 0, total / np.maximum(sizes, 1), np.nan)
    return means, sizes
