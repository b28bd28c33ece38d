"""Seed 004: the anisotropy profile of the token states of the anisotropy prompts, per layer.

Per layer, from the n x D matrix X of token states: the covariance spectrum ``lambda = s^2 / (n-1)``
from the singular values ``s`` of the centred X (an SVD of the n x D matrix, never the D x D
covariance), padded with zeros to D values and floored at 1e-10 as the seed's ``eigvalsh`` path;
eigenvalue variance, lambda1 / sum(lambda), effective rank exp(H(lambda / sum)), mean cosine to the
mean state, variance share of the top 1/10/50 components, the top of the spectrum. L* = argmax of
lambda1 / sum; the seed's bell-curve test fits a line before and after L*.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numba import njit

from uaprobe.analysis.inference import curves, stats
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.geometry import (Anisotropy, AnisotropySignChange, AnisotropyVariant, BellCurve,
                                     CorrelationSignChanges, LineFit, LStarBootstrap, VariantBellCurve)
from uaprobe.analysis.compute.workers import ordered_map

EIGEN_FLOOR = 1e-10
"""Seed 004 floors eigenvalues at this value (``np.maximum(eigenvalues, 1e-10)``)."""
TOP_SHARES = (1, 10, 50)
NO_L_STAR = "lambda1/sum is undefined at every layer"
ZERO_COVARIANCE_RELATIVE = 1e-24
"""A layer whose centred sum of squares is below this fraction of its raw sum of squares has no
covariance (all token states the same vector): its spectrum measures are undefined, not the
floor's artefacts (lambda1/sum = 1/D, effective rank = D)."""


def select_tokens(*, states: np.ndarray, special: np.ndarray, pooling_drop: str) -> tuple[np.ndarray, str]:
    """Token states to use: (T, L+1, D) -> (L+1, n, D) float64 and the selection's name.

    ``pooling_drop == "special"``: content tokens only (``"content"``); ``"first"``: every token,
    as seed 004 did (``"all"``).
    """
    if pooling_drop == "special":
        keep, name = ~np.asarray(special, dtype=bool), "content"
    else:
        keep, name = np.ones(states.shape[0], dtype=bool), "all"
    return np.swapaxes(np.asarray(states[keep], dtype=np.float64), 0, 1), name


def covariance_spectrum(x: np.ndarray) -> np.ndarray:
    """Eigenvalues of the covariance of each layer's rows: x (L, n, D) -> (L, D), descending,
    from the SVD of the centred n x D matrices, padded with zeros to D and floored at 1e-10."""
    n, d = x.shape[-2], x.shape[-1]
    centred = x - x.mean(axis=-2, keepdims=True)
    s = np.linalg.svd(centred, compute_uv=False)  # (L, min(n, d)), descending
    lam = np.zeros(x.shape[:-2] + (d,))
    lam[..., : s.shape[-1]] = s * s / max(n - 1, 1)
    return np.maximum(lam, EIGEN_FLOOR)


@dataclass(frozen=True)
class Profile:
    """Per-layer anisotropy measures, arrays (L+1,) unless noted."""

    eigenvalue_variance: np.ndarray
    lambda1_ratio: np.ndarray
    effective_rank: np.ndarray
    mean_cos_to_mean: np.ndarray
    mean_cos_reason: np.ndarray
    var_top: dict[int, np.ndarray]
    spectrum: np.ndarray
    """(L+1, m) leading eigenvalues."""
    spectrum_reason: np.ndarray
    """(L+1,) why the spectrum measures of a layer are undefined (``""`` where defined)."""


def anisotropy_profile(x: np.ndarray, *, spectrum_top: int) -> Profile:
    """Seed 004's measures for x (L+1, n, D) (n >= 2 token states)."""
    lam = covariance_spectrum(x)
    total = lam.sum(axis=-1)
    norm = lam / total[..., None]
    entropy = -(norm * np.log(norm + 1e-10)).sum(axis=-1)
    cum = np.cumsum(lam, axis=-1) / total[..., None]
    d = lam.shape[-1]
    mean_vec = x.mean(axis=-2)  # (L, D)
    mean_norm = np.linalg.norm(mean_vec, axis=-1)
    dots = np.einsum("lnd,ld->ln", x, mean_vec)
    row_norms = np.linalg.norm(x, axis=-1)
    cos = dots / (row_norms * mean_norm[:, None] + 1e-10)
    zero_mean = mean_norm <= 1e-10
    centred_ss = ((x - mean_vec[:, None, :]) ** 2).sum(axis=(-2, -1))
    flat = centred_ss <= ZERO_COVARIANCE_RELATIVE * (x * x).sum(axis=(-2, -1))
    spectrum_reason = stats.first_reason((flat, "the token states are all the same vector (zero covariance)"))

    def defined(v: np.ndarray) -> np.ndarray:
        return np.where(flat.reshape(flat.shape + (1,) * (v.ndim - 1)), np.nan, v)

    return Profile(
        eigenvalue_variance=defined(lam.var(axis=-1)),
        lambda1_ratio=defined(lam[..., 0] / total),
        effective_rank=defined(np.exp(entropy)),
        mean_cos_to_mean=np.where(zero_mean, np.nan, cos.mean(axis=-1)),
        mean_cos_reason=stats.first_reason((zero_mean, "the mean token state is the zero vector")),
        var_top={k: defined(cum[..., min(k, d) - 1]) for k in TOP_SHARES},
        spectrum=defined(lam[..., : min(spectrum_top, d)]),
        spectrum_reason=spectrum_reason,
    )


def _line(fit: stats.LineFit) -> LineFit:
    return LineFit(n_layers=fit.n, **{f: missing.value(getattr(fit, f), fit.reason.get(f))
                                      for f in ("slope", "intercept", "r", "p")})


def _bell_curve(ratio: np.ndarray, l_star: int | None, *, alpha: float | None) -> BellCurve:
    """The seed's bell-curve test around L* (``alpha``: with the slopes' significance)."""
    if l_star is None:
        return BellCurve(is_bell_curve=missing.flag(False, defined=False, reason=NO_L_STAR))
    fits = {"before": stats.line_fit(ratio[:l_star]), "after": stats.line_fit(ratio[l_star:])}
    slopes_defined = np.isfinite(fits["before"].slope) and np.isfinite(fits["after"].slope)
    reason = "; ".join(f"{name}: {fit.reason['slope']}" for name, fit in fits.items() if "slope" in fit.reason)
    significant = {} if alpha is None else {"is_bell_curve_significant": _significant(fits["before"], fits["after"],
                                                                                      alpha)}
    return BellCurve(before=_line(fits["before"]), after=_line(fits["after"]),
                     is_bell_curve=missing.flag(fits["before"].slope > 0 and fits["after"].slope < 0,
                                                defined=slopes_defined, reason=reason or "a slope is undefined"),
                     **significant)


def _sign_changes(l_star: int | None, sign_changes: Sequence[Mapping[str, Any]]) -> CorrelationSignChanges:
    """L* against the sign changes of r(UA, preference) (``sign_changes``: the mean pooling's, ``layerwise.json``)."""
    if l_star is None:
        return CorrelationSignChanges(
            pooling="mean", sign_changes=[AnisotropySignChange(**sc, distance=missing.label(None, NO_L_STAR))
                                          for sc in sign_changes],
            **{key: missing.label(None, NO_L_STAR) for key in ("last_inversion_layer", "distance_to_last_inversion",
                                                               "nearest_sign_change_layer", "distance_to_nearest")})
    changes = [AnisotropySignChange(**dict(sc, distance=int(l_star - sc["layer_after"]))) for sc in sign_changes]
    inversions = [sc for sc in changes if sc.r_before > 0 > sc.r_after]
    never = "r(UA, preference) never changes from positive to negative"
    nearest = min(changes, key=lambda sc: (abs(sc.distance), sc.layer_after)) if changes else None
    no_change = "r(UA, preference) never changes sign"
    return CorrelationSignChanges(
        pooling="mean", sign_changes=changes,
        last_inversion_layer=inversions[-1].layer_after if inversions else missing.label(None, never),
        distance_to_last_inversion=inversions[-1].distance if inversions else missing.label(None, never),
        nearest_sign_change_layer=nearest.layer_after if nearest else missing.label(None, no_change),
        distance_to_nearest=nearest.distance if nearest else missing.label(None, no_change))


def anisotropy_results(*, profile: Profile, header: Mapping[str, Any], n_layers: int, token_selection: str,
                       n_tokens: int, n_prompts: int, hidden_size: int, sign_changes: Sequence[Mapping[str, Any]],
                       tolerance: float, alpha: float | None = None,
                       bootstrap: Callable[[int, list[int]], LStarBootstrap] | None = None,
                       variants: Mapping[str, AnisotropyVariant] | None = None) -> Anisotropy:
    """``anisotropy.json`` of ``profile``, with the keys every results file starts with (``header``);
    ``sign_changes`` are the mean-pooling records of layerwise r; ``alpha``, the bell curve's significance;
    ``bootstrap(l_star, ties)``, L* over resamples of the prompts; ``variants``, the other token selections."""
    ratio = profile.lambda1_ratio
    why = profile.spectrum_reason
    l_star = stats.peak(ratio)
    ties = l_star_ties(ratio, tolerance=tolerance)
    return record(
        Anisotropy, header, token_selection=token_selection, n_tokens=n_tokens, n_prompts=n_prompts,
        hidden_size=hidden_size,
        eigenvalue_variance=missing.series(profile.eigenvalue_variance, why),
        lambda1_ratio=missing.series(ratio, why),
        effective_rank=missing.series(profile.effective_rank, why),
        mean_cos_to_mean=missing.series(profile.mean_cos_to_mean, profile.mean_cos_reason),
        **{f"var_top{k}": missing.series(v, why) for k, v in profile.var_top.items()},
        spectrum=missing.series(profile.spectrum, why[:, None]),
        spectrum_top=int(profile.spectrum.shape[-1]),
        l_star=missing.label(None, NO_L_STAR) if l_star is None else l_star,
        l_star_depth_pct=(missing.value(np.nan, NO_L_STAR) if l_star is None
                          else float(curves.depth_pct([l_star], n_layers=n_layers)[0])),
        l_star_value=missing.value(np.nan, NO_L_STAR) if l_star is None else float(ratio[l_star]),
        l_star_tolerance=tolerance, l_star_ties=ties,
        **({} if l_star is None or bootstrap is None else {"l_star_bootstrap": bootstrap(l_star, ties)}),
        bell_curve=_bell_curve(ratio, l_star, alpha=alpha),
        correlation_sign_changes=_sign_changes(l_star, sign_changes),
        variants=dict(variants or {}))


# --------------------------------------------------------------------------------------------
# With and without position 0; L* ties; the bell curve's p-values; a bootstrap over the prompts

MIN_ANISOTROPY_TOKENS = 2


def position0(prompt_index: np.ndarray) -> np.ndarray:
    """(T,) bool: the first token of every prompt (prompts are stored consecutively)."""
    idx = np.asarray(prompt_index)
    first = np.ones(idx.shape, dtype=bool)
    first[1:] = idx[1:] != idx[:-1]
    return first


def l_star_ties(ratio: np.ndarray, *, tolerance: float) -> list[int]:
    """Layers whose lambda1/sum is within ``tolerance`` (a fraction) of the maximum: they tie with L*."""
    r = np.asarray(ratio, dtype=float)
    if not np.isfinite(r).any():
        return []
    top = float(np.nanmax(r))
    return [int(i) for i in np.flatnonzero(np.isfinite(r) & (r >= top - tolerance * abs(top)))]


@njit(cache=True, boundscheck=False, nogil=True)
def _weighted_centred(g: np.ndarray, row_mean: np.ndarray, mean: np.ndarray,
                      root: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``(g - row_mean[:, :, None] - row_mean[:, None, :] + mean[:, None, None]) * root[None, :, None] *
    root[None, None, :]`` for g (L, T, T), row_mean (L, T), mean (L,), root (T,): the same operations
    on each element in the same order as numpy's expression, in one pass and no temporaries."""
    layers, t = g.shape[0], g.shape[1]
    out = np.empty((layers, t, t))
    for layer in range(layers):
        c = mean[layer]
        for i in range(t):
            a, r = row_mean[layer, i], root[i]
            for j in range(t):
                out[layer, i, j] = ((((g[layer, i, j] - a) - row_mean[layer, j]) + c) * r) * root[j]
    return out


def lambda1_ratio_weighted(gram: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """lambda1 / sum(lambda) of the covariance of tokens repeated ``weights`` times, from their Gram matrices.

    ``gram`` (L, T, T) = X X^T of the T token states of each layer; ``weights`` (T,) >= 0 integer
    multiplicities. With W = diag(w), s = sum(w) and the weighted mean mu, the covariance's non-zero
    eigenvalues are those of W^(1/2) (X - 1 mu^T)(X - 1 mu^T)^T W^(1/2) (T x T); the common
    factor 1 / (s - 1) cancels in the ratio. The seed's floor of 1e-10 on the D - T zero
    eigenvalues is left out (a relative difference below 1e-7 for the prompts' states).
    """
    w = np.asarray(weights, dtype=float)
    keep = w > 0
    g = gram[:, keep][:, :, keep]
    w = w[keep]
    s = w.sum()
    gw = g @ w  # (L, T')
    wgw = gw @ w  # (L,)
    k = _weighted_centred(g, gw / s, wgw / (s * s), np.sqrt(w))
    lam = np.linalg.eigvalsh(k)  # ascending
    total = np.trace(k, axis1=-2, axis2=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, lam[:, -1] / total, np.nan)


def bootstrap_l_star(x: np.ndarray, prompt_of_token: np.ndarray, *, rng: np.random.Generator,
                     resamples: int) -> np.ndarray:
    """L* of every bootstrap resample of the prompts (drawn with replacement): x (L, T, D) -> (resamples,) int.

    A resample whose ratio is undefined at every layer gives -1.
    """
    prompts, token_prompt = np.unique(np.asarray(prompt_of_token), return_inverse=True)
    gram = x @ np.swapaxes(x, -1, -2)
    draws = rng.integers(0, prompts.size, size=(resamples, prompts.size))

    def l_star(row: np.ndarray) -> int:
        ratio = lambda1_ratio_weighted(gram, np.bincount(row, minlength=prompts.size)[token_prompt])
        return int(np.nanargmax(ratio)) if np.isfinite(ratio).any() else -1

    # each resample is one unit on the worker threads (its eigenvalues on one thread)
    return np.array(ordered_map(l_star, list(draws)), dtype=np.int64).reshape(resamples)


def _significant(before: stats.LineFit, after: stats.LineFit, alpha: float) -> bool:
    """Both slopes significant at ``alpha``, in the seed's directions (rising before L*, falling after)."""
    return bool(np.isfinite(before.p) and np.isfinite(after.p) and before.slope > 0 and after.slope < 0
                and before.p < alpha and after.p < alpha)


def _bell(ratio: np.ndarray, l_star: int, alpha: float) -> VariantBellCurve:
    """The slopes before and after L* with their p-values and whether both are significant (:func:`_significant`)."""
    before, after = stats.line_fit(ratio[:l_star]), stats.line_fit(ratio[l_star:])
    few = "too few layers"
    return VariantBellCurve(slope_before=missing.value(before.slope, few), p_before=missing.value(before.p, few),
                            slope_after=missing.value(after.slope, few), p_after=missing.value(after.p, few),
                            is_bell_curve_significant=_significant(before, after, alpha))


def _variant(xv: np.ndarray, profile: Profile, *, tolerance: float, alpha: float) -> AnisotropyVariant:
    """The lambda1/sum profile of one token selection, its L* and the bell curve's slopes."""
    ratio = profile.lambda1_ratio
    ls = stats.peak(ratio)
    bell = None if ls is None else _bell(ratio, ls, alpha)
    return AnisotropyVariant(
        n_tokens=int(xv.shape[1]), lambda1_ratio=missing.series(ratio, profile.spectrum_reason),
        l_star=ls if ls is not None else missing.label(None, "lambda1/sum is undefined everywhere"),
        l_star_ties=l_star_ties(ratio, tolerance=tolerance), **({} if bell is None else {"bell_curve": bell}))


def analyze_anisotropy(*, states: np.ndarray, special: np.ndarray, prompt_index: np.ndarray, pooling_drop: str,
                       n_layers: int, n_prompts: int, params: Any, sign_changes: Sequence[Mapping[str, Any]],
                       rng: np.random.Generator, source: str, header: Mapping[str, Any]) -> Anisotropy:
    """``anisotropy.json``: seed 004's profile on the policy's tokens, L* with its ties and a bootstrap over
    the prompts, the bell curve with its slopes' p-values, and the lambda1/sum profile with every token
    (position 0 in) and with position 0 of every prompt and the special tokens out."""
    from uaprobe.errors import UAProbeError

    x, selection = select_tokens(states=states, special=special, pooling_drop=pooling_drop)
    if x.shape[1] < MIN_ANISOTROPY_TOKENS:
        raise UAProbeError(f"{source}: {x.shape[1]} anisotropy token state(s) after selecting {selection} tokens; "
                           f"the profile needs at least {MIN_ANISOTROPY_TOKENS}")
    first = position0(prompt_index)
    selections = (("all_tokens", np.ones(len(special), dtype=bool)),
                  ("sink_excluded", ~np.asarray(special, dtype=bool) & ~first))
    variant_states = [np.swapaxes(np.asarray(states[sel], dtype=np.float64), 0, 1) for _, sel in selections]
    # the three profiles' spectra are independent units on the worker threads
    prof, *variant_profiles = ordered_map(lambda job: anisotropy_profile(job[0], spectrum_top=job[1]),
                                          [(x, params.spectrum_top)] + [(xv, 1) for xv in variant_states])
    tol = params.robustness.l_star_tolerance
    keep = ~np.asarray(special, dtype=bool) if pooling_drop == "special" else np.ones(len(special), dtype=bool)

    def bootstrap(l_star: int, ties: list[int]) -> LStarBootstrap:
        boot = bootstrap_l_star(x, np.asarray(prompt_index)[keep], rng=rng,
                                resamples=params.robustness.anisotropy_bootstrap)
        counts = np.bincount(boot[boot >= 0], minlength=n_layers + 1)
        return LStarBootstrap(resamples=int(boot.size), counts=counts.tolist(),
                              share_at_l_star=float((boot == l_star).mean()),
                              share_in_ties=float(np.isin(boot, ties).mean()), mode=int(counts.argmax()))

    return anisotropy_results(
        profile=prof, header=header, n_layers=n_layers, token_selection=selection, n_tokens=int(x.shape[1]),
        n_prompts=n_prompts, hidden_size=int(x.shape[2]), sign_changes=sign_changes, tolerance=tol,
        alpha=params.alpha, bootstrap=bootstrap,
        variants={name: _variant(xv, pv, tolerance=tol, alpha=params.alpha)
                  for (name, _), xv, pv in zip(selections, variant_states, variant_profiles)})
