"""Uniformity (mean pairwise cosine similarity) of groups of embeddings, in time linear in the members.

The seeds' definition: rows normalised by ``norm + 1e-10``, then the mean of the strict upper
triangle of the cosine matrix. With unit rows ``u_i`` the sum over the upper triangle of a group
``g`` is ``(||sum_{i in g} u_i||^2 - sum_{i in g} ||u_i||^2) / 2``, so a group's uniformity needs
either its block of the Gram matrix ``G = U U^T`` (``|g|^2 / 2`` entries) or the sum of its unit
vectors (``|g| D`` additions).

:class:`Cosines` holds one set of embeddings (n members, every view) in whichever form is smaller:
the Gram matrices when ``n <= D`` (then each group costs its block, and the ``n x n`` matrices are
no larger than the embeddings), else the unit vectors, summed per group by one dense product with
the groups' one-hot matrix. Memory is O(V n D) and, for a fixed number of groups, time is linear
in n once ``n > D``; below that the Gram form is both smaller and faster.
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

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


def _check_labels(labels: np.ndarray, n: int, n_groups: int) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 2 or labels.shape[1] != n:
        raise ValueError(f"labels must have shape (partitions, {n}), got {labels.shape}")
    if labels.size and (labels.max() >= n_groups or labels.min() < -1):
        raise ValueError("labels must lie in -1..n_groups-1")
    return labels


def _group_bincount(labels: np.ndarray, n_groups: int, weights: np.ndarray | None = None) -> np.ndarray:
    """(P, G + 1) sums of ``weights`` (n,) (member counts if None) over each group of each partition,
    in one bincount; column G collects the left-out members (label -1)."""
    n_parts = labels.shape[0]
    keyed = np.where(labels < 0, n_groups, labels)
    flat = (keyed + (n_groups + 1) * np.arange(n_parts)[:, None]).ravel()
    w = None if weights is None else np.broadcast_to(weights, labels.shape).ravel()
    return np.bincount(flat, weights=w, minlength=n_parts * (n_groups + 1)).reshape(n_parts, n_groups + 1)


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
    n_layers, n = flat_g.n_layers, flat_g.n
    labels = _check_labels(labels, n, n_groups)
    n_parts = labels.shape[0]
    order = np.argsort(np.where(labels < 0, n_groups, labels), axis=1, kind="stable")  # left-out members last
    sizes_all = _group_bincount(labels, n_groups)
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
    total = _group_bincount(labels, n_groups, values)[:, :n_groups]
    sizes = _group_bincount(labels, n_groups)[:, :n_groups]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(sizes > 0, total / np.maximum(sizes, 1), np.nan)
    return means, sizes


Representation = Literal["gram", "vectors"]
"""How :class:`Cosines` holds the inner products: Gram matrices or unit vectors."""
PRODUCT_BYTES = 1 << 26
"""Working-memory target of one block of the one-hot product (float64 elements x 8)."""


def representation_for(n: int, dim: int) -> Representation:
    """The smaller form of the inner products of n rows of dimension ``dim``: ``gram`` iff n <= dim."""
    return "gram" if n <= dim else "vectors"


def _onehot(labels: np.ndarray, n_groups: int) -> np.ndarray:
    """(P * G, n) float64 indicator of every group of every partition; -1 labels give zero columns."""
    n_parts, n = labels.shape
    out = np.zeros((n_parts * n_groups, n))
    part, member = np.nonzero(labels >= 0)
    out[part * n_groups + labels[part, member], member] = 1.0
    return out


def group_pair_sums(units: np.ndarray, labels: np.ndarray, *, n_groups: int,
                    block_bytes: int = PRODUCT_BYTES) -> np.ndarray:
    """Sum of ``u_i . u_j`` over the pairs i < j of every group, from unit vectors.

    Args:
        units: (n, V, D) unit rows (members first, so that a block of views is one strided matrix).
        labels: (P, n) group of each member in each partition; -1 leaves a member out.
        n_groups: groups G per partition.
        block_bytes: working-memory target of one block of the product.

    Returns:
        (V, P, G): ``(||sum_g u||^2 - sum_g ||u||^2) / 2``; 0 for groups of fewer than two members.

    Cost: ``P G n V D`` multiply-adds in dense products (the one-hot factor is G x wasteful in
    arithmetic but runs as a matrix product), in blocks of partitions and views.
    """
    n, n_views, dim = units.shape
    labels = _check_labels(labels, n, n_groups)
    n_parts = labels.shape[0]
    flat = np.asarray(units, dtype=np.float64).reshape(n, n_views * dim)  # a view for slices of views
    self_sq = np.einsum("nvd,nvd->nv", units, units)  # (n, V)
    out = np.empty((n_views, n_parts, n_groups))
    part_block = max(1, block_bytes // max(1, 8 * n_groups * n))
    for p0 in range(0, n_parts, part_block):
        p1 = min(n_parts, p0 + part_block)
        onehot = _onehot(labels[p0:p1], n_groups)  # (b G, n)
        self_sums = onehot @ self_sq  # (b G, V)
        view_block = max(1, block_bytes // max(1, 8 * onehot.shape[0] * dim))
        for v0 in range(0, n_views, view_block):
            v1 = min(n_views, v0 + view_block)
            sums = (onehot @ flat[:, v0 * dim:v1 * dim]).reshape(-1, v1 - v0, dim)  # (b G, c, D)
            sq = np.einsum("gcd,gcd->gc", sums, sums)
            out[v0:v1, p0:p1] = ((sq - self_sums[:, v0:v1]) / 2.0).T.reshape(v1 - v0, p1 - p0, n_groups)
    return out


def _pair_counts(sizes: np.ndarray) -> np.ndarray:
    return sizes * (sizes - 1) / 2.0


class Cosines:
    """The cosine inner products among the A and among the B statements of one pooling, every view.

    Args:
        a, b: (n, V, D) embeddings of the two sides (row i of ``a`` and of ``b`` form pair i).
        representation: force ``gram`` or ``vectors`` (default :func:`representation_for`); both
            give the same values up to rounding.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, *, representation: Representation | None = None) -> None:
        if a.shape != b.shape or a.ndim != 3:
            raise ValueError(f"a and b must both be (n, V, D), got {a.shape} and {b.shape}")
        self.n, self.n_views, self.dim = a.shape
        self.representation: Representation = representation or representation_for(self.n, self.dim)
        self._both = unit_rows(np.concatenate([a, b], axis=1))  # (n, 2V, D): one product serves both sides
        self.units = {"a": self._both[:, :self.n_views], "b": self._both[:, self.n_views:]}
        """side -> (n, V, D) float64 unit rows (views of one array)."""

    def _gram(self, side: str) -> np.ndarray:
        u = np.swapaxes(self.units[side], 0, 1)  # (V, n, D)
        return u @ np.swapaxes(u, -1, -2)

    @cached_property
    def _flat(self) -> dict[str, FlatGram]:
        g_a, g_b = self._gram("a"), self._gram("b")
        return {"a": FlatGram(g_a), "b": FlatGram(g_b), "diff": FlatGram(g_a - g_b)}

    def uniformity(self, labels: np.ndarray, *, n_groups: int, side: str) -> tuple[np.ndarray, np.ndarray]:
        """Uniformity of every group of every partition on one side, or ``U_A - U_B`` (side ``diff``).

        Returns ``(values (V, P, G), sizes (P, G))`` as :func:`group_uniformity` does: NaN for
        groups with fewer than two members.
        """
        if side not in ("a", "b", "diff"):
            raise ValueError(f"side must be a, b or diff, got {side!r}")
        labels = _check_labels(labels, self.n, n_groups)
        if self.representation == "gram":
            return group_uniformity(self._flat[side], labels, n_groups=n_groups)
        sizes = _group_bincount(labels, n_groups)[:, :n_groups]
        if side == "diff":
            both = group_pair_sums(self._both, labels, n_groups=n_groups)
            sums = both[:self.n_views] - both[self.n_views:]
        else:
            sums = group_pair_sums(self.units[side], labels, n_groups=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = np.where(sizes >= 2, sums / _pair_counts(sizes), np.nan)
        return values, sizes
