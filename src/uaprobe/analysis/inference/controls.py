"""Controls that a correlation between UA and the preference must survive before it means anything.

- **Length.** A and B statements differ in length, and the per-token mean NLL falls with length.
  :func:`partial_r` correlates two variables after regressing both on covariates (the difference in
  content tokens B - A, optionally with category fixed effects).
- **A model-free lexical baseline.** :func:`lexical_embeddings` gives every token id a seeded
  random Gaussian vector and mean-pools a statement's content tokens: the same UA computed from
  these embeddings knows which words the statements share and nothing else.
- **A size-matched null.** :func:`size_matched_labels` assigns the pairs at random to groups of the
  categories' sizes; r across those groups is what the category-level r would be if the
  categories were arbitrary sets of pairs.
- **One category.** :func:`most_influential` finds, from the data, the category whose removal
  changes r most.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class PartialCorrelation:
    r: float
    p: float
    """Two-sided t-test p with ``n - 2 - k`` degrees of freedom (k covariates besides the intercept)."""
    n: int
    k: int
    reason: str


def residualize(y: np.ndarray, covariates: np.ndarray) -> np.ndarray:
    """Residuals of the least-squares fit of ``y`` (n,) on an intercept and ``covariates`` (n, k)."""
    y = np.asarray(y, dtype=float)
    z = np.column_stack([np.ones(y.size), np.asarray(covariates, dtype=float).reshape(y.size, -1)])
    coef, *_ = np.linalg.lstsq(z, y, rcond=None)
    return y - z @ coef


def partial_r(x: np.ndarray, y: np.ndarray, covariates: np.ndarray) -> PartialCorrelation:
    """Pearson r of ``x`` and ``y`` (n,) after removing from both their linear fit on ``covariates`` (n, k).

    The covariate matrix may be rank-deficient (``lstsq``); ``k`` counts its rank, which sets the
    degrees of freedom of the p-value.
    """
    return partial_r_rows(np.asarray(x, dtype=float)[None, :], y, covariates)[0]


def partial_r_rows(x: np.ndarray, y: np.ndarray, covariates: np.ndarray) -> list[PartialCorrelation]:
    """:func:`partial_r` of every row of ``x`` (M, n) with the same ``y`` and covariates; ``y``'s
    residuals and the covariates' rank are computed once."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    n = y.size
    z = np.asarray(covariates, dtype=float).reshape(n, -1)
    k = int(np.linalg.matrix_rank(np.column_stack([np.ones(n), z]))) - 1
    df = n - 2 - k
    shared_ok = np.isfinite(y).all() and np.isfinite(z).all()
    ry = residualize(y, z) if shared_ok and df >= 1 else None
    out: list[PartialCorrelation | None] = []
    tested: list[tuple[int, float, float]] = []  # (row, r, t) of the rows whose p comes from the t distribution
    for row in x:
        if not (shared_ok and np.isfinite(row).all()):
            out.append(PartialCorrelation(np.nan, np.nan, n, k, "non-finite input"))
            continue
        if ry is None:
            out.append(PartialCorrelation(np.nan, np.nan, n, k, f"{n} points leave no degree of freedom "
                                                                f"after {k} covariate(s)"))
            continue
        rx = residualize(row, z)
        scale = max(float(np.abs(row).max(initial=0.0)), float(np.abs(y).max(initial=0.0)), 1.0)
        if np.abs(rx).max(initial=0.0) <= 1e-12 * scale or np.abs(ry).max(initial=0.0) <= 1e-12 * scale:
            out.append(PartialCorrelation(np.nan, np.nan, n, k, "a variable is explained exactly by the covariates"))
            continue
        r = float(np.clip(np.dot(rx, ry) / np.sqrt(np.dot(rx, rx) * np.dot(ry, ry)), -1.0, 1.0))
        if abs(r) < 1.0:
            tested.append((len(out), r, r * np.sqrt(df / max(1e-300, (1.0 - r) * (1.0 + r)))))
            out.append(None)
        else:
            out.append(PartialCorrelation(r, 0.0, n, k, ""))
    if tested:  # one call of the t distribution for every row (elementwise: the same values as one call each)
        sf = sps.t.sf(np.abs(np.array([t for _, _, t in tested])), df)
        for (i, r, _), tail in zip(tested, sf):
            out[i] = PartialCorrelation(r, float(2.0 * tail), n, k, "")
    return [c for c in out if c is not None]


def category_indicators(category_of_pair: np.ndarray, n_categories: int) -> np.ndarray:
    """(n, C) the category fixed effects: column c is 1 for the pairs of category c, else 0 (beside an
    intercept, any C - 1 of them span the same columns)."""
    cat = np.asarray(category_of_pair)
    return (cat[:, None] == np.arange(n_categories)[None, :]).astype(float)


def lexical_embeddings(token_ids: np.ndarray, offsets: np.ndarray, keep: np.ndarray, *, dim: int,
                       seed: int) -> np.ndarray:
    """Mean of seeded random Gaussian vectors of each statement's kept tokens: -> (N, dim) float64.

    Every distinct token id gets one N(0, I) vector, drawn in ascending order of the ids from
    ``numpy.random.default_rng(seed)``, so a token has the same vector in every statement and the
    vectors do not depend on the statements' order. ``keep`` (total,) bool selects the tokens
    pooled (content tokens); a statement with none kept gets the zero vector.
    """
    ids = np.asarray(token_ids, dtype=np.int64)
    keep = np.asarray(keep, dtype=bool)
    vocab, inverse = np.unique(ids, return_inverse=True)
    table = np.random.default_rng(seed).standard_normal((vocab.size, dim))
    n = len(offsets) - 1
    owner = np.repeat(np.arange(n), np.diff(offsets))
    # each statement's kept tokens are one run of ``owner[keep]`` (nondecreasing); adding the j-th
    # token of every run at once, j = 0, 1, ..., sums each statement in token order from zero, as
    # ``np.add.at`` does (the same bytes), with one vectorised step per token position
    kept, values = owner[keep], table[inverse[keep]]
    counts = np.bincount(kept, minlength=n)
    position = np.arange(kept.size) - np.repeat(np.cumsum(counts) - counts, counts)  # within its statement
    sums = np.zeros((n, dim))
    for j in range(int(counts.max(initial=0))):
        at = position == j
        sums[kept[at]] += values[at]
    return sums / np.maximum(counts, 1).astype(float)[:, None]


def size_matched_labels(rng: np.random.Generator, *, sizes: np.ndarray, partitions: int) -> np.ndarray:
    """(partitions, n) random assignments of n = sum(sizes) members to groups of exactly ``sizes``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    base = np.repeat(np.arange(sizes.size), sizes)
    return rng.permuted(np.broadcast_to(base, (partitions, base.size)), axis=1)


def most_influential(r: float, loo_r: np.ndarray) -> int | None:
    """Index of the group whose removal moves r most (|r - r_loo| largest, first on ties); None if undefined."""
    shift = np.abs(np.asarray(loo_r, dtype=float) - r)
    if not np.isfinite(r) or not np.isfinite(shift).any():
        return None
    return int(np.nanargmax(shift))
