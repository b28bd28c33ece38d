"""The representation axis: how pooled states are transformed before any analysis reads them.

Every transform works layer by layer over *all* statements of both framings at that layer (the
rows of one pooled array, ``(N, L+1, D)``; a pre-norm array ``(N, D)`` is one layer):

- ``raw``: the states unchanged (the same array object, so the default changes no byte);
- ``zscore``: each dimension centred on its mean over the statements and divided by its standard
  deviation (``ddof = 0``); a dimension with zero variance is dropped, written as zeros so that
  every layer keeps ``D`` columns (a zero column adds nothing to a dot product or a norm, so every
  cosine and distance equals the one with the dimension removed);
- ``abtt`` (all-but-the-top, Mu & Viswanath 2018): the same mean removed, then the projections on
  the top ``k`` principal directions of the centred states removed. The projection ``V_k V_k^T``
  does not depend on the signs eigensolvers give the directions.

Only pooled states are transformed; the token-level analyses (anisotropy spectra, the sink
statistics) read the raw token states. Everything in float64.
"""

from __future__ import annotations


import numpy as np
from scipy import linalg

from uaprobe.names import REPRESENTATIONS, Representation



def _top_eigh(xc: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """The ``k`` largest eigenpairs of the centred states' smaller Gram form: ``(values (k,)
    descending, vectors, in_rows)``; ``in_rows`` says the vectors are (N, k) left singular vectors
    (from ``X X^T``), else (D, k) principal directions (from ``X^T X``)."""
    n, d = xc.shape
    in_rows = n <= d
    g = xc @ xc.T if in_rows else xc.T @ xc
    m = g.shape[0]
    k = min(k, m)
    w, v = linalg.eigh(g, subset_by_index=[m - k, m - 1])
    return np.clip(w[::-1], 0.0, None), v[:, ::-1], in_rows


def _check_removable(xc: np.ndarray, k: int) -> None:
    """``k`` directions can be removed from centred states (N, D): fewer than their rank bound
    ``min(N - 1, D)`` (as many leave rounding noise; :mod:`uaprobe.analysis.run.limits` refuses such an
    ``analysis.abtt_k`` before the stage starts)."""
    bound = min(xc.shape[0] - 1, xc.shape[1])
    if not 1 <= k < bound:
        raise ValueError(f"abtt: k = {k} directions cannot be removed from states of rank at most {bound} "
                         f"({xc.shape[0]} statements x {xc.shape[1]} dimensions); k must be in [1, {bound - 1}]")


def remove_top(xc: np.ndarray, k: int) -> np.ndarray:
    """Centred states ``xc`` (N, D) less their projections on their top ``k`` principal directions
    (``k`` below the rank bound ``min(N - 1, D)``)."""
    _check_removable(xc, k)
    _, v, in_rows = _top_eigh(xc, k)
    if in_rows:  # X V_k V_k^T = U_k U_k^T X (U_k: left singular vectors)
        return xc - v @ (v.T @ xc)
    return xc - (xc @ v) @ v.T


def zscore_layer(x: np.ndarray) -> np.ndarray:
    """One layer's states (N, D) standardized per dimension (ddof 0), zero-variance dimensions as zeros."""
    x = np.asarray(x, dtype=np.float64)
    constant = np.ptp(x, axis=0) == 0
    xc = x - x.mean(axis=0)
    return np.where(constant, 0.0, xc / np.where(constant, 1.0, xc.std(axis=0)))


def transform_layer(x: np.ndarray, kind: Representation, *, k: int) -> np.ndarray:
    """One layer's states (N, D) under ``kind`` (float64; ``raw`` returns ``x`` itself)."""
    if kind == "raw":
        return x
    if kind == "zscore":
        return zscore_layer(x)
    if kind == "abtt":
        x = np.asarray(x, dtype=np.float64)
        return remove_top(x - x.mean(axis=0), k)
    raise ValueError(f"unknown representation {kind!r}; expected one of {REPRESENTATIONS}")


def transform(states: np.ndarray, kind: Representation, *, k: int = 5) -> np.ndarray:
    """Pooled states (N, L+1, D) or one layer (N, D) under ``kind``, layer by layer.

    ``raw`` returns ``states`` itself (no copy, no cast); the others a new float64 array."""
    if kind == "raw":
        return states
    if kind not in REPRESENTATIONS:
        raise ValueError(f"unknown representation {kind!r}; expected one of {REPRESENTATIONS}")
    if states.ndim == 2:
        return transform_layer(states, kind, k=k)
    out = np.empty(states.shape, dtype=np.float64)
    for layer in range(states.shape[1]):
        out[:, layer] = transform_layer(states[:, layer], kind, k=k)
    return out


def transform_all(arrays: dict[str, np.ndarray], kind: Representation, *, k: int = 5) -> dict[str, np.ndarray]:
    """Every array of a ``pooling -> states`` mapping under ``kind`` (``raw``: the same mapping)."""
    if kind == "raw":
        return arrays
    return {name: transform(x, kind, k=k) for name, x in arrays.items()}


def variance_shares(x: np.ndarray, tops: tuple[int, ...]) -> np.ndarray:
    """Share of the centred variance of ``x`` (N, D) on its top-t principal components, for each t
    of ``tops``: ``sum of the t largest eigenvalues / trace``. NaN where the states are constant."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean(axis=0)
    total = float((xc * xc).sum())
    if total <= 0.0:
        return np.full(len(tops), np.nan)
    w, _, _ = _top_eigh(xc, max(tops))
    return shares_of(w, total, tops)


def shares_of(top_values: np.ndarray, total: float, tops: tuple[int, ...]) -> np.ndarray:
    """Cumulative shares of ``total`` of the descending ``top_values`` at each t of ``tops``."""
    if total <= 0.0:
        return np.full(len(tops), np.nan)
    cum = np.cumsum(top_values)
    return np.array([cum[min(t, len(cum)) - 1] / total for t in tops])


def abtt_and_shares(x: np.ndarray, *, k: int, tops: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """One layer (N, D): its ``abtt`` transform and :func:`variance_shares`, from one eigensolution."""
    x = np.asarray(x, dtype=np.float64)
    xc = x - x.mean(axis=0)
    _check_removable(xc, k)
    total = float((xc * xc).sum())
    w, v, in_rows = _top_eigh(xc, max(k, *tops))
    vk = v[:, :k]
    out = xc - vk @ (vk.T @ xc) if in_rows else xc - (xc @ vk) @ vk.T
    return out, shares_of(w, total, tops)
