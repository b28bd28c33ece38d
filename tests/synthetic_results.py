"""A small synthetic project tree of analysis outputs, laid out as ``docs/results.md`` describes.

The values are random (seeded) but internally consistent where the figures and the manuscript
rely on it (lengths, layer indices, CIs around r, sign changes where r changes sign). Used by the
figure, manuscript and rendering tests, which must run without the models and the analysis stage.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]

CATEGORIES = ("ground_truth_numeric", "ground_truth_nonnumeric", "tech_philosophy", "lifestyle",
              "business", "scientific_facts")
POOLINGS = ("mean", "last", "first")
SYNTHETIC_MODELS: dict[str, dict[str, Any]] = {
    "tiny-a": {"display": "Tiny-A", "n_layers": 6, "params_millions": 1.5, "hidden": 16},
    "tiny-b": {"display": "Tiny-B", "n_layers": 4, "params_millions": 3.0, "hidden": 12},
}


def _dump(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _f(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    return params["analysis"]


def _common(model_id: str, spec: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n = spec["n_layers"]
    extraction = {"bos_added": model_id.endswith("b"), "dataset_sha256": "0" * 64, "display": spec["display"],
                  "dtype": "float32", "location": f"/models/{model_id}", "model_id": model_id,
                  "pooling_drop": params["pooling"]["drop"], "prompts_sha256": "0" * 64, "revision": "",
                  "source": "local", "uaprobe_version": "test"}
    return {"model": model_id, "display": spec["display"], "n_layers": n, "layers": list(range(n + 1)),
            "depth_pct": [100.0 * i / n for i in range(n + 1)], "settings": _settings(params),
            "seed_layers": sorted(set(list(range(0, n + 1, 4)) + [n])), "extraction": extraction}


def _sign_changes(r: list[float | None], layers: list[int], n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(len(r) - 1):
        if r[i] is not None and r[i + 1] is not None and r[i] * r[i + 1] < 0:
            out.append({"layer_before": layers[i], "layer_after": layers[i + 1], "r_before": r[i],
                        "r_after": r[i + 1], "midpoint_depth_pct": 100.0 * (layers[i] + layers[i + 1]) / 2 / n})
    return out


def _peak(r: list[float | None], n: int, best: Any) -> dict[str, Any]:
    values = [(v, i) for i, v in enumerate(r) if v is not None]
    v, i = best(values)
    return {"layer": i, "r": v, "depth_pct": 100.0 * i / n}


def _corr_block(rng: np.random.Generator, n_layers: int, n_groups: int, *, base: float) -> dict[str, Any]:
    layers = np.arange(n_layers + 1)
    r = np.clip(base * np.cos(np.pi * layers / max(n_layers, 1) * 1.3) + rng.normal(0, 0.15, layers.size), -0.97, 0.97)
    half = rng.uniform(0.2, 0.6, layers.size)
    p = np.clip(rng.uniform(0.001, 0.9, layers.size), 0, 1)
    return {
        "pearson_r": [float(x) for x in r],
        "pearson_p": [float(x) for x in p],
        "spearman_rho": [float(x) for x in np.clip(r + rng.normal(0, 0.05, r.size), -1, 1)],
        "spearman_p": [float(x) for x in p],
        "bootstrap_ci_low": [float(max(-1.0, x - h)) for x, h in zip(r, half)],
        "bootstrap_ci_high": [float(min(1.0, x + h)) for x, h in zip(r, half)],
        "bootstrap_valid": [1000] * r.size,
        "fisher_ci_low": [float(max(-1.0, x - h * 1.2)) for x, h in zip(r, half)],
        "fisher_ci_high": [float(min(1.0, x + h * 1.2)) for x, h in zip(r, half)],
        "permutation_p": [float(min(1.0, x * 1.1)) for x in p],
        "holm_p": [float(min(1.0, x * (n_layers + 1))) for x in p],
        "holm_reject": [bool(x * (n_layers + 1) < 0.05) for x in p],
        "bh_p": [float(min(1.0, x * 2)) for x in p],
        "bh_reject": [bool(x * 2 < 0.05) for x in p],
    }


def _layerwise(rng: np.random.Generator, model_id: str, spec: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n = spec["n_layers"]
    layers = list(range(n + 1))
    n_cat = len(CATEGORIES)
    mean_pref = [float(x) for x in rng.normal(0.2, 0.5, n_cat)]
    doc = _common(model_id, spec, params) | {
        "categories": list(CATEGORIES), "n_pairs": [3] * n_cat, "preference": "mean",
        "mean_preference": mean_pref, "seed_layers": sorted(set(list(range(0, n + 1, 4)) + [n])),
        "permutation_mode": "exact", "poolings": {}, "nan_reasons": {},
    }
    for k, pooling in enumerate(POOLINGS):
        block = _corr_block(rng, n, n_cat, base=(0.7, -0.5, 0.3)[k])
        u_a = rng.uniform(0.2, 0.9, (n + 1, n_cat))
        u_b = u_a - rng.normal(0, 0.03, (n + 1, n_cat))
        r = block["pearson_r"]
        loco = np.clip(np.array(r)[:, None] + rng.normal(0, 0.2, (n + 1, n_cat)), -1, 1)
        shifts = np.abs(loco - np.array(r)[:, None])
        block.update({
            "u_a": u_a.tolist(), "u_b": u_b.tolist(), "ua": (u_a - u_b).tolist(),
            "permutation_holm_p": block["holm_p"], "permutation_bh_p": block["bh_p"],
            "loco_r": loco.tolist(), "loco_driver": [CATEGORIES[int(j)] for j in shifts.argmax(axis=1)],
            "loco_max_shift": [float(x) for x in shifts.max(axis=1)],
            "sign_changes": _sign_changes(r, layers, n),
            "seed_layers_sign_changes": _sign_changes([r[i] for i in doc["seed_layers"]], doc["seed_layers"], n),
            "peak_positive": _peak(r, n, max), "peak_negative": _peak(r, n, min),
            "final": {"layer": n, "r": r[-1], "p": block["pearson_p"][-1]},
        })
        pre = _corr_block(rng, 0, n_cat, base=0.4)
        block["prenorm"] = {key: value[0] for key, value in pre.items() if not key.endswith("reject") and key not in ("holm_p", "bh_p")}
        block["prenorm"].update({"u_a": u_a[-1].tolist(), "u_b": u_b[-1].tolist(), "ua": (u_a - u_b)[-1].tolist(),
                                 "loco_r": loco[-1].tolist(), "loco_driver": CATEGORIES[0], "loco_max_shift": 0.1})
        doc["poolings"][pooling] = block
    return doc


def _validation(rng: np.random.Generator, lw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n = lw["n_layers"]
    a = params["analysis"]
    variants = {}
    for variant in ("mean", "last", "first", "mean_prenorm", "last_prenorm", "first_prenorm"):
        pooling = variant.split("_")[0]
        block = lw["poolings"][pooling]
        ua = block["prenorm"]["ua"] if variant.endswith("prenorm") else block["ua"][n]
        u_a = block["prenorm"]["u_a"] if variant.endswith("prenorm") else block["u_a"][n]
        u_b = block["prenorm"]["u_b"] if variant.endswith("prenorm") else block["u_b"][n]
        rows = []
        for j, cat in enumerate(lw["categories"]):
            pref = lw["mean_preference"][j]
            aligned = (ua[j] > 0 and pref > 0) or (ua[j] < 0 and pref < 0) or (
                abs(ua[j]) < a["neutral_ua"] and abs(pref) < a["neutral_preference"])
            rows.append({"category": cat, "n_pairs": 3, "u_a": u_a[j], "u_b": u_b[j], "ua": ua[j],
                         "mean_preference": pref, "pct_prefer_a": float(rng.choice([0.0, 33.3, 66.7, 100.0])),
                         "aligned": bool(aligned)})
        arr = np.array(ua)
        r = float(np.corrcoef(arr, lw["mean_preference"])[0, 1])
        label = "ALIGNED" if r > a["aligned_r"] else "INVERTED" if r < a["inverted_r"] else "DECOUPLED"
        variants[variant] = {"table": rows, "global": {
            "total_pairs": 18, "mean_ua": float(arr.mean()), "std_ua": float(arr.std()),
            "ci_low": float(arr.mean() - 0.01), "ci_high": float(arr.mean() + 0.01), "ci_level": a["ci_level"],
            "cohens_d": float(arr.mean() / (arr.std() + 1e-10)), "r": r,
            "mean_preference": float(np.mean(lw["mean_preference"])), "label": label}}
    return {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "settings", "seed_layers", "extraction")} | {
        "layer": n, "thresholds": {k: a[k] for k in ("aligned_r", "inverted_r", "neutral_ua", "neutral_preference")},
        "variants": variants, "nan_reasons": {}}


def _bins(rng: np.random.Generator, lw: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    n = lw["n_layers"]
    b = params["analysis"]["bins"]
    size = n + 1
    poolings = {}
    for pooling in POOLINGS:
        schemes = {}
        for scheme in ("randint", "balanced"):
            by_k = {str(k): {"r_mean": rng.uniform(-0.5, 0.5, size).tolist(), "r_std": rng.uniform(0.05, 0.3, size).tolist(),
                             "p_mean": rng.uniform(0, 1, size).tolist(), "n_valid": [b["partitions"]] * size,
                             "bins_used_mean": float(k), "bin_size_min": 1, "bin_size_max": 4} for k in b["k"]}
            r = rng.uniform(-0.8, 0.8, size)
            half = rng.uniform(0.1, 0.4, size)
            low, high = np.maximum(-1, r - half), np.minimum(1, r + half)
            excl = [(bool(lo > 0 or hi < 0)) for lo, hi in zip(low, high)]
            cat = lw["poolings"][pooling]
            cat_low, cat_high = np.array(cat["bootstrap_ci_low"]), np.array(cat["bootstrap_ci_high"])
            cat_excl = [(bool(lo > 0 or hi < 0)) for lo, hi in zip(cat_low, cat_high)]
            change = ["NOW SIGNIFICANT" if e and not c else "Lost significance" if c and not e else "No change"
                      for c, e in zip(cat_excl, excl)]
            w_cat, w_bin = cat_high - cat_low, high - low
            schemes[scheme] = {
                "by_k": by_k,
                "ci_partition": {"assignment": [int(x) for x in rng.integers(0, b["ci_k"], 18)],
                                 "bin_sizes": [18 // b["ci_k"]] * b["ci_k"], "mean_preference": rng.normal(0, 1, b["ci_k"]).tolist(),
                                 "u_a": rng.uniform(0, 1, (size, b["ci_k"])).tolist(), "u_b": rng.uniform(0, 1, (size, b["ci_k"])).tolist(),
                                 "ua": rng.normal(0, 0.02, (size, b["ci_k"])).tolist(), "r": r.tolist(),
                                 "p": rng.uniform(0, 1, size).tolist(), "bootstrap_ci_low": low.tolist(),
                                 "bootstrap_ci_high": high.tolist(), "bootstrap_valid": [1000] * size,
                                 "ci_excludes_zero": excl},
                "comparison": {"categories_r": cat["pearson_r"], "categories_ci_low": cat_low.tolist(),
                               "categories_ci_high": cat_high.tolist(), "categories_ci_width": w_cat.tolist(),
                               "categories_ci_excludes_zero": cat_excl, "bins_ci_width": w_bin.tolist(),
                               "change": change, "n_significant_categories": int(sum(cat_excl)),
                               "n_significant_bins": int(sum(excl)), "mean_ci_width_categories": float(w_cat.mean()),
                               "mean_ci_width_bins": float(w_bin.mean()),
                               "ci_width_reduction_pct": float(100 * (w_cat.mean() - w_bin.mean()) / w_cat.mean())},
            }
        poolings[pooling] = {"schemes": schemes}
    return {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "settings", "seed_layers", "extraction")} | {
        "n_pairs": 18, "k": list(b["k"]), "partitions": b["partitions"], "ci_k": b["ci_k"],
        "poolings": poolings, "nan_reasons": {}}


def _pairs(rng: np.random.Generator, lw: dict[str, Any]) -> dict[str, Any]:
    n = lw["n_layers"]
    poolings = {}
    for k, pooling in enumerate(POOLINGS):
        block = _corr_block(rng, n, 18, base=(0.3, -0.2, 0.1)[k])
        block["score"] = rng.normal(0, 0.1, (n + 1, 18)).tolist()
        r = block["pearson_r"]
        i = int(np.argmax(np.abs(r)))
        block["peak_abs"] = {"layer": i, "r": r[i], "depth_pct": 100.0 * i / n}
        block["final"] = {"layer": n, "r": r[-1], "p": block["pearson_p"][-1],
                          "bootstrap_ci_low": block["bootstrap_ci_low"][-1], "bootstrap_ci_high": block["bootstrap_ci_high"][-1]}
        pre = _corr_block(rng, 0, 18, base=0.2)
        block["prenorm"] = {key: value[0] for key, value in pre.items() if key not in ("holm_p", "holm_reject", "bh_p", "bh_reject")}
        block["prenorm"]["score"] = rng.normal(0, 0.1, 18).tolist()
        poolings[pooling] = block
    cats = [c for c in CATEGORIES for _ in range(3)]
    return {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "settings", "seed_layers", "extraction")} | {
        "pair": list(range(18)), "category": cats, "preference": rng.normal(0, 1, 18).tolist(),
        "permutation_mode": "random", "poolings": poolings, "nan_reasons": {}}


def _preference(rng: np.random.Generator, lw: dict[str, Any]) -> dict[str, Any]:
    n = lw["n_layers"]
    size = n + 1
    nm_a, nm_b = rng.uniform(2, 6, 18), rng.uniform(2, 6, 18)
    nt_a, nt_b = rng.integers(2, 9, 18), rng.integers(2, 9, 18)
    poolings = {}
    for pooling in POOLINGS:
        r_mean, r_sum = rng.uniform(-1, 1, size), rng.uniform(-1, 1, size)
        poolings[pooling] = {"r_mean": r_mean.tolist(), "p_mean": rng.uniform(0, 1, size).tolist(),
                             "r_sum": r_sum.tolist(), "p_sum": rng.uniform(0, 1, size).tolist(),
                             "sign_agree": [bool(a * b > 0) for a, b in zip(r_mean, r_sum)],
                             "prenorm": {"r_mean": 0.1, "p_mean": 0.5, "r_sum": 0.2, "p_sum": 0.4}}
    return {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "settings", "seed_layers", "extraction")} | {
        "pairs": {"pair": list(range(18)), "category": [c for c in CATEGORIES for _ in range(3)],
                  "nll_mean_a": nm_a.tolist(), "nll_mean_b": nm_b.tolist(), "nll_sum_a": (nm_a * nt_a).tolist(),
                  "nll_sum_b": (nm_b * nt_b).tolist(), "n_tokens_a": nt_a.tolist(), "n_tokens_b": nt_b.tolist(),
                  "preference_mean": (nm_b - nm_a).tolist(), "preference_sum": (nm_b * nt_b - nm_a * nt_a).tolist()},
        "categories": list(CATEGORIES), "category_preference_mean": lw["mean_preference"],
        "category_preference_sum": [x * 5 for x in lw["mean_preference"]], "r_pairs_mean_vs_sum": 0.8,
        "r_categories_mean_vs_sum": 0.9, "poolings": poolings, "selected": "mean", "nan_reasons": {}}


def _anisotropy(rng: np.random.Generator, lw: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    n = lw["n_layers"]
    size = n + 1
    d = spec["hidden"]
    ratio = np.clip(0.2 + 0.5 * np.sin(np.pi * np.arange(size) / n) + rng.normal(0, 0.02, size), 0.05, 0.95)
    spectra = []
    for layer in range(size):
        tail = np.sort(rng.uniform(0.01, 1.0, d - 1))[::-1] * (1 - ratio[layer])
        top = ratio[layer] * (tail.sum() / (1 - ratio[layer]) + 0) if ratio[layer] < 1 else 1.0
        eig = np.concatenate([[max(top, tail[0] * 1.01)], tail])
        spectra.append(eig.tolist())
    eigs = np.array(spectra)
    share = eigs / eigs.sum(axis=1, keepdims=True)
    l_star = int(np.argmax(share[:, 0]))
    sc = lw["poolings"]["mean"]["sign_changes"]
    inversions = [c for c in sc if c["r_before"] > 0 > c["r_after"]]
    last = inversions[-1]["layer_after"] if inversions else None
    return {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "settings", "seed_layers", "extraction")} | {
        "token_selection": "content", "n_tokens": 60, "n_prompts": 3, "hidden_size": d,
        "eigenvalue_variance": eigs.var(axis=1).tolist(), "lambda1_ratio": share[:, 0].tolist(),
        "effective_rank": np.exp(-(share * np.log(share)).sum(axis=1)).tolist(),
        "mean_cos_to_mean": rng.uniform(0.3, 0.9, size).tolist(), "var_top1": share[:, 0].tolist(),
        "var_top10": share[:, :10].sum(axis=1).tolist(), "var_top50": share[:, :50].sum(axis=1).tolist(),
        "spectrum": spectra, "spectrum_top": d, "l_star": l_star, "l_star_depth_pct": 100.0 * l_star / n,
        "l_star_value": float(share[l_star, 0]),
        "bell_curve": {"before": {"slope": 0.05, "intercept": 0.2, "r": 0.9, "p": 0.01, "n_layers": l_star},
                       "after": {"slope": -0.04, "intercept": 0.6, "r": -0.8, "p": 0.02, "n_layers": size - l_star},
                       "is_bell_curve": True},
        "correlation_sign_changes": {"pooling": "mean", "sign_changes": [c | {"distance": l_star - c["layer_after"]} for c in sc],
                                     "last_inversion_layer": last,
                                     "distance_to_last_inversion": None if last is None else l_star - last,
                                     "nearest_sign_change_layer": sc[0]["layer_after"] if sc else None,
                                     "distance_to_nearest": (l_star - sc[0]["layer_after"]) if sc else None},
        "nan_reasons": {}}


def _panel(docs: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    models = list(docs)
    out: dict[str, Any] = {"models": models, "stable_depth_std": params["analysis"]["stable_depth_std"],
                           "poolings": {}, "seed_layers_view": {}, "anisotropy": {}, "nan_reasons": {}}
    for view, restrict in (("poolings", False), ("seed_layers_view", True)):
        target = out[view]
        for pooling in POOLINGS:
            entries = {}
            for m, d in docs.items():
                lw = d["layerwise"]
                n = lw["n_layers"]
                layers = lw["seed_layers"] if restrict else lw["layers"]
                r = [lw["poolings"][pooling]["pearson_r"][i] for i in layers]
                entries[m] = {"display": lw["display"], "params_millions": params["catalog"][m]["params_millions"],
                              "n_layers": n, "layers": layers, "depth_pct": [100.0 * i / n for i in layers], "r": r,
                              "peak_positive": _peak_sub(r, layers, n, max), "peak_negative": _peak_sub(r, layers, n, min),
                              "final_r": r[-1], "sign_changes": [{k: c[k] for k in ("layer_before", "layer_after", "midpoint_depth_pct")}
                                                                  for c in _sign_changes(r, layers, n)]}
            pos = [e["peak_positive"]["depth_pct"] for e in entries.values()]
            neg = [e["peak_negative"]["depth_pct"] for e in entries.values()]
            target[pooling] = {"models": entries, "summary": {
                "n_models_with_peak": len(pos), "peak_positive_depth_mean": float(np.mean(pos)), "peak_positive_depth_std": float(np.std(pos)),
                "peak_negative_depth_mean": float(np.mean(neg)), "peak_negative_depth_std": float(np.std(neg)),
                "stable": bool(np.std(pos) < params["analysis"]["stable_depth_std"])}}
    for m, d in docs.items():
        a = d["anisotropy"]
        out["anisotropy"][m] = {"l_star": a["l_star"], "l_star_depth_pct": a["l_star_depth_pct"],
                                "is_bell_curve": a["bell_curve"]["is_bell_curve"]}
    return out


def _peak_sub(r: list[float], layers: list[int], n: int, best: Any) -> dict[str, Any]:
    v, i = best((v, i) for i, v in zip(layers, r))
    return {"layer": i, "r": v, "depth_pct": 100.0 * i / n}


def _metrics(d: dict[str, dict[str, Any]]) -> dict[str, Any]:
    lw, val, bins, pairs, an, pref = (d[k] for k in ("layerwise", "validation", "bins", "pairs", "anisotropy", "preference"))
    m: dict[str, Any] = {"layerwise": {}, "pairs": {}, "bins": {}}
    for p in POOLINGS:
        b = lw["poolings"][p]
        m["layerwise"][p] = {"final_r": b["final"]["r"], "final_p": b["final"]["p"],
                             "final_permutation_p": b["permutation_p"][-1], "prenorm_r": b["prenorm"]["pearson_r"],
                             "peak_positive_r": b["peak_positive"]["r"], "peak_positive_layer": b["peak_positive"]["layer"],
                             "peak_negative_r": b["peak_negative"]["r"], "peak_negative_layer": b["peak_negative"]["layer"],
                             "n_sign_changes": len(b["sign_changes"]), "n_holm_reject": sum(b["holm_reject"]),
                             "n_bh_reject": sum(b["bh_reject"])}
        pb = pairs["poolings"][p]
        m["pairs"][p] = {"final_r": pb["final"]["r"], "final_ci_low": pb["final"]["bootstrap_ci_low"],
                         "final_ci_high": pb["final"]["bootstrap_ci_high"], "peak_abs_r": pb["peak_abs"]["r"],
                         "peak_abs_layer": pb["peak_abs"]["layer"]}
    g = val["variants"]["mean"]["global"]
    m["validation"] = {k: g[k] for k in ("mean_ua", "std_ua", "ci_low", "ci_high", "cohens_d", "r", "mean_preference")}
    for s, data in bins["poolings"]["mean"]["schemes"].items():
        entry = {f"final_r_mean_k{k}": v["r_mean"][-1] for k, v in data["by_k"].items()}
        cp = data["ci_partition"]
        entry.update(ci_final_r=cp["r"][-1], ci_final_low=cp["bootstrap_ci_low"][-1],
                     ci_final_high=cp["bootstrap_ci_high"][-1], n_layers_ci_excludes_zero=sum(cp["ci_excludes_zero"]))
        m["bins"][s] = entry
    m["anisotropy"] = {"l_star": an["l_star"], "l_star_depth_pct": an["l_star_depth_pct"],
                       "is_bell_curve": an["bell_curve"]["is_bell_curve"],
                       "distance_to_last_inversion": an["correlation_sign_changes"]["distance_to_last_inversion"]}
    m["preference"] = {"r_categories_mean_vs_sum": pref["r_categories_mean_vs_sum"],
                       "final_r_mean": pref["poolings"]["mean"]["r_mean"][-1],
                       "final_r_sum": pref["poolings"]["mean"]["r_sum"][-1]}
    return m


def synthetic_params(models: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The project's params.yaml with a catalog of synthetic models and small analysis settings."""
    models = SYNTHETIC_MODELS if models is None else models
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = list(models)
    params["catalog"] = {m: {"display": s["display"], "source": "local", "location": f"/models/{m}",
                             "params_millions": s["params_millions"]} for m, s in models.items()}
    params["analysis"].update(bootstrap_resamples=1000, permutations=1000)
    params["analysis"]["bins"].update(k=[3, 4], partitions=10, ci_k=3)
    return params


def _option_b_docs(rng: np.random.Generator, lw: dict[str, Any], spec: dict[str, Any],
                   params: dict[str, Any]) -> dict[str, Any]:
    """``option_b.json`` and ``neutral_control.json`` from the library on random states (16 study
    pairs; control categories of 6 and 4 pairs)."""
    from uaprobe.analysis import optionb
    from uaprobe.analysis.report import NanReasons
    from uaprobe.config import AnalysisParams

    a = AnalysisParams(seed=params["analysis"]["seed"], bootstrap_resamples=200, permutations=200)
    header = {k: lw[k] for k in ("model", "display", "n_layers", "layers", "depth_pct", "seed_layers", "settings",
                                 "extraction")}

    def states(n_pairs: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        shift = rng.normal(size=(1, spec["n_layers"] + 1, spec["hidden"]))
        pooled = {p: rng.normal(size=(2 * n_pairs, spec["n_layers"] + 1, spec["hidden"])) + shift for p in POOLINGS}
        return pooled, rng.normal(size=n_pairs), rng.integers(4, 12, size=2 * n_pairs)

    pooled, pref, n_content = states(16)
    rec = NanReasons()
    body = optionb.option_b_poolings(pooled=pooled, row_a=np.arange(0, 32, 2), row_b=np.arange(1, 32, 2),
                                     preference=pref, n_content=n_content, params=a, rec=rec)
    docs = {"option_b": {**header, **body, "nan_reasons": dict(sorted(rec.reasons.items()))}}
    pooled, pref, n_content = states(10)
    rec = NanReasons()
    body = optionb.control_results(pooled=pooled, row_a=np.arange(0, 20, 2), row_b=np.arange(1, 20, 2),
                                   category_of_pair=np.array([0] * 6 + [1] * 4), categories=("neutral", "political"),
                                   preference=pref, n_content=n_content, params=a, rec=rec)
    docs["neutral_control"] = {**header, **body, "preference": {"neutral": pref[:6].tolist(),
                                                                 "political": pref[6:].tolist()},
                               "nan_reasons": dict(sorted(rec.reasons.items()))}
    return docs


def write_synthetic_results(root: Path, *, seed: int = 0, models: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write params.yaml, results/, metrics/ and a dvc.lock under ``root``; return the documents."""
    models = SYNTHETIC_MODELS if models is None else models
    rng = np.random.default_rng(seed)
    params = synthetic_params(models)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    published = root / "data" / "published" / "pythia-6-9b.json"
    published.parent.mkdir(parents=True, exist_ok=True)
    published.write_bytes((REPO / "data" / "published" / "pythia-6-9b.json").read_bytes())
    docs: dict[str, dict[str, Any]] = {}
    for model_id, spec in models.items():
        lw = _layerwise(rng, model_id, spec, params)
        d = {"layerwise": lw, "validation": _validation(rng, lw, params), "bins": _bins(rng, lw, params),
             "pairs": _pairs(rng, lw), "preference": _preference(rng, lw), "anisotropy": _anisotropy(rng, lw, spec)}
        d.update(_option_b_docs(np.random.default_rng([seed, len(docs), 14]), lw, spec, params))
        docs[model_id] = d
        for name, doc in d.items():
            _dump(root / "results" / "models" / model_id / f"{name}.json", doc)
        _dump(root / "metrics" / "models" / f"{model_id}.json", _metrics(d))
    panel = _panel(docs, params)
    _dump(root / "results" / "panel.json", panel)
    _dump(root / "metrics" / "panel.json", {
        "poolings": {p: {k: v for k, v in panel["poolings"][p]["summary"].items() if k != "n_models_with_peak"}
                     for p in POOLINGS},
        "final_r": {m: panel["poolings"]["mean"]["models"][m]["final_r"] for m in models},
        "peak_positive_depth_pct": {m: panel["poolings"]["mean"]["models"][m]["peak_positive"]["depth_pct"] for m in models}})
    write_dvc_lock(root)
    return {"params": params, "models": docs, "panel": panel}


def write_dvc_lock(root: Path) -> None:
    """A dvc.lock in DVC's layout whose outs are the results and metrics files under ``root``."""
    stages: dict[str, Any] = {}
    for path in sorted((root / "results").rglob("*.json")) + sorted((root / "metrics").rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        stage = "compare" if "panel" in rel else f"analyze@{path.parent.name if 'results/models' in rel else path.stem}"
        stages.setdefault(stage, {"cmd": f"python stages/{stage.split('@')[0]}.py", "outs": []})
        stages[stage]["outs"].append({"path": rel, "hash": "md5", "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                                      "size": path.stat().st_size})
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}, sort_keys=False), encoding="utf-8")


def load_results(root: Path, model_id: str, name: str) -> dict[str, Any]:
    return json.loads((root / "results" / "models" / model_id / f"{name}.json").read_text(encoding="utf-8"))
