"""The headline scalars (``metrics/models/<id>.json``) and per-layer CSV series (``plots/<kind>/<id>.csv``)
of one model, read off its results documents."""

from __future__ import annotations

from typing import Any, Mapping

from uaprobe.analysis.category import robustness
from uaprobe.config import AnalysisParams


def model_metrics(results: Mapping[str, dict[str, Any]], *, params: AnalysisParams) -> dict[str, Any]:
    """Headline scalars of one model (``metrics/models/<id>.json``)."""
    lw = results["layerwise"]["poolings"]
    m: dict[str, Any] = {"layerwise": {}, "pairs": {}, "bins": {}}
    for p, e in lw.items():
        m["layerwise"][p] = {
            "final_r": e["final"]["r"], "final_p": e["final"]["p"],
            "final_permutation_p": e["permutation_p"][-1],
            "layer0_r": e["pearson_r"][0], "layer0_permutation_p": e["permutation_p"][0],
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
    cluster = results["pairs"]["cluster_bootstrap"]["poolings"]
    for p, e in results["pairs"]["poolings"].items():
        m["pairs"][p] = {"final_r": e["final"]["r"], "final_ci_low": e["final"]["bootstrap_ci_low"],
                         "final_ci_high": e["final"]["bootstrap_ci_high"],
                         "final_cluster_ci_low": cluster[p]["score"]["low"][-1],
                         "final_cluster_ci_high": cluster[p]["score"]["high"][-1], "peak_abs_r": e["peak_abs"]["r"],
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
