"""Vectorised statistics shared by every analysis family.

Conventions: the last axis of an array is the sample axis (groups: categories, bins or pairs);
leading axes are batch axes (layers, poolings, partitions) and broadcast. A statistic that cannot
be computed is NaN, and every function that can produce one returns a matching array of reasons
(``""`` where the value is defined), so the caller can record why -- never a silent 0.
Random draws take an explicit :class:`numpy.random.Generator`; nothing touches global state.
"""

from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit
from scipy import special
from scipy import stats as scipy_stats

from uaprobe.analysis.compute.workers import ordered_map

FloatArray = np.ndarray
"""An ``np.ndarray`` of float64."""
ReasonArray = np.ndarray
"""An ``np.ndarray`` of ``object`` dtype holding ``str``: ``""`` where a value is defined."""

DEGENERATE_RELATIVE_VARIANCE = 1e-12
"""A bootstrap resample whose variance is below this fraction of the full sample's sum of squares
has "no variance": its correlation is undefined and it is dropped from the interval."""
TIE_TOLERANCE = 1e-12
"""|r_perm| >= |r| - TIE_TOLERANCE counts as a permutation hit (floating-point ties)."""


def rng_for(*, seed: int, name: str) -> np.random.Generator:
    """The one generator of an analysis family: seeded by ``seed`` and the family's ``name``."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def reasons_like(shape: tuple[int, ...]) -> ReasonArray:
    """An all-defined reason array of ``shape``."""
    out = np.empty(shape, dtype=object)
    out.fill("")
    return out


def first_reason(*candidates: tuple[np.ndarray, str]) -> ReasonArray:
    """Combine ``(condition, reason)`` pairs (broadcast together); the first true condition wins."""
    shape = np.broadcast_shapes(*(np.shape(c) for c, _ in candidates))
    out = reasons_like(shape)
    for cond, why in reversed(candidates):
        out[np.broadcast_to(cond, shape)] = why
    return out


def inherit(reason: ReasonArray, own: ReasonArray) -> ReasonArray:
    """``reason`` where it is set, else ``own`` (a derived statistic inherits its input's reason)."""
    out = np.array(own, dtype=object, copy=True)
    has = np.array([bool(s) for s in np.ravel(reason)], dtype=bool).reshape(np.shape(reason))
    out[has] = reason[has]
    return out


# --------------------------------------------------------------------------------------------
# Correlation


@dataclass(frozen=True)
class Correlation:
    """Correlations along the sample axis; all arrays have the batch shape ``(...)``."""

    r: FloatArray
    p: FloatArray
    """Two-sided p-value of the t-test of r (the same as ``scipy.stats.pearsonr``)."""
    n: np.ndarray
    """Number of points behind r."""
    reason: ReasonArray


def _constant(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """True where the selected entries of ``x`` (..., n) are all equal (exact comparison)."""
    hi = np.where(w, x, -np.inf).max(axis=-1, initial=-np.inf)
    lo = np.where(w, x, np.inf).min(axis=-1, initial=np.inf)
    return hi == lo


def pearson_p(*, r: FloatArray, n: np.ndarray) -> FloatArray:
    """Two-sided p-value of Pearson's r with ``n`` points (t distribution with n - 2 df)."""
    r = np.asarray(r, dtype=float)
    df = np.asarray(n, dtype=float) - 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(r) * np.sqrt(df / ((1.0 - r) * (1.0 + r)))
        p = 2.0 * special.stdtr(df, -t)
    return np.where(np.isfinite(r) & (df > 0), np.clip(p, 0.0, 1.0), np.nan)


def _pearson_arrays(x: np.ndarray, y: np.ndarray, w: np.ndarray, xs: np.ndarray,
                    ys: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`pearson`'s per-row quantities: the selected points' count, whether
    one is non-finite, whether x and y are constant over them, and the unclipped r."""
    n = w.sum(axis=-1)
    nonfinite = (w & ~(np.isfinite(x) & np.isfinite(y))).any(axis=-1)
    nn = np.maximum(n, 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a non-finite input: r is NaN with its reason
        xc = np.where(w, xs - (xs.sum(axis=-1) / nn)[..., None], 0.0)
        yc = np.where(w, ys - (ys.sum(axis=-1) / nn)[..., None], 0.0)
        r = (xc * yc).sum(axis=-1) / np.sqrt((xc * xc).sum(axis=-1) * (yc * yc).sum(axis=-1))
    return n, nonfinite, _constant(xs, w), _constant(ys, w), r


def pearson(x: np.ndarray, y: np.ndarray, *, mask: np.ndarray | None = None, min_n: int = 3,
            x_name: str = "x", y_name: str = "y") -> Correlation:
    """Pearson r of ``x`` and ``y`` (broadcast to ``(..., n)``) along the last axis.

    ``mask`` (broadcastable to ``(..., n)``, bool) selects the points of each row (default: all).
    Undefined (NaN, with a reason) where fewer than ``min_n`` points are selected, an input is
    non-finite, or either variable is constant over the selected points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if mask is None:
        x, y = np.broadcast_arrays(x, y)
        w = np.ones(x.shape, dtype=bool)
    else:
        x, y, w = np.broadcast_arrays(x, y, np.asarray(mask, dtype=bool))
    xs = np.where(w, x, 0.0)
    ys = np.where(w, y, 0.0)
    n, nonfinite, const_x, const_y, r = _pearson_arrays(x, y, w, xs, ys)
    reason = first_reason(
        (n < min_n, f"fewer than {min_n} points"),
        (nonfinite, "non-finite input"),
        (const_x, f"{x_name} is constant"),
        (const_y, f"{y_name} is constant"),
    )
    bad = reason != ""
    r = np.where(bad, np.nan, np.clip(r, -1.0, 1.0))
    return Correlation(r=r, p=pearson_p(r=r, n=n), n=n, reason=reason)


def average_ranks(x: np.ndarray) -> FloatArray:
    """Ranks 1..n along the last axis, ties sharing their average rank (``scipy.stats.rankdata``)."""
    return scipy_stats.rankdata(np.asarray(x, dtype=float), axis=-1)


def spearman(x: np.ndarray, y: np.ndarray, *, x_name: str = "x", y_name: str = "y") -> Correlation:
    """Spearman rho (Pearson of average ranks) along the last axis, with the t-test p-value
    (as ``scipy.stats.spearmanr``). ``x`` and ``y`` broadcast to ``(..., n)``."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    finite = np.isfinite(x) & np.isfinite(y)
    rx = np.where(finite, average_ranks(np.where(finite, x, 0.0)), np.nan)
    ry = np.where(finite, average_ranks(np.where(finite, y, 0.0)), np.nan)
    return pearson(rx, ry, x_name=x_name, y_name=y_name)


# --------------------------------------------------------------------------------------------
# Bootstrap


def bootstrap_indices(rng: np.random.Generator, *, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) int: each row draws ``n`` of ``range(n)`` with replacement."""
    if n == 0:
        return np.zeros((resamples, 0), dtype=np.int64)
    return rng.integers(0, n, size=(resamples, n))


def resample_counts(indices: np.ndarray, *, n: int) -> FloatArray:
    """(B, n) multiplicity of each point in each resample of ``indices`` (B, m)."""
    b = indices.shape[0]
    flat = (indices + n * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(float)


def percentile(values: FloatArray, q: float) -> tuple[FloatArray, np.ndarray]:
    """The ``q``-th percentile (0..100, linear interpolation as ``numpy.percentile``) of the
    finite entries along the last axis, and their count. All-NaN rows give NaN."""
    s = np.sort(np.asarray(values, dtype=float), axis=-1)  # NaN sort last
    valid = np.isfinite(s).sum(axis=-1)
    return _percentile_of_sorted(s, valid, q), valid


def _percentile_of_sorted(s: FloatArray, valid: np.ndarray, q: float) -> FloatArray:
    """:func:`percentile` of rows already sorted (NaN last) with ``valid`` finite entries each."""
    h = (np.maximum(valid, 1) - 1) * (q / 100.0)
    lo = np.floor(h).astype(int)
    hi = np.minimum(lo + 1, np.maximum(valid - 1, 0))
    frac = h - lo
    a = np.take_along_axis(s, lo[..., None], axis=-1)[..., 0]
    b = np.take_along_axis(s, hi[..., None], axis=-1)[..., 0]
    out = a + frac * (b - a)
    return np.where(valid > 0, out, np.nan)


def percentile_interval(values: FloatArray, *, level: float) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """Percentile interval at ``level`` over the finite entries of the last axis: (low, high, valid)."""
    alpha = 1.0 - level
    s = np.sort(np.asarray(values, dtype=float), axis=-1)  # once for both ends; NaN sort last
    valid = np.isfinite(s).sum(axis=-1)
    return (_percentile_of_sorted(s, valid, 100.0 * alpha / 2.0),
            _percentile_of_sorted(s, valid, 100.0 * (1.0 - alpha / 2.0)), valid)


def bootstrap_pearson(x: np.ndarray, y: np.ndarray, counts: FloatArray) -> FloatArray:
    """Pearson r of every bootstrap resample: x (M, n), y (n,), counts (B, n) -> (M, B).

    Uses count-weighted moments (three matrix products, no loop over resamples). A resample in
    which x or y has no variance (below :data:`DEGENERATE_RELATIVE_VARIANCE` of the full
    sample's sum of squares) gives NaN.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    n = x.shape[-1]
    if n == 0:
        return np.full((x.shape[0], counts.shape[0]), np.nan)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    # the three (B, n) x (n, M) products run as independent units on the worker threads
    sx, sxx, sxy = ordered_map(lambda right: counts @ right, (xc.T, (xc * xc).T, (xc * yc).T))  # (B, M) each
    sy = counts @ yc
    syy = counts @ (yc * yc)
    tol_x = DEGENERATE_RELATIVE_VARIANCE * (xc * xc).sum(axis=-1)
    tol_y = DEGENERATE_RELATIVE_VARIANCE * float((yc * yc).sum())
    return _moments_r(sx, sxx, sxy, sy, syy, float(n), tol_x, tol_y).T


@njit(cache=True, boundscheck=False, nogil=True, error_model="numpy")
def _moments_r(sx: np.ndarray, sxx: np.ndarray, sxy: np.ndarray, sy: np.ndarray, syy: np.ndarray, n: float,
               tol_x: np.ndarray, tol_y: float) -> np.ndarray:  # pragma: no cover - compiled
    """r of every resample (B, M) from its count-weighted sums (B, M) and (B,), in one pass: per entry
    the operations of ``vx = sxx - sx * sx / n``, ``vy = syy - sy * sy / n``, ``cxy = sxy - sx * sy / n``,
    ``clip(cxy / sqrt(vx * vy), -1, 1)`` where ``vx > tol_x`` and ``vy > tol_y``, else NaN, in numpy's
    order (the same bytes as those array expressions, tested)."""
    resamples, m = sx.shape
    out = np.empty((resamples, m))
    for i in range(resamples):
        vy = syy[i] - sy[i] * sy[i] / n
        for j in range(m):
            vx = sxx[i, j] - sx[i, j] * sx[i, j] / n
            cxy = sxy[i, j] - sx[i, j] * sy[i] / n
            if vx > tol_x[j] and vy > tol_y:
                out[i, j] = min(max(cxy / np.sqrt(vx * vy), -1.0), 1.0)
            else:
                out[i, j] = np.nan
    return out


def bootstrap_mean(x: np.ndarray, counts: FloatArray) -> FloatArray:
    """Mean of every bootstrap resample: x (M, n), counts (B, n) -> (M, B)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    return (counts @ x.T).T / x.shape[-1]


@dataclass(frozen=True)
class Interval:
    low: FloatArray
    high: FloatArray
    valid: np.ndarray
    """Resamples behind the interval."""
    reason: ReasonArray


def bootstrap_r_interval(x: np.ndarray, y: np.ndarray, counts: FloatArray, *, level: float,
                         r_reason: ReasonArray, boot_r: FloatArray | None = None) -> Interval:
    """Percentile interval of bootstrap r: x (M, n), y (n,), counts (B, n); ``r_reason`` (M,) is
    the reason of the observed r (an undefined r gives an undefined interval). ``boot_r``: the
    caller's :func:`bootstrap_pearson` of the same inputs, if it has it (not modified)."""
    rb = bootstrap_pearson(x, y, counts) if boot_r is None else np.array(boot_r, dtype=float, copy=True)
    undefined = r_reason != ""
    rb[undefined] = np.nan
    lo, hi, valid = percentile_interval(rb, level=level)
    reason = inherit(r_reason, first_reason((valid == 0, "no bootstrap resample had variance in both variables")))
    return Interval(low=lo, high=hi, valid=valid, reason=reason)


# --------------------------------------------------------------------------------------------
# Permutation, Fisher-z, multiple comparisons


def permutation_orders(rng: np.random.Generator, *, n: int, permutations: int) -> tuple[np.ndarray, str]:
    """Orders to permute ``n`` points: all ``n!`` (``"exact"``) if that is at most
    ``permutations``, else ``permutations`` random ones (``"random"``). (P, n) int."""
    if n <= 12 and math.factorial(n) <= permutations:
        orders = list(itertools.permutations(range(n)))
        return np.array(orders, dtype=np.int64).reshape(len(orders), n), "exact"
    base = np.broadcast_to(np.arange(n), (permutations, n))
    return rng.permuted(base, axis=1), "random"


def permuted_r(x: np.ndarray, y: np.ndarray, orders: np.ndarray) -> FloatArray:
    """Pearson r of every row of x (M, n) with every order of y (P orders): (M, P); NaN for a constant row."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        xn = xc / np.linalg.norm(xc, axis=-1, keepdims=True)
        yn = yc / np.linalg.norm(yc)
    return xn @ yn[orders].T


def permutation_p(x: np.ndarray, y: np.ndarray, *, r: FloatArray, orders: np.ndarray, mode: str,
                  r_perm: FloatArray | None = None) -> FloatArray:
    """Two-sided permutation p-value of Pearson r: x (M, n), y (n,), observed r (M,).

    ``exact``: share of the orders with ``|r_perm| >= |r|``; ``random``: ``(1 + hits) / (1 + P)``
    (:func:`tail_p`).
    NaN where r is NaN. Ties count within :data:`TIE_TOLERANCE`, so r = 0 gives p = 1. The exact p
    equals an enumeration of all orders in rational arithmetic, and ``scipy.stats.permutation_test`` of
    ``|r|`` with ``permutation_type="pairings"`` and ``alternative="greater"`` wherever r is not 0
    (tested; scipy's tie rule is relative to the observed statistic, so at r = 0 its p follows the
    rounding noise of r). This is one matrix product for all rows, about 150 times faster than scipy's vectorised call, and the random orders are
    the analysis's own, drawn once and shared by every row.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    if x.shape[-1] == 0:
        return np.full(x.shape[0], np.nan)
    if r_perm is None:
        r_perm = permuted_r(x, y, orders)  # (M, P)
    return tail_p(r, r_perm, mode=mode)


def tail_p(observed: FloatArray, null: FloatArray, *, mode: str) -> FloatArray:
    """Two-sided permutation p of each row's statistic: observed (M,), its null draws (M, P).

    ``exact`` (the draws are every order): the share ``hits / P`` of the draws with ``|null| >= |observed|``;
    ``random``: ``(1 + hits) / (1 + P)``. P counts the defined draws: an undefined draw (NaN) is left out of both
    counts. Ties count within :data:`TIE_TOLERANCE`; NaN where the statistic or every draw is undefined. The one
    p of every permutation test.
    """
    observed = np.asarray(observed, dtype=float)
    null = np.asarray(null, dtype=float)
    ok = np.isfinite(null)
    hits = ((np.abs(null) >= (np.abs(observed) - TIE_TOLERANCE)[:, None]) & ok).sum(axis=-1)
    valid = ok.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = hits / valid if mode == "exact" else (1.0 + hits) / (1.0 + valid)
    return np.where(np.isfinite(observed) & (valid > 0), p, np.nan)


def p_floor(count: int, *, mode: str) -> float:
    """The smallest p :func:`tail_p` can give over ``count`` draws: ``1 / count`` exact, ``1 / (1 + count)``
    random."""
    return 1.0 / count if mode == "exact" else 1.0 / (1 + count)


def fisher_interval(*, r: FloatArray, n: np.ndarray, level: float) -> tuple[FloatArray, FloatArray, ReasonArray]:
    """Two-sided Fisher-z interval ``tanh(atanh(r) -+ z * sqrt(1 / (n - 3)))`` at ``level``, element-wise
    over any batch shape: the formula, operation for operation, of
    ``scipy.stats.pearsonr(x, y).confidence_interval(level)``. Needs n >= 4 and a defined r (where
    scipy returns [-1, 1] for n <= 3, this gives NaN with a reason)."""
    r = np.asarray(r, dtype=float)
    n = np.asarray(n, dtype=float)
    zcrit = special.ndtri(0.5 + level / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.arctanh(r)
        se = np.sqrt(1.0 / (n - 3.0))
        lo = np.tanh(z - zcrit * se)
        hi = np.tanh(z + zcrit * se)
    reason = first_reason((~np.isfinite(r), "r is undefined"), (n < 4, "the Fisher-z interval needs at least 4 points"))
    bad = reason != ""
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi), reason


def _adjust_finite(p: np.ndarray, step: Callable[[np.ndarray], np.ndarray]) -> FloatArray:
    """Adjusted p-values of a 1-D family: ``step`` maps the ascending finite p-values to their
    adjusted values (capped at 1 here); NaN entries are left out of the family and stay NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    q = p[ok]
    if q.size == 0:
        return out
    order = np.argsort(q, kind="stable")
    res = np.empty(q.size)
    res[order] = np.minimum(step(q[order]), 1.0)
    out[ok] = res
    return out


def holm(p: np.ndarray) -> FloatArray:
    """Holm step-down adjusted p-values of a 1-D family; NaN entries are left out (stay NaN)."""
    return _adjust_finite(p, lambda q: np.maximum.accumulate((q.size - np.arange(q.size)) * q))


def benjamini_hochberg(p: np.ndarray) -> FloatArray:
    """Benjamini-Hochberg adjusted p-values of a 1-D family (``scipy.stats.false_discovery_control``);
    NaN entries are left out of the family and stay NaN."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    out[ok] = scipy_stats.false_discovery_control(p[ok], method="bh")
    return out


# --------------------------------------------------------------------------------------------
# Curves over layers and simple summaries


def sign_changes(values: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs ``(i, i + 1)`` of consecutive entries with ``v_i * v_{i+1} < 0`` (NaN never changes)."""
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        hit = (v[:-1] * v[1:]) < 0
    return [(int(i), int(i) + 1) for i in np.flatnonzero(hit)]


def peak(values: np.ndarray, *, lowest: bool = False) -> int | None:
    """Index of the largest (or smallest) finite entry, first on ties; None if none is finite."""
    v = np.asarray(values, dtype=float)
    if not np.isfinite(v).any():
        return None
    return int(np.nanargmin(v) if lowest else np.nanargmax(v))


def cohens_d(x: np.ndarray) -> float:
    """Seed 003's one-sample effect size: ``mean / (std(ddof=0) + 1e-10)``.

    NaN for a constant sample: the seed's ``1e-10`` would turn it into ``mean * 1e10`` (or 0), a
    number that means nothing.
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0 or np.ptp(x) == 0:
        return float("nan")
    return float(np.mean(x) / (np.std(x) + 1e-10))


@dataclass(frozen=True)
class LineFit:
    slope: float
    intercept: float
    r: float
    p: float
    n: int
    reason: dict[str, str]
    """Field name -> reason, for each undefined field."""


def line_fit(y: np.ndarray) -> LineFit:
    """Least-squares line of ``y`` against its positions ``0..n-1``: ``scipy.stats.linregress``, with
    reasons where it has none (fewer than 2 points or a non-finite value: nothing is defined; constant
    ``y``: r and p are undefined; 2 points: p is undefined, where linregress reports 0 or 1)."""
    y = np.asarray(y, dtype=float)
    n = y.size
    if n < 2 or not np.isfinite(y).all():
        why = "fewer than 2 points" if n < 2 else "non-finite input"
        return LineFit(np.nan, np.nan, np.nan, np.nan, n, {k: why for k in ("slope", "intercept", "r", "p")})
    fit = scipy_stats.linregress(np.arange(n, dtype=float), y)
    slope, intercept, r, p = float(fit.slope), float(fit.intercept), float(fit.rvalue), float(fit.pvalue)
    reason: dict[str, str] = {}
    if np.ptp(y) == 0:
        r, p = np.nan, np.nan
        reason["r"] = reason["p"] = "the values is constant"
    elif n < 3:
        p = np.nan
        reason["p"] = "a p-value needs at least 3 points"
    return LineFit(slope, intercept, r, p, n, reason)
