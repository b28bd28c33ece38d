"""Scale benchmark: extraction and analysis on the dataset and on a synthetic dataset 20x larger.

    python bench/scale.py [--model smollm2-135m] [--factor 20] [--analysis-factors 1 2 4 20] [--skip-analysis]

The larger dataset is generated from the real one: each pair is repeated ``factor`` times, every
copy after the first with the words of each statement shuffled by a seeded generator, so token
lengths (and so the cost per statement) follow the real data. In one process, with the model
loaded once, it prints for both datasets the peak resident memory above the post-load baseline
and the statements per second of the extraction (goal: memory grows < 1.2x, throughput within
20 %).

Then the ``analyze`` computation (:func:`~uaprobe.analysis.pipeline.analyze_model`, single-threaded
BLAS as in the DVC stage) is timed on the first 1, 2, 4 and 20 copies of that extraction: with the
default form of the cosines (Gram matrices while the pairs are no more than the hidden size, sums
of unit vectors beyond) and, where the default is the Gram form, also with the unit-vector form,
so that the linear path is measured at every size (goal: time at most linear in the pairs).
``--skip-analysis`` stops after the extraction figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS as in the analyze stage (torch keeps its threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from extract import PeakRSS, ours  # noqa: E402  (bench/extract.py)

from uaprobe import extract  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.analysis.pipeline import analyze_model  # noqa: E402
from uaprobe.dataset import load_dataset, load_prompts  # noqa: E402
from uaprobe.store import Embeddings, read_embeddings  # noqa: E402
from uaprobe.models import load_model  # noqa: E402
from uaprobe.analysis.uniformity import representation_for  # noqa: E402


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


def measure_extraction(model, tokenizer, dataset, batch_size: int, max_batch_tokens: int, drop: str, out: Path,
                       anisotropy) -> tuple[float, float]:
    texts = dataset.texts
    batches = extract.length_sorted_batches(extract.token_lengths(tokenizer, texts), batch_size,
                                            max_batch_tokens=max_batch_tokens)
    with PeakRSS() as mem:
        start = time.perf_counter()
        ours(model, tokenizer, texts, batches, out, drop, categories=[s.category for s in dataset.statements],
             pairs=np.array([s.pair for s in dataset.statements]), sides=np.array([s.side for s in dataset.statements]),
             anisotropy=anisotropy)
        seconds = time.perf_counter() - start
    return len(texts) / seconds, mem.above_baseline_mb


def pairs_subset(emb: Embeddings, factor: int, of: int) -> Embeddings:
    """The statements of the first ``factor`` of the ``of`` copies of every category's pairs (the
    enlarged dataset lists each category's originals, then copy 1, copy 2, ...)."""
    if factor == of:
        return emb
    rank_of: dict[int, int] = {}
    rank = np.empty(emb.pair.size, dtype=np.int64)
    per_category: dict[str, list[int]] = {}
    for row, (cat, pair) in enumerate(zip(emb.category, emb.pair)):
        pairs = per_category.setdefault(str(cat), [])
        if int(pair) not in rank_of:
            rank_of[int(pair)] = len(pairs)
            pairs.append(int(pair))
        rank[row] = rank_of[int(pair)]
    size = np.array([len(per_category[str(c)]) // of for c in emb.category])
    rows = np.flatnonzero(rank < factor * size)
    pick = lambda a: a[rows]  # noqa: E731
    return dataclasses.replace(
        emb, text=[emb.text[i] for i in rows], category=pick(emb.category), pair=pick(emb.pair), side=pick(emb.side),
        pooled={p: pick(v) for p, v in emb.pooled.items()}, prenorm={p: pick(v) for p, v in emb.prenorm.items()},
        nll_sum=pick(emb.nll_sum), nll_mean=pick(emb.nll_mean), n_tokens=pick(emb.n_tokens),
        n_content=pick(emb.n_content))


def measure_analysis(emb: Embeddings, params, representation=None) -> float:
    start = time.perf_counter()
    analyze_model(emb, params=params.analysis, model_id="bench", representation=representation)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--factor", type=int, default=20, help="size of the large extraction run")
    parser.add_argument("--analysis-factors", type=int, nargs="+", default=[1, 2, 4, 20],
                        help="numbers of copies (at most --factor) on which the analyze computation is timed")
    parser.add_argument("--skip-analysis", action="store_true", help="measure the extraction only")
    args = parser.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    model, tokenizer, _source, _dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    extract.prepare_tokenizer(tokenizer)
    anisotropy = extract.anisotropy_states(model, tokenizer, load_prompts(REPO / "data" / "anisotropy_prompts.txt"),
                                           batch_size=params.extract.batch_size,
                                           max_batch_tokens=params.extract.max_batch_tokens)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, factor in (("dataset", 1), (f"{args.factor}x", args.factor)):
            path = Path(tmp) / f"{label}.json"
            path.write_text(json.dumps(enlarged(raw, factor)), encoding="utf-8")
            dataset = load_dataset(path)
            h5 = Path(tmp) / f"{label}.h5"
            rate, mem = measure_extraction(model, tokenizer, dataset, params.extract.batch_size,
                                           params.extract.max_batch_tokens, params.pooling.drop, h5, anisotropy)
            rows.append((dataset.n_pairs, rate, mem))
            print(f"  extraction {label:<8} {len(dataset.texts):6d} statements  {rate:7.1f} statements/s  "
                  f"peak RSS +{mem:7.1f} MiB", flush=True)
        (n1, r1, m1), (n2, r2, m2) = rows
        print(f"peak memory ratio {m2 / m1:.2f}x for {n2 / n1:.0f}x the statements (goal < 1.2x)")
        print(f"throughput ratio  {r2 / r1:.2f} (goal within 0.8-1.2)", flush=True)
        if args.skip_analysis:
            return 0
        del model
        emb = read_embeddings(Path(tmp) / f"{args.factor}x.h5")
        hidden = emb.pooled["mean"].shape[-1]
        print(f"analyze: {emb.n_layers + 1} layers x 3 poolings, hidden size {hidden}, "
              f"{len(params.analysis.bins.k)} k x {params.analysis.bins.partitions} partitions x 2 schemes of random bins",
              flush=True)
        vector_rate = []
        for factor in args.analysis_factors:
            sub = pairs_subset(emb, factor, args.factor)
            n_pairs = len(sub.text) // 2
            chosen = representation_for(n_pairs, hidden)
            forms = [chosen] + (["vectors"] if chosen == "gram" else [])
            for form in forms:
                seconds = measure_analysis(sub, params, form)
                if form == "vectors":
                    vector_rate.append((n_pairs, seconds))
                print(f"  analyze {n_pairs:6d} pairs  {form:<7}{' (default)' if form == chosen else '          '}  "
                      f"{seconds:7.1f} s  {1000 * seconds / n_pairs:6.1f} ms per pair", flush=True)
        if len(vector_rate) >= 2:
            (n_a, t_a), (n_b, t_b) = vector_rate[0], vector_rate[-1]
            print(f"unit-vector form: {t_b / t_a:.1f}x the time for {n_b / n_a:.0f}x the pairs (goal: at most linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
