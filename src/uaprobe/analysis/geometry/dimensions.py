"""Per-dimension breakdown of the uniformity, and the sweep over the representation axis.

With unit rows ``u_i`` (i = 1..n) the mean pairwise cosine of a set splits over the dimensions d::

    U = sum_d c_d,   c_d = ((sum_i u_id)^2 - sum_i u_id^2) / (n (n - 1))

(``c_d`` is the mean over ordered pairs i != j of ``u_id u_jd``). The *share of the top k
dimensions* is the sum of the k largest ``c_d`` (signed) over ``U``: near 1 at k = 1 when one
coordinate carries the whole uniformity. The top principal components' shares of the centred
variance (``sum of the k largest eigenvalues / trace``) say the same of directions rather than
coordinates.

:func:`sweep` runs once per model: for every policy, pooling and representation
(:mod:`uaprobe.analysis.geometry.representation`) it transforms the pooled states once, layer by layer on
the worker threads, and keeps what ``dimensions.json`` and ``specification_curve.json`` need (per
layer: the whole set's mean cosine, each category's uniformity of each side).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from numba import njit

from uaprobe.analysis.geometry import representation as reps
from uaprobe.names import REPRESENTATIONS
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.specs import Dimensions, DimensionsPolicy, DimensionsPooling
from uaprobe.analysis.geometry.uniformity import unit_rows
from uaprobe.analysis.compute.workers import ordered_map

TOPS: tuple[int, ...] = (1, 5, 10)
"""The k of the top-k shares."""

DEFINITION = ("uniformity_share_topK: with unit rows u_i of all n statements, c_d = ((sum_i u_id)^2 - sum_i u_id^2) "
              "/ (n(n-1)) sums over the dimensions d to the mean pairwise cosine; the share is the sum of the K "
              "largest c_d (signed) over that sum. variance_share_topK: the K largest eigenvalues of the centred "
              "states' covariance over its trace. mean_cosine: the mean pairwise cosine of all n statements after "
              "the representation's transform.")


def dimension_contributions(x: np.ndarray) -> np.ndarray:
    """``c_d`` of the set ``x`` (..., n, D) -> (..., D); they sum to :func:`uniformity.uniformity`."""
    return _contributions(unit_rows(x))


def _contributions(u: np.ndarray) -> np.ndarray:
    """``c_d`` of unit rows ``u`` (..., n, D)."""
    n = u.shape[-2]
    if n < 2:
        return np.full(u.shape[:-2] + u.shape[-1:], np.nan)
    total = u.sum(axis=-2)
    return (total * total - (u * u).sum(axis=-2)) / (n * (n - 1))


def top_shares(c: np.ndarray, tops: tuple[int, ...] = TOPS) -> np.ndarray:
    """Share of ``sum(c)`` carried by the k largest entries of ``c`` (..., D), for each k: (..., len(tops));
    NaN where the sum is 0."""
    s = -np.sort(-c, axis=-1)
    cum = np.cumsum(s, axis=-1)
    total = c.sum(axis=-1, keepdims=True)
    picked = np.stack([cum[..., min(k, c.shape[-1]) - 1] for k in tops], axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total != 0, picked / np.where(total != 0, total, 1.0), np.nan)


@dataclass
class Sweep:
    """What the representation sweep keeps, keyed ``[policy][pooling][representation]``."""

    mean_cosine: dict[str, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    """(L+1,) mean pairwise cosine of all statements."""
    u_a: dict[str, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    """(L+1, C) each category's uniformity of its A statements."""
    u_b: dict[str, dict[str, dict[str, np.ndarray]]] = field(default_factory=dict)
    """(L+1, C) the same of its B statements."""
    uniformity_share: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """``[policy][pooling]`` (L+1, len(TOPS)): raw states, top-k dimensions' share of the uniformity."""
    variance_share: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """``[policy][pooling]`` (L+1, len(TOPS)): raw states, top-k PCs' share of the centred variance."""


@dataclass(frozen=True)
class _Layer:
    """What the sweep keeps of one layer of one pooling (see :class:`Sweep`)."""

    mean_cosine: dict[str, float]
    u_a: dict[str, np.ndarray]
    """representation -> (C,)"""
    u_b: dict[str, np.ndarray]
    uniformity_share: np.ndarray
    """(len(TOPS),) raw states"""
    variance_share: np.ndarray
    """(len(TOPS),)"""


@dataclass(frozen=True)
class _Groups:
    """The sets a layer's uniformities are taken over, as runs of statement rows: all statements
    (in row order), then each category's A statements, then each category's B statements."""

    rows: np.ndarray
    bounds: np.ndarray
    sizes: np.ndarray
    ascending: bool
    """Every group's rows in ascending order (then they can be visited a block of rows at a time)."""

    @classmethod
    def of(cls, *, n_rows: int, row_a: np.ndarray, row_b: np.ndarray, category_of_pair: np.ndarray,
           n_categories: int) -> "_Groups":
        runs = [np.arange(n_rows)] + [side[category_of_pair == c] for side in (row_a, row_b)
                                      for c in range(n_categories)]
        sizes = np.array([r.size for r in runs])
        return cls(rows=np.concatenate(runs).astype(np.int64), bounds=np.concatenate([[0], np.cumsum(sizes)]),
                   sizes=sizes, ascending=all(bool((np.diff(r) > 0).all()) for r in runs))


@njit(cache=True, boundscheck=False, nogil=True)
def _add_block(u: np.ndarray, first: int, rows: np.ndarray, bounds: np.ndarray, cursor: np.ndarray,
               total: np.ndarray, squares: np.ndarray) -> None:  # pragma: no cover - compiled
    """Per group g (the rows ``rows[bounds[g]:bounds[g + 1]]`` of the whole (N, D) array): the column sums
    of its rows and of their squares, added to ``total`` and ``squares`` (G, D) row after row in the order
    of ``rows``, over the rows ``first..first + len(u)`` given as the block ``u``: each group's rows from
    its ``cursor`` on while they fall in the block (the whole array as one block takes every row; blocks
    in turn need each group's rows ascending). 4x faster than numpy's sums of each group's rows (230 and
    4600 pairs), about a twentieth of the analyze in numpy."""
    end = first + u.shape[0]
    dim = u.shape[1]
    for g in range(bounds.size - 1):
        t = cursor[g]
        while t < bounds[g + 1] and rows[t] < end:
            r = rows[t] - first
            for d in range(dim):
                v = u[r, d]
                total[g, d] += v
                squares[g, d] += v * v
            t += 1
        cursor[g] = t


UNIT_BLOCK_ROWS = 128
"""Rows of unit vectors :func:`group_contributions_of` holds at a time (a block that stays in cache)."""


def group_contributions_of(x: np.ndarray, groups: _Groups) -> np.ndarray:
    """Each group's ``c_d`` (:func:`dimension_contributions`) of ``x`` (N, D) -> (G, D), without the (N, D)
    float64 unit vectors where each group's rows are ascending: they are made :data:`UNIT_BLOCK_ROWS`
    rows at a time and each block's rows added to their groups' sums at once, in the order of the
    whole pass; otherwise the whole array is one block."""
    n_groups = groups.bounds.size - 1
    total = np.zeros((n_groups, x.shape[1]))
    squares = np.zeros((n_groups, x.shape[1]))
    cursor = groups.bounds[:-1].copy()
    step = UNIT_BLOCK_ROWS if groups.ascending else max(1, x.shape[0])
    for first in range(0, x.shape[0], step):
        _add_block(unit_rows(x[first:first + step]), first, groups.rows, groups.bounds, cursor, total, squares)
    return _finish(total, squares, groups)


def _finish(total: np.ndarray, squares: np.ndarray, groups: _Groups) -> np.ndarray:
    """Each group's ``c_d`` from its column sums of the unit rows and of their squares."""
    n = groups.sizes[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (total * total - squares) / (n * (n - 1))
    return np.where(n < 2, np.nan, out)


def _sweep_layer(x: np.ndarray, *, groups: _Groups, n_categories: int, k: int) -> _Layer:
    """One layer's states (N, D) under every representation of :data:`~uaprobe.names.REPRESENTATIONS`."""
    abtt, variance_share = reps.abtt_and_shares(x, k=k, tops=TOPS)
    cosines, ua, ub = {}, {}, {}
    uniformity_share = np.full(len(TOPS), np.nan)
    for kind in REPRESENTATIONS:
        # unit rows once per representation: every uniformity below is a sum of their contributions
        c = group_contributions_of(abtt if kind == "abtt" else reps.transform_layer(x, kind, k=k), groups)
        # (1 + 2C, D): all statements, A by category, B by category
        if kind == "raw":
            uniformity_share = top_shares(c[0])
        cosines[kind] = c[0].sum()
        ua[kind] = np.array([c[1 + i].sum() for i in range(n_categories)])
        ub[kind] = np.array([c[1 + n_categories + i].sum() for i in range(n_categories)])
    return _Layer(cosines, ua, ub, uniformity_share, variance_share)


def sweep(policies: Mapping[str, Mapping[str, np.ndarray]], *, row_a: np.ndarray, row_b: np.ndarray,
          category_of_pair: np.ndarray, n_categories: int, k: int) -> Sweep:
    """Every policy (name -> pooling -> (N, L+1, D)) x pooling x representation of :data:`~uaprobe.names.REPRESENTATIONS`.

    Each layer of each pooling is one unit of :func:`~uaprobe.analysis.compute.workers.ordered_map` (its
    eigensolution and its passes over one (N, D) array), so the units run on the worker threads
    and only a few layers' transformed states are held at a time."""
    units = [(policy, pooling, layer) for policy, pooled in policies.items() for pooling, raw in pooled.items()
             for layer in range(raw.shape[1])]
    n_rows = {raw.shape[0] for pooled in policies.values() for raw in pooled.values()}
    groups = {n: _Groups.of(n_rows=n, row_a=np.asarray(row_a), row_b=np.asarray(row_b),
                            category_of_pair=np.asarray(category_of_pair), n_categories=n_categories) for n in n_rows}
    done = ordered_map(lambda u: _sweep_layer(policies[u[0]][u[1]][:, u[2]], groups=groups[policies[u[0]][u[1]].shape[0]],
                                              n_categories=n_categories, k=k),
                       units)
    layers: dict[tuple[str, str], list[_Layer]] = {}
    for (policy, pooling, _), one in zip(units, done):
        layers.setdefault((policy, pooling), []).append(one)
    out = Sweep()
    for policy, pooled in policies.items():
        for key in ("mean_cosine", "u_a", "u_b", "uniformity_share", "variance_share"):
            getattr(out, key)[policy] = {}
        for pooling in pooled:
            ls = layers[(policy, pooling)]
            out.mean_cosine[policy][pooling] = {kind: np.array([one.mean_cosine[kind] for one in ls])
                                                for kind in REPRESENTATIONS}
            out.u_a[policy][pooling] = {kind: np.stack([one.u_a[kind] for one in ls]) for kind in REPRESENTATIONS}
            out.u_b[policy][pooling] = {kind: np.stack([one.u_b[kind] for one in ls]) for kind in REPRESENTATIONS}
            out.uniformity_share[policy][pooling] = np.stack([one.uniformity_share for one in ls])
            out.variance_share[policy][pooling] = np.stack([one.variance_share for one in ls])
    return out


def dimensions_results(sw: Sweep, *, policy_names: Mapping[str, str], header: Mapping[str, Any]) -> Dimensions:
    """``dimensions.json``, with the keys every results file starts with (``header``)."""
    policies: dict[str, DimensionsPolicy] = {}
    for policy in sw.mean_cosine:
        entry: dict[str, DimensionsPooling] = {}
        for pooling in sw.mean_cosine[policy]:
            us = sw.uniformity_share[policy][pooling]
            vs = sw.variance_share[policy][pooling]
            entry[pooling] = DimensionsPooling(
                mean_cosine={kind: missing.series(v, "fewer than two statements")
                             for kind, v in sw.mean_cosine[policy][pooling].items()},
                uniformity_share={f"top{t}": missing.series(us[:, i], "the mean pairwise cosine is 0")
                                  for i, t in enumerate(TOPS)},
                variance_share={f"top{t}": missing.series(vs[:, i], "the states have no variance")
                                for i, t in enumerate(TOPS)})
        policies[policy] = DimensionsPolicy(poolings=entry)
    return record(Dimensions, header, tops=list(TOPS), definition=DEFINITION, policy_names=dict(policy_names),
                  policies=policies)
