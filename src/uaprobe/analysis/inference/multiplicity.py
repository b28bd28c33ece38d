"""A family's corrections that use the tests' joint permutations, and the interval of a partial r.

- **Westfall-Young max-T step-down** (:func:`maxt_stepdown`; Westfall & Young 1993, algorithms 2.8 and 4.1), on
  each test's own permutation p so that a test whose null is wider cannot dominate the maximum (the min-P form:
  the max-T of ``1 - p``). Among the observed statistics and the B permutations applied to every test at once
  (B + 1 rows), a value's p is the share of its test's rows at least as extreme. With the tests ordered by
  their observed p, ``p_(1) <= ... <= p_(T)``, and ``q_b,(j) = min_{k >= j} p*_b,(k)`` over the ranks j and
  below, the adjusted p of rank j is ``#{rows: q_(j) <= p_(j)} / (B + 1)`` (the observed row included), made
  monotone over the ranks. It controls the family-wise error like Holm and uses the dependence between the
  tests that Holm ignores: for T copies of one test it gives that test's own p, where Holm gives T times it.
- **Minimum detectable partial r** (:func:`partial_r_mde`): the smallest population partial correlation whose
  two-sided test at level ``a`` has the given power, under the same Fisher-z approximation: the power at rho is
  ``Phi(atanh(rho) sqrt(d) - z) + Phi(-atanh(rho) sqrt(d) - z)``, ``d = n - q - 3``, ``z = z_(1 - a/2)``, solved
  for rho. A permutation test at the same level has about this power where the normal approximation holds.
- **Partial r interval** (:func:`partial_r_interval`): Fisher's z with ``n - q - 3`` degrees of freedom for
  ``q`` covariates beside the intercept; it treats the pairs as independent given the covariates.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import optimize
from scipy import stats as sps

from uaprobe.analysis.inference.stats import TIE_TOLERANCE


def column_p(values: np.ndarray) -> np.ndarray:
    """(R, T) the p of every entry of ``values`` (R, T) within its own column: the share of the column's entries
    whose absolute value is at least its own (less the tie tolerance), itself included; NaN stays NaN and an
    undefined entry counts as not extreme."""
    a = np.abs(np.asarray(values, dtype=float))
    out = np.full(a.shape, np.nan)
    for j in range(a.shape[1]):
        col = a[:, j]
        ranked = np.sort(np.where(np.isfinite(col), col, -np.inf))
        hits = col.size - np.searchsorted(ranked, col - TIE_TOLERANCE, side="left")
        out[:, j] = np.where(np.isfinite(col), hits / col.size, np.nan)
    return out


def maxt_stepdown(observed: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """(T,) Westfall-Young step-down adjusted p of the tests' statistics ``observed`` (T,) given their values under
    the same B permutations ``permuted`` (B, T), on each test's own permutation p (see the module). Tests with an
    undefined observed value get NaN and stay out."""
    t = np.asarray(observed, dtype=float)
    out = np.full(t.size, np.nan)
    ok = np.flatnonzero(np.isfinite(t))
    if ok.size == 0:
        return out
    rows = np.vstack([t[None, ok], np.asarray(permuted, dtype=float).reshape(-1, t.size)[:, ok]])  # row 0 observed
    p = column_p(rows)
    p = np.where(np.isfinite(p), p, 1.0 + 1.0)  # an undefined permuted value is never as extreme
    order = np.argsort(p[0], kind="stable")  # smallest observed p first
    running = np.minimum.accumulate(p[:, order][:, ::-1], axis=1)[:, ::-1]  # q_(j): the min over ranks j..T
    hits = (running <= p[0, order][None, :] + TIE_TOLERANCE).mean(axis=0)
    out[ok[order]] = np.minimum(np.maximum.accumulate(hits), 1.0)
    return out


def partial_r_interval(r: np.ndarray, *, n: np.ndarray, n_covariates: np.ndarray, level: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) Fisher-z interval of partial correlations ``r`` over ``n`` pairs with ``n_covariates`` covariates
    beside the intercept: ``tanh(atanh(r) -+ z_(1+level)/2 / sqrt(n - q - 3))``; NaN where r is undefined or
    ``n - q - 3 <= 0``."""
    r = np.asarray(r, dtype=float)
    dof = np.asarray(n, dtype=float) - np.asarray(n_covariates, dtype=float) - 3.0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.arctanh(np.clip(r, -1.0 + 1e-15, 1.0 - 1e-15))
        half = sps.norm.ppf((1.0 + level) / 2.0) / np.sqrt(np.where(dof > 0, dof, np.nan))
    return np.tanh(z - half), np.tanh(z + half)


def partial_r_power(rho: float, *, n: int, n_covariates: int, alpha: float) -> float:
    """The power of the two-sided Fisher-z test of a partial r over ``n`` pairs with ``n_covariates`` covariates at
    level ``alpha`` when the population partial correlation is ``rho`` (see the module)."""
    dof = n - n_covariates - 3
    if dof <= 0:
        return float("nan")
    z, shift = sps.norm.ppf(1.0 - alpha / 2.0), math.atanh(rho) * math.sqrt(dof)
    return float(sps.norm.cdf(shift - z) + sps.norm.cdf(-shift - z))


def partial_r_mde(*, n: int, n_covariates: int, alpha: float, power: float) -> float:
    """The minimum detectable partial r: the rho in (0, 1) at which :func:`partial_r_power` equals ``power``
    (NaN where ``n - q - 3 <= 0``)."""
    if n - n_covariates - 3 <= 0:
        return float("nan")
    return float(optimize.brentq(lambda rho: partial_r_power(rho, n=n, n_covariates=n_covariates, alpha=alpha)
                                 - power, 0.0, 1.0 - 1e-12, xtol=1e-14))


__all__: Sequence[str] = ("column_p", "maxt_stepdown", "partial_r_interval", "partial_r_mde", "partial_r_power")
