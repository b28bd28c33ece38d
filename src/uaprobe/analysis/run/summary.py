"""The headline scalars (``metrics/models/<id>.json``) and per-layer CSV series (``plots/<kind>/<id>.csv``)
of one model, read off the attributes of its results files' records."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from uaprobe.analysis.category import robustness
from uaprobe.schema import missing
from uaprobe.schema.categories import Bins, Layerwise, Preference, Validation
from uaprobe.schema.common import ResultsHeader
from uaprobe.schema.document import document
from uaprobe.schema.geometry import Anisotropy, Robustness
from uaprobe.schema.metrics import (AnisotropyMetrics, BinsMetrics, LayerwiseMetrics, ModelMetrics, PairsMetrics,
                                    PreferenceMetrics, ValidationMetrics)
from uaprobe.schema.pairs import Pairs


def model_metrics(records: Mapping[str, ResultsHeader]) -> dict[str, Any]:
    """The headline scalars of one model read off its results files (``metrics/models/<id>.json`` but the pair
    level's, the specification curve's and the control's): key -> the schema's metrics record (or a mapping of
    them)."""
    lw, val, bn, pr = records["layerwise"], records["validation"], records["bins"], records["pairs"]
    a, pf, rob = records["anisotropy"], records["preference"], records["robustness"]
    assert isinstance(lw, Layerwise) and isinstance(val, Validation) and isinstance(bn, Bins)
    assert isinstance(pr, Pairs) and isinstance(a, Anisotropy) and isinstance(pf, Preference)
    assert isinstance(rob, Robustness)
    g = val.variants["mean"].global_
    cluster = pr.cluster_bootstrap.poolings
    mean = pf.poolings["mean"]
    return {
        "layerwise": {p: LayerwiseMetrics(
            final_r=e.final.r, final_p=e.final.p, final_permutation_p=e.permutation_p[-1], layer0_r=e.pearson_r[0],
            layer0_permutation_p=e.permutation_p[0], prenorm_r=e.prenorm.pearson_r, peak_positive_r=e.peak_positive.r,
            peak_positive_layer=e.peak_positive.layer, peak_negative_r=e.peak_negative.r,
            peak_negative_layer=e.peak_negative.layer, n_sign_changes=len(e.sign_changes),
            n_holm_reject=missing.count_true(e.holm_reject), n_bh_reject=missing.count_true(e.bh_reject)) for p, e in lw.poolings.items()},
        "validation": ValidationMetrics(mean_ua=g.mean_ua, std_ua=g.std_ua, ci_low=g.ci_low, ci_high=g.ci_high,
                                        cohens_d=g.cohens_d, r=g.r, mean_preference=g.mean_preference),
        "bins": {scheme: BinsMetrics(
            **{f"final_r_mean_k{k}": by_k.r_mean[-1] for k, by_k in s.by_k.items()},
            ci_final_r=s.ci_partition.r[-1], ci_final_low=s.ci_partition.bootstrap_ci_low[-1],
            ci_final_high=s.ci_partition.bootstrap_ci_high[-1],
            n_layers_ci_excludes_zero=missing.count_true(s.ci_partition.ci_excludes_zero))
            for scheme, s in bn.poolings["mean"].schemes.items()},
        "pairs": {p: PairsMetrics(
            final_r=e.final.r, final_ci_low=e.final.bootstrap_ci_low, final_ci_high=e.final.bootstrap_ci_high,
            final_cluster_ci_low=cluster[p]["score"].low[-1], final_cluster_ci_high=cluster[p]["score"].high[-1],
            peak_abs_r=e.peak_abs.r, peak_abs_layer=e.peak_abs.layer) for p, e in pr.poolings.items()},
        "anisotropy": AnisotropyMetrics(
            l_star=a.l_star, l_star_depth_pct=a.l_star_depth_pct, is_bell_curve=a.bell_curve.is_bell_curve,
            is_bell_curve_significant=a.bell_curve.is_bell_curve_significant, n_l_star_ties=len(a.l_star_ties),
            l_star_all_tokens=a.variants["all_tokens"].l_star, l_star_sink_excluded=a.variants["sink_excluded"].l_star,
            distance_to_last_inversion=a.correlation_sign_changes.distance_to_last_inversion),
        "preference": PreferenceMetrics(r_categories_mean_vs_sum=pf.r_categories_mean_vs_sum,
                                        final_r_mean=mean.r_mean[-1], final_r_sum=mean.r_sum[-1]),
        **robustness.robustness_metrics(rob),
    }


def metrics_document(pieces: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics/models/<id>.json`` of its pieces (:func:`model_metrics` and the others), built as its model; missing
    values None (their reasons are in the results files)."""
    return missing.as_null(document(ModelMetrics(**pieces)))


def _series(values: Iterable[Any]) -> list[Any]:
    """A record's per-layer values as a column (a copy: the record's own list is not changed)."""
    return list(values)


def model_plots(records: Mapping[str, ResultsHeader]) -> dict[str, dict[str, list[Any]]]:
    """Per-layer CSV series of one model (``plots/<kind>/<id>.csv``), missing values None."""
    lw, bn, pr, a, rob = (records[k] for k in ("layerwise", "bins", "pairs", "anisotropy", "robustness"))
    assert isinstance(lw, Layerwise) and isinstance(bn, Bins) and isinstance(pr, Pairs)
    assert isinstance(a, Anisotropy) and isinstance(rob, Robustness)
    base = {"layer": list(range(lw.n_layers + 1)), "depth_pct": list(lw.depth_pct)}
    cols: dict[str, list[Any]] = dict(base)
    for suffix, stem in (("", "layerwise"), ("_sink_excluded", "sink_excluded/layerwise")):
        rec = records[stem]
        assert isinstance(rec, Layerwise)
        for p, e in rec.poolings.items():
            cols.update({f"r_{p}{suffix}": _series(e.pearson_r), f"spearman_{p}{suffix}": _series(e.spearman_rho),
                         f"permutation_p_{p}{suffix}": _series(e.permutation_p),
                         f"permutation_holm_p_{p}{suffix}": _series(e.permutation_holm_p),
                         f"permutation_bh_p_{p}{suffix}": _series(e.permutation_bh_p),
                         f"fisher_low_{p}{suffix}": _series(e.fisher_ci_low),
                         f"fisher_high_{p}{suffix}": _series(e.fisher_ci_high),
                         f"p_{p}{suffix}": _series(e.pearson_p), f"ci_low_{p}{suffix}": _series(e.bootstrap_ci_low),
                         f"ci_high_{p}{suffix}": _series(e.bootstrap_ci_high), f"holm_p_{p}{suffix}": _series(e.holm_p),
                         f"bh_p_{p}{suffix}": _series(e.bh_p)})
    plots = {"layerwise": cols}
    sk = rob.sink
    plots["sink"] = dict(base, norm_ratio_median=_series(sk.norm_ratio_median), norm_ratio_q10=_series(sk.norm_ratio_q10),
                         norm_ratio_q90=_series(sk.norm_ratio_q90), mean_share_median=_series(sk.mean_share_median),
                         top_dim_share_median=_series(sk.top_dim_share_median), top_dim_mode=_series(sk.top_dim_mode))
    cols = dict(base)
    for scheme, s in bn.poolings["mean"].schemes.items():
        for k, e in s.by_k.items():
            cols[f"r_mean_{scheme}_k{k}"] = _series(e.r_mean)
            cols[f"r_std_{scheme}_k{k}"] = _series(e.r_std)
        ci = s.ci_partition
        cols.update({f"ci_r_{scheme}": _series(ci.r), f"ci_low_{scheme}": _series(ci.bootstrap_ci_low),
                     f"ci_high_{scheme}": _series(ci.bootstrap_ci_high)})
    plots["bins"] = cols
    cols = dict(base)
    for p, e in pr.poolings.items():
        cols.update({f"r_{p}": _series(e.pearson_r), f"ci_low_{p}": _series(e.bootstrap_ci_low),
                     f"ci_high_{p}": _series(e.bootstrap_ci_high)})
    plots["pairs"] = cols
    cols = dict(base)
    for key in ("eigenvalue_variance", "lambda1_ratio", "effective_rank", "mean_cos_to_mean", "var_top1",
                "var_top10", "var_top50"):
        cols[key] = _series(getattr(a, key))
    for name, v in a.variants.items():
        cols[f"lambda1_ratio_{name}"] = _series(v.lambda1_ratio)
    plots["anisotropy"] = cols
    return missing.as_null(plots)
