"""Scale benchmark: extraction and analysis on the dataset and on a synthetic dataset 20x larger.

    python bench/scale.py [--model smollm2-135m] [--factor 20]

The larger dataset is generated from the real one: each pair is repeated ``factor`` times, every
copy after the first with the words of each statement shuffled by a seeded generator, so token
lengths (and so the cost per statement) match the real data. In one process, with the model
loaded once, it prints for both datasets the peak resident memory above the post-load baseline
and the statements per second of the extraction (goal: memory grows < 1.2x, throughput within
20 %), and the time of the `analyze` computation on 1x, 2x and 4x the pairs (goal: at most linear growth).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from extract import PeakRSS, ours  # noqa: E402  (bench/extract.py)

from uaprobe import extract  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.analysis.pipeline import analyze_model  # noqa: E402
from uaprobe.dataset import load_dataset, load_prompts  # noqa: E402
from uaprobe.store import read_embeddings  # noqa: E402
from uaprobe.models import load_model  # noqa: E402


def enlarged(raw: dict, factor: int, seed: int = 0) -> dict:
    """``factor`` copies of every pair; in each copy after the first, every statement has its words
    shuffled and one word replaced by a word drawn from the same category, so copies stay distinct
    while their lengths (and so the cost per statement) follow the real data."""
    rng = np.random.default_rng(seed)

    def variant(text: str, vocabulary: list[str]) -> str:
        words = text.split()
        words = [words[i] for i in rng.permutation(len(words))]
        words[int(rng.integers(len(words)))] = vocabulary[int(rng.integers(len(vocabulary)))]
        return " ".join(words)

    out = {}
    for name, body in raw.items():
        vocabulary = sorted({w for pair in body["pairs"] for text in pair for w in text.split()})
        pairs, seen = [list(p) for p in body["pairs"]], {tuple(p) for p in body["pairs"]}
        for _copy in range(1, factor):
            for a, b in body["pairs"]:
                while True:
                    pair = (variant(a, vocabulary), variant(b, vocabulary))
                    if pair not in seen and pair[0] != pair[1]:
                        break
                seen.add(pair)
                pairs.append(list(pair))
        out[name] = dict(body, pairs=pairs)
    return out


def measure_extraction(model, tokenizer, dataset, batch_size: int, drop: str, out: Path, anisotropy) -> tuple[float, float]:
    texts = dataset.texts
    batches = extract.length_sorted_batches(extract.token_lengths(tokenizer, texts), batch_size)
    with PeakRSS() as mem:
        start = time.perf_counter()
        ours(model, tokenizer, texts, batches, out, drop, categories=[s.category for s in dataset.statements],
             pairs=np.array([s.pair for s in dataset.statements]), sides=np.array([s.side for s in dataset.statements]),
             anisotropy=anisotropy)
        seconds = time.perf_counter() - start
    return len(texts) / seconds, mem.above_baseline_mb


def measure_analysis(path: Path, params) -> float:
    emb = read_embeddings(path)
    start = time.perf_counter()
    analyze_model(emb, params=params.analysis, model_id="bench")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--factor", type=int, default=20, help="size of the large extraction run")
    parser.add_argument("--analysis-factors", type=int, nargs="+", default=[1, 2, 4],
                        help="dataset sizes (multiples) on which the analyze computation is timed")
    args = parser.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    model, tokenizer, _source, _dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    extract.prepare_tokenizer(tokenizer)
    anisotropy = extract.anisotropy_states(model, tokenizer, load_prompts(REPO / "data" / "anisotropy_prompts.txt"),
                                           batch_size=params.extract.batch_size)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, factor in (("dataset", 1), (f"{args.factor}x", args.factor)):
            path = Path(tmp) / f"{label}.json"
            path.write_text(json.dumps(enlarged(raw, factor)), encoding="utf-8")
            dataset = load_dataset(path)
            h5 = Path(tmp) / f"{label}.h5"
            rate, mem = measure_extraction(model, tokenizer, dataset, params.extract.batch_size, params.pooling.drop,
                                           h5, anisotropy)
            rows.append((dataset.n_pairs, rate, mem))
            print(f"  extraction {label:<8} {len(dataset.texts):6d} statements  {rate:7.1f} statements/s  "
                  f"peak RSS +{mem:7.1f} MiB", flush=True)
            h5.unlink()
        (n1, r1, m1), (n2, r2, m2) = rows
        print(f"peak memory ratio {m2 / m1:.2f}x for {n2 / n1:.0f}x the statements (goal < 1.2x)")
        print(f"throughput ratio  {r2 / r1:.2f} (goal within 0.8-1.2)", flush=True)
        # The analyses hold per-layer Gram matrices of the pairs (31 n^2 float64 per side and
        # pooling), so they are measured on the sizes that fit this machine's memory.
        times = []
        for factor in args.analysis_factors:
            path = Path(tmp) / f"a{factor}.json"
            path.write_text(json.dumps(enlarged(raw, factor)), encoding="utf-8")
            dataset = load_dataset(path)
            h5 = Path(tmp) / f"a{factor}.h5"
            batches = extract.length_sorted_batches(extract.token_lengths(tokenizer, dataset.texts),
                                                    params.extract.batch_size)
            ours(model, tokenizer, dataset.texts, batches, h5, params.pooling.drop,
                 categories=[s.category for s in dataset.statements],
                 pairs=np.array([s.pair for s in dataset.statements]),
                 sides=np.array([s.side for s in dataset.statements]), anisotropy=anisotropy)
            seconds = measure_analysis(h5, params)
            times.append((dataset.n_pairs, seconds))
            print(f"  analyze {dataset.n_pairs:6d} pairs  {seconds:6.1f} s  "
                  f"({seconds / times[0][1]:.1f}x the time for {dataset.n_pairs / times[0][0]:.0f}x the pairs)",
                  flush=True)
            h5.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
