"""The ``compare`` stage's library entry point: seed 001 across the panel, from each model's
``layerwise.json`` and ``anisotropy.json`` (read through :mod:`uaprobe.schema`), and the models' primary
joint p (``specification_curve.json``) corrected across the panel as ``analysis.primary.across_models`` declares,
and every pair-level test at the pre-declared layer (``pair_models.json``'s three families, every model) as one
Holm family."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from uaprobe.analysis.category import power
from uaprobe.analysis.inference import multiplicity, stats
from uaprobe.analysis.panel import scaling
from uaprobe.analysis.run.documents import StageOutputs, finish, settings
from uaprobe.schema import missing
from uaprobe.schema.document import document
from uaprobe.schema.panel import (PairPower, Panel, PanelAnisotropy, PanelMetrics, PanelOriginal, PanelPairFamily,
                                  PanelPairFamilyModel, PanelPoolingMetrics, PanelPrimary, PanelPrimaryModel)
from uaprobe.analysis.inference.stats import rng_for
from uaprobe.config import AnalysisParams
from uaprobe.errors import ConfigError
from uaprobe.extraction.store import POOLINGS

if TYPE_CHECKING:
    from uaprobe.schema.categories import Layerwise
    from uaprobe.schema.pairmodels import PairFamily
    from uaprobe.schema.geometry import Anisotropy


def _panel_anisotropy(model_id: str, aniso: Anisotropy) -> PanelAnisotropy:
    """L* of one model for ``results/panel.json``; a missing value keeps the reason its
    ``anisotropy.json`` records."""
    values: dict[str, Any] = {"l_star": aniso.l_star, "l_star_depth_pct": aniso.l_star_depth_pct,
                              "is_bell_curve": aniso.bell_curve.is_bell_curve}
    where = {"l_star": "l_star", "l_star_depth_pct": "l_star_depth_pct", "is_bell_curve": "bell_curve/is_bell_curve"}
    for key, value in values.items():
        if value is None:
            why = aniso.nan_reasons.get(where[key], "see its nan_reasons")
            values[key] = missing.Missing(f"undefined in results/models/{model_id}/anisotropy.json: {why}")
    return PanelAnisotropy(**values)


def primary_across_models(primary_p: Mapping[str, float | None], *, statistic: str, correction: str,
                          alpha: float) -> PanelPrimary:
    """The ``primary`` object of ``results/panel.json``: each model's primary joint p (``primary_p``: model ->
    p, None where undefined) with its correction across the panel's models (``holm`` or ``bonferroni``; an
    undefined p is left out of the family) and the verdict at ``alpha``."""
    ids = list(primary_p)
    p = np.array([np.nan if primary_p[m] is None else float(primary_p[m]) for m in ids], dtype=float)
    if correction == "holm":
        adj = stats.holm(p)
    elif correction == "bonferroni":
        adj = np.where(np.isfinite(p), np.minimum(1.0, p * np.isfinite(p).sum()), np.nan)
    else:
        raise ValueError(f"unknown correction across models {correction!r} (holm or bonferroni)")
    models = {}
    for m, q in zip(ids, adj):
        why = f"the primary p of {m} is undefined (see its specification_curve.json)"
        models[m] = PanelPrimaryModel(p=missing.value(np.nan if primary_p[m] is None else float(primary_p[m]), why),
                                      adjusted_p=missing.value(q, why),
                                      reject=missing.flag(bool(np.isfinite(q) and q <= alpha),
                                                          defined=bool(np.isfinite(q)), reason=why))
    return PanelPrimary(statistic=statistic, correction=correction, alpha=float(alpha), models=models)


ORIGINAL_RNG = "original"
"""Names the generator of the original points' simulated power (:func:`uaprobe.analysis.inference.stats.rng_for`)."""

PAIR_FAMILIES = {"length": "family", "lexical": "incremental/family",
                 "lexical_without_category": "incremental/without_category/family"}
"""The pair-level families of ``pair_models.json`` (name -> key): the category and length covariates; the
lexical metric added; the same without ``analysis.primary.left_out``'s pairs."""


def pair_family_across_models(families: Mapping[str, Mapping[str, PairFamily]], *, alpha: float,
                              target: float = 0.8) -> PanelPairFamily:
    """The ``pair_family`` object of ``results/panel.json``: every test of every family of every model
    (``families[model][name]``, :data:`PAIR_FAMILIES`) that is itself (``same_as``) Holm-corrected as one
    family; a test merged into an identical one takes that one's Holm p; an undefined p stays out of the
    family; a degenerate test (``degenerate``: VIF above ``analysis.degenerate_vif``) stays out as well. Every family
    draws the same permutations, so its smallest Holm p is ``n_tests`` x ``p_floor``."""
    rows = [(m, name, i) for m, fams in families.items() for name, fam in fams.items()
            for i, twin in enumerate(fam.tests.same_as)
            if twin == i and fam.tests.permutation_p[i] is not None and not fam.tests.degenerate[i]]
    p_all = [float(families[m][name].tests.permutation_p[i]) for m, name, i in rows]  # type: ignore[arg-type]
    adjusted = dict(zip(rows, stats.holm(np.array(p_all, dtype=float)).tolist()))
    holm_of: dict[tuple[str, str], dict[str, Any]] = {}
    for m, fams in families.items():
        for name, fam in fams.items():
            same_as = fam.tests.same_as
            q = np.array([adjusted.get((m, name, twin), np.nan) for twin in same_as], dtype=float)
            ok = np.isfinite(q)
            why = np.where(np.array(fam.tests.degenerate, dtype=bool), "the test is degenerate (its VIF exceeds "
                           "analysis.degenerate_vif) and kept out of the family", "the test's p is undefined (see "
                           "pair_models.json)")
            holm_of[m, name] = {"holm_p": missing.series(q, why),
                                "holm_reject": missing.flags(ok & (q <= alpha), defined=ok, reasons=why),
                                "n_reject": int(sum((m, name, i) in adjusted and q[i] <= alpha for i in range(q.size)))}
    floor = next((fam.p_floor for fams in families.values() for fam in fams.values()), None)
    n_tests = len(rows)
    n_degenerate = sum(int(fam.n_degenerate) for fams in families.values() for fam in fams.values())
    # max-T within each model's family, Bonferroni across the families that test anything: a family-wise error
    # over the whole panel, like Holm's, that uses the dependence of the tests within each family
    n_families = sum(int(fam.n_tests > 0) for fams in families.values() for fam in fams.values())
    n_maxt = 0
    models: dict[str, dict[str, PanelPairFamilyModel]] = {}
    for m, fams in families.items():
        models[m] = {}
        for name, fam in fams.items():
            raw = np.array([np.nan if v is None else float(v) for v in fam.tests.maxt_p], dtype=float)
            q = np.minimum(1.0, n_families * raw)
            ok = np.isfinite(q)
            counted = np.array(fam.tests.same_as) == np.arange(q.size)
            why = "the test's max-T p is undefined (degenerate or undefined: see pair_models.json)"
            n_reject = int((ok & (q <= alpha) & counted).sum())
            models[m][name] = PanelPairFamilyModel(
                **holm_of[m, name], maxt_p=missing.series(q, why),
                maxt_reject=missing.flags(ok & (q <= alpha), defined=ok, reasons=why), n_maxt_reject=n_reject,
                power=pair_power(fam, alpha=alpha, n_tests=n_tests, target=target))
            n_maxt += n_reject
    return PanelPairFamily(families=dict(PAIR_FAMILIES), alpha=float(alpha), n_tests=n_tests,
                           n_degenerate=n_degenerate, n_reject=int(sum(v <= alpha for v in adjusted.values())),
                           holm_floor=None if floor is None else min(1.0, n_tests * floor), n_families=n_families,
                           n_maxt_reject=n_maxt, power_target=float(target), models=models)


def pair_power(fam: PairFamily, *, alpha: float, n_tests: int, target: float) -> PairPower:
    """The minimum detectable partial r of a family's tests (:func:`uaprobe.analysis.inference.multiplicity.partial_r_mde`)
    at power ``target``: at ``alpha`` uncorrected and at ``alpha / n_tests``, the level of the first step of the
    panel's Holm correction (the smallest effect its strongest test can find). The family's tests share their
    pairs and covariates but for the lexical seeds' columns: the largest ``q`` and the smallest ``n`` are taken."""
    counted = [i for i, twin in enumerate(fam.tests.same_as) if twin == i and not fam.tests.degenerate[i]]
    if not counted or n_tests == 0:
        why = "the family has no test"
        return PairPower(n=None, n_covariates=None, mde=missing.value(np.nan, why),
                         mde_panel=missing.value(np.nan, why))
    n = min(int(fam.tests.n[i]) for i in counted)
    q = max(int(fam.tests.n_covariates[i]) for i in counted)
    why = "too few pairs for the covariates"
    return PairPower(n=n, n_covariates=q,
                     mde=missing.value(multiplicity.partial_r_mde(n=n, n_covariates=q, alpha=alpha, power=target), why),
                     mde_panel=missing.value(multiplicity.partial_r_mde(n=n, n_covariates=q, alpha=alpha / n_tests,
                                                                        power=target), why))


def original_points(table: object, *, source: str, params: AnalysisParams) -> PanelOriginal:
    """The original study's published category points (``category_level.final_table`` of ``source``: category ->
    [UA, mean preference]) under this panel's category-level analysis: r, its exact p over every order, r with
    each category left out, and the exact test's power with the published UA held fixed
    (:func:`uaprobe.analysis.category.power.power_set`)."""
    points = {k: v for k, v in table.items() if k != "note"} if isinstance(table, Mapping) else {}
    bad = [k for k, v in points.items() if not (isinstance(v, (list, tuple)) and len(v) == 2
                                                and all(isinstance(e, (int, float)) for e in v))]
    if len(points) < 3 or bad:
        raise ConfigError(f"{source}: category_level.final_table: expected at least 3 categories, each "
                          f"[UA, mean preference] (two numbers); got {bad or list(points)}. Restore the file from "
                          f"git (`git checkout -- {source}`)")
    names = list(points)
    x = np.array([float(points[k][0]) for k in names])
    y = np.array([float(points[k][1]) for k in names])
    r_loo = [power.statistic(np.delete(x, i), np.delete(y, i)) for i in range(x.size)]
    ps = power.power_set(x, observed_y=y, params=params.power, alpha=params.alpha,
                         rng=rng_for(seed=params.seed, name=ORIGINAL_RNG), left_out=None,
                         permutations=params.permutations)
    return PanelOriginal(source=source, categories=names, ua=x.tolist(), preference=y.tolist(), r=ps.observed_r,
                         p=ps.observed_p, orders=ps.orders, p_floor=ps.p_floor,
                         leave_one_out_r=missing.series(np.array(r_loo), "the rest is constant"), power=ps)


def compare_panel(*, model_ids: Sequence[str], layerwise_results: Mapping[str, Layerwise],
                  anisotropy_results: Mapping[str, Anisotropy],
                  params_millions: Mapping[str, float | None], params: AnalysisParams,
                  sink_excluded_results: Mapping[str, Layerwise] | None = None,
                  primary_p: Mapping[str, float | None] | None = None,
                  pair_families: Mapping[str, Mapping[str, PairFamily]] | None = None,
                  original: tuple[str, object] | None = None) -> StageOutputs:
    """Seed 001 across the panel, from each model's ``layerwise.json`` and ``anisotropy.json`` (read
    through :mod:`uaprobe.schema`); the same view of the sink-excluded policy from
    ``sink_excluded/layerwise.json`` where given; with ``primary_p`` (model -> the primary joint p of its
    ``specification_curve.json``) that p corrected across the models (:func:`primary_across_models`); with
    ``pair_families`` (model -> :data:`PAIR_FAMILIES` name -> its family) the pair-level tests as one family
    (:func:`pair_family_across_models`); with ``original`` (its file, the published ``final_table``) the original
    study's category points tested as this panel's are (:func:`original_points`)."""
    present = set(next(iter(layerwise_results.values())).poolings) if layerwise_results else set(POOLINGS)
    poolings = [p for p in POOLINGS if p in present] + sorted(present - set(POOLINGS))
    curves_by_pooling = {
        p: [scaling.curve_from_results(model_id=m, layerwise=layerwise_results[m], pooling=p,
                                       params_millions=params_millions.get(m)) for m in model_ids]
        for p in poolings
    }
    views = {"poolings": scaling.scaling_view(curves_by_pooling, seed_view=False,
                                              stable_depth_std=params.stable_depth_std),
             "seed_layers_view": scaling.scaling_view(curves_by_pooling, seed_view=True,
                                                      stable_depth_std=params.stable_depth_std)}
    optional: dict[str, Any] = {}
    if primary_p is not None:
        optional["primary"] = primary_across_models(primary_p, statistic=params.primary.statistic,
                                                    correction=params.primary.across_models, alpha=params.alpha)
    if pair_families is not None:
        optional["pair_family"] = pair_family_across_models(pair_families, alpha=params.alpha,
                                                            target=params.power.target)
    if original is not None:
        optional["original"] = original_points(original[1], source=original[0], params=params)
    if sink_excluded_results:
        sx_curves = {"mean": [scaling.curve_from_results(model_id=m, layerwise=sink_excluded_results[m], pooling="mean",
                                                         params_millions=params_millions.get(m)) for m in model_ids]}
        optional["sink_excluded"] = scaling.scaling_view(sx_curves, seed_view=False,
                                                         stable_depth_std=params.stable_depth_std)
    panel = Panel(models=list(model_ids), stable_depth_std=params.stable_depth_std, settings=settings(params),
                  **views, anisotropy={m: _panel_anisotropy(m, a) for m, a in anisotropy_results.items()},
                  **optional, nan_reasons={})
    return StageOutputs(results={"panel": finish(panel)}, metrics=_panel_metrics(panel),
                        plots=_panel_plots(model_ids, poolings, layerwise_results, sink_excluded_results))


def _panel_metrics(panel: Panel) -> dict[str, Any]:
    """``metrics/panel.json``, built as its model (missing values None)."""
    mean_models = panel.poolings["mean"].models if "mean" in panel.poolings else {}
    sink_excluded = ({} if panel.sink_excluded is None else
                     {"sink_excluded_final_r": {m: v.final_r for m, v in panel.sink_excluded["mean"].models.items()}})
    metrics = PanelMetrics(
        poolings={p: PanelPoolingMetrics(peak_positive_depth_mean=e.summary.peak_positive_depth_mean,
                                         peak_positive_depth_std=e.summary.peak_positive_depth_std,
                                         peak_negative_depth_mean=e.summary.peak_negative_depth_mean,
                                         peak_negative_depth_std=e.summary.peak_negative_depth_std,
                                         stable=e.summary.stable) for p, e in panel.poolings.items()},
        final_r={m: v.final_r for m, v in mean_models.items()},
        peak_positive_depth_pct={m: v.peak_positive.depth_pct for m, v in mean_models.items()}, **sink_excluded)
    return missing.as_null(document(metrics))


def _panel_plots(model_ids: Sequence[str], poolings: Sequence[str], layerwise_results: Mapping[str, Layerwise],
                 sink_excluded_results: Mapping[str, Layerwise] | None) -> dict[str, dict[str, list[Any]]]:
    """``plots/panel/<id>.csv``: each model's r per layer and pooling."""
    plots = {}
    for m in model_ids:
        lw = layerwise_results[m]
        cols: dict[str, list[Any]] = {"layer": list(lw.layers), "depth_pct": list(lw.depth_pct)}
        for p in poolings:
            cols[f"r_{p}"] = list(lw.poolings[p].pearson_r)
        if sink_excluded_results:
            cols["r_mean_sink_excluded"] = list(sink_excluded_results[m].poolings["mean"].pearson_r)
        plots[m] = cols
    return plots
