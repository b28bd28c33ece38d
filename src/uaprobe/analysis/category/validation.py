"""Seed 003: the UA validation table at the final layer, and its global statistics.

Per category: n_pairs, U_A, U_B, UA, mean preference, % of pairs preferring A, the seed's
"aligned" flag. Globally, over the categories: mean UA, std (ddof 0), percentile bootstrap CI of
the mean, Cohen's d = mean / (std + 1e-10), r(UA, mean preference), mean preference, and the
seed's label (ALIGNED / INVERTED / DECOUPLED) with its thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from uaprobe.analysis.inference import stats
from uaprobe.schema import missing
from uaprobe.schema.categories import ValidationGlobal, ValidationRow, ValidationVariant


@dataclass(frozen=True)
class CategoryTable:
    """Per-category columns, arrays (n_categories,)."""

    n_pairs: np.ndarray
    u_a: np.ndarray
    u_b: np.ndarray
    ua: np.ndarray
    mean_preference: np.ndarray
    pct_prefer_a: np.ndarray
    aligned: np.ndarray


def aligned_flags(*, ua: np.ndarray, preference: np.ndarray, neutral_ua: float,
                  neutral_preference: float) -> np.ndarray:
    """Seed 003: same sign, or both neutral (|UA| < neutral_ua and |pref| < neutral_preference)."""
    ua = np.asarray(ua, dtype=float)
    pref = np.asarray(preference, dtype=float)
    same_sign = ((ua > 0) & (pref > 0)) | ((ua < 0) & (pref < 0))
    neutral = (np.abs(ua) < neutral_ua) & (np.abs(pref) < neutral_preference)
    return same_sign | neutral


def category_table(*, u_a: np.ndarray, u_b: np.ndarray, preference: np.ndarray, category_of_pair: np.ndarray,
                   n_categories: int, neutral_ua: float, neutral_preference: float) -> CategoryTable:
    """The seed's per-category table from per-category uniformities (n_categories,) and per-pair
    preferences (n_pairs,)."""
    pref = np.asarray(preference, dtype=float)
    cat = np.asarray(category_of_pair)
    n_pairs = np.bincount(cat, minlength=n_categories)
    mean_pref = np.bincount(cat, weights=pref, minlength=n_categories) / n_pairs
    pct_a = 100.0 * np.bincount(cat, weights=(pref > 0).astype(float), minlength=n_categories) / n_pairs
    ua = np.asarray(u_a, dtype=float) - np.asarray(u_b, dtype=float)
    return CategoryTable(n_pairs=n_pairs, u_a=np.asarray(u_a, dtype=float), u_b=np.asarray(u_b, dtype=float), ua=ua,
                         mean_preference=mean_pref, pct_prefer_a=pct_a,
                         aligned=aligned_flags(ua=ua, preference=mean_pref, neutral_ua=neutral_ua,
                                               neutral_preference=neutral_preference))


def interpretation(r: float, *, aligned_r: float, inverted_r: float) -> str | None:
    """Seed 003's label of r: ALIGNED above ``aligned_r``, INVERTED below ``inverted_r``, else
    DECOUPLED; None for an undefined r."""
    if not np.isfinite(r):
        return None
    if r > aligned_r:
        return "ALIGNED"
    if r < inverted_r:
        return "INVERTED"
    return "DECOUPLED"


@dataclass(frozen=True)
class GlobalStats:
    """Seed 003's global statistics over the categories."""

    mean_ua: float
    std_ua: float
    ci_low: float
    ci_high: float
    ci_valid: int
    cohens_d: float
    r: float
    r_reason: str
    mean_preference: float
    label: str | None


def global_stats(*, ua: np.ndarray, mean_preference: np.ndarray, counts: np.ndarray, level: float,
                 aligned_r: float, inverted_r: float) -> GlobalStats:
    """Global statistics of per-category UA (n,) and mean preference (n,); ``counts`` (B, n) are
    the bootstrap multiplicities for the CI of the mean UA."""
    ua = np.asarray(ua, dtype=float)
    pref = np.asarray(mean_preference, dtype=float)
    means = stats.bootstrap_mean(ua[None, :], counts)
    lo, hi, valid = stats.percentile_interval(means, level=level)
    corr = stats.pearson(ua, pref, x_name="UA", y_name="preference")
    r = float(corr.r)
    return GlobalStats(mean_ua=float(ua.mean()), std_ua=float(ua.std()), ci_low=float(lo[0]), ci_high=float(hi[0]),
                       ci_valid=int(valid[0]), cohens_d=stats.cohens_d(ua), r=r, r_reason=str(corr.reason[()]),
                       mean_preference=float(pref.mean()),
                       label=interpretation(r, aligned_r=aligned_r, inverted_r=inverted_r))


def validation_variant(*, table: CategoryTable, glob: GlobalStats, categories: Sequence[str],
                       level: float) -> ValidationVariant:
    """One ``variants.<v>`` object of ``validation.json``."""
    rows = [ValidationRow(category=name, n_pairs=int(table.n_pairs[i]), u_a=float(table.u_a[i]),
                          u_b=float(table.u_b[i]), ua=float(table.ua[i]),
                          mean_preference=float(table.mean_preference[i]), pct_prefer_a=float(table.pct_prefer_a[i]),
                          aligned=bool(table.aligned[i]))
            for i, name in enumerate(categories)]
    return ValidationVariant(
        table=rows,
        global_=ValidationGlobal(
            total_pairs=int(table.n_pairs.sum()),
            mean_ua=glob.mean_ua, std_ua=glob.std_ua,
            ci_low=missing.value(glob.ci_low, "no bootstrap resample"),
            ci_high=missing.value(glob.ci_high, "no bootstrap resample"),
            ci_level=level, ci_valid=glob.ci_valid,
            cohens_d=missing.value(glob.cohens_d, "UA is constant across categories (std 0)"),
            r=missing.value(glob.r, glob.r_reason),
            mean_preference=glob.mean_preference,
            label=missing.label(glob.label, glob.r_reason or "r is undefined")))
