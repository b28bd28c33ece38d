"""Every statistic of a correlation across groups (categories, bins or pairs), for many rows at once.

A row is one (pooling, view) combination; ``x`` (M, n) holds the per-group UA (or pair score) of
each row and ``y`` (n,) the per-group preference, which does not depend on the layer. Bootstrap
resamples and permutations are drawn once by the caller and shared by all rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from uaprobe.schema import missing

from uaprobe.analysis.inference import stats
from uaprobe.analysis.inference.stats import Correlation, Interval, ReasonArray


@dataclass(frozen=True)
class Resampling:
    """The random draws of one analysis, shared by all its rows."""

    counts: np.ndarray
    """(B, n) bootstrap multiplicities."""
    orders: np.ndarray
    """(P, n) permutation orders."""
    mode: str
    """``exact`` (all n! orders) or ``random``."""

    @staticmethod
    def draw(rng: np.random.Generator, *, n: int, resamples: int, permutations: int) -> "Resampling":
        """Bootstrap indices first, then permutations, from ``rng``."""
        idx = stats.bootstrap_indices(rng, n=n, resamples=resamples)
        orders, mode = stats.permutation_orders(rng, n=n, permutations=permutations)
        return Resampling(counts=stats.resample_counts(idx, n=n), orders=orders, mode=mode)


@dataclass(frozen=True)
class GroupStats:
    """Row-wise statistics of x (M, n) against y (n,); every array has shape (M,)."""

    pearson: Correlation
    spearman: Correlation
    bootstrap: Interval
    fisher_low: np.ndarray
    fisher_high: np.ndarray
    fisher_reason: ReasonArray
    permutation_p: np.ndarray

    @property
    def permutation_reason(self) -> ReasonArray:
        return self.pearson.reason

    def fields(self, rows: Any) -> dict[str, Any]:
        """The statistics of ``rows`` (a slice of the rows or one row) as results fields, a missing value with
        its reason (:mod:`uaprobe.schema.missing`)."""
        def s(values: np.ndarray, reasons: Any) -> Any:
            v, why = values[rows], reasons[rows] if np.ndim(reasons) else reasons
            return missing.series(v, why) if np.ndim(v) else missing.value(v, why)

        p, rho, b = self.pearson, self.spearman, self.bootstrap
        return {
            "pearson_r": s(p.r, p.reason), "pearson_p": s(p.p, p.reason),
            "spearman_rho": s(rho.r, rho.reason), "spearman_p": s(rho.p, rho.reason),
            "bootstrap_ci_low": s(b.low, b.reason),
            "bootstrap_ci_high": s(b.high, b.reason),
            "bootstrap_valid": np.asarray(b.valid[rows]).tolist(),
            "fisher_ci_low": s(self.fisher_low, self.fisher_reason),
            "fisher_ci_high": s(self.fisher_high, self.fisher_reason),
            "permutation_p": s(self.permutation_p, p.reason),
        }


def group_stats(*, x: np.ndarray, y: np.ndarray, draws: Resampling, level: float,
                x_name: str = "UA", y_name: str = "preference", boot_r: np.ndarray | None = None,
                perm_r: np.ndarray | None = None) -> GroupStats:
    """Pearson, Spearman, bootstrap CI, Fisher-z CI and permutation p of each row of ``x`` vs ``y``.

    ``boot_r`` / ``perm_r``: the caller's :func:`~uaprobe.analysis.inference.stats.bootstrap_pearson` and
    :func:`~uaprobe.analysis.inference.stats.permuted_r` of the same inputs and draws, if it needs them too."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    corr = stats.pearson(x, y, x_name=x_name, y_name=y_name)
    rho = stats.spearman(x, y, x_name=x_name, y_name=y_name)
    boot = stats.bootstrap_r_interval(x, y, draws.counts, level=level, r_reason=corr.reason, boot_r=boot_r)
    f_lo, f_hi, f_reason = stats.fisher_interval(r=corr.r, n=corr.n, level=level)
    perm = stats.permutation_p(x, y, r=corr.r, orders=draws.orders, mode=draws.mode, r_perm=perm_r)
    return GroupStats(pearson=corr, spearman=rho, bootstrap=boot, fisher_low=f_lo, fisher_high=f_hi,
                      fisher_reason=stats.inherit(corr.reason, f_reason), permutation_p=perm)


@dataclass(frozen=True)
class LeaveOneOut:
    """r with each group left out: arrays (M, n) and per-row summaries (M,)."""

    r: np.ndarray
    reason: ReasonArray
    driver: np.ndarray
    """(M,) index of the group whose removal moves r most; -1 where r (or every loo r) is undefined."""
    max_shift: np.ndarray
    """(M,) that largest |r - r_loo|."""


def leave_one_out(*, x: np.ndarray, y: np.ndarray, r: np.ndarray, names: Sequence[str],
                  x_name: str = "UA", y_name: str = "preference") -> LeaveOneOut:
    """Leave-one-group-out Pearson r of each row of x (M, n) against y (n,)."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    n = x.shape[-1]
    keep = ~np.eye(n, dtype=bool)  # (n_left_out, n)
    corr = stats.pearson(x[:, None, :], np.asarray(y, dtype=float)[None, None, :], mask=keep[None],
                         x_name=x_name, y_name=y_name)
    reason = stats.reasons_like(corr.r.shape)
    for j, name in enumerate(names):
        col = corr.reason[:, j]
        reason[:, j] = [f"with {name} left out: {s}" if s else "" for s in col]
    shift = np.abs(corr.r - np.asarray(r, dtype=float)[:, None])
    any_defined = np.isfinite(shift).any(axis=1)
    safe = np.where(np.isfinite(shift), shift, -1.0)
    driver = np.where(any_defined, safe.argmax(axis=1), -1)
    max_shift = np.where(any_defined, safe.max(axis=1), np.nan)
    return LeaveOneOut(r=corr.r, reason=reason, driver=driver, max_shift=max_shift)
