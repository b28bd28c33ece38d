"""Scale benchmark: extraction and analysis on the dataset and on a synthetic dataset 20x larger.

    python bench/scale.py [--model smollm2-135m] [--factor 20] [--analysis-factors 1 2 4 20] [--skip-analysis]

The larger dataset is generated from the real one: each pair is repeated ``factor`` times, every
copy after the first with the words of each statement shuffled by a seeded generator, so token
lengths (and so the cost per statement) follow the real data. In one process, with the model
loaded once, it prints for both datasets the peak resident memory above the post-load baseline
and the statements per second of the extraction (goal: memory grows < 1.2x, throughput within
20 %).

Then the ``analyze`` computation (:func:`~uaprobe.analysis.pipeline.analyze_model`, single-threaded
BLAS as in the DVC stage, the compiled kernels and the worker pool of :mod:`uaprobe.analysis.workers`
on numba's threads) is timed on the first 1, 2, 4
and 20 copies of that extraction. For each size it prints the time per pair, the ratio to the
previous size (goal: no doubling of the pairs costs more than 2.5x the time), and the ratio to the
additions bound: ``n D`` additions per partition, view and side of the random bins, at the peak of
the machine's AVX2 cores (8 float64 additions per cycle each); beside them the CPU seconds of all
threads and the load average (the machine may be shared: wall time alone misleads). It then checks the cost model of
:class:`~uaprobe.analysis.uniformity.Cosines` at that size: one scheme's random-bins call of the mean
pooling (every k at once) is timed in each form the model allows, beside the model's prediction and
choice. ``--embeddings FILE`` keeps the large extraction (or reuses it: the extraction is then
skipped); ``--tile FILE`` times the analysis on perturbed copies of an existing extraction instead
(the analyses' cost depends on the shapes only); ``--skip-analysis`` stops after the extraction figures.
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

from uaprobe.extraction import extract  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.analysis.pipeline import analyze_model  # noqa: E402
from uaprobe.extraction.dataset import load_dataset, load_prompts  # noqa: E402
from uaprobe.extraction.store import POLICIES, Embeddings, read_embeddings  # noqa: E402
from uaprobe.extraction.models import load_model  # noqa: E402
from uaprobe.analysis import bins, kernels  # noqa: E402
from uaprobe.analysis.pairs_data import pooling_cosines  # noqa: E402
from uaprobe.analysis.pipeline import BIN_POOLINGS, table_from_embeddings  # noqa: E402
from uaprobe.analysis.uniformity import Groups  # noqa: E402


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


def take_rows(emb: Embeddings, rows: np.ndarray) -> Embeddings:
    """The statements ``rows`` of ``emb``, in that order: every per-statement field, the flat token
    arrays through their offsets."""
    n = len(emb.text)
    changes: dict = {"text": [emb.text[i] for i in rows]}
    for field in dataclasses.fields(emb):
        value = getattr(emb, field.name)
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n and field.name != "token_offsets":
            changes[field.name] = value[rows]
        elif isinstance(value, dict) and value and all(isinstance(v, np.ndarray) and v.shape[:1] == (n,)
                                                       for v in value.values()):
            changes[field.name] = {k: v[rows] for k, v in value.items()}
    starts, stops = emb.token_offsets[rows], emb.token_offsets[rows + 1]
    tokens = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)]) if len(rows) else np.zeros(0, int)
    changes["token_ids"] = emb.token_ids[tokens]
    changes["token_special"] = emb.token_special[tokens]
    changes["token_offsets"] = np.concatenate([[0], np.cumsum(stops - starts)])
    return dataclasses.replace(emb, **changes)


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
    return take_rows(emb, np.flatnonzero(rank < factor * size))


def tiled(emb: Embeddings, factor: int, seed: int = 0) -> Embeddings:
    """``factor`` copies of an extraction's statements, every copy after the first with its pooled
    states and NLLs perturbed by seeded noise (1 % of each row's scale) and new pair numbers: the
    shapes, and so the cost of every analysis, of a ``factor``-fold extraction, without the model."""
    rng = np.random.default_rng(seed)
    n = len(emb.text)
    rows = np.tile(np.arange(n), factor)
    out = take_rows(emb, rows)
    copy = np.repeat(np.arange(factor), n)
    later = copy > 0

    def noisy(x: np.ndarray) -> np.ndarray:
        x = x.copy()
        scale = 0.01 * np.abs(x[later]).mean(axis=-1, keepdims=True) if x.ndim > 1 else 0.01 * np.abs(x[later]).mean()
        x[later] += (scale * rng.standard_normal(x[later].shape)).astype(x.dtype)
        return x

    span = int(emb.pair.max()) + 1
    changes: dict = {"pair": emb.pair[rows] + span * copy}
    for name in ("pooled", "prenorm", "pooled_sink_excluded", "prenorm_sink_excluded"):
        changes[name] = {k: noisy(v) for k, v in getattr(out, name).items()}
    for name in ("nll_mean", "nll_sum"):
        changes[name] = noisy(getattr(out, name))
    return dataclasses.replace(out, **changes)


def measure_analysis(emb: Embeddings, params) -> tuple[float, float]:
    """Wall-clock and CPU seconds (all threads) of the analyze computation."""
    start, cpu = time.perf_counter(), time.process_time()
    analyze_model(emb, params=params.analysis, model_id="bench")
    return time.perf_counter() - start, time.process_time() - cpu


def peak_additions_per_second(cores: int) -> float:
    """float64 additions per second at the peak of ``cores`` AVX2 cores: two 4-wide adders per core,
    at the clock /proc/cpuinfo reports (2.5 GHz where it reports none)."""
    mhz = 2500.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
                break
    except OSError:
        pass
    return cores * 8 * mhz * 1e6


def bins_additions(n_pairs: int, dim: int, n_views: int, params) -> float:
    """The additions bound of the random bins: n D per partition, view and side, every bins pooling
    of every pooling policy."""
    partitions = len(params.analysis.bins.k) * params.analysis.bins.partitions * len(bins.SCHEMES)
    return float(n_pairs) * dim * partitions * n_views * 2 * len(BIN_POOLINGS) * len(POLICIES)


def check_cost_model(emb: Embeddings, params) -> str:
    """Time one scheme's bins call of the mean pooling in every form the cost model allows."""
    table = table_from_embeddings(emb)
    rng = np.random.default_rng(params.analysis.seed)
    labels = {k: bins.partitions(rng, scheme="randint", n=table.n_pairs, k=k, count=params.analysis.bins.partitions)
              for k in params.analysis.bins.k}
    stacked = np.concatenate(list(labels.values()))
    n_groups = max(labels)
    cos = pooling_cosines(pooled=emb.pooled["mean"], prenorm=emb.prenorm["mean"], table=table)
    sizes = Groups.of(stacked, n_groups).sizes
    predicted = cos.costs(sizes, "diff", threads=kernels.thread_count())  # seconds on the kernels' threads
    one = cos.costs(sizes, "diff")  # the choice is made on one thread, whatever the thread count
    chosen = min(one, key=one.__getitem__)
    measured = {}
    for form in predicted:
        cos.form = form
        start = time.perf_counter()
        cos.uniformity(stacked, n_groups=n_groups, side="diff")  # a Gram table is built in the timed call
        measured[form] = time.perf_counter() - start
    faster = min(measured, key=measured.__getitem__)
    parts = "  ".join(f"{f} {measured[f]:6.1f} s (model {predicted[f]:6.1f} s)" for f in predicted)
    verdict = "ok" if chosen == faster else f"MISS (model chose {chosen})"
    return f"    cost model, one scheme's bins call ({len(stacked)} partitions): {parts}  chosen {chosen}: {verdict}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--factor", type=int, default=20, help="size of the large extraction run")
    parser.add_argument("--analysis-factors", type=int, nargs="+", default=[1, 2, 4, 20],
                        help="numbers of copies (at most --factor) on which the analyze computation is timed")
    parser.add_argument("--skip-analysis", action="store_true", help="measure the extraction only")
    parser.add_argument("--embeddings", type=Path, default=None,
                        help="the large extraction: written there if absent, else read (and the extraction skipped)")
    parser.add_argument("--skip-cost-check", action="store_true", help="do not time the forms one against the other")
    parser.add_argument("--tile", type=Path, default=None,
                        help="time the analysis on --factor perturbed copies of this extraction file instead of "
                             "extracting the enlarged dataset (same shapes, no model needed)")
    args = parser.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        large = args.embeddings or Path(tmp) / f"{args.factor}x.h5"
        if args.tile is None and not large.exists():
            extraction(args, params, Path(tmp), large)
        if args.skip_analysis:
            return 0
        emb = tiled(read_embeddings(args.tile), args.factor) if args.tile else read_embeddings(large)
        hidden = emb.pooled["mean"].shape[-1]
        n_views = emb.n_layers + 2
        peak = peak_additions_per_second(os.cpu_count() or 1)
        print(f"analyze: {len(POLICIES)} pooling policies x 3 poolings x {emb.n_layers + 1} layers + prenorm, "
              f"hidden size {hidden}, "
              f"{len(params.analysis.bins.k)} k x {params.analysis.bins.partitions} partitions x 2 schemes of random "
              f"bins; kernels on {kernels.thread_count()} thread(s); additions bound at {peak / 1e9:.0f} G/s "
              f"({os.cpu_count()} AVX2 cores at peak)", flush=True)
        previous = None
        worst_doubling = 0.0
        for factor in args.analysis_factors:
            sub = pairs_subset(emb, factor, args.factor)
            n_pairs = len(sub.text) // 2
            seconds, cpu = measure_analysis(sub, params)
            bound = bins_additions(n_pairs, hidden, n_views, params) / peak
            step = ""
            if previous is not None:
                ratio = seconds / previous[1]
                size = n_pairs / previous[0]
                step = f"  {ratio:5.2f}x the time for {size:.0f}x the pairs"
                if size == 2:
                    worst_doubling = max(worst_doubling, ratio)
            print(f"  analyze {n_pairs:6d} pairs  {seconds:7.1f} s  {1000 * seconds / n_pairs:6.2f} ms per pair  "
                  f"{seconds / bound:5.2f}x the additions bound ({bound:5.1f} s)  cpu {cpu:7.1f} s  "
                  f"load {os.getloadavg()[0]:4.1f}{step}", flush=True)
            if not args.skip_cost_check:
                print(check_cost_model(sub, params), flush=True)
            previous = (n_pairs, seconds)
        if worst_doubling:
            print(f"largest doubling ratio {worst_doubling:.2f}x (goal at most 2.5x); "
                  f"{previous[0]} pairs in {previous[1]:.1f} s (goal at most 60 s)")
    return 0


def extraction(args, params, tmp: Path, large: Path) -> None:
    """Extract the dataset and its ``factor``-fold enlargement (to ``large``); print memory and throughput."""
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    model, tokenizer, _source, _dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    extract.prepare_tokenizer(tokenizer)
    anisotropy = extract.anisotropy_states(model, tokenizer, load_prompts(REPO / "data" / "anisotropy_prompts.txt"),
                                           batch_size=params.extract.batch_size,
                                           max_batch_tokens=params.extract.max_batch_tokens)
    rows = []
    for label, factor in (("dataset", 1), (f"{args.factor}x", args.factor)):
        path = tmp / f"{label}.json"
        path.write_text(json.dumps(enlarged(raw, factor)), encoding="utf-8")
        dataset = load_dataset(path)
        h5 = large if factor == args.factor else tmp / f"{label}.h5"
        rate, mem = measure_extraction(model, tokenizer, dataset, params.extract.batch_size,
                                       params.extract.max_batch_tokens, params.pooling.drop, h5, anisotropy)
        rows.append((dataset.n_pairs, rate, mem))
        print(f"  extraction {label:<8} {len(dataset.texts):6d} statements  {rate:7.1f} statements/s  "
              f"peak RSS +{mem:7.1f} MiB", flush=True)
    (n1, r1, m1), (n2, r2, m2) = rows
    print(f"peak memory ratio {m2 / m1:.2f}x for {n2 / n1:.0f}x the statements (goal < 1.2x)")
    print(f"throughput ratio  {r2 / r1:.2f} (goal within 0.8-1.2)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
