"""Uniformity (mean pairwise cosine similarity) of groups of embeddings, in time linear in the members.

The seeds' definition: rows normalised by ``norm + 1e-10``, then the mean of the strict upper
triangle of the cosine matrix. With unit rows ``u_i`` the sum over the upper triangle of a group
``g`` is ``(||sum_{i in g} u_i||^2 - sum_{i in g} ||u_i||^2) / 2``, so a group's uniformity needs
either its block of the Gram matrix ``G = U U^T`` (``|g|^2 / 2`` entries) or the sum of its unit
vectors (``|g| D`` additions).

:class:`Cosines` is the one resampling kernel: every analysis that averages cosines over groups
of statements (categories, random bins, size-matched nulls) calls :meth:`Cosines.uniformity` with a
(P, n) label array. Each call takes the cheaper exact form under :class:`CostModel`, from n, D, V,
the side and the group sizes: the Gram entries of each group (from a cached table, quadratic in n
and never larger than the unit vectors themselves) or the sums of unit vectors (linear in n). The compiled loops are
in :mod:`uaprobe.analysis.compute.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Literal

import numpy as np
from scipy import sparse

from uaprobe.analysis.compute import kernels
from uaprobe.analysis.geometry import gram_pieces
from uaprobe.analysis.compute.workers import ordered_map, worker_count

NORM_EPS = 1e-10
"""Added to each row's norm before dividing (the seeds)."""


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows (last axis) of ``x`` (..., D) divided by ``norm + 1e-10``, in float64 (the seeds)."""
    x = np.asarray(x, dtype=np.float64)
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + NORM_EPS)


UNIT_CHUNK_ROWS = 16
"""Rows of the float64 unit vectors :func:`unit_rows_of` computes at a time (its temporaries are
this many rows, not the whole array)."""


def unit_rows_of(*parts: np.ndarray) -> np.ndarray:
    """:func:`unit_rows` of ``np.concatenate(parts, axis=1)`` (each (n, V_i, D)), written into the
    result :data:`UNIT_CHUNK_ROWS` rows at a time (every operation of :func:`unit_rows` is within
    one row), so that the float64 copy, the squares and the norms are
    held for a chunk of rows rather than for the whole array."""
    n, dim = parts[0].shape[0], parts[0].shape[-1]
    out = np.empty((n, sum(p.shape[1] for p in parts), dim))
    for start in range(0, n, UNIT_CHUNK_ROWS):
        rows = slice(start, min(n, start + UNIT_CHUNK_ROWS))
        view = 0
        for part in parts:
            out[rows, view:view + part.shape[1]] = unit_rows(part[rows])
            view += part.shape[1]
    return out


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


@dataclass(frozen=True)
class Groups:
    """The groups of every partition as contiguous runs: group g of partition p is
    ``order[p, bounds[p, g]:bounds[p, g + 1]]``, its members in increasing order; the left-out
    members (label -1) follow the last group."""

    order: np.ndarray
    """(P, n) int32 members, sorted by group (stable)."""
    bounds: np.ndarray
    """(P, G + 2) int64 run starts; column G + 1 is n (the end of the left-out run)."""
    sizes: np.ndarray
    """(P, G) int64 members per group."""

    @classmethod
    def of(cls, labels: np.ndarray, n_groups: int) -> "Groups":
        n_parts, n = labels.shape
        keyed = np.where(labels < 0, n_groups, labels)
        order = np.argsort(keyed, axis=1, kind="stable").astype(np.int32)
        counts = _group_bincount(labels, n_groups)  # (P, G + 1)
        bounds = np.zeros((n_parts, n_groups + 2), dtype=np.int64)
        np.cumsum(counts, axis=1, out=bounds[:, 1:])
        return cls(order=order, bounds=bounds, sizes=counts[:, :n_groups])

    @property
    def group_bounds(self) -> np.ndarray:
        """(P, G + 1) starts of the groups and the end of the last one (the kernels' ``bounds``)."""
        return np.ascontiguousarray(self.bounds[:, :-1])

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (n, K) over every group: (P, G, K), as one sparse product."""
        n_parts, n = self.order.shape
        n_groups = self.sizes.shape[1]
        indptr = (self.bounds + n * np.arange(n_parts)[:, None])[:, :-1].ravel()
        indptr = np.append(indptr, n_parts * n)  # one row per group, then one for the left-out members
        member_of = sparse.csr_matrix((np.ones(n_parts * n), self.order.ravel(), indptr),
                                      shape=(n_parts * (n_groups + 1), n))
        return (member_of @ values).reshape(n_parts, n_groups + 1, -1)[:, :n_groups]


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


CosineForm = Literal["gram", "vectors"]
"""How :class:`Cosines` evaluates a call: Gram entries or sums of unit vectors."""


@dataclass(frozen=True)
class CostModel:
    """Seconds per unit of work of the two exact forms, one thread, fitted to timings of both forms
    on a 2-core AMD EPYC: the unit-vector terms to the CPU seconds of the random bins' calls (33 views, side ``diff``) at
    460, 920 and 4600 pairs, about 6 G additions per CPU second; the Gram terms to the CPU seconds
    of the table and of the tiled sums of the same calls at 460 and 920 pairs. Only the ratios
    between the forms decide.
    """

    vector_add: float = 1.5e-10
    """One lane of one member added to its group's sum (16 lanes per block; per output view)."""
    vector_run: float = 2.5e-8
    """One run of a group within one block of members and one block of 16 lanes (per output view)."""
    vector_pack: float = 1.0e-9
    """One lane of one member packed into blocks (per output view, once per call)."""
    vector_launch: float = 1.0e-5
    """One block of 16 lanes of one output view (a pass over all partitions)."""
    gram_pair: float = 6.0e-9
    """One pair of one group in one block of eight views (a random read of a tile of the table, in cache)."""
    gram_build: float = 8.0e-11
    """One multiply-add of the Gram matrices (``n^2 D / 2`` per view and side, once per table)."""

    def vectors(self, *, n: int, dim: int, n_views: int, signed: bool, members: int, runs: int,
                threads: int = 1) -> float:
        """``n_views`` output views, each one side's coordinates or (``signed``, side ``diff``) both
        sides' packed together; ``members`` in groups over all partitions; ``runs`` of groups within
        the blocks of members (see :func:`vector_runs`); the packing and the sums run on ``threads``
        threads."""
        blocks = -(-dim // (kernels.LANES // 2 if signed else kernels.LANES))
        parallel = self.vector_add * members * blocks * kernels.LANES + self.vector_run * runs * blocks
        return n_views * ((parallel + self.vector_pack * n * blocks * kernels.LANES) / threads
                          + self.vector_launch * blocks)

    def gram(self, *, n: int, dim: int, n_views: int, pairs: float, syrks: int, threads: int = 1) -> float:
        """``pairs`` within groups over all partitions; ``syrks`` Gram matrices per view still to
        compute (2 for a ``diff`` table, 1 for one side, 0 once the table is held); the sums and the
        Gram matrices (one single-threaded BLAS call per view on each worker) run on ``threads``
        threads."""
        view_blocks = -(-n_views // kernels.GRAM_LANES)
        return (self.gram_pair * pairs * view_blocks + self.gram_build * syrks * n * n * dim / 2 * n_views) / threads


def vector_runs(sizes: np.ndarray, n: int) -> int:
    """Runs the unit-vector kernel sums for groups of ``sizes`` (P, G): a group of m members spans
    at most ``min(m, member blocks)`` blocks of :data:`~uaprobe.analysis.compute.kernels.BLOCK_MEMBERS`."""
    blocks = -(-n // kernels.BLOCK_MEMBERS)
    return int(np.minimum(np.asarray(sizes, dtype=np.int64), blocks).sum())


COST = CostModel()


def _gram_table_bytes(n: int, n_views: int) -> int:
    return n * (n - 1) // 2 * -(-n_views // kernels.GRAM_LANES) * kernels.GRAM_LANES * 8


def cosine_form_for(n: int, dim: int, *, n_views: int = 32, partitions: int = 1000,
                    n_groups: int = 20) -> CosineForm:
    """The form :class:`Cosines` chooses for one call of ``partitions`` partitions into ``n_groups``
    equal groups of n members on side ``diff`` with no table held yet: the random bins' calls."""
    m = n / n_groups
    vec = COST.vectors(n=n, dim=dim, n_views=n_views, signed=True, members=partitions * n,
                       runs=vector_runs(np.full((partitions, n_groups), n // n_groups), n))
    fits = _gram_table_bytes(n, n_views) <= n * 2 * n_views * dim * 8  # the unit vectors' bytes
    gram = COST.gram(n=n, dim=dim, n_views=n_views, pairs=partitions * n_groups * m * (m - 1) / 2, syrks=2)
    return "gram" if fits and gram < vec else "vectors"


def _pair_counts(sizes: np.ndarray) -> np.ndarray:
    return sizes * (sizes - 1) / 2.0


SIDES = ("a", "b", "diff")

GRAM_HELD_BYTES = 1 << 30
"""The most bytes of Gram tables one :class:`Cosines` keeps between calls (1 GiB). Past it the Gram
form builds its table one piece at a time on every call (:mod:`~uaprobe.analysis.geometry.gram_pieces`)."""


class Cosines:
    """The cosine inner products among the A and among the B statements of one pooling, every view.

    Holds the unit vectors (memory O(n V D)); each call of :meth:`uniformity` is evaluated in the
    cheaper exact form by :class:`CostModel`: sums of unit vectors (``n D`` additions per partition,
    view and side, linear in the members) or sums of the Gram entries within each group (about
    ``n^2 / (2 G)`` per partition and view, from a table of the strict upper triangles built once
    per side on first use and kept, tile by tile in cache: see
    :func:`~uaprobe.analysis.compute.kernels.gram_sums`). The tables held never take more bytes than the
    unit vectors (``n 2V D`` float64) nor :data:`GRAM_HELD_BYTES`; where they would, the Gram form
    builds and sums its table one piece of at most ``piece_bytes`` at a time on every call
    (:func:`~uaprobe.analysis.geometry.gram_pieces.piece_sums`), so memory stays bounded at any n.

    Args:
        a, b: (n, V, D) embeddings of the two sides (row i of ``a`` and of ``b`` form pair i).
        form: force ``gram`` or ``vectors`` for every call (default: the cost model);
            both give the same values up to rounding.
        gram_bytes: the cap on the Gram tables held (default: the unit vectors' bytes, at most
            :data:`GRAM_HELD_BYTES`).
        piece_bytes: the cap on one piece of a table built and summed per call where the tables
            do not fit (:mod:`~uaprobe.analysis.geometry.gram_pieces`).
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, *, form: CosineForm | None = None,
                 gram_bytes: int | None = None, piece_bytes: int = gram_pieces.GRAM_PIECE_BYTES) -> None:
        if a.shape != b.shape or a.ndim != 3:
            raise ValueError(f"a and b must both be (n, V, D), got {a.shape} and {b.shape}")
        self.n, self.n_views, self.dim = a.shape
        self.form: CosineForm | None = form
        self._both = unit_rows_of(a, b)  # (n, 2V, D)
        self.gram_bytes = min(self._both.nbytes, GRAM_HELD_BYTES) if gram_bytes is None else gram_bytes
        self._pieces = gram_pieces.piece_rows(self.n, kernels.gram_tile(self.n), piece_bytes)
        self.units = {"a": self._both[:, :self.n_views], "b": self._both[:, self.n_views:]}
        """side -> (n, V, D) float64 unit rows (views of one array)."""
        self._self_sq = np.einsum("nvd,nvd->nv", self._both, self._both)  # (n, 2V) ||u_i||^2
        self._tables: dict[str, np.ndarray] = {}
        self.last_form: CosineForm | None = None
        """The form the last call of :meth:`uniformity` used."""

    def _table(self, side: str) -> np.ndarray:
        """The strict upper triangle of the side's Gram matrix (``G_A - G_B`` for ``diff``) in
        every view, as :func:`~uaprobe.analysis.compute.kernels.gram_table` lays it out; built once. The
        Gram matrices of a few views at a time are computed on the worker threads (one BLAS call
        each, :func:`~uaprobe.analysis.compute.workers.ordered_map`), then copied in view order."""
        if side not in self._tables:
            v = self.n_views

            def gram(view: int) -> np.ndarray:
                u = self._both[:, view]
                return u @ u.T  # numpy's product of an array with its transpose: one dsyrk, GIL released

            def of_view(i: int) -> tuple[np.ndarray, np.ndarray | None]:
                return (gram(i), gram(v + i)) if side == "diff" else (gram(i if side == "a" else v + i), None)

            def grams() -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
                width = 2 * worker_count()  # views whose Gram matrices are held at once
                for first in range(0, v, width):
                    yield from ordered_map(of_view, range(first, min(v, first + width)))

            self._tables[side] = kernels.gram_table(grams(), n=self.n, n_views=v)
        return self._tables[side]

    def _views(self, side: str) -> list[tuple[int, int]]:
        """The kernel's ``(low, high)`` views of the unit rows per output view (A then B for ``diff``)."""
        v = self.n_views
        if side == "diff":
            return [(i, v + i) for i in range(v)]
        shift = 0 if side == "a" else v
        return [(i + shift, i + shift) for i in range(v)]

    def costs(self, sizes: np.ndarray, side: str, *, threads: int = 1) -> dict[CosineForm, float]:
        """Predicted seconds of each form on ``threads`` threads for groups of ``sizes`` (P, G) on
        ``side``. Sides ``a`` and ``b`` are one pair: a call on either is costed as the same groups on
        both, and the Gram form is offered only where the tables of both fit beside those held, so
        that ``U_A`` and ``U_B`` of one labelling always take one form and their difference carries no
        rounding of two forms (a constant ``UA`` stays exactly constant). The Gram form is left out
        where the tables still to build would take the held tables past ``gram_bytes``.
        :meth:`uniformity` chooses on one thread whatever the kernels' thread count, so that the
        form, and with it the last bits of the values, never depends on the machine's cores (each
        form gives the same bytes on any count)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        sides = ("a", "b") if side in ("a", "b") else (side,)
        members, runs, pairs = int(sizes.sum()), vector_runs(sizes, self.n), float(_pair_counts(sizes).sum())
        out: dict[CosineForm, float] = {"vectors": sum(
            COST.vectors(n=self.n, dim=self.dim, n_views=self.n_views, signed=s == "diff", members=members,
                         runs=runs, threads=threads) for s in sides)}
        if self._held(side):
            out["gram"] = sum(
                COST.gram(n=self.n, dim=self.dim, n_views=self.n_views, pairs=pairs, threads=threads,
                          syrks=0 if s in self._tables else (2 if s == "diff" else 1)) for s in sides)
        elif self._pieces is not None:  # built piece by piece on every call
            out["gram"] = sum(
                COST.gram(n=self.n, dim=self.dim, n_views=self.n_views, pairs=pairs, threads=threads,
                          syrks=2 if s == "diff" else 1) for s in sides)
        return out

    def _held(self, side: str) -> bool:
        """Whether the Gram form of ``side`` (and of its partner among ``a``, ``b``) uses held tables:
        those still to build fit beside the held ones under ``gram_bytes``."""
        sides = ("a", "b") if side in ("a", "b") else (side,)
        missing = [s for s in sides if s not in self._tables]
        held = sum(t.nbytes for t in self._tables.values())
        return held + len(missing) * _gram_table_bytes(self.n, self.n_views) <= self.gram_bytes

    def uniformity(self, labels: np.ndarray, *, n_groups: int, side: str) -> tuple[np.ndarray, np.ndarray]:
        """Uniformity of every group of every partition on one side, or ``U_A - U_B`` (side ``diff``).

        Args:
            labels: (P, n) int, the group of each member in each partition; -1 leaves a member out.
            n_groups: groups G per partition (labels < G).
            side: ``a``, ``b`` or ``diff``.

        Returns:
            ``(values (V, P, G), sizes (P, G))``: the mean cosine over the pairs of each group
            (the seeds' upper triangle), NaN for groups with fewer than two members.
        """
        if side not in SIDES:
            raise ValueError(f"side must be a, b or diff, got {side!r}")
        labels = _check_labels(labels, self.n, n_groups)
        groups = Groups.of(labels, n_groups)
        sizes = groups.sizes
        costs = self.costs(sizes, side)
        form: CosineForm = self.form or min(costs, key=costs.__getitem__)
        self.last_form = form
        if form == "gram" and (self._held(side) or self._pieces is None):
            sums = kernels.gram_sums(self._table(side), self.n, labels, n_groups=n_groups, n_views=self.n_views)
        elif form == "gram":
            v = self.n_views
            views = [(i, v + i) if side == "diff" else (i if side == "a" else v + i, None) for i in range(v)]
            sums = gram_pieces.piece_sums(self._both, views, labels, n_groups=n_groups, pieces=self._pieces,
                                          tile=kernels.gram_tile(self.n))
        else:
            squares = kernels.vector_squares(self._both, labels, sizes, views=self._views(side),
                                             signed=side == "diff")
            own = np.moveaxis(groups.sums(self._self_sq), 2, 0)  # (2V, P, G) sums of ||u_i||^2
            v = self.n_views
            own = own[:v] - own[v:] if side == "diff" else own[:v] if side == "a" else own[v:]
            sums = (squares - own) / 2.0
        with np.errstate(invalid="ignore", divide="ignore"):
            values = np.where(sizes >= 2, sums / _pair_counts(sizes), np.nan)
        return values, sizes
