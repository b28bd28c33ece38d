"""Extraction benchmark: the seeds' method vs ours vs bare batched forward passes, one run, one model.

    python bench/extract.py [--model smollm2-135m] [--limit N] [--batch-size B] [--max-batch-tokens T]

On the whole dataset it times, with model loading excluded from all three:

(a) the seeds' method: one statement at a time, a forward pass for the hidden states (pooled as
    ``hidden[0, 1:].mean(0)``, last and first token, every layer) and another with ``labels=`` for
    the NLL;
(b) our extraction: length-sorted batches (at most ``extract.batch_size`` statements and
    ``extract.max_batch_tokens`` padded tokens), one pass each, masked pooling and NLL on the
    device, streamed into an HDF5 file;
(c) bare batched forward passes over the same batches with ``output_hidden_states=True``: no
    pooling, no NLL, no I/O.

It prints each time, the ratios a/b (goal >= 10) and b/c (goal <= 1.25), and the peak resident
memory above the post-load baseline of each phase.

Then (d) the cost of the pinned CPU code paths (:mod:`uaprobe.repro.numerics`): (b) in fresh processes,
pinned and unpinned (the pins are environment variables read when the libraries are imported),
alternating over two rounds, each side's best kept; it prints pinned/unpinned (goal <= 1.1).
``--pins-only`` runs (d) alone.

And (e), ``--portable``: the same for the portable pins (MKL's Intel code path under
``MKL_CBWR=AVX2,STRICT``, the same bytes on Intel and AMD) against the previous revision's pins (AVX2
only, each vendor's own MKL path), for SmolLM2 and Gemma, alternating over two rounds; it prints
``numerics: portable pins T s vs today's pins T0 s = R x`` with both models' best times summed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from uaprobe.repro import numerics

# The benchmark runs pinned, as the stages do; `--unpinned` (used by phase (d)) leaves the
# numeric libraries to pick their own CPU code paths; `--previous-pins` (phase (e)) sets the pins of
# the previous revision: the AVX2 pins without MKL's Intel code path and MKL_CBWR.
# Like the pins, only on a CPU that runs their kernels (numerics.pins_for): nowhere an ISA it lacks.
PREVIOUS_PINS = {k: v for k, v in numerics.pins_for(flags=numerics.cpu_flags()).items() if k != "MKL_CBWR"}
if __name__ == "__main__" and "--previous-pins" in sys.argv:
    os.environ.pop("MKL_CBWR", None)
    os.environ.update(PREVIOUS_PINS)
elif __name__ == "__main__" and "--unpinned" not in sys.argv:
    numerics.pin()

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

from uaprobe.extraction import extract  # noqa: E402
from uaprobe.config import load_params  # noqa: E402
from uaprobe.extraction.dataset import load_dataset  # noqa: E402
from uaprobe.extraction.models import load_model  # noqa: E402
from uaprobe.extraction.store import ExtractionWriter  # noqa: E402
from uaprobe.extraction.batches import length_sorted_batches  # noqa: E402
from uaprobe.extraction.tokens import encode, prepare_tokenizer, statement_tokens, token_lengths  # noqa: E402


class PeakRSS:
    """Samples the process's resident memory every 5 ms; ``peak`` is the maximum seen."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> "PeakRSS":
        self.baseline = self.proc.memory_info().rss
        self.peak = self.baseline
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def above_baseline_mb(self) -> float:
        return (self.peak - self.baseline) / 2**20


@torch.no_grad()
def seeds_method(model, tokenizer, texts: list[str]) -> None:
    for text in texts:
        inputs = tokenizer(text, return_tensors="pt")
        out = model(**inputs, output_hidden_states=True)
        last_idx = int(inputs["attention_mask"][0].sum()) - 1
        for hidden in out.hidden_states:
            hidden[0, 1:, :].mean(dim=0).numpy().astype(np.float32)
            hidden[0, last_idx, :].numpy().astype(np.float32)
            hidden[0, 0, :].numpy().astype(np.float32)
        model(**inputs, labels=inputs["input_ids"]).loss.item()


@torch.no_grad()
def bare_forward(model, tokenizer, texts: list[str], batches: list[np.ndarray]) -> None:
    for rows in batches:
        enc = encode(tokenizer, [texts[i] for i in rows])
        model(input_ids=enc.input_ids, attention_mask=enc.attention_mask, output_hidden_states=True, use_cache=False)


def ours(model, tokenizer, texts: list[str], batches: list[np.ndarray], out: Path, drop: str, *,
         categories: list[str] | None = None, pairs: np.ndarray | None = None, sides: np.ndarray | None = None,
         anisotropy: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
    """Our extraction path: length-sorted batches, one pass each, streamed through the HDF5 writer."""
    n_layers = model.config.num_hidden_layers
    d = model.config.hidden_size
    states, index, special = anisotropy or (np.zeros((2, n_layers + 1, d), np.float32), np.array([0, 1]),
                                            np.zeros(2, bool))
    writer = ExtractionWriter(
        out, texts=texts, categories=categories or ["c"] * len(texts),
        pairs=np.arange(len(texts)) // 2 if pairs is None else pairs,
        sides=np.arange(len(texts)) % 2 if sides is None else sides, n_layers=n_layers, hidden_size=d,
        prompts=[f"p{i}" for i in range(int(index.max()) + 1)], aniso_states=states, aniso_prompt_index=index,
        aniso_special=special, tokens=statement_tokens(tokenizer, texts),
        attrs={"model_id": "bench", "n_layers": n_layers, "hidden_size": d, "pooling_drop": drop}, resume=False)
    try:
        extract.iterate_batches(model, tokenizer, texts, batches, drop=drop, on_batch=writer.write)
        writer.finish()
    finally:
        writer.close()


def timed(label: str, fn) -> tuple[float, float]:
    with PeakRSS() as mem:
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
    print(f"  {label:<58} {seconds:8.2f} s   peak RSS +{mem.above_baseline_mb:7.1f} MiB", flush=True)
    return seconds, mem.above_baseline_mb


def alternate(args: argparse.Namespace, phase: str, model: str, modes: dict[str, list[str]],
              describe: Callable[[dict], str]) -> dict[str, list[float]]:
    """Our extraction of ``model`` in fresh processes, one per mode (its extra flags), alternating over two
    rounds so that load from other processes does not land on one side only; each mode's seconds."""
    env = numerics.unpinned_environ()
    base = [sys.executable, str(Path(__file__).resolve()), "--child", "--model", model, "--limit", str(args.limit),
            "--batch-size", str(args.batch_size), "--max-batch-tokens", str(args.max_batch_tokens)]
    first, second = modes
    runs: dict[str, list[float]] = {mode: [] for mode in modes}
    for round_, order in ((1, (first, second)), (2, (second, first))):
        for mode in order:
            proc = subprocess.run(base + modes[mode], env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"({phase}) {model} {mode} child failed:\n{proc.stderr[-3000:]}")
            child = json.loads(proc.stdout.strip().splitlines()[-1])
            runs[mode].append(child["seconds"])
            print(f"  ({phase}) {describe({**child, 'mode': mode})} [round {round_}]{'':<8}{child['seconds']:8.2f} s",
                  flush=True)
    return runs


def pinned_vs_unpinned(args: argparse.Namespace) -> float:
    """(d): our extraction in fresh processes, pinned and unpinned, alternating; returns the ratio."""
    runs = alternate(args, "d", args.model, {"pinned": [], "unpinned": ["--unpinned"]},
                     lambda c: f"ours, {c['mode']:<8} (ISA {c['isa']:<8}, torch {c['capability']})")
    ratio = min(runs["pinned"]) / min(runs["unpinned"])
    print(f"pinned/unpinned = {ratio:.3f}  (goal <= 1.1)")
    return ratio


def portable_vs_previous(args: argparse.Namespace, models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")) -> float:
    """(e): our extraction of each model in fresh processes under the portable and the previous pins."""
    best: dict[str, float] = {"portable": 0.0, "previous": 0.0}
    for model in models:
        runs = alternate(args, "e", model, {"portable": [], "previous": ["--previous-pins"]},
                         lambda c, model=model: f"{model}, {c['mode']:<8} pins (MKL {c['mkl']})")
        for mode in best:
            best[mode] += min(runs[mode])
    ratio = best["portable"] / best["previous"]
    print(f"numerics: portable pins {best['portable']:.1f} s vs today's pins {best['previous']:.1f} s = {ratio:.2f} x"
          "  (goal <= 1.10)")
    return ratio


def child(args: argparse.Namespace, model, tokenizer, texts: list[str], batches: list[np.ndarray], drop: str) -> int:
    """One (d) measurement in this process: a warm-up batch, then our extraction once."""
    bare_forward(model, tokenizer, texts, batches[:1])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        ours(model, tokenizer, texts, batches, Path(tmp) / "bench.h5", drop)
        seconds = time.perf_counter() - start
    rec = numerics.record()
    print(json.dumps({"seconds": seconds, "isa": rec["isa"], "capability": rec["torch"]["cpu_capability"],
                      "mkl": rec["mkl_dispatch"]}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--limit", type=int, default=0, help="first N statements only (0 = all)")
    parser.add_argument("--batch-size", type=int, default=0, help="default: extract.batch_size of params.yaml")
    parser.add_argument("--max-batch-tokens", type=int, default=0,
                        help="default: extract.max_batch_tokens of params.yaml")
    parser.add_argument("--pins-only", action="store_true", help="only (d): pinned vs unpinned")
    parser.add_argument("--portable", action="store_true", help="only (e): portable vs the previous pins")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--unpinned", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--previous-pins", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    params = load_params(REPO / "params.yaml")
    texts = load_dataset(REPO / "data" / "dataset.json").texts
    if args.limit:
        texts = texts[: args.limit]
    batch_size = args.batch_size = args.batch_size or params.extract.batch_size
    max_batch_tokens = args.max_batch_tokens = args.max_batch_tokens or params.extract.max_batch_tokens
    if args.portable and not args.child:
        portable_vs_previous(args)
        return 0
    if args.pins_only and not args.child:
        print(f"{args.model}: {len(texts)} statements, {torch.get_num_threads()} threads")
        pinned_vs_unpinned(args)
        return 0
    model, tokenizer, _source, dtype = load_model(params.model(args.model), args.model, device=torch.device("cpu"))
    prepare_tokenizer(tokenizer)
    batches = length_sorted_batches(token_lengths(tokenizer, texts), batch_size,
                                    max_batch_tokens=max_batch_tokens)
    if args.child:
        return child(args, model, tokenizer, texts, batches, params.pooling.drop)
    print(f"{args.model}: {len(texts)} statements, {len(batches)} batches (at most {batch_size} statements, "
          f"{max_batch_tokens} padded tokens), {dtype}, {torch.get_num_threads()} threads")
    bare_forward(model, tokenizer, texts, batches[:1])  # warm-up, not timed
    with tempfile.TemporaryDirectory() as tmp:
        a, _ = timed("(a) seeds' method: 1 statement, 2 passes each", lambda: seeds_method(model, tokenizer, texts))
        # (b) and (c) alternate over two rounds and keep each one's best, so that load from other
        # processes on the machine does not land on one side only.
        runs_b, runs_c = [], []
        for round_ in (1, 2):
            runs_b.append(timed(f"(b) ours: batched, pooled, NLL, streamed to HDF5 [round {round_}]",
                                lambda: ours(model, tokenizer, texts, batches, Path(tmp) / "bench.h5",
                                             params.pooling.drop)))
            runs_c.append(timed(f"(c) bare batched forward passes, no pooling/I/O [round {round_}]",
                                lambda: bare_forward(model, tokenizer, texts, batches)))
        b, c = min(t for t, _ in runs_b), min(t for t, _ in runs_c)
    print(f"a/b = {a / b:.2f}  (goal >= 10)")
    print(f"b/c = {b / c:.2f}  (goal <= 1.25)")
    print(f"statements/s: seeds {len(texts) / a:.1f}, ours {len(texts) / b:.1f}, bare {len(texts) / c:.1f}")
    pinned_vs_unpinned(args)
    portable_vs_previous(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
