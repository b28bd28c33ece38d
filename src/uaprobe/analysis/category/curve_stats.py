"""The statistics of the specification curve: every specification's r under every relabelling of the
categories' preferences, the curve-level joint tests and the null band (:mod:`.speccurve` builds the
results from them).

Inference is by permutation of the categories' preferences: exact while the orders of the categories
number at most :data:`MAX_EXACT_ORDERS` (8! = 40320: up to eight categories), else Monte Carlo
(:func:`relabellings`):

- per specification: every order of its categories' preferences (C! = 720 at six categories, or 120
  with one left out), two-sided, ``|r_perm| >= |r|`` (the identity included);
- jointly: each permutation ``pi`` of the C categories relabels the preference (category c gets
  the preference of ``pi(c)``) in *every* specification of a set at once and the curve-level
  statistics are recomputed: the median r (two-sided: ``|median_pi| >= |median|``) and the share of
  specifications with r > 0 (two-sided: ``|share_pi - 1/2| >= |share - 1/2|``). Each p is the share
  of the relabellings, the identity included, so the smallest is 1/C! (its ``p_floor``).
- beyond the bound (nine categories or more; eight or more with one left out), the relabellings are the
  identity and ``analysis.permutations`` = m orders drawn from the curve's own seeded generator
  (``rng_for(seed, "specification-curve")``), and the same share is ``(b + 1) / (m + 1)`` with b the
  random orders at least as extreme: the convention of ``scipy.stats.permutation_test``, a valid p
  whose resolution (its floor) is 1/(m + 1). ``mode`` says which test each p comes from.

The **null band** of a set of specifications: sort the curve under each relabelling (the identity
included) and take, per rank, the (1 - level)/2 and (1 + level)/2 quantiles over the relabellings
(level: ``analysis.ci_level``). It is recorded for every joint test and for the curve the figure
draws (every distinct specification, every layer and left-out option).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from uaprobe.analysis.inference.stats import TIE_TOLERANCE, tail_p
from uaprobe.errors import UAProbeError
from uaprobe.schema.specs import BelowAlpha

MAX_EXACT_ORDERS = math.factorial(8)
"""The exact tests enumerate the C! orders of the categories while C! is at most this (8! = 40320, eight
categories); beyond it they draw random orders (:func:`relabellings`)."""

def all_orders(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, identity first: (n!, n) int."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(math.factorial(n), n)


def relabellings(n: int, *, rng: np.random.Generator | None, permutations: int) -> tuple[np.ndarray, str]:
    """The orders of ``n`` categories a test relabels with, identity first, and the test's mode: every order
    (``"exact"``) while ``n!`` is at most :data:`MAX_EXACT_ORDERS`, else the identity and ``permutations``
    orders drawn from ``rng`` (``"monte_carlo"``), so that a share of the rows is ``(b + 1) / (m + 1)``."""
    if math.factorial(n) <= MAX_EXACT_ORDERS:
        return all_orders(n), "exact"
    if rng is None or permutations < 1:
        raise ValueError(f"{n} categories have {math.factorial(n):,} orders, more than the exact bound "
                         f"{MAX_EXACT_ORDERS:,}: give a generator and a number of random orders")
    drawn = rng.permuted(np.broadcast_to(np.arange(n, dtype=np.int64), (permutations, n)), axis=1)
    return np.concatenate([np.arange(n, dtype=np.int64)[None, :], drawn]), "monte_carlo"


def _normalised(x: np.ndarray) -> np.ndarray:
    """Centred and unit-norm along the last axis; NaN where constant."""
    xc = x - x.mean(axis=-1, keepdims=True)
    norm = np.linalg.norm(xc, axis=-1, keepdims=True)
    scale = np.abs(x).max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > 1e-12 * np.maximum(scale, 1e-300), xc / norm, np.nan)


@dataclass(frozen=True)
class CurveStats:
    """r of every specification under every relabelling, and the tests built on it."""

    r: np.ndarray
    """(S, K, C + 1) observed r: base rows x preferences x left-out option (0 = none, 1 + c = c out)."""
    r_perm: np.ndarray
    """(C!, S, K, C + 1) r under each relabelling (row 0: the identity = ``r``)."""
    spec_p: np.ndarray
    """(S, K, C + 1) per-specification exact two-sided permutation p."""
    spec_orders: np.ndarray
    """(C + 1,) how many orders each left-out option's p uses (the identity included)."""
    mode: str
    """``exact`` or ``monte_carlo``: the joint relabellings (:func:`relabellings`)."""
    spec_modes: tuple[str, ...]
    """(C + 1) the mode of each left-out option's per-specification p."""


def curve_r(ua: np.ndarray, pref: np.ndarray, *, rng: np.random.Generator | None = None, permutations: int = 0,
            left_out: bool = True) -> CurveStats:
    """The r of every specification, under every relabelling, and each one's permutation p.

    Args:
        ua: (S, C) UA of each category for each base row (pooling x policy x representation x layer).
        pref: (K, C) mean preference of each category for each NLL kind.
        rng, permutations: the generator and count of the random orders beyond :data:`MAX_EXACT_ORDERS`
            (needed only there).
        left_out: also each category left out in turn (the last axis C + 1); else every category only (1).
    """
    ua = np.asarray(ua, dtype=np.float64)
    pref = np.asarray(pref, dtype=np.float64)
    n_cat = ua.shape[-1]
    if n_cat < 3:
        raise UAProbeError(f"specification curve: {n_cat} categories; a correlation across categories needs 3")
    orders, mode = relabellings(n_cat, rng=rng, permutations=permutations)
    permuted = pref[:, orders]  # (K, C!, C): category c gets the preference of orders[pi, c]
    keeps = [np.ones(n_cat, dtype=bool)] + ([np.arange(n_cat) != c for c in range(n_cat)] if left_out else [])
    r_perm = np.full((orders.shape[0], ua.shape[0], pref.shape[0], len(keeps)), np.nan)
    spec_p = np.full((ua.shape[0], pref.shape[0], len(keeps)), np.nan)
    spec_orders = np.zeros(len(keeps), dtype=np.int64)
    spec_modes: list[str] = []
    for j, keep in enumerate(keeps):
        x = _normalised(ua[:, keep])  # (S, m)
        y = _normalised(permuted[:, :, keep])  # (K, C!, m)
        r_perm[:, :, :, j] = np.clip(np.einsum("sm,kpm->psk", x, y), -1.0, 1.0)
        # the per-specification test: every order of the kept categories' own preferences
        own, own_mode = (orders, mode) if j == 0 else relabellings(int(keep.sum()), rng=rng, permutations=permutations)
        spec_orders[j] = own.shape[0]
        spec_modes.append(own_mode)
        y_own = _normalised(pref[:, keep][:, own])  # (K, m!, m)
        r_own = np.clip(np.einsum("sm,kpm->skp", x, y_own), -1.0, 1.0)  # identity first
        spec_p[:, :, j] = tail_p(r_own[..., 0].ravel(), r_own.reshape(-1, r_own.shape[-1]),
                                 mode="exact").reshape(r_own.shape[:-1])
    return CurveStats(r=r_perm[0], r_perm=r_perm, spec_p=spec_p, spec_orders=spec_orders, mode=mode,
                      spec_modes=tuple(spec_modes))


@dataclass(frozen=True)
class JointStatistics:
    """The curve-level statistics and their exact joint permutation p."""

    n_specs: int
    median_r: float
    median_p: float
    share_positive: float
    share_p: float


def joint_test(r_perm: np.ndarray) -> JointStatistics:
    """Median r and share r > 0 of a curve under every relabelling: r_perm (P, S) with row 0 observed.

    Undefined specifications (NaN) are left out of every statistic."""
    finite = np.isfinite(r_perm[0])
    r = r_perm[:, finite]
    if r.shape[1] == 0:
        return JointStatistics(0, np.nan, np.nan, np.nan, np.nan)
    medians = np.median(r, axis=1)
    shares = (r > 0).mean(axis=1)
    med_p = float(tail_p(medians[:1], medians[None, :], mode="exact")[0])
    dev = shares - 0.5  # two-sided about one half
    share_p = float(tail_p(dev[:1], dev[None, :], mode="exact")[0])
    return JointStatistics(int(r.shape[1]), float(medians[0]), med_p, float(shares[0]), share_p)


def null_band(r_perm: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per rank of the sorted curve, the central ``level`` quantiles of the sorted relabelled curves.

    Args:
        r_perm: (P, S) r of S specifications under P relabellings (row 0 observed); the specifications
            whose observed r is undefined (NaN) are left out, as in :func:`joint_test`.
        level: the central share of the relabelled curves the band holds.

    Returns: (low, high), each (S',) over the S' defined specifications, rank 0 the smallest."""
    r = np.sort(r_perm[:, np.isfinite(r_perm[0])], axis=1)
    if r.shape[1] == 0:
        return np.empty(0), np.empty(0)
    low, high = np.quantile(r, [(1.0 - level) / 2, (1.0 + level) / 2], axis=0)
    return low, high


def relabelled_p(r_perm: np.ndarray) -> np.ndarray:
    """(P, S) each specification's exact p as if relabelling pi were the observed one: ``#{sigma: |r_sigma| >=
    |r_pi| - tie} / P`` over its own column of ``r_perm`` (P, S), every category in it (P its every order). Row 0
    (the identity) is each one's own exact p."""
    a = np.abs(np.asarray(r_perm, dtype=float))
    out = np.full(a.shape, np.nan)
    for s in range(a.shape[1]):
        col = a[:, s]
        if not np.isfinite(col).all():
            continue
        ranked = np.sort(col)
        out[:, s] = (col.size - np.searchsorted(ranked, col - TIE_TOLERANCE, side="left")) / col.size
    return out


def below_alpha(r_perm: np.ndarray, alpha: float) -> BelowAlpha:
    """The specifications (``r_perm``: (P, S) the distinct ones with every category under every relabelling, row
    0 observed) whose exact p is at or below ``alpha``, uncorrected: their number and share, and the same share
    under every relabelling (each applied to every specification at once, :func:`relabelled_p`), whose mean is
    what chance gives and whose upper tail gives the exact p of the observed share. Specifications with an
    undefined r are left out; so are those with a category left out, whose own test relabels only the rest (no
    relabelling of all categories is one of theirs)."""
    p = relabelled_p(np.asarray(r_perm, dtype=float)[:, np.isfinite(np.asarray(r_perm)[0])])
    n = p.shape[1]
    below = (p <= alpha).sum(axis=1)
    share = below / n if n else np.zeros(p.shape[0])
    return BelowAlpha(alpha=float(alpha), n_specs=int(n), n_below=int(below[0]) if n else 0, share=float(share[0]),
                      null_mean_share=float(share.mean()),
                      null_p=float(tail_p(share[:1], share[None, :], mode="exact")[0]), relabellings=int(p.shape[0]))


def first_identical(ua: np.ndarray) -> np.ndarray:
    """(S,) for each row of ``ua`` (S, C) the index of the first row bit-identical to it (itself if none before)."""
    first: dict[bytes, int] = {}
    rows = np.ascontiguousarray(np.asarray(ua, dtype=np.float64))
    return np.array([first.setdefault(row.tobytes(), i) for i, row in enumerate(rows)], dtype=np.int64)


def distinct_subset(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The entries of ``idx`` whose row of ``rows`` is bit-identical to none of an earlier entry's."""
    idx = np.asarray(idx, dtype=np.int64)
    return idx[first_identical(rows[idx]) == np.arange(idx.size)]
