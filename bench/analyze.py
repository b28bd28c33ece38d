"""Benchmark: the seed notebooks' loop implementations against the vectorised analyses.

Both sides do the same work on the same extraction file in one run, and the numbers they produce
are compared before the timings are trusted:

1. layer-wise r (seeds 000/001): per-category U_A, U_B, UA and pearsonr, every layer, 3 poolings;
2. random bins (seed 002): k in ``analysis.bins.k``, ``analysis.bins.partitions`` partitions each,
   every layer, mean pooling -- both sides evaluate the very same partitions;
3. the bootstrap CI of r over the ``ci_k`` bins (seed 002), every layer, mean pooling;
4. the bootstrap CI of the mean UA (seed 003), final layer, mean pooling;
5. the anisotropy profile (seed 004), every layer.

The seed side runs on float64 copies of the states, so the diff column measures the algorithms,
not float32 rounding. The file is ``data/embeddings/<first model of params.yaml>.h5`` if it
exists, else a synthetic file of the default model's size (N = 460 statements, L + 1 = 31,
D = 576) written to ``bench/out/``.
Usage: ``python bench/analyze.py [--embeddings FILE] [--layers N]`` (``--layers`` keeps the first
N layers on both sides, for a quick run).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # as the stages; both sides run under the same setting

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import seed_reference as seed  # noqa: E402
from synthetic_h5 import write_synthetic_h5  # noqa: E402
from uaprobe.analysis.category import bins, layerwise  # noqa: E402
from uaprobe.analysis.geometry import anisotropy  # noqa: E402
from uaprobe.analysis.pairs.pair_table import pooling_cosines  # noqa: E402
from uaprobe.analysis.run.pipeline import table_from_embeddings  # noqa: E402
from uaprobe.analysis.inference import stats  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.extraction.store import POOLINGS, read_embeddings  # noqa: E402


def default_file(params_path: Path) -> Path:
    params = load_params(params_path)
    real = ROOT / "data" / "embeddings" / f"{params.models[0]}.h5"
    if real.exists():
        return real
    out = ROOT / "bench" / "out" / "synthetic-default.h5"
    if not out.exists():
        dataset = json.loads((ROOT / "data" / "dataset.json").read_text(encoding="utf-8"))
        sizes = tuple(len(c["pairs"]) for c in dataset.values())
        write_synthetic_h5(out, pairs_per_category=sizes, n_layers=30, hidden=576, n_prompts=16,
                           tokens_per_prompt=12, seed=0, model_id="synthetic-default")
    return out


class Clock:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, float | None]] = []

    def add(self, name: str, t_seed: float, t_ours: float, max_diff: float | None) -> None:
        """One row; ``max_diff`` is the largest |seed - ours| of the point estimates (None where the
        only outputs are random intervals, which differ by construction: different RNGs)."""
        self.rows.append((name, t_seed, t_ours, max_diff))
        diff = "n/a (RNG-dependent)" if max_diff is None else f"{max_diff:.1e}"
        print(f"{name:<34} seed {t_seed:9.2f} s   ours {t_ours:7.3f} s   x{t_seed / t_ours:8.1f}   "
              f"max |diff| {diff}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--embeddings", type=Path, default=None)
    ap.add_argument("--layers", type=int, default=None, help="keep only the first N layers (both sides)")
    args = ap.parse_args()
    params = load_params(args.params).analysis
    path = args.embeddings or default_file(args.params)
    emb = read_embeddings(path)
    table = table_from_embeddings(emb, source=str(path))
    n_views = emb.n_layers + 1 if args.layers is None else min(args.layers, emb.n_layers + 1)
    layers = range(n_views)
    pref = table.preference(params.preference)
    names = [table.categories[c] for c in table.category_of_pair]
    cats = list(table.categories)
    n_cat = len(cats)
    print(f"{path}: N={len(emb.text)} statements, {n_views} of {emb.n_layers + 1} layers, "
          f"D={emb.pooled['mean'].shape[2]}, {params.bootstrap_resamples} resamples, k={list(params.bins.k)} x "
          f"{params.bins.partitions} partitions; BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}\n")
    clock = Clock()
    pooled = {p: emb.pooled[p][:, :n_views] for p in POOLINGS}
    prenorm = {p: emb.prenorm[p] for p in POOLINGS}
    # The seed side gets float64 copies: the seeds' float32 cosines cannot resolve UA where the
    # states are nearly collinear (|UA| ~ 1e-6), and the diff column should measure the algorithms.
    pooled64 = {p: v.astype(np.float64) for p, v in pooled.items()}

    # 1. layer-wise r, 3 poolings
    t = time.perf_counter()
    seed_r = {p: [seed.layer_correlations(pooled64[p][table.row_a, layer], pooled64[p][table.row_b, layer], pref,
                                          names, cats)["correlation"] for layer in layers] for p in POOLINGS}
    t_seed = time.perf_counter() - t
    t = time.perf_counter()
    grams = {p: pooling_cosines(pooled=pooled[p], prenorm=prenorm[p], table=table) for p in POOLINGS}
    mean_pref = np.bincount(table.category_of_pair, weights=pref) / table.pairs_per_category
    our_r = {}
    for p in POOLINGS:
        cu = layerwise.category_uniformity(grams[p], category_of_pair=table.category_of_pair, n_categories=n_cat)
        our_r[p] = stats.pearson(cu.ua, mean_pref).r[:n_views]
    t_ours = time.perf_counter() - t
    clock.add("layer-wise r (3 poolings)", t_seed, t_ours,
              max(np.nanmax(np.abs(np.array(seed_r[p]) - our_r[p])) for p in POOLINGS))

    # 2. random bins, mean pooling, the same partitions on both sides
    rng = np.random.default_rng(params.seed)
    labels = {k: bins.partitions(rng, scheme="randint", n=table.n_pairs, k=k, count=params.bins.partitions)
              for k in params.bins.k}
    a = pooled64["mean"][table.row_a]
    b = pooled64["mean"][table.row_b]
    t = time.perf_counter()
    seed_bins = {k: [seed.analyze_with_k_bins(a[:, layer], b[:, layer], pref, k, params.bins.partitions,
                                              assignments=labels[k])["r_mean"] for layer in layers] for k in labels}
    t_seed = time.perf_counter() - t
    t = time.perf_counter()
    g = grams["mean"]
    our_bins = {k: bins.summarize_partitions(cosines=g, preference=pref, labels=labels[k], k=k).r_mean[:n_views]
                for k in labels}
    t_ours = time.perf_counter() - t
    clock.add(f"random bins ({len(labels)} k x {params.bins.partitions})", t_seed, t_ours,
              max(np.nanmax(np.abs(np.array(seed_bins[k]) - our_bins[k])) for k in labels))

    # 3. bootstrap CI of r over the ci_k bins, every layer
    ci_labels = bins.partitions(rng, scheme="randint", n=table.n_pairs, k=params.bins.ci_k, count=1)[0]
    used = [q for q in range(params.bins.ci_k) if (ci_labels == q).sum() >= 2]
    t = time.perf_counter()
    seed_ci = []
    for layer in layers:
        x = np.array([seed.uniformity_score(a[ci_labels == q, layer])
                      - seed.uniformity_score(b[ci_labels == q, layer]) for q in used])
        y = np.array([pref[ci_labels == q].mean() for q in used])
        seed_ci.append(seed.bootstrap_correlation(x, y, params.bootstrap_resamples, params.ci_level,
                                                  np.random.RandomState(params.seed))[0])
    t_seed = time.perf_counter() - t
    t = time.perf_counter()
    ci = bins.ci_partition(cosines=g, preference=pref, labels=ci_labels,
                           k=params.bins.ci_k, params=params, rng=rng)
    t_ours = time.perf_counter() - t
    clock.add(f"bootstrap CI of r, k={params.bins.ci_k} bins", t_seed, t_ours,  # diff of r
              float(np.nanmax(np.abs(np.array(seed_ci) - ci.stats.pearson.r[:n_views]))))

    # 4. bootstrap CI of the mean UA (seed 003), final layer
    final = n_views - 1
    ua_final = np.array(seed.layer_correlations(a[:, final], b[:, final], pref, names, cats)["category_uas"])
    t = time.perf_counter()
    seed.bootstrap_ci_mean(ua_final, params.bootstrap_resamples, params.ci_level, np.random.RandomState(params.seed))
    t_seed = time.perf_counter() - t
    t = time.perf_counter()
    counts = stats.resample_counts(stats.bootstrap_indices(rng, n=n_cat, resamples=params.bootstrap_resamples),
                                   n=n_cat)
    stats.percentile_interval(stats.bootstrap_mean(ua_final[None], counts), level=params.ci_level)
    t_ours = time.perf_counter() - t
    clock.add("bootstrap CI of the mean UA", t_seed, t_ours, None)

    # 5. anisotropy profile (seed 004)
    x, _ = anisotropy.select_tokens(states=emb.aniso_states[:, :n_views], special=emb.aniso_special,  # float64
                                    pooling_drop=str(emb.attrs.get("pooling_drop", "special")))
    t = time.perf_counter()
    seed_ratio = [seed.compute_anisotropy_metrics(x[layer])["intrinsic_dim_ratio"] for layer in layers]
    t_seed = time.perf_counter() - t
    t = time.perf_counter()
    prof = anisotropy.anisotropy_profile(x, spectrum_top=params.spectrum_top)
    t_ours = time.perf_counter() - t
    clock.add("anisotropy profile", t_seed, t_ours, float(np.max(np.abs(np.array(seed_ratio) - prof.lambda1_ratio))))

    total_seed = sum(r[1] for r in clock.rows)
    total_ours = sum(r[2] for r in clock.rows)
    print(f"\n{'total (same work)':<34} seed {total_seed:9.2f} s   ours {total_ours:7.3f} s   "
          f"x{total_seed / total_ours:8.1f}")
    print(f"speed-up ratio: {total_seed / total_ours:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
