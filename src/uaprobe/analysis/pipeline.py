"""Library entry points of the ``analyze`` (one model) and ``compare`` (the panel) stages.

:func:`analyze_model` turns one extraction file's contents into the results, metrics and plot
series documented in ``docs/results.md``; :func:`compare_panel` does the same for the panel from
the per-model results. Neither touches the file system: the stages write what they return.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from uaprobe.analysis import (anisotropy, bins, controls, curves, dimensions, layerwise, optionb, pairlevel,
                              pairmodels, preference, robustness, scaling, speccurve, stats, validation)
from uaprobe.analysis.representation import transform_all
from uaprobe.analysis.pairs_data import PairTable, pair_table, pooling_cosines
from uaprobe.analysis.report import NanReasons
from uaprobe.analysis.stats import bootstrap_indices, resample_counts, rng_for
from uaprobe.analysis.uniformity import CosineForm, group_means
from uaprobe.config import AnalysisParams
from uaprobe.errors import UAProbeError
from uaprobe.extraction.store import POLICIES, POOLINGS, Embeddings

if TYPE_CHECKING:
    from uaprobe.schema.categories import Layerwise
    from uaprobe.schema.geometry import Anisotropy

EXTRACTION_ATTRS = ("model_id", "display", "source", "location", "revision", "dtype", "pooling_drop",
                    "dataset_sha256", "prompts_sha256", "uaprobe_version", "bos_added")
"""HDF5 attributes copied into every results file (provenance)."""
BIN_POOLINGS: tuple[str, ...] = POOLINGS
"""Poolings the random-bins analysis runs on (the seed used mean pooling)."""


@dataclass
class Outputs:
    """What a stage writes: results files (stem -> JSON object), one metrics object, CSV series
    (stem -> ordered columns)."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    plots: dict[str, dict[str, list[Any]]] = field(default_factory=dict)


def settings(params: AnalysisParams) -> dict[str, Any]:
    """The analysis parameters as a JSON object."""
    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return conv(dataclasses.asdict(params))


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return v


def _header(*, model_id: str, display: str, n_layers: int, params: AnalysisParams,
            attrs: Mapping[str, Any]) -> dict[str, Any]:
    layers = list(range(n_layers + 1))
    return {
        "model": model_id,
        "display": display,
        "n_layers": n_layers,
        "layers": layers,
        "depth_pct": curves.depth_pct(layers, n_layers=n_layers).tolist(),
        "seed_layers": curves.seed_layers(n_layers),
        "settings": settings(params),
        "representation": {"kind": params.representation, "abtt_k": params.abtt_k},
        "extraction": {k: _plain(attrs[k]) for k in EXTRACTION_ATTRS if k in attrs},
    }


def _finish(body: dict[str, Any], header: dict[str, Any], rec: NanReasons) -> dict[str, Any]:
    return {**header, **body, "nan_reasons": dict(sorted(rec.reasons.items()))}


def table_from_embeddings(emb: Embeddings, *, source: str = "extraction file") -> PairTable:
    return pair_table(category=emb.category, pair=emb.pair, side=emb.side, nll_mean=emb.nll_mean,
                      nll_sum=emb.nll_sum, n_tokens=emb.n_tokens, source=source)


@dataclass
class PolicyRun:
    """One pooling policy's analyses: its results files and what the robustness view reads."""

    results: dict[str, dict[str, Any]]
    view: robustness.PolicyView
    layerwise_draws: Any


def _analyze_policy(*, pooled: Mapping[str, np.ndarray], prenorm: Mapping[str, np.ndarray], policy_name: str,
                    table: PairTable, pref: np.ndarray, mean_pref: np.ndarray, header: dict[str, Any],
                    params: AnalysisParams, form: CosineForm | None,
                    on_step: Callable[[], None] | None) -> PolicyRun:
    """Layer-wise, validation, random bins, pair level and NLL kind for one pooling policy's states."""
    n_layers = header["n_layers"]
    categories = list(table.categories)
    n_cat = len(categories)
    header = dict(header, policy=policy_name)

    # The only embedding-sized work, one pooling at a time (so memory holds one pooling's cosines).
    cat_u, scores, bin_res = {}, {}, {}
    b_rng = rng_for(seed=params.seed, name="bins")
    null_labels = controls.size_matched_labels(rng_for(seed=params.seed, name="size-matched-null"),
                                               sizes=table.pairs_per_category,
                                               partitions=params.robustness.null_partitions)
    null_pref, _ = group_means(pref, null_labels, n_groups=n_cat)
    null_r = None
    for p in POOLINGS:
        cos = pooling_cosines(pooled=pooled[p], prenorm=prenorm[p], table=table, form=form)
        cat_u[p] = layerwise.category_uniformity(cos, category_of_pair=table.category_of_pair, n_categories=n_cat)
        scores[p] = pairlevel.pair_scores(cos, category_of_pair=table.category_of_pair, n_categories=n_cat)
        if p == "mean":
            null_ua, _ = cos.uniformity(null_labels, n_groups=n_cat, side="diff")  # (V, P, C)
            null_r = stats.pearson(null_ua, null_pref[None]).r  # (V, P)
        if on_step:
            on_step()
        if p in BIN_POOLINGS:
            bin_res[p] = bins.analyze_bins(cosines=cos, preference=pref, params=params, rng=b_rng, on_step=on_step)
        del cos
    results: dict[str, dict[str, Any]] = {}

    # --- layer-wise (seed 000)
    rec = NanReasons()
    lw, lw_draws = layerwise.analyze_layerwise(uniformity=cat_u, mean_preference=mean_pref, categories=categories,
                                               params=params, rng=rng_for(seed=params.seed, name="layerwise"))
    distinct = (lw_draws.counts > 0).sum(axis=1)
    lw_body = {
        "categories": categories,
        "n_pairs": table.pairs_per_category.tolist(),
        "preference": params.preference,
        "mean_preference": rec.series("mean_preference", mean_pref),
        "permutation_mode": lw_draws.mode,
        "permutation_count": int(lw_draws.orders.shape[0]),
        "bootstrap_degenerate": int((distinct <= robustness.DEGENERATE_DISTINCT).sum()),
        "poolings": layerwise.layerwise_results(lw, categories=categories, n_layers=n_layers, params=params, rec=rec),
    }
    results["layerwise"] = _finish(lw_body, header, rec)

    # --- validation table (seed 003)
    rec = NanReasons()
    v_rng = rng_for(seed=params.seed, name="validation")
    v_counts = resample_counts(bootstrap_indices(v_rng, n=n_cat, resamples=params.bootstrap_resamples), n=n_cat)
    variants = {}
    for p in POOLINGS:
        for suffix, view in (("", n_layers), ("_prenorm", n_layers + 1)):
            name = p + suffix
            tab = validation.category_table(u_a=cat_u[p].u_a[view], u_b=cat_u[p].u_b[view], preference=pref,
                                            category_of_pair=table.category_of_pair, n_categories=n_cat,
                                            neutral_ua=params.neutral_ua, neutral_preference=params.neutral_preference)
            glob = validation.global_stats(ua=tab.ua, mean_preference=tab.mean_preference, counts=v_counts,
                                           level=params.ci_level, aligned_r=params.aligned_r,
                                           inverted_r=params.inverted_r)
            variants[name] = validation.validation_variant(table=tab, glob=glob, categories=categories,
                                                           level=params.ci_level, rec=rec.sub(f"variants/{name}"))
    val_body = {
        "layer": n_layers,
        "thresholds": {"aligned_r": params.aligned_r, "inverted_r": params.inverted_r,
                       "neutral_ua": params.neutral_ua, "neutral_preference": params.neutral_preference},
        "variants": variants,
    }
    results["validation"] = _finish(val_body, header, rec)

    # --- random bins (seed 002)
    rec = NanReasons()
    bins_body_poolings = {}
    for p in BIN_POOLINGS:
        bins_body_poolings[p] = {"schemes": bins.bins_results(bin_res[p], categories_stats=lw[p].stats,
                                                              n_layers=n_layers, rec=rec.sub(f"poolings/{p}"))}
    bins_body = {"n_pairs": table.n_pairs, **bins.bins_settings(params), "poolings": bins_body_poolings}
    results["bins"] = _finish(bins_body, header, rec)

    # --- pair level
    rec = NanReasons()
    pl, pl_draws = pairlevel.analyze_pairlevel(scores=scores, preference=pref, params=params,
                                               rng=rng_for(seed=params.seed, name="pairs"))
    names = np.array(categories, dtype=object)[table.category_of_pair]
    pl_body = {
        "pair": table.pair_ids.tolist(),
        "category": names.tolist(),
        "preference": rec.series("preference", pref),
        "centroid": "mean of the unit-normalised statements of the same side and category, own statement included",
        "permutation_mode": pl_draws.mode,
        "poolings": pairlevel.pairlevel_results(pl, n_layers=n_layers, alpha=params.alpha, rec=rec),
    }
    results["pairs"] = _finish(pl_body, header, rec)

    # --- NLL mean vs sum
    rec = NanReasons()
    pref_body = preference.preference_results(table=table, ua={p: cat_u[p].ua for p in POOLINGS},
                                              selected=params.preference, n_layers=n_layers, rec=rec)
    results["preference"] = _finish(pref_body, header, rec)

    m = lw["mean"]
    view = robustness.PolicyView(
        name=policy_name, ua=cat_u["mean"].ua, r=m.stats.pearson.r, rho=m.stats.spearman.r,
        permutation_p=m.stats.permutation_p,
        permutation_holm_reject=m.permutation_holm_p <= params.alpha,
        permutation_bh_reject=m.permutation_bh_p <= params.alpha,
        parametric_holm_reject=m.holm_p <= params.alpha,
        pair_score=scores["mean"], null_r=null_r)
    return PolicyRun(results=results, view=view, layerwise_draws=lw_draws)


def analyze_model(emb: Embeddings, *, params: AnalysisParams, model_id: str, display: str | None = None,
                  source: str = "extraction file", form: CosineForm | None = None,
                  on_step: Callable[[], None] | None = None) -> Outputs:
    """Every per-model analysis of docs/results.md, from one extraction file's contents.

    Every analysis runs under both pooling policies of the file: the default (``pooled/*``, the
    ``pooling.drop`` of the extraction; results at the top level) and ``sink_excluded``
    (``pooled_sink_excluded/*``; results under ``sink_excluded/``). ``robustness.json`` sets them
    side by side with the controls.

    Every analysis that reads pooled states (layer-wise, validation, bins, pairs, preference, the
    robustness views, Option B, the pair-level models) reads them, pooled and pre-norm, after the transform
    ``params.representation`` (:mod:`uaprobe.analysis.representation`); the token-level analyses
    (anisotropy, the sink statistics) read the raw token states whatever the representation.
    ``dimensions.json`` and ``specification_curve.json`` run over every representation and both
    policies themselves, from the raw states.

    Args:
        emb: the extraction file, loaded.
        params: the ``analysis`` section of params.yaml.
        model_id: the catalog id (names the outputs).
        display: the model's display name (default: the file's ``display`` attribute or the id).
        source: the file's path, for error messages.
        form: force the Gram or the unit-vector form of the cosines (default: the
            smaller one, see :func:`~uaprobe.analysis.uniformity.cosine_form_for`); the results
            agree up to rounding.
        on_step: called after each of the :func:`analysis_steps` embedding-sized steps (progress).
    """
    n_layers = emb.n_layers
    for policy in POLICIES:
        pooled, _ = emb.policy(policy)
        for p in POOLINGS:
            if pooled[p].shape[1] != n_layers + 1:
                raise UAProbeError(f"{source}: pooled/{p} ({policy}) has {pooled[p].shape[1]} layers, the attribute "
                                   f"n_layers says {n_layers} (+1 for the embeddings); the file is inconsistent, "
                                   "re-extract it")
    table = table_from_embeddings(emb, source=source)
    bins.check_bins(params, n_pairs=table.n_pairs)
    display = display or str(_plain(emb.attrs.get("display") or model_id))
    header = _header(model_id=model_id, display=display, n_layers=n_layers, params=params, attrs=emb.attrs)
    categories = list(table.categories)
    n_cat = len(categories)
    pref = table.preference(params.preference)
    if not np.isfinite(pref).all():
        raise UAProbeError(f"{source}: non-finite NLL values (nll/{params.preference}); re-extract the model")
    mean_pref = preference.category_means(pref, category_of_pair=table.category_of_pair, n_categories=n_cat)
    default_name = str(_plain(emb.attrs.get("pooling_drop", "special")))

    out = Outputs()
    runs: dict[str, PolicyRun] = {}
    kind, k = params.representation, params.abtt_k
    for policy in POLICIES:
        pooled, prenorm = emb.policy(policy)
        pooled, prenorm = transform_all(pooled, kind, k=k), transform_all(prenorm, kind, k=k)
        runs[policy] = _analyze_policy(pooled=pooled, prenorm=prenorm,
                                       policy_name=default_name if policy == "default" else policy, table=table,
                                       pref=pref, mean_pref=mean_pref, header=header, params=params,
                                       form=form, on_step=on_step)
        prefix = "" if policy == "default" else f"{policy}/"
        for stem, body in runs[policy].results.items():
            out.results[prefix + stem] = body

    # --- anisotropy (seed 004), with and without position 0 of every prompt
    rec = NanReasons()
    lw_default = out.results["layerwise"]["poolings"]["mean"]
    an_body = anisotropy.analyze_anisotropy(
        states=emb.aniso_states, special=emb.aniso_special, prompt_index=emb.aniso_prompt_index,
        pooling_drop=default_name, n_layers=n_layers, n_prompts=len(emb.prompts), params=params,
        sign_changes=lw_default["sign_changes"], rng=rng_for(seed=params.seed, name="anisotropy"), source=source,
        rec=rec)
    out.results["anisotropy"] = _finish(an_body, header, rec)

    # --- robustness: the sink, the controls, the nulls, the inference
    rec = NanReasons()
    r_by_nll = {kind: out.results["preference"]["poolings"]["mean"][f"r_{kind}"][n_layers] for kind in ("mean", "sum")}
    r_by_nll = {k: (np.nan if v is None else v) for k, v in r_by_nll.items()}
    rob_body = robustness.robustness_results(
        default=runs["default"].view, sink_excluded=runs["sink_excluded"].view, table=table, preference=pref,
        mean_preference=mean_pref, sink=emb.sink, n_content=emb.n_content,
        tokens=(emb.token_ids, emb.token_offsets, emb.token_special), dim=int(emb.pooled["mean"].shape[-1]),
        bootstrap_counts=runs["default"].layerwise_draws.counts,
        permutation_mode=runs["default"].layerwise_draws.mode, r_by_nll=r_by_nll, preference_kind=params.preference,
        seeds=[params.seed + i for i in range(params.robustness.lexical_seeds)], n_layers=n_layers, rec=rec)
    out.results["robustness"] = _finish(rob_body, header, rec)

    out.metrics = model_metrics(out.results, params=params)
    out.plots = model_plots(out.results, n_layers=n_layers)

    # --- Option B and phase means: the original study's pair-level analysis (analysis/optionb.py),
    # under both pooling policies (option_b.json, sink_excluded/option_b.json); metrics and plots
    # of the default policy
    for policy in POLICIES:
        pooled = transform_all(emb.policy(policy)[0], kind, k=k)
        rec = NanReasons()
        ob_body = optionb.option_b_poolings(pooled=pooled, row_a=table.row_a, row_b=table.row_b, preference=pref,
                                            n_content=emb.n_content, params=params, rec=rec)
        policy_name = default_name if policy == "default" else policy
        out.results[("" if policy == "default" else f"{policy}/") + "option_b"] = _finish(
            ob_body, dict(header, policy=policy_name), rec)
        if policy == "default":
            out.metrics.update(optionb.headline_metrics(ob_body, n_layers=n_layers))
            out.plots["option_b"] = optionb.plot_columns(ob_body, base={"layer": list(range(n_layers + 1)),
                                                                         "depth_pct": header["depth_pct"]})

    # --- pair-level models: the Option B metrics, length out, permutation within categories (analysis/pairmodels.py)
    rec = NanReasons()
    pm_body = pairmodels.from_embeddings(emb, table=table, preference=pref, params=params, default_name=default_name,
                                         rec=rec)
    out.results["pair_models"] = _finish(pm_body, header, rec)
    out.metrics["pair_models"] = pairmodels.headline_metrics(pm_body)
    out.plots["pair_models"] = pairmodels.plot_columns(pm_body, base={"layer": list(range(n_layers + 1)),
                                                                      "depth_pct": header["depth_pct"]})

    # --- every representation and policy at once: the per-dimension breakdown and the specification curve
    policy_names = {policy: default_name if policy == "default" else policy for policy in POLICIES}
    sw = dimensions.sweep({policy: emb.policy(policy)[0] for policy in POLICIES}, row_a=table.row_a,
                          row_b=table.row_b, category_of_pair=table.category_of_pair, n_categories=n_cat, k=k)
    rec = NanReasons()
    out.results["dimensions"] = _finish(dimensions.dimensions_results(sw, policy_names=policy_names, rec=rec),
                                        header, rec)
    rec = NanReasons()
    ua = {policy: {p: {r: sw.u_a[policy][p][r] - sw.u_b[policy][p][r] for r in sw.u_a[policy][p]}
                   for p in sw.u_a[policy]} for policy in sw.u_a}
    prefs = {nll: preference.category_means(table.preference(nll), category_of_pair=table.category_of_pair,
                                            n_categories=n_cat) for nll in ("mean", "sum")}
    sc_body = speccurve.curve_results(ua, prefs, categories=categories, policy_names=policy_names, rec=rec)
    out.results["specification_curve"] = _finish(sc_body, header, rec)
    out.metrics["specification_curve"] = speccurve.curve_metrics(sc_body)
    out.plots["representation"] = speccurve.plot_columns(out.results, n_layers=n_layers, nll=params.preference)
    if on_step:
        on_step()
    return out


def analyze_control(control: Embeddings, *, params: AnalysisParams, model_id: str, display: str | None = None,
                    source: str = "control extraction file") -> dict[str, Any]:
    """``neutral_control.json``: the Option B analysis on each category of the control pairs
    (``data/neutral_control.json`` extracted into ``<id>.control.h5``), plus its headline metrics
    under the key ``metrics``. The pooled states are transformed as ``params.representation`` says,
    over the control file's own statements."""
    table = table_from_embeddings(control, source=source)
    pref = table.preference(params.preference)
    if not np.isfinite(pref).all():
        raise UAProbeError(f"{source}: non-finite NLL values (nll/{params.preference}); re-extract the model")
    display = display or str(_plain(control.attrs.get("display") or model_id))
    header = _header(model_id=model_id, display=display, n_layers=control.n_layers, params=params,
                     attrs=control.attrs)
    rec = NanReasons()
    pooled = transform_all(control.pooled, params.representation, k=params.abtt_k)
    body = optionb.control_results(pooled=pooled, row_a=table.row_a, row_b=table.row_b,
                                   category_of_pair=table.category_of_pair, categories=table.categories,
                                   preference=pref, n_content=control.n_content, params=params, rec=rec)
    body["preference"] = {name: rec.series(f"preference/{name}", pref[table.category_of_pair == c])
                          for c, name in enumerate(table.categories)}
    return {"results": _finish(body, header, rec),
            "metrics": optionb.control_metrics(body, n_layers=control.n_layers)}


def analysis_steps(params: AnalysisParams) -> int:
    """How many times :func:`analyze_model` calls ``on_step``: per policy and pooling, the cosines
    with the category and pair-level sums, then the random-bins steps; then the representation sweep."""
    return len(POLICIES) * (len(POOLINGS) + len(BIN_POOLINGS) * bins.bins_steps(params)) + 1


def _layer_pick(values: list[Any], layer: int | None) -> Any:
    return None if layer is None else values[layer]


def model_metrics(results: Mapping[str, dict[str, Any]], *, params: AnalysisParams) -> dict[str, Any]:
    """Headline scalars of one model (``metrics/models/<id>.json``)."""
    lw = results["layerwise"]["poolings"]
    m: dict[str, Any] = {"layerwise": {}, "pairs": {}, "bins": {}}
    for p, e in lw.items():
        m["layerwise"][p] = {
            "final_r": e["final"]["r"], "final_p": e["final"]["p"],
            "final_permutation_p": e["permutation_p"][-1],
            "prenorm_r": e["prenorm"]["pearson_r"],
            "peak_positive_r": e["peak_positive"]["r"], "peak_positive_layer": e["peak_positive"]["layer"],
            "peak_negative_r": e["peak_negative"]["r"], "peak_negative_layer": e["peak_negative"]["layer"],
            "n_sign_changes": len(e["sign_changes"]),
            "n_holm_reject": sum(1 for v in e["holm_reject"] if v),
            "n_bh_reject": sum(1 for v in e["bh_reject"] if v),
        }
    g = results["validation"]["variants"]["mean"]["global"]
    m["validation"] = {k: g[k] for k in ("mean_ua", "std_ua", "ci_low", "ci_high", "cohens_d", "r", "mean_preference")}
    b = results["bins"]["poolings"]["mean"]["schemes"]
    for scheme, s in b.items():
        entry = {f"final_r_mean_k{k}": s["by_k"][k]["r_mean"][-1] for k in s["by_k"]}
        ci = s["ci_partition"]
        entry.update({"ci_final_r": ci["r"][-1], "ci_final_low": ci["bootstrap_ci_low"][-1],
                      "ci_final_high": ci["bootstrap_ci_high"][-1],
                      "n_layers_ci_excludes_zero": sum(1 for v in ci["ci_excludes_zero"] if v)})
        m["bins"][scheme] = entry
    for p, e in results["pairs"]["poolings"].items():
        m["pairs"][p] = {"final_r": e["final"]["r"], "final_ci_low": e["final"]["bootstrap_ci_low"],
                         "final_ci_high": e["final"]["bootstrap_ci_high"], "peak_abs_r": e["peak_abs"]["r"],
                         "peak_abs_layer": e["peak_abs"]["layer"]}
    a = results["anisotropy"]
    m["anisotropy"] = {"l_star": a["l_star"], "l_star_depth_pct": a["l_star_depth_pct"],
                       "is_bell_curve": a["bell_curve"]["is_bell_curve"],
                       "is_bell_curve_significant": a["bell_curve"].get("is_bell_curve_significant"),
                       "n_l_star_ties": len(a["l_star_ties"]),
                       "l_star_all_tokens": a["variants"]["all_tokens"]["l_star"],
                       "l_star_sink_excluded": a["variants"]["sink_excluded"]["l_star"],
                       "distance_to_last_inversion": a["correlation_sign_changes"]["distance_to_last_inversion"]}
    pr = results["preference"]
    m["preference"] = {"r_categories_mean_vs_sum": pr["r_categories_mean_vs_sum"],
                       "final_r_mean": pr["poolings"]["mean"]["r_mean"][-1],
                       "final_r_sum": pr["poolings"]["mean"]["r_sum"][-1]}
    m.update(robustness.robustness_metrics(results["robustness"]))
    return m


def model_plots(results: Mapping[str, dict[str, Any]], *, n_layers: int) -> dict[str, dict[str, list[Any]]]:
    """Per-layer CSV series of one model (``plots/<kind>/<id>.csv``)."""
    base = {"layer": list(range(n_layers + 1)), "depth_pct": results["layerwise"]["depth_pct"]}
    cols: dict[str, list[Any]] = dict(base)
    for suffix, stem in (("", "layerwise"), ("_sink_excluded", "sink_excluded/layerwise")):
        for p, e in results[stem]["poolings"].items():
            cols.update({f"r_{p}{suffix}": e["pearson_r"], f"spearman_{p}{suffix}": e["spearman_rho"],
                         f"permutation_p_{p}{suffix}": e["permutation_p"],
                         f"permutation_holm_p_{p}{suffix}": e["permutation_holm_p"],
                         f"permutation_bh_p_{p}{suffix}": e["permutation_bh_p"],
                         f"fisher_low_{p}{suffix}": e["fisher_ci_low"], f"fisher_high_{p}{suffix}": e["fisher_ci_high"],
                         f"p_{p}{suffix}": e["pearson_p"], f"ci_low_{p}{suffix}": e["bootstrap_ci_low"],
                         f"ci_high_{p}{suffix}": e["bootstrap_ci_high"], f"holm_p_{p}{suffix}": e["holm_p"],
                         f"bh_p_{p}{suffix}": e["bh_p"]})
    plots = {"layerwise": cols}
    sk = results["robustness"]["sink"]
    plots["sink"] = dict(base, norm_ratio_median=sk["norm_ratio_median"], norm_ratio_q10=sk["norm_ratio_q10"],
                         norm_ratio_q90=sk["norm_ratio_q90"], mean_share_median=sk["mean_share_median"],
                         top_dim_share_median=sk["top_dim_share_median"], top_dim_mode=sk["top_dim_mode"])
    cols = dict(base)
    for scheme, s in results["bins"]["poolings"]["mean"]["schemes"].items():
        for k, e in s["by_k"].items():
            cols[f"r_mean_{scheme}_k{k}"] = e["r_mean"]
            cols[f"r_std_{scheme}_k{k}"] = e["r_std"]
        ci = s["ci_partition"]
        cols.update({f"ci_r_{scheme}": ci["r"], f"ci_low_{scheme}": ci["bootstrap_ci_low"],
                     f"ci_high_{scheme}": ci["bootstrap_ci_high"]})
    plots["bins"] = cols
    cols = dict(base)
    for p, e in results["pairs"]["poolings"].items():
        cols.update({f"r_{p}": e["pearson_r"], f"ci_low_{p}": e["bootstrap_ci_low"], f"ci_high_{p}": e["bootstrap_ci_high"]})
    plots["pairs"] = cols
    a = results["anisotropy"]
    cols = dict(base)
    for key in ("eigenvalue_variance", "lambda1_ratio", "effective_rank", "mean_cos_to_mean", "var_top1",
                "var_top10", "var_top50"):
        cols[key] = a[key]
    for name, v in a["variants"].items():
        cols[f"lambda1_ratio_{name}"] = v["lambda1_ratio"]
    plots["anisotropy"] = cols
    return plots


# ---------------------------------------------------------------------------------------------
# compare


def _panel_anisotropy(model_id: str, aniso: Anisotropy, *, rec: Any) -> dict[str, Any]:
    """L* of one model for ``results/panel.json``; a missing value keeps the reason its
    ``anisotropy.json`` records."""
    values = {"l_star": aniso.l_star, "l_star_depth_pct": aniso.l_star_depth_pct,
              "is_bell_curve": aniso.bell_curve.is_bell_curve}
    where = {"l_star": "l_star", "l_star_depth_pct": "l_star_depth_pct", "is_bell_curve": "bell_curve/is_bell_curve"}
    for key, value in values.items():
        if value is None:
            why = aniso.nan_reasons.get(where[key], "see its nan_reasons")
            rec.label(key, None, f"undefined in results/models/{model_id}/anisotropy.json: {why}")
    return values


def compare_panel(*, model_ids: Sequence[str], layerwise_results: Mapping[str, Layerwise],
                  anisotropy_results: Mapping[str, Anisotropy],
                  params_millions: Mapping[str, float | None], params: AnalysisParams,
                  sink_excluded_results: Mapping[str, Layerwise] | None = None) -> Outputs:
    """Seed 001 across the panel, from each model's ``layerwise.json`` and ``anisotropy.json`` (read
    through :mod:`uaprobe.schema`); the same view of the sink-excluded policy from
    ``sink_excluded/layerwise.json`` where given."""
    rec = NanReasons()
    present = set(next(iter(layerwise_results.values())).poolings) if layerwise_results else set(POOLINGS)
    poolings = [p for p in POOLINGS if p in present] + sorted(present - set(POOLINGS))
    curves_by_pooling = {
        p: [scaling.curve_from_results(model_id=m, layerwise=layerwise_results[m], pooling=p,
                                       params_millions=params_millions.get(m)) for m in model_ids]
        for p in poolings
    }
    body: dict[str, Any] = {
        "models": list(model_ids),
        "stable_depth_std": params.stable_depth_std,
        "settings": settings(params),
        "poolings": scaling.scaling_view(curves_by_pooling, seed_view=False, stable_depth_std=params.stable_depth_std,
                                         rec=rec.sub("poolings")),
        "seed_layers_view": scaling.scaling_view(curves_by_pooling, seed_view=True,
                                                 stable_depth_std=params.stable_depth_std,
                                                 rec=rec.sub("seed_layers_view")),
        "anisotropy": {m: _panel_anisotropy(m, a, rec=rec.sub(f"anisotropy/{m}"))
                       for m, a in anisotropy_results.items()},
    }
    if sink_excluded_results:
        sx_curves = {"mean": [scaling.curve_from_results(model_id=m, layerwise=sink_excluded_results[m], pooling="mean",
                                                         params_millions=params_millions.get(m)) for m in model_ids]}
        body["sink_excluded"] = scaling.scaling_view(sx_curves, seed_view=False,
                                                     stable_depth_std=params.stable_depth_std,
                                                     rec=rec.sub("sink_excluded"))
    results = {"panel": {**body, "nan_reasons": dict(sorted(rec.reasons.items()))}}
    metrics: dict[str, Any] = {"poolings": {}}
    for p, e in body["poolings"].items():
        s = e["summary"]
        metrics["poolings"][p] = {k: s[k] for k in ("peak_positive_depth_mean", "peak_positive_depth_std",
                                                    "peak_negative_depth_mean", "peak_negative_depth_std", "stable")}
    mean_models = body["poolings"]["mean"]["models"] if "mean" in body["poolings"] else {}
    metrics["final_r"] = {m: v["final_r"] for m, v in mean_models.items()}
    metrics["peak_positive_depth_pct"] = {m: v["peak_positive"]["depth_pct"] for m, v in mean_models.items()}
    if "sink_excluded" in body:
        metrics["sink_excluded_final_r"] = {m: v["final_r"]
                                            for m, v in body["sink_excluded"]["mean"]["models"].items()}
    plots = {}
    for m in model_ids:
        lw = layerwise_results[m]
        cols: dict[str, list[Any]] = {"layer": list(lw.layers), "depth_pct": list(lw.depth_pct)}
        for p in poolings:
            cols[f"r_{p}"] = list(lw.poolings[p].pearson_r)
        if sink_excluded_results:
            cols["r_mean_sink_excluded"] = list(sink_excluded_results[m].poolings["mean"].pearson_r)
        plots[m] = cols
    return Outputs(results=results, metrics=metrics, plots=plots)
