"""The seed notebooks' analysis code, kept as close to the original as arrays allow.

Readable, loop-based references: the unit tests compare the vectorised library against them, and
``bench/analyze.py`` times them against it on the same data. Only the model calls are gone (inputs
are arrays) and the global NumPy RNG is replaced by an explicit ``numpy.random.RandomState``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def uniformity_score(embeddings: np.ndarray) -> float:
    """Seeds 000-003: average pairwise cosine similarity."""
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    normalized = embeddings / (norms + 1e-10)
    kernel = normalized @ normalized.T
    n = kernel.shape[0]
    idx = np.triu_indices(n, k=1)
    return float(np.mean(kernel[idx]))


def layer_correlations(emb_a: np.ndarray, emb_b: np.ndarray, prefs: np.ndarray, category_indices: list[str],
                       categories: list[str]) -> dict[str, object]:
    """Seed 000/001 per-strategy block: per-category UA and mean preference, then pearsonr.

    emb_a, emb_b: (n_pairs, D) for one layer; prefs (n_pairs,); category_indices: category per pair.
    """
    category_uas, category_prefs = [], []
    for cat_name in categories:
        cat_mask = [c == cat_name for c in category_indices]
        u_a = uniformity_score(emb_a[cat_mask])
        u_b = uniformity_score(emb_b[cat_mask])
        category_uas.append(u_a - u_b)
        category_prefs.append(float(np.mean(np.array(prefs)[cat_mask])))
    r, p = stats.pearsonr(category_uas, category_prefs)
    return {"correlation": float(r), "p_value": float(p), "category_uas": category_uas,
            "category_prefs": category_prefs}


def bootstrap_correlation(x: np.ndarray, y: np.ndarray, n_bootstrap: int, ci_level: float,
                          rs: np.random.RandomState) -> tuple[float, float, float, float]:
    """Seed 002: bootstrap CI for Pearson r (one pearsonr per resample)."""
    n = len(x)
    if n < 3:
        return 0.0, -1.0, 1.0, 1.0
    r_observed, p_value = stats.pearsonr(x, y)
    bootstrap_rs = []
    for _ in range(n_bootstrap):
        idx = rs.choice(n, size=n, replace=True)
        x_boot = x[idx]
        y_boot = y[idx]
        if np.std(x_boot) > 0 and np.std(y_boot) > 0:
            r_boot, _ = stats.pearsonr(x_boot, y_boot)
            bootstrap_rs.append(r_boot)
    if len(bootstrap_rs) < 100:
        return float(r_observed), -1.0, 1.0, float(p_value)
    bootstrap_rs = np.array(bootstrap_rs)
    alpha = 1 - ci_level
    return (float(r_observed), float(np.percentile(bootstrap_rs, alpha / 2 * 100)),
            float(np.percentile(bootstrap_rs, (1 - alpha / 2) * 100)), float(p_value))


def analyze_with_k_bins(emb_a: np.ndarray, emb_b: np.ndarray, prefs: np.ndarray, k: int, n_permutations: int,
                        rs: np.random.RandomState | None = None,
                        assignments: np.ndarray | None = None) -> dict[str, float]:
    """Seed 002: r over k random bins, averaged over ``n_permutations`` partitions.

    ``assignments`` (n_permutations, n_pairs) replays given partitions instead of drawing them.
    """
    n_pairs = len(prefs)
    all_rs, all_ps = [], []
    for perm in range(n_permutations):
        bin_assignments = assignments[perm] if assignments is not None else rs.randint(0, k, size=n_pairs)
        bin_uas, bin_prefs = [], []
        for bin_idx in range(k):
            bin_mask = bin_assignments == bin_idx
            if bin_mask.sum() < 2:
                continue
            bin_embs_a, bin_embs_b, bin_preferences = [], [], []
            for i, is_in_bin in enumerate(bin_mask):
                if is_in_bin:
                    bin_embs_a.append(emb_a[i])
                    bin_embs_b.append(emb_b[i])
                    bin_preferences.append(prefs[i])
            ua = uniformity_score(np.array(bin_embs_a)) - uniformity_score(np.array(bin_embs_b))
            bin_uas.append(ua)
            bin_prefs.append(np.mean(bin_preferences))
        if len(bin_uas) >= 3:
            r, p = stats.pearsonr(bin_uas, bin_prefs)
            all_rs.append(r)
            all_ps.append(p)
    if not all_rs:
        return {"r_mean": 0, "r_std": 0, "p_mean": 1, "n_valid": 0}
    return {"r_mean": float(np.mean(all_rs)), "r_std": float(np.std(all_rs)), "p_mean": float(np.mean(all_ps)),
            "n_valid": len(all_rs)}


def bootstrap_ci_mean(data: np.ndarray, n_bootstrap: int, ci: float, rs: np.random.RandomState) -> tuple[float, float]:
    """Seed 003: bootstrap CI of the mean."""
    bootstrap_means = [np.mean(rs.choice(data, size=len(data), replace=True)) for _ in range(n_bootstrap)]
    alpha = 1 - ci
    return (float(np.percentile(bootstrap_means, alpha / 2 * 100)),
            float(np.percentile(bootstrap_means, (1 - alpha / 2) * 100)))


def cohens_d(data: np.ndarray, null_value: float = 0) -> float:
    """Seed 003."""
    return float((np.mean(data) - null_value) / (np.std(data) + 1e-10))


def validation_global(all_asymmetries: np.ndarray, all_preferences: np.ndarray) -> dict[str, float]:
    """Seed 003's `_global_stats` without the bootstrap."""
    correlation = np.corrcoef(all_asymmetries, all_preferences)[0, 1]
    return {"mean_asymmetry": float(np.mean(all_asymmetries)), "std_asymmetry": float(np.std(all_asymmetries)),
            "cohens_d": cohens_d(all_asymmetries), "ua_output_correlation": float(correlation),
            "mean_output_preference": float(np.mean(all_preferences))}


def compute_anisotropy_metrics(embeddings: np.ndarray) -> dict[str, object]:
    """Seed 004: eigendecomposition of the D x D covariance."""
    centered = embeddings - embeddings.mean(axis=0)
    n_samples = embeddings.shape[0]
    cov = (centered.T @ centered) / (n_samples - 1)
    eigenvalues = np.linalg.eigvalsh(cov)
    eigenvalues = np.sort(eigenvalues)[::-1]
    eigenvalues = np.maximum(eigenvalues, 1e-10)
    eigenvalue_variance = np.var(eigenvalues)
    total_var = eigenvalues.sum()
    intrinsic_dim_ratio = eigenvalues[0] / total_var if total_var > 0 else 0
    normalized = eigenvalues / total_var
    entropy = -np.sum(normalized * np.log(normalized + 1e-10))
    effective_rank = np.exp(entropy)
    mean_vec = embeddings.mean(axis=0)
    mean_norm = np.linalg.norm(mean_vec)
    if mean_norm > 1e-10:
        cos_sims = []
        for emb in embeddings:
            cos_sims.append(np.dot(emb, mean_vec) / (np.linalg.norm(emb) * mean_norm + 1e-10))
        avg_cos_sim = np.mean(cos_sims)
    else:
        avg_cos_sim = 0
    cumsum = np.cumsum(eigenvalues) / total_var
    return {
        "eigenvalue_variance": eigenvalue_variance, "intrinsic_dim_ratio": intrinsic_dim_ratio,
        "effective_rank": effective_rank, "avg_cos_sim_to_mean": avg_cos_sim,
        "var_top1": eigenvalues[0] / total_var, "var_top10": cumsum[min(9, len(cumsum) - 1)],
        "var_top50": cumsum[min(49, len(cumsum) - 1)], "eigenvalues": eigenvalues[:100],
    }


def analyze_bell_curve(values: list[float], L_star: int) -> dict[str, object]:
    """Seed 004."""
    values = np.array(values)
    phase1 = values[:L_star]
    phase2 = values[L_star:]
    if len(phase1) > 1:
        slope1, _, r1, p1, _ = stats.linregress(range(len(phase1)), phase1)
    else:
        slope1, r1, p1 = 0, 0, 1
    if len(phase2) > 1:
        slope2, _, r2, p2, _ = stats.linregress(range(len(phase2)), phase2)
    else:
        slope2, r2, p2 = 0, 0, 1
    return {"is_bell_curve": (slope1 > 0) and (slope2 < 0), "phase1_slope": slope1, "phase1_r": r1,
            "phase1_p": p1, "phase2_slope": slope2, "phase2_r": r2, "phase2_p": p2}


def scaling_summary(layer_results: dict[int, float], n_layers: int) -> dict[str, object]:
    """Seed 001 per-model summary from layer -> r."""
    layers = sorted(layer_results)
    correlations = [layer_results[layer] for layer in layers]
    max_pos_r = max(correlations)
    max_pos_layer = layers[correlations.index(max_pos_r)]
    max_neg_r = min(correlations)
    max_neg_layer = layers[correlations.index(max_neg_r)]
    sign_changes = []
    for i in range(len(correlations) - 1):
        if correlations[i] * correlations[i + 1] < 0:
            midpoint = (layers[i] + layers[i + 1]) / 2
            sign_changes.append({"layer_before": layers[i], "layer_after": layers[i + 1],
                                 "midpoint_pct": midpoint / n_layers * 100})
    return {"max_pos_r": max_pos_r, "max_pos_layer": max_pos_layer, "max_pos_pct": max_pos_layer / n_layers * 100,
            "max_neg_r": max_neg_r, "max_neg_layer": max_neg_layer, "max_neg_pct": max_neg_layer / n_layers * 100,
            "final_r": layer_results[max(layers)], "sign_changes": sign_changes}
