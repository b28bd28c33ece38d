"""The pair-level tests with the categories as groups: a linear mixed model (statsmodels' ``MixedLM``).

Beside the fixed-effects partial r (:mod:`uaprobe.analysis.pairs.pairmodels`), every test of the family at the
pre-declared layer is fitted as

    preference_i = b0 + b1 z_i + b2 n_content(A)_i + b3 n_content(B)_i + u_c + v_c z_i + e_i

with ``z`` the metric standardised over the pairs, ``(u_c, v_c)`` a random intercept and a random slope per
category c (unstructured covariance) and ``e`` independent noise, by restricted maximum likelihood. ``b1`` is the
preference's change per standard deviation of the metric for a typical category; the random slope lets each
category have its own, so ``b1``'s standard error carries the between-category variation of the slope that the
fixed-effects model assumes away. Its Wald z test is two-sided; with few categories it is liberal (the slope's
variance is estimated from them), which the within-category permutation tests are not.

Values are rounded to :data:`DIGITS` significant digits: the optimiser stops at a tolerance far above the last
bits, which would otherwise move with the linear algebra's summation order.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from uaprobe.schema import missing
from uaprobe.schema.pairmodels import Mixed, MixedTests

DIGITS = 8
"""Significant digits kept of every fitted value."""
MODEL = ("preference ~ 1 + z + n_content(A) + n_content(B), z the metric standardised over the pairs; a random "
         "intercept and a random slope of z per category (unstructured covariance); REML; Wald z test of z's "
         "fixed slope, two-sided")
METHODS = ("lbfgs", "bfgs", "powell")
"""Optimisers tried in turn until one converges (statsmodels' ``fit(method=...)``)."""


def _rounded(x: float) -> float:
    return float(f"{x:.{DIGITS}g}") if np.isfinite(x) else float("nan")


def fit_slope(y: np.ndarray, x: np.ndarray, covariates: np.ndarray, groups: np.ndarray, *, level: float
              ) -> dict[str, Any]:
    """The mixed model of ``y`` (n,) on the standardised ``x`` (n,) and ``covariates`` (n, k), random intercept
    and slope by ``groups`` (n,): the fixed slope, its standard error, Wald p and interval at ``level``, the
    random effects' standard deviations, whether the fit converged and with which optimiser. NaN (and
    ``converged`` false) where ``x`` is constant or no optimiser converges."""
    import statsmodels.api as sm
    from scipy import stats as sps
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float)
    nan = {"slope": np.nan, "se": np.nan, "p": np.nan, "low": np.nan, "high": np.nan, "sd_intercept": np.nan,
           "sd_slope": np.nan, "converged": False, "method": None}
    sd = x.std()
    if not np.isfinite(sd) or sd <= 1e-12 * max(1.0, float(np.abs(x).max())):
        return nan
    z = (x - x.mean()) / sd
    exog = np.column_stack([np.ones_like(z), z, np.asarray(covariates, dtype=float).reshape(z.size, -1)])
    exog_re = np.column_stack([np.ones_like(z), z])
    for method in METHODS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", UserWarning)
            try:
                res = sm.MixedLM(y, exog, groups=np.asarray(groups), exog_re=exog_re).fit(reml=True, method=method)
                converged = bool(res.converged)
                slope, se = float(res.fe_params[1]), float(res.bse_fe[1])
                cov_re = np.asarray(res.cov_re, dtype=float)
            except (ConvergenceWarning, np.linalg.LinAlgError, ValueError):
                continue
        if not (converged and np.isfinite(slope) and np.isfinite(se) and se > 0):
            continue
        q = float(sps.norm.ppf((1.0 + level) / 2.0))
        return {"slope": _rounded(slope), "se": _rounded(se), "p": _rounded(float(2 * sps.norm.sf(abs(slope / se)))),
                "low": _rounded(slope - q * se), "high": _rounded(slope + q * se),
                "sd_intercept": _rounded(float(np.sqrt(max(cov_re[0, 0], 0.0)))),
                "sd_slope": _rounded(float(np.sqrt(max(cov_re[1, 1], 0.0)))), "converged": True, "method": method}
    return nan


def mixed_results(values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], *, lengths: Mapping[str, np.ndarray],
                  preference: np.ndarray, category_of_pair: np.ndarray, layer: int, level: float,
                  alpha: float) -> Mixed:
    """The ``mixed`` object of ``pair_models.json``: :func:`fit_slope` of every (policy, pooling, metric) at
    ``layer`` (``values[policy][pooling][metric]``: (V, n)), with the policy's content-token counts of A and B
    (``lengths[policy]``: (n, 2)) as fixed covariates."""
    rows: dict[str, list[Any]] = {k: [] for k in ("policy", "pooling", "metric")}
    fits: list[dict[str, Any]] = []
    for key, poolings in values.items():
        for p, metrics in poolings.items():
            for m, v in metrics.items():
                rows["policy"].append(key)
                rows["pooling"].append(p)
                rows["metric"].append(m)
                fits.append(fit_slope(preference, np.asarray(v)[layer], lengths[key], category_of_pair, level=level))
    why = "the metric is constant over the pairs, or no optimiser converged"
    col = {k: np.array([f[k] for f in fits], dtype=float) for k in ("slope", "se", "p", "low", "high", "sd_intercept",
                                                                     "sd_slope")}
    conv = np.array([f["converged"] for f in fits], dtype=bool)
    return Mixed(model=MODEL, layer=int(layer), ci_level=float(level), alpha=float(alpha),
                 n_groups=int(np.unique(np.asarray(category_of_pair)).size), n_converged=int(conv.sum()),
                 n_below_alpha=int((np.nan_to_num(col["p"], nan=1.0) <= alpha).sum()),
                 tests=MixedTests(**rows, **{k: missing.series(col[k], why) for k in col},
                                  converged=conv.tolist(), method=[f["method"] or "" for f in fits]))


__all__: Sequence[str] = ("DIGITS", "METHODS", "MODEL", "fit_slope", "mixed_results")
