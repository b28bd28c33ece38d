"""Scale benchmark: extraction and analysis on the dataset and on a synthetic dataset 20x larger.

    python bench/scale.py [--model smollm2-135m] [--factor 20]

The larger dataset is generated from the real one: each pair is repeated ``factor`` times, every
copy after the first with the words of each statement shuffled by a seeded generator, so token
lengths (and so the cost per statement) match the real data. In one process, with the model
loaded once, it prints for both datasets the peak resident memory above the post-load baseline
and the statements per second of the extraction (goal: memory grows < 1.2x, throughput within
20 %), and the time of the `analyze` computation (goal: grows at most linearly in the pairs).
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
    """``factor`` copies of every pair; copies after the first have their words shuffled."""
    rng = np.random.default_rng(seed)

    def shuffle(text: str) -> str:
        words = text.split()
        return " ".join(words[i] for i in rng.permutation(len(words)))

    out = {}
    for name, body in raw.items():
        pairs = [list(p) for p in body["pairs"]]
        for copy in range(1, factor):
            pairs += [[shuffle(a) + f" ({copy})", shuffle(b) + f" ({copy})"] for a, b in body["pairs"]]
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
    parser.add_argument("--factor", type=int, default=20)
    args = parser.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    model, tokenizer, _source, _dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    extract.prepare_tokenizer(tokenizer)
    anisotropy = extract.anisotropy_states(model, tokenizer, load_prompts(REPO / "data" / "anisotropy_prompts.txt"),
                                           batch_size=params.extract.batch_size)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, data in (("dataset", raw), (f"{args.factor}x", enlarged(raw, args.factor))):
            path = Path(tmp) / f"{label}.json"
            path.write_text(json.dumps(data), encoding="utf-8")
            dataset = load_dataset(path)
            h5 = Path(tmp) / f"{label}.h5"
            rate, mem = measure_extraction(model, tokenizer, dataset, params.extract.batch_size, params.pooling.drop,
                                           h5, anisotropy)
            seconds = measure_analysis(h5, params)
            rows.append((label, dataset.n_pairs, rate, mem, seconds))
            print(f"  {label:<8} {dataset.n_pairs:6d} pairs  extraction {rate:7.1f} statements/s, "
                  f"peak RSS +{mem:7.1f} MiB;  analyze {seconds:6.1f} s", flush=True)
            h5.unlink()
    (_, n1, r1, m1, s1), (_, n2, r2, m2, s2) = rows
    print(f"peak memory ratio {m2 / m1:.2f}x for {n2 / n1:.0f}x the statements (goal < 1.2x)")
    print(f"throughput ratio  {r2 / r1:.2f} (goal within 0.8-1.2)")
    print(f"analyze time ratio {s2 / s1:.1f}x for {n2 / n1:.0f}x the pairs (goal <= {n2 / n1:.0f}x, linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
