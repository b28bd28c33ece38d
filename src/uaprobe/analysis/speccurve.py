"""The specification curve (Simonsohn, Simmons & Nelson 2020) of the category-level r(UA, preference).

A *specification* is one choice of every analytic option the params allow: pooling (mean, last,
first) x position-0 policy (the extraction's default, ``sink_excluded``) x representation (raw,
zscore, abtt) x NLL (per-token mean or sum) x layer (0..L) x left-out category (none or one of the
C categories). Its statistic is the Pearson r over the categories (C, or C - 1 with one left out)
of the category's UA = U(A) - U(B) (:mod:`uaprobe.analysis.dimensions` computes U with the
sum-of-unit-vectors identity) and its mean preference NLL(B) - NLL(A).

Inference at C = 6 categories is by exact permutation only:

- per specification: every order of its categories' preferences (C! = 720, or 120 with one left
  out), two-sided, ``|r_perm| >= |r|`` (the identity included);
- jointly, for the whole curve: each permutation ``pi`` of the C categories relabels the
  preference (category c gets the preference of ``pi(c)``) in *every* specification at once (a
  leave-one-out specification pairs the UA of the kept categories with the permuted preference of
  those same categories) and the curve-level statistics are recomputed: the median r (two-sided:
  ``|median_pi| >= |median|``) and the share of specifications with r > 0 (two-sided:
  ``|share_pi - 1/2| >= |share - 1/2|``); over all specifications and over those without a
  left-out category. Each p is the share of the C! relabellings, the identity included, so the
  smallest is 1/C!.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from uaprobe.analysis.nan_reasons import NanReasons
from uaprobe.analysis.stats import TIE_TOLERANCE
from uaprobe.errors import UAProbeError
from uaprobe.names import REPRESENTATIONS

MAX_CATEGORIES = 8
"""The exact joint test enumerates C! relabellings of every specification: at most 8! = 40320."""


def all_orders(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, identity first: (n!, n) int."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(math.factorial(n), n)


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
    """(C + 1,) how many orders each left-out option's p enumerates."""


def curve_r(ua: np.ndarray, pref: np.ndarray) -> CurveStats:
    """The r of every specification, under every relabelling, and each one's exact p.

    Args:
        ua: (S, C) UA of each category for each base row (pooling x policy x representation x layer).
        pref: (K, C) mean preference of each category for each NLL kind.
    """
    ua = np.asarray(ua, dtype=np.float64)
    pref = np.asarray(pref, dtype=np.float64)
    n_cat = ua.shape[-1]
    if not 3 <= n_cat <= MAX_CATEGORIES:
        raise UAProbeError(f"specification curve: {n_cat} categories; the exact test needs 3..{MAX_CATEGORIES}")
    orders = all_orders(n_cat)
    permuted = pref[:, orders]  # (K, C!, C): category c gets the preference of orders[pi, c]
    keeps = [np.ones(n_cat, dtype=bool)] + [np.arange(n_cat) != c for c in range(n_cat)]
    r_perm = np.full((orders.shape[0], ua.shape[0], pref.shape[0], n_cat + 1), np.nan)
    spec_p = np.full((ua.shape[0], pref.shape[0], n_cat + 1), np.nan)
    spec_orders = np.zeros(n_cat + 1, dtype=np.int64)
    for j, keep in enumerate(keeps):
        x = _normalised(ua[:, keep])  # (S, m)
        y = _normalised(permuted[:, :, keep])  # (K, C!, m)
        r_perm[:, :, :, j] = np.clip(np.einsum("sm,kpm->psk", x, y), -1.0, 1.0)
        # the per-specification test: every order of the kept categories' own preferences
        own = all_orders(int(keep.sum()))
        spec_orders[j] = own.shape[0]
        y_own = _normalised(pref[:, keep][:, own])  # (K, m!, m)
        r_own = np.clip(np.einsum("sm,kpm->skp", x, y_own), -1.0, 1.0)  # identity first
        observed = r_own[..., 0]
        hits = (np.abs(r_own) >= (np.abs(observed) - TIE_TOLERANCE)[..., None]).sum(axis=-1)
        spec_p[:, :, j] = np.where(np.isfinite(observed), hits / own.shape[0], np.nan)
    return CurveStats(r=r_perm[0], r_perm=r_perm, spec_p=spec_p, spec_orders=spec_orders)


@dataclass(frozen=True)
class JointTest:
    """The curve-level statistics and their exact joint permutation p."""

    n_specs: int
    median_r: float
    median_p: float
    share_positive: float
    share_p: float


def joint_test(r_perm: np.ndarray) -> JointTest:
    """Median r and share r > 0 of a curve under every relabelling: r_perm (P, S) with row 0 observed.

    Undefined specifications (NaN) are left out of every statistic."""
    finite = np.isfinite(r_perm[0])
    r = r_perm[:, finite]
    if r.shape[1] == 0:
        return JointTest(0, np.nan, np.nan, np.nan, np.nan)
    medians = np.median(r, axis=1)
    shares = (r > 0).mean(axis=1)
    med_p = float((np.abs(medians) >= np.abs(medians[0]) - TIE_TOLERANCE).mean())
    dev = np.abs(shares - 0.5)
    share_p = float((dev >= dev[0] - TIE_TOLERANCE).mean())
    return JointTest(int(r.shape[1]), float(medians[0]), med_p, float(shares[0]), share_p)


def _joint_body(t: JointTest, rec: NanReasons, where: str) -> dict[str, Any]:
    why = "no specification has a defined r"
    return {"n_specs": t.n_specs, "median_r": rec.value(f"{where}/median_r", t.median_r, why),
            "median_p": rec.value(f"{where}/median_p", t.median_p, why),
            "share_positive": rec.value(f"{where}/share_positive", t.share_positive, why),
            "share_p": rec.value(f"{where}/share_p", t.share_p, why)}


def curve_results(ua: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], pref: Mapping[str, np.ndarray], *,
                  categories: Sequence[str], policy_names: Mapping[str, str], rec: NanReasons) -> dict[str, Any]:
    """The body of ``specification_curve.json``.

    Args:
        ua: ``[policy][pooling][representation]`` -> (L+1, C) category UA.
        pref: NLL kind -> (C,) category mean preference.
        categories: the C category names.
        policy_names: policy key -> the name written (the default policy's ``pooling_drop``).
    """
    base: list[tuple[str, str, str, int]] = []
    rows: list[np.ndarray] = []
    for pooling in next(iter(ua.values())):
        for policy in ua:
            for kind in ua[policy][pooling]:
                values = ua[policy][pooling][kind]
                for layer in range(values.shape[0]):
                    base.append((pooling, policy_names[policy], kind, layer))
                    rows.append(values[layer])
    nll = list(pref)
    stats = curve_r(np.array(rows), np.array([pref[k] for k in nll]))
    n_cat = len(categories)
    left_out: list[str | None] = [None, *categories]
    s_idx, k_idx, j_idx = (a.ravel() for a in np.meshgrid(np.arange(len(base)), np.arange(len(nll)),
                                                           np.arange(n_cat + 1), indexing="ij"))
    r = stats.r[s_idx, k_idx, j_idx]
    p = stats.spec_p[s_idx, k_idx, j_idx]
    order = np.argsort(np.where(np.isfinite(r), r, np.inf), kind="stable")
    s_idx, k_idx, j_idx, r, p = s_idx[order], k_idx[order], j_idx[order], r[order], p[order]
    why = "UA or the preference is constant over the specification's categories"
    specs = {
        "pooling": [base[s][0] for s in s_idx], "policy": [base[s][1] for s in s_idx],
        "representation": [base[s][2] for s in s_idx], "nll": [nll[k] for k in k_idx],
        "layer": [base[s][3] for s in s_idx], "left_out": [left_out[j] for j in j_idx],
        "r": rec.series("specs/r", r, why), "permutation_p": rec.series("specs/permutation_p", p, why),
        "permutation_count": [int(stats.spec_orders[j]) for j in j_idx],
    }
    flat = stats.r_perm.reshape(stats.r_perm.shape[0], -1)
    no_lo = stats.r_perm[..., 0].reshape(stats.r_perm.shape[0], -1)
    return {
        "categories": list(categories),
        "n_specs": int(r.size),
        "choices": {"pooling": list(dict.fromkeys(b[0] for b in base)),
                    "policy": list(dict.fromkeys(b[1] for b in base)),
                    "representation": list(dict.fromkeys(b[2] for b in base)), "nll": nll,
                    "layer": sorted({b[3] for b in base}), "left_out": left_out},
        "relabellings": int(stats.r_perm.shape[0]),
        "specs": specs,
        "joint": {"all": _joint_body(joint_test(flat), rec, "joint/all"),
                  "no_left_out": _joint_body(joint_test(no_lo), rec, "joint/no_left_out")},
    }


def curve_metrics(body: Mapping[str, Any]) -> dict[str, Any]:
    """The ``specification_curve`` block of ``metrics/models/<id>.json``."""
    j = body["joint"]["all"]
    return {"n_specs": body["n_specs"], "median_r": j["median_r"], "median_p": j["median_p"],
            "share_positive": j["share_positive"], "share_p": j["share_p"]}


def layer_r(body: Mapping[str, Any], *, pooling: str, policy: str, representation: str, nll: str,
            n_layers: int) -> list[float | None]:
    """The r per layer of one line of the curve without a left-out category (None where undefined)."""
    out: list[float | None] = [None] * (n_layers + 1)
    s = body["specs"]
    for i in range(len(s["r"])):
        if (s["pooling"][i] == pooling and s["policy"][i] == policy and s["representation"][i] == representation
                and s["nll"][i] == nll and s["left_out"][i] is None):
            out[s["layer"][i]] = s["r"][i]
    return out


def plot_columns(results: Mapping[str, dict[str, Any]], *, n_layers: int, nll: str) -> dict[str, list[Any]]:
    """``plots/representation/<id>.csv``: per layer, r of the mean pooling under every representation
    and both policies (no category left out, the selected NLL), and the raw mean pairwise cosine and
    top-PC share of the mean pooling."""
    sc, dims = results["specification_curve"], results["dimensions"]
    cols: dict[str, list[Any]] = {"layer": list(range(n_layers + 1)), "depth_pct": results["layerwise"]["depth_pct"]}
    for policy, suffix in (("default", ""), ("sink_excluded", "_sink_excluded")):
        name = dims["policy_names"][policy]
        for kind in REPRESENTATIONS:
            cols[f"r_mean_{kind}{suffix}"] = layer_r(sc, pooling="mean", policy=name, representation=kind, nll=nll,
                                                     n_layers=n_layers)
    for policy, suffix in (("default", ""), ("sink_excluded", "_sink_excluded")):
        e = dims["policies"][policy]["poolings"]["mean"]
        cols[f"mean_cosine_raw{suffix}"] = e["mean_cosine"]["raw"]
        cols[f"variance_top1{suffix}"] = e["variance_share"]["top1"]
    return cols
