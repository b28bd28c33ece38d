"""Scale benchmark: extraction and analysis on the dataset and on a synthetic dataset 20x larger.

    python bench/scale.py [--model smollm2-135m] [--factor 20] [--analysis-factors 1 2 4 20] [--skip-analysis]
                          [--tile FILE] [--embeddings FILE] [--results DIR] [--cost-check]

The larger dataset is generated from the real one: each pair is repeated ``factor`` times, every
copy after the first with the words of each statement shuffled by a seeded generator, so token
lengths (and so the cost per statement) follow the real data. In one process, with the model
loaded once, it prints for both datasets the peak resident memory above the post-load baseline
and the statements per second of the extraction (goal: memory grows < 1.2x, throughput within
20 %).

Then the ``analyze`` computation (:func:`~uaprobe.analysis.pipeline.analyze_model`, single-threaded
BLAS as in the DVC stage, the compiled kernels and the worker pool of :mod:`uaprobe.analysis.workers`
on numba's threads) is timed on the first 1, 2, 4 and 20 copies of that extraction, after untimed
runs on a small subset that load every compiled kernel (:mod:`warm`; a size that loads one anyway
says so). Before each size the machine's rates
are measured in this process (:func:`timing.measure_rates`: a float64 GEMM on every worker thread,
a float64 sum from L2 on every worker thread, float64 entries gathered from a Gram table of that
size at the pairs inside random groups on every worker thread, the seeded generator's integers),
and the floor is the operation counts of every component's cheapest exact form (:mod:`floor`) at
those rates. Each size prints the wall and CPU seconds, the floor, their ratio, the peak resident
memory of the process and the load average (the machine may be shared: the rates and the time are
measured under the same load), then each component's floor and measured seconds and their shares,
so that the next bottleneck is visible. The last line:

    analyze N pairs: T s, floor F s, R x floor; worst ratio to floor over sizes W x

for the largest size N. ``--results DIR`` writes the figures to ``DIR/<cpu model>.json`` (``make
bench``: ``bench/results``; docs/performance.md quotes them and a test checks it). ``--embeddings
FILE`` keeps the large extraction (or reuses it: the extraction is then skipped); ``--tile FILE``
times the analysis on perturbed copies of an existing extraction instead (the analyses' cost depends
on the shapes only); ``--skip-analysis`` stops after the extraction figures; ``--cost-check`` also
times one random-bins call in each form of :class:`~uaprobe.analysis.uniformity.Cosines` beside its
cost model's prediction and choice.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS as in the analyze stage (torch keeps its threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from extract import PeakRSS, ours  # noqa: E402  (bench/extract.py)
import floor  # noqa: E402  (bench/floor.py)
import timing  # noqa: E402  (bench/timing.py)
import warm  # noqa: E402  (bench/warm.py)

from uaprobe.extraction import extract  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.analysis.pipeline import analyze_model  # noqa: E402
from uaprobe.extraction.dataset import load_dataset, load_prompts  # noqa: E402
from uaprobe.extraction.store import POLICIES, Embeddings, read_embeddings  # noqa: E402
from uaprobe.extraction.models import load_model  # noqa: E402
from uaprobe.extraction.batches import length_sorted_batches  # noqa: E402
from uaprobe.extraction.tokens import prepare_tokenizer, token_lengths  # noqa: E402
from uaprobe import numerics  # noqa: E402
from uaprobe.analysis import bins, kernels  # noqa: E402
from uaprobe.analysis.pair_table import pooling_cosines  # noqa: E402
from uaprobe.analysis.pipeline import table_from_embeddings  # noqa: E402
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
    batches = length_sorted_batches(token_lengths(tokenizer, texts), batch_size,
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


def pairs_subset(emb: Embeddings, factor: int, of: int, *, at_most: int | None = None) -> Embeddings:
    """The statements of the first ``factor`` of the ``of`` copies of every category's pairs (the
    enlarged dataset lists each category's originals, then copy 1, copy 2, ...); with ``at_most``,
    only the first ``at_most`` pairs of each category."""
    if factor == of and at_most is None:
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
    keep = rank < factor * size if at_most is None else rank < np.minimum(factor * size, at_most)
    return take_rows(emb, np.flatnonzero(keep))


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


def measure_analysis(emb: Embeddings, params) -> tuple[float, float, float, float, dict[str, float], list[str]]:
    """Wall-clock and CPU seconds (all threads) of the analyze computation, its peak resident memory
    (MiB: the whole process, the extraction it holds included; and above the process's memory when
    the analysis started), the wall seconds of each component (:class:`timing.ComponentClock`) and
    the components that ran beside the main thread (their seconds overlap the others'; "other" is
    the main thread's time outside every component)."""
    clock = timing.ComponentClock()
    with PeakRSS() as mem, clock.patched():
        start, cpu = time.perf_counter(), time.process_time()
        analyze_model(emb, params=params.analysis, model_id="bench")
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    parts = dict(clock.seconds)
    parts["other"] = max(0.0, seconds - clock.main_seconds())
    return seconds, cpu, mem.peak / 2**20, mem.above_baseline_mb, parts, sorted(clock.beside)


def shape_of(emb: Embeddings, params) -> floor.Shape:
    """The analyze computation's shape (:class:`floor.Shape`) on ``emb``."""
    table = table_from_embeddings(emb)
    return floor.Shape.of(n_pairs=table.n_pairs, dim=emb.pooled["mean"].shape[-1], n_layers=emb.n_layers,
                          category_sizes=table.pairs_per_category,
                          tokens_per_statement=emb.token_ids.size / len(emb.text),
                          aniso_tokens=emb.aniso_states.shape[0], vocabulary=np.unique(emb.token_ids).size,
                          aniso_prompts=len(emb.prompts), params=params.analysis)


def cpu_slug(model: str) -> str:
    """A file name for the CPU model: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown"


ISA_FLAGS = frozenset({"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl",
                       "avx512_vnni", "asimd", "sve"})
"""The instruction-set flags that decide the kernels' and the BLAS's speed (recorded in the results)."""


def machine() -> dict:
    flags = numerics.cpu_flags() or frozenset()
    return {"cpu_model": numerics.cpu_model(), "cpu_vendor": numerics.cpu_vendor(), "cores": os.cpu_count(),
            "kernel_threads": kernels.thread_count(), "isa": sorted(flags & ISA_FLAGS)}


def commit() -> str:
    """The checkout's commit, ``+modified`` where tracked files differ from it; ``unknown`` outside git."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+modified" if dirty else "")


def component_table(floor_s: dict[str, float], measured: dict[str, float], beside: Sequence[str] = ()) -> list[str]:
    """Each component's floor and measured seconds and their shares of the totals; ``beside``: the
    components that ran beside the main thread (marked; their seconds overlap the others')."""
    total_f, total_m = sum(floor_s.values()), sum(measured.values())
    lines = [f"    {'component':<30} {'floor':>8} {'share':>6}   {'measured':>8} {'share':>6}"]
    for name in list(floor_s) + [m for m in measured if m not in floor_s]:
        f, m = floor_s.get(name), measured.get(name)
        f_txt = f"{f:7.2f}s {100 * f / total_f:5.1f}%" if f is not None else f"{'':>8} {'':>6}"
        m_txt = f"{m:7.2f}s {100 * m / total_m:5.1f}%" if m is not None else "(inside bins, null, kNN)"
        lines.append(f"    {name:<30} {f_txt}   {m_txt}{'  (beside the main thread)' if name in beside else ''}")
    return lines


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
    pieces = "gram" in predicted and not cos._held("diff")  # the Gram form built piece by piece in the call
    label = {"gram": "gram in pieces" if pieces else "gram", "vectors": "vectors"}
    parts = "  ".join(f"{label[f]} {measured[f]:6.1f} s (model {predicted[f]:6.1f} s)" for f in predicted)
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
    parser.add_argument("--cost-check", action="store_true",
                        help="also time the cosines' two forms one against the other at every size")
    parser.add_argument("--tile", type=Path, default=None,
                        help="time the analysis on --factor perturbed copies of this extraction file instead of "
                             "extracting the enlarged dataset (same shapes, no model needed)")
    parser.add_argument("--results", type=Path, default=None,
                        help="write the figures to RESULTS/<cpu model>.json (make bench: bench/results)")
    args = parser.parse_args(argv)
    if max(args.analysis_factors) > args.factor:
        parser.error(f"--analysis-factors {max(args.analysis_factors)} exceeds --factor {args.factor}")
    params = load_params(REPO / "params.yaml")
    record: dict = {"machine": machine(), "commit": commit(), "model": args.model,
                    "mode": "tile" if args.tile else "extraction", "sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        large = args.embeddings or Path(tmp) / f"{args.factor}x.h5"
        if args.tile is None and not large.exists():
            record["extraction"] = extraction(args, params, Path(tmp), large)
        if args.skip_analysis:
            write_record(args, record)
            return 0
        emb = tiled(read_embeddings(args.tile), args.factor) if args.tile else read_embeddings(large)
        print(f"analyze: {len(POLICIES)} pooling policies x 3 poolings x {emb.n_layers + 1} layers + prenorm, "
              f"hidden size {emb.pooled['mean'].shape[-1]}; kernels on {kernels.thread_count()} thread(s); "
              f"floor: bench/floor.py's operation counts at the rates measured before each size", flush=True)
        # untimed: every compiled kernel loaded (in a fresh clone: compiled) and every code path run once
        warm.every_path(pairs_subset(emb, 1, args.factor, at_most=12), params.analysis)
        previous = None
        for factor in args.analysis_factors:
            sub = pairs_subset(emb, factor, args.factor)
            shape = shape_of(sub, params)
            rates = timing.measure_rates(n_pairs=shape.n_pairs, category_sizes=shape.category_sizes, dim=shape.dim)
            floor_s = floor.seconds(floor.components(shape, rates), rates)
            loaded = warm.signatures()
            seconds, cpu, rss, rss_above, parts, beside = measure_analysis(sub, params)
            late = sorted(warm.signatures() - loaded)
            if late:  # compiled (or read from numba's cache) inside the time: the warm-up missed them
                print(f"  warning: {len(late)} kernel signature(s) first loaded inside the timed analysis: "
                      + ", ".join(f"{name}{sig}" for name, sig in late), flush=True)
            total = sum(floor_s.values())
            step = ""
            if previous is not None:
                step = f"  {seconds / previous[1]:5.2f}x the time for {shape.n_pairs / previous[0]:.1f}x the pairs"
            print(f"  analyze {shape.n_pairs:6d} pairs  {seconds:7.1f} s  floor {total:6.1f} s  "
                  f"{seconds / total:5.2f}x floor (CPU {cpu / (total * kernels.thread_count()):5.2f}x the floor's "
                  f"CPU)  peak RSS {rss / 1024:5.2f} GiB (+{rss_above / 1024:4.2f} GiB in the analysis)  cpu {cpu:7.1f} s  "
                  f"load {os.getloadavg()[0]:4.1f}{step}", flush=True)
            print(f"    rates: GEMM {rates.gemm / 1e9:5.1f} G multiply-adds/s, L2 sum {rates.add / 1e9:5.1f} G "
                  f"additions/s, Gram gather {rates.gather / 1e9:5.2f} G entries/s (null's groups {rates.gather_null / 1e9:5.2f}) "
                  f"({kernels.thread_count()} "
                  f"threads); draws {rates.draw / 1e6:5.0f} M/s (one stream)")
            print("\n".join(component_table(floor_s, parts, beside)), flush=True)
            if args.cost_check:
                print(check_cost_model(sub, params), flush=True)
            record["sizes"].append({"pairs": shape.n_pairs, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                                    "floor_seconds": round(total, 2), "ratio": round(seconds / total, 2),
                                    "peak_rss_mib": round(rss), "rss_above_start_mib": round(rss_above),
                                    "rates": {k: float(f"{v:.3g}") for k, v in
                                                                          dataclasses.asdict(rates).items()},
                                    "floor_components": {k: round(v, 3) for k, v in floor_s.items()},
                                    "measured_components": {k: round(v, 3) for k, v in parts.items()},
                                    "beside_components": beside,
                                    "kernels_loaded_late": [f"{name}{sig}" for name, sig in late]})
            previous = (shape.n_pairs, seconds)
            record["worst_ratio"] = max(size["ratio"] for size in record["sizes"])
            write_record(args, record)  # after every size: a run stopped early keeps what it measured
        last, worst = record["sizes"][-1], record["worst_ratio"]
        print(f"analyze {last['pairs']} pairs: {last['seconds']:.1f} s, floor {last['floor_seconds']:.1f} s, "
              f"{last['ratio']:.2f} x floor; worst ratio to floor over sizes {worst:.2f} x", flush=True)
    return 0


def write_record(args, record: dict) -> None:
    if args.results is None:
        return
    args.results.mkdir(parents=True, exist_ok=True)
    path = args.results / f"{cpu_slug(record['machine']['cpu_model'])}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"figures written to {path}", flush=True)


def extraction(args, params, tmp: Path, large: Path) -> dict:
    """Extract the dataset and its ``factor``-fold enlargement (to ``large``); print memory and throughput."""
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    model, tokenizer, _source, _dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    prepare_tokenizer(tokenizer)
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
    return {"statements_per_second": [round(r1, 1), round(r2, 1)], "peak_rss_above_baseline_mib": [round(m1), round(m2)],
            "statements": [2 * n1, 2 * n2]}


if __name__ == "__main__":
    sys.exit(main())
