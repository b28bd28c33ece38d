"""A family's corrections that use the tests' joint permutations, and the interval of a partial r.

- **Westfall-Young max-T step-down** (:func:`maxt_stepdown`; Westfall & Young 1993, algorithm 2.8): with the
  tests ordered by their observed statistic ``|t_(1)| >= ... >= |t_(T)|`` and every permutation ``b`` applied to
  every test at once, ``q_b,(j) = max_{k >= j} |t*_b,(k)|``; the adjusted p of the test of rank j is
  ``(1 + #{b: q_b,(j) >= |t_(j)|}) / (1 + B)``, made monotone over the ranks. It controls the family-wise
  error like Holm and uses the dependence between the tests that Holm ignores, so it is never more
  conservative than the single-step max-T and, with strongly dependent tests, much less so than Holm.
  The statistic here is the partial r; within a family whose tests have the same number of pairs and
  covariates it is a monotone function of the t statistic.
- **Partial r interval** (:func:`partial_r_interval`): Fisher's z with ``n - q - 3`` degrees of freedom for
  ``q`` covariates beside the intercept; it treats the pairs as independent given the covariates.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats as sps

from uaprobe.analysis.stats import TIE_TOLERANCE


def maxt_stepdown(observed: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """(T,) max-T step-down adjusted p of the tests' statistics ``observed`` (T,) given their values under the same
    B permutations ``permuted`` (B, T). Tests with an undefined observed value get NaN and stay out; an undefined
    permuted value counts as not exceeding."""
    t = np.abs(np.asarray(observed, dtype=float))
    perm = np.abs(np.asarray(permuted, dtype=float)).reshape(-1, t.size)
    out = np.full(t.size, np.nan)
    ok = np.flatnonzero(np.isfinite(t))
    if ok.size == 0:
        return out
    order = ok[np.argsort(-t[ok], kind="stable")]  # largest first
    perm = np.where(np.isfinite(perm[:, order]), perm[:, order], -np.inf)
    running = np.maximum.accumulate(perm[:, ::-1], axis=1)[:, ::-1]  # q_b,(j): the max over ranks j..T
    hits = (running >= t[order][None, :] - TIE_TOLERANCE).sum(axis=0)
    adjusted = np.maximum.accumulate((1.0 + hits) / (1.0 + perm.shape[0]))
    out[order] = np.minimum(adjusted, 1.0)
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


__all__: Sequence[str] = ("maxt_stepdown", "partial_r_interval")
