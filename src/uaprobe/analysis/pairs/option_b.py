"""The original study's pair-level analysis ("Option B"): five per-pair metrics against the preference.

Defined in the original repository's ``Option_B_Pair_Level.ipynb`` (D'Elia, 2026; MIT), published
for Pythia-6.9B in ``option_b_pair_level_20260102_142148.json`` and used (``centroid_asymmetry``)
by the follow-up paper on phase-structured dynamics. Per layer, with ``a_i``, ``b_i`` the pooled
states of pair i's statements and the **global** centroids ``c_A = mean_j a_j``,
``c_B = mean_j b_j`` over all pairs (the pair's own statements included), and
``cos(x, y) = x . y / (|x| |y| + 1e-10)``:

- ``centroid_asymmetry``: ``cos(a_i, c_A) - cos(b_i, c_B)``
- ``cross_centroid``: ``cos(a_i, c_B) - cos(b_i, c_A)``
- ``within_pair_sim``: ``cos(a_i, b_i)``
- ``knn_density_asymmetry``: ``z(dens_A)_i - z(dens_B)_i`` with ``dens_X_i = 1 / (mean of the
  cosine distances 1 - cos from x_i to its k = min(10, n - 1) nearest statements of side X + 1e-10)``;
  the point itself is one of its k neighbours (distance 0), as the notebook's
  ``NearestNeighbors.kneighbors`` on the fitted points counts it; ``z(v) = (v - mean v) / (std v + 1e-10)``
  with the population std;
- ``margin_asymmetry``: ``|a_i - m| - |b_i - m|`` (Euclidean) with ``m = (c_A + c_B) / 2``.

Each metric is correlated with the pair's preference ``NLL(B) - NLL(A)`` across pairs, layer by
layer, with the original's statistics (Pearson r, its t-test p, a percentile bootstrap interval over
pairs) plus this project's: Spearman rho, Fisher-z interval, permutation p, Holm and
Benjamini-Hochberg across layers, and the r of each metric partialled for the difference in
content tokens ``n_content(B) - n_content(A)`` (:func:`uaprobe.analysis.inference.controls.partial_r`). The three centroid metrics also come
leave-one-out (``*_loo``): pair i's own statements are left out of the centroids it is compared with.

All functions take arrays; nothing here reads files. The states are processed one layer at a time
in float64, so memory holds one layer of the pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import controls, phases, stats
from uaprobe.analysis.inference.groupstats import Resampling, group_stats
from uaprobe.analysis.geometry.knn import EPS, knn_density
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.metrics import ControlMetrics, OptionBMetrics, PhaseMetrics
from uaprobe.schema.pairs import ClusterBootstrap, ControlCategory, OptionBMetric, OptionBPooling, PhaseLayers
from uaprobe.schema.pairs import OptionB as OptionBFile
from uaprobe.analysis.geometry.view_geometry import GEOMETRY_METRICS, view_geometry
from uaprobe.analysis.compute.workers import ordered_map
from uaprobe.config import AnalysisParams
from uaprobe.errors import UAProbeError
from uaprobe.names import OPTION_B_METRICS

KNN_K = 10
"""The notebook's k of the kNN density (``min(10, n - 1)``)."""
PREFERENCE_DEFINITION = "NLL(B) - NLL(A)"
LENGTH_DIFFERENCE = "n_content(B) - n_content(A): content tokens behind the pooled states"

METRICS: tuple[str, ...] = OPTION_B_METRICS
"""The five metrics of the original, in its order."""
LOO_METRICS: tuple[str, ...] = ("centroid_asymmetry_loo", "cross_centroid_loo", "margin_asymmetry_loo")
"""The centroid metrics with the pair left out of its own centroids."""
ALL_METRICS: tuple[str, ...] = METRICS + LOO_METRICS

DEFINITIONS: Mapping[str, str] = {
    "centroid_asymmetry": "cos(A_i, c_A) - cos(B_i, c_B); c_A, c_B = mean of all A, all B states",
    "cross_centroid": "cos(A_i, c_B) - cos(B_i, c_A)",
    "within_pair_sim": "cos(A_i, B_i)",
    "knn_density_asymmetry": "z(1 / mean cosine distance to the k nearest A) - z(same for B); the point itself "
                             "is one of its k neighbours",
    "margin_asymmetry": "|A_i - m| - |B_i - m|, m = (c_A + c_B) / 2 (Euclidean)",
    "centroid_asymmetry_loo": "centroid_asymmetry with pair i left out of c_A and c_B",
    "cross_centroid_loo": "cross_centroid with pair i left out of c_A and c_B",
    "margin_asymmetry_loo": "margin_asymmetry with pair i left out of c_A and c_B",
}


def cosine(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The notebook's cosine along the last axis: ``x . y / (|x| |y| + 1e-10)``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    return (x * y).sum(axis=-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1) + EPS)


def zscore(v: np.ndarray) -> np.ndarray:
    """``(v - mean) / (std + 1e-10)`` along the last axis, population std (numpy's default)."""
    v = np.asarray(v, dtype=float)
    return (v - v.mean(axis=-1, keepdims=True)) / (v.std(axis=-1, keepdims=True) + EPS)


def _check(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 3 or a.shape != b.shape:
        raise ValueError(f"a and b must both be (n_pairs, n_views, D); got {a.shape} and {b.shape}")
    if a.shape[0] < 2:
        raise UAProbeError(f"the pair-level metrics need at least 2 pairs, got {a.shape[0]}")
    return a, b


def _view_metrics(xa: np.ndarray, xb: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """The eight metrics of one view: xa, xb (n, D) -> name -> (n,): the kNN densities
    (:func:`~uaprobe.analysis.geometry.knn.knn_density`) and the seven from centroids and norms
    (:func:`~uaprobe.analysis.geometry.view_geometry.view_geometry`, the bytes of the numpy expressions
    ``cosine(xa, xa.mean(0)) - cosine(xb, xb.mean(0))`` and so on, see :data:`DEFINITIONS`)."""
    geometry = view_geometry(xa, xb, EPS)
    out = {name: geometry[row] for row, name in enumerate(GEOMETRY_METRICS)}
    out["knn_density_asymmetry"] = zscore(knn_density(xa, k=k)) - zscore(knn_density(xb, k=k))
    return out


def pair_metrics(a: np.ndarray, b: np.ndarray, *, k: int = KNN_K, workers: int | None = None) -> dict[str, np.ndarray]:
    """The five metrics and the three leave-one-out variants: a, b (n, V, D) -> name -> (V, n).

    ``k`` is capped at ``n - 1`` as in the notebook. The leave-one-out centroids of pair i are
    ``(sum_j x_j - x_i) / (n - 1)``. The views run on ``workers`` threads
    (:func:`~uaprobe.analysis.compute.workers.ordered_map`; the same bytes on any number).
    """
    a, b = _check(a, b)
    return _by_view(lambda v: (a[:, v, :], b[:, v, :]), n=a.shape[0], n_views=a.shape[1], k=k, workers=workers)


def pair_metrics_of_rows(x: np.ndarray, row_a: np.ndarray, row_b: np.ndarray, *, k: int = KNN_K,
                         workers: int | None = None) -> dict[str, np.ndarray]:
    """:func:`pair_metrics` of ``x[row_a]`` and ``x[row_b]`` (x: (N, V, D) states of the statements),
    the same bytes, each view's rows taken when its unit runs: one view's (n, D) copies held per
    worker instead of two (n, V, D) copies of the whole pooling."""
    row_a, row_b = np.asarray(row_a), np.asarray(row_b)
    if x.ndim != 3 or row_a.shape != row_b.shape or row_a.ndim != 1:
        raise ValueError(f"x must be (N, V, D) and the rows two (n,) arrays; got {x.shape}, {row_a.shape}, "
                         f"{row_b.shape}")
    if row_a.size < 2:
        raise UAProbeError(f"the pair-level metrics need at least 2 pairs, got {row_a.size}")
    return _by_view(lambda v: (x[row_a, v], x[row_b, v]), n=row_a.size, n_views=x.shape[1], k=k, workers=workers)


def _by_view(view: Callable[[int], tuple[np.ndarray, np.ndarray]], *, n: int, n_views: int, k: int,
             workers: int | None) -> dict[str, np.ndarray]:
    """The metrics of each view ``v`` of ``view(v) = (xa, xb)``, the views on ``workers`` threads."""
    k_used = min(k, n - 1)
    per_view = ordered_map(lambda v: _view_metrics(*view(v), k_used), range(n_views), workers=workers)
    return {name: np.stack([one[name] for one in per_view]) if per_view else np.empty((0, n))
            for name in ALL_METRICS}


def option_b_results(a: np.ndarray, b: np.ndarray, preference: np.ndarray, n_content_diff: np.ndarray, *,
                     params: AnalysisParams, rng: np.random.Generator | None = None,
                     draws: Resampling | None = None,
                     k: int = KNN_K, values: Mapping[str, np.ndarray] | None = None) -> OptionBPooling:
    """Every statistic of the eight metrics against the preference, layer by layer (one pooling of
    ``option_b.json``).

    Args:
        a, b: (n, V, D) pooled states of the A and the B statements, pairs in the same order; the
            V views are the layers 0..L (the corrections run over all of them).
        preference: (n,) NLL(B) - NLL(A).
        n_content_diff: (n,) content tokens of B minus those of A (partialled out in ``partial_r``).
        params: the analysis parameters (resamples, permutations, level, alpha).
        rng: the one generator of this analysis: bootstrap indices, then permutations.
        draws: those draws already made (:meth:`Resampling.draw` over the n pairs), instead of ``rng``
            (exactly one of the two).
        k: neighbours of the kNN density (capped at n - 1).
        values: :func:`pair_metrics` of ``a`` and ``b`` with this ``k`` where already computed
            (default: computed here).

    Returns:
        the per-layer lists of every metric (docs/results.md, ``option_b.json``), every missing value a
        :class:`~uaprobe.schema.missing.Missing`.
    """
    a, b = _check(a, b)
    values = pair_metrics(a, b, k=k) if values is None else values
    return _results(values, n=a.shape[0], n_views=a.shape[1], preference=preference, n_content_diff=n_content_diff,
                    params=params, rng=rng, draws=draws, k=k)


def _results(values: Mapping[str, np.ndarray], *, n: int, n_views: int, preference: np.ndarray,
             n_content_diff: np.ndarray, params: AnalysisParams, rng: np.random.Generator | None,
             draws: Resampling | None, k: int) -> OptionBPooling:
    """:func:`option_b_results` from the metric values (:func:`pair_metrics`) of n pairs and V views, its missing
    values :class:`~uaprobe.schema.missing.Missing`."""
    pref = np.asarray(preference, dtype=float)
    zdiff = np.asarray(n_content_diff, dtype=float)
    if pref.shape != (n,) or zdiff.shape != (n,):
        raise ValueError(f"preference and n_content_diff must be ({n},); got {pref.shape} and {zdiff.shape}")
    x = np.concatenate([values[m] for m in ALL_METRICS])  # (M * V, n)
    if (rng is None) == (draws is None):
        raise ValueError("give exactly one of rng and draws")
    if draws is None:
        draws = Resampling.draw(rng, n=n, resamples=params.bootstrap_resamples, permutations=params.permutations)
    elif draws.counts.shape[1] != n or draws.orders.shape[1] != n:
        raise ValueError(f"draws over {draws.counts.shape[1]} points for {n} pairs")
    boot_r = stats.bootstrap_pearson(x, pref, draws.counts)  # (M * V, B): the intervals and the phases'
    perm_r = stats.permuted_r(x, pref, draws.orders)  # (M * V, P): the p-values and the phases'
    gs = group_stats(x=x, y=pref, draws=draws, level=params.ci_level, x_name="pair metric", boot_r=boot_r,
                     perm_r=perm_r)
    partial = controls.partial_r_rows(x, pref, zdiff)
    pr = np.array([c.r for c in partial])
    pp = np.array([c.p for c in partial])
    preason = np.array([c.reason for c in partial], dtype=object)
    n_layers = n_views - 1
    part = phases.partition(n_layers)
    metrics: dict[str, OptionBMetric] = {}
    for i, name in enumerate(ALL_METRICS):
        rows = slice(i * n_views, (i + 1) * n_views)
        p = gs.pearson
        corrected: dict[str, Any] = {}
        for label, raw in (("", p.p[rows]), ("permutation_", gs.permutation_p[rows])):
            for corr_name, fn in (("holm", stats.holm), ("bh", stats.benjamini_hochberg)):
                adj = fn(raw)
                why = stats.inherit(p.reason[rows], stats.first_reason((~np.isfinite(adj), "p-value is undefined")))
                corrected[f"{label}{corr_name}_p"] = missing.series(adj, why)
                corrected[f"{label}{corr_name}_reject"] = missing.flags(adj <= params.alpha, defined=np.isfinite(adj),
                                                                        reasons=why)
        metrics[name] = OptionBMetric(
            definition=DEFINITIONS[name], mean=missing.series(values[name].mean(axis=1), "non-finite metric"),
            **gs.fields(rows), partial_r=missing.series(pr[rows], preason[rows]),
            partial_p=missing.series(pp[rows], preason[rows]), **corrected,
            phases=phases.phase_results(r=p.r[rows], boot_r=boot_r[rows], perm_r=perm_r[rows], mode=draws.mode,
                                        partition=part, level=params.ci_level))
    return OptionBPooling(n_pairs=n, k_neighbours=min(k, n - 1), permutation_mode=draws.mode,
                          phase_layers=PhaseLayers(**{name: list(layers) for name, layers in part.items()}),
                          metrics=metrics)


def metrics_summary(body: OptionBPooling, *, layer: int) -> dict[str, OptionBMetrics]:
    """Headline scalars of :func:`option_b_results` at one layer (e.g. the last), per metric of the
    original (the leave-one-out r beside its metric)."""
    out: dict[str, OptionBMetrics] = {}
    for name in METRICS:
        e = body.metrics[name]
        loo = body.metrics.get(f"{name}_loo")
        out[name] = OptionBMetrics(
            final_r=e.pearson_r[layer], final_ci_low=e.bootstrap_ci_low[layer],
            final_ci_high=e.bootstrap_ci_high[layer], final_permutation_p=e.permutation_p[layer],
            final_partial_r=e.partial_r[layer],
            n_permutation_holm_reject=missing.count_true(e.permutation_holm_reject),
            **({} if loo is None else {"final_r_loo": loo.pearson_r[layer]}))
    return out


def control_metrics(categories: Mapping[str, ControlCategory], *, n_layers: int, pooling: str = "mean"
                    ) -> dict[str, dict[str, ControlMetrics]]:
    """Headline scalars of :func:`control_results`: per category, the last layer's r and
    permutation p of each metric of the original, one pooling."""
    return {name: {m: ControlMetrics(final_r=c.poolings[pooling].metrics[m].pearson_r[n_layers],
                                     final_permutation_p=c.poolings[pooling].metrics[m].permutation_p[n_layers])
                   for m in METRICS}
            for name, c in categories.items()}


@dataclass(frozen=True)
class OptionB:
    """:func:`option_b_poolings` of one extraction: the results and the metric values behind them."""

    poolings: dict[str, OptionBPooling]
    """pooling -> :func:`option_b_results`."""
    values: dict[str, dict[str, np.ndarray]]
    """pooling -> metric of :data:`ALL_METRICS` -> (V, n): :func:`pair_metrics` of the pairs (k = :data:`KNN_K`)."""


def option_b_draws(*, n_pairs: int, params: AnalysisParams, rng_name: str = "option_b") -> Resampling:
    """The draws of :func:`option_b_poolings` over ``n_pairs`` pairs: the bootstrap resamples, then the
    permutations, from the generator named ``rng_name``; the same for every pooling and policy."""
    return Resampling.draw(stats.rng_for(seed=params.seed, name=rng_name), n=n_pairs,
                           resamples=params.bootstrap_resamples, permutations=params.permutations)


def option_b_poolings(*, pooled: Mapping[str, np.ndarray], row_a: np.ndarray, row_b: np.ndarray,
                      preference: np.ndarray, n_content: np.ndarray, params: AnalysisParams,
                      rng_name: str = "option_b", draws: Resampling | None = None) -> OptionB:
    """:func:`option_b_results` for every pooling of one extraction (``body["poolings"][p]``), with
    the metric values it computed (the pair-level models read them).

    Args:
        pooled: pooling -> (N, L+1, D) states of the N statements (layers only, no prenorm block).
        row_a, row_b: (n,) statement rows of the pairs' A and B.
        preference: (n,) NLL(B) - NLL(A).
        n_content: (N,) content tokens behind each statement's pooled state.
        params: the analysis parameters.
        rng_name: names the analysis's generator (one per pooling, the same draws for every pooling:
            they are drawn once and shared).
        draws: :func:`option_b_draws` of these pairs, where the caller has them (they are the same for
            every pooling policy); drawn here otherwise.
    """
    n_content = np.asarray(n_content)
    diff = n_content[row_b] - n_content[row_a]
    if draws is None:
        draws = option_b_draws(n_pairs=len(row_a), params=params, rng_name=rng_name)
    elif draws.counts.shape[1] != len(row_a):
        raise ValueError(f"draws for {draws.counts.shape[1]} pairs given for {len(row_a)} pairs")
    values = {p: pair_metrics_of_rows(x, row_a, row_b) for p, x in pooled.items()}
    return OptionB(poolings={p: _results(values[p], n=len(row_a), n_views=x.shape[1], preference=preference,
                                         n_content_diff=diff, params=params, rng=None, draws=draws, k=KNN_K)
                             for p, x in pooled.items()}, values=values)


def option_b_file(ob: OptionB, *, cluster_bootstrap: ClusterBootstrap, header: Mapping[str, Any]) -> OptionBFile:
    """``option_b.json``: every pooling of :func:`option_b_poolings` and the cluster bootstrap of their metrics, with
    the keys every results file of the policy starts with (``header``)."""
    return record(OptionBFile, header, preference_definition=PREFERENCE_DEFINITION, length_difference=LENGTH_DIFFERENCE,
                  poolings=ob.poolings, cluster_bootstrap=cluster_bootstrap)


def headline_metrics(poolings: Mapping[str, OptionBPooling], *, n_layers: int) -> dict[str, Any]:
    """``option_b`` (per pooling and metric, the last layer) and ``phases`` (per pooling, the
    follow-up paper's metric ``centroid_asymmetry``) for ``metrics/models/<id>.json``."""
    option_b: dict[str, dict[str, OptionBMetrics]] = {}
    phase: dict[str, PhaseMetrics] = {}
    for p, e in poolings.items():
        option_b[p] = metrics_summary(e, layer=n_layers)
        ph = e.metrics["centroid_asymmetry"].phases
        phase[p] = PhaseMetrics(**{f"{name}_mean_r": getattr(ph, name).mean_r for name in phases.PHASES},
                                late_ci_low=ph.late.bootstrap_ci_low, late_ci_high=ph.late.bootstrap_ci_high,
                                sign_change=ph.sign_change)
    return {"option_b": option_b, "phases": phase}


def plot_columns(poolings: Mapping[str, OptionBPooling], *, base: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """Per-layer r of every metric and pooling (``plots/option_b/<id>.csv``): ``<metric>_<pooling>``,
    with the bootstrap interval of ``centroid_asymmetry``."""
    cols: dict[str, list[Any]] = dict(base)
    for p, e in poolings.items():
        for name in ALL_METRICS:
            cols[f"{name}_{p}"] = list(e.metrics[name].pearson_r)
        ca = e.metrics["centroid_asymmetry"]
        cols[f"centroid_asymmetry_ci_low_{p}"] = list(ca.bootstrap_ci_low)
        cols[f"centroid_asymmetry_ci_high_{p}"] = list(ca.bootstrap_ci_high)
    return missing.as_null(cols)


def control_results(*, pooled: Mapping[str, np.ndarray], row_a: np.ndarray, row_b: np.ndarray,
                    category_of_pair: np.ndarray, categories: Sequence[str], preference: np.ndarray,
                    n_content: np.ndarray, params: AnalysisParams) -> dict[str, ControlCategory]:
    """The same analysis on each category of a control set of pairs on its own (its centroids
    and neighbours from that category's pairs), per category."""
    cat = np.asarray(category_of_pair)
    out: dict[str, ControlCategory] = {}
    for c, name in enumerate(categories):
        sel = np.flatnonzero(cat == c)
        ob = option_b_poolings(pooled=pooled, row_a=np.asarray(row_a)[sel], row_b=np.asarray(row_b)[sel],
                               preference=np.asarray(preference)[sel], n_content=n_content, params=params,
                               rng_name=f"control/{name}")
        out[name] = ControlCategory(n_pairs=int(sel.size), poolings=ob.poolings)
    return out


__all__: Sequence[str] = ("OptionB", "option_b_draws", "option_b_file", "option_b_poolings", "headline_metrics", "plot_columns", "control_results", "control_metrics", "EPS", "KNN_K", "METRICS", "LOO_METRICS", "ALL_METRICS", "DEFINITIONS", "cosine", "zscore",
                          "knn_density", "pair_metrics", "pair_metrics_of_rows", "option_b_results",
                          "metrics_summary")
