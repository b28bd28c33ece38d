"""The analyze computation of this checkout beside the code of another revision, in one run.

    python bench/compare.py [--against REV] [--rounds 3] [--rounds-4600 1] [--layers-4600 3] [--results DIR]

``REV`` (default ``HEAD~1``)'s ``src/`` is exported by ``git archive`` into a temporary directory;
each timing runs in a fresh process whose ``PYTHONPATH`` is one code's ``src/`` (pinned as the
``analyze`` stage is: :func:`uaprobe.repro.numerics.pin`), on the same input:

- 230 pairs: the first model's extraction (``data/embeddings/<model>.h5``; without it a synthetic
  file of the default model's shape, written to ``bench/out/``), every layer;
- 4600 pairs: 20 copies of it, every copy after the first perturbed by seeded noise (the shapes,
  and so the cost, of a 20-fold dataset), the first ``--layers-4600`` layers (the analysis is
  linear in the layers; all 31 take about 7 minutes per run on 2 cores).

A process times :func:`~uaprobe.analysis.run.pipeline.analyze_model` once. First each code runs every
path of the analysis on a small subset, untimed (:func:`warm`: it compiles and caches that code's
kernels); then the two codes alternate, ``--rounds`` times (3) at 230 pairs and ``--rounds-4600``
times (1) at 4600, and each time is the median of its rounds (the machine may be shared). Prints,
last, the line ``analyze plain: 230 pairs T s vs T0 s = R x; 4600 pairs T s vs T0 s = R x`` (T this
checkout, T0 the revision) and writes the figures to ``DIR/<cpu model>.json`` (``make bench``:
``bench/results``, which :mod:`report` renders into docs/performance.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = (1, 20)
"""Copies of the dataset's 230 pairs timed."""


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_slug(model: str) -> str:
    """A file name for the CPU model: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()


def export_src(rev: str, folder: Path) -> Path:
    """``rev``'s ``src/`` under ``folder`` (``git archive``): the directory to put on ``PYTHONPATH``."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev, "src"], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


# --- the child: one timed analysis ------------------------------------------------------------


def first_layers(emb, views: int):
    """``emb`` with only its first ``views`` layer views (token embeddings included)."""
    views = min(views, emb.n_layers + 1)
    cut = {name: {k: v[:, :views] for k, v in getattr(emb, name).items()}
           for name in ("pooled", "pooled_sink_excluded", "sink")}
    return dataclasses.replace(emb, **cut, aniso_states=emb.aniso_states[:, :views],
                               attrs={**emb.attrs, "n_layers": views - 1})


def rows_of(emb, rows):
    """The statements ``rows`` of ``emb``, in that order (every per-statement field)."""
    import numpy as np

    starts, stops = emb.token_offsets[rows], emb.token_offsets[rows + 1]
    tokens = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])
    changes = {"text": [emb.text[i] for i in rows], "category": emb.category[rows], "side": emb.side[rows],
               "pair": emb.pair[rows], "token_ids": emb.token_ids[tokens], "token_special": emb.token_special[tokens],
               "token_offsets": np.concatenate([[0], np.cumsum(stops - starts)])}
    for name in ("pooled", "prenorm", "pooled_sink_excluded", "prenorm_sink_excluded", "sink"):
        changes[name] = {k: v[rows] for k, v in getattr(emb, name).items()}
    for name in ("nll_mean", "nll_sum", "n_tokens", "n_content", "n_content_sink_excluded"):
        changes[name] = getattr(emb, name)[rows]
    return dataclasses.replace(emb, **changes)


def tiled(emb, copies: int, seed: int = 0):
    """``copies`` copies of every statement, each copy after the first with its pooled states and NLLs
    perturbed by seeded noise (1 % of each row's scale) and new pair numbers."""
    import numpy as np

    if copies == 1:
        return emb
    rng = np.random.default_rng(seed)
    n = len(emb.text)
    copy = np.repeat(np.arange(copies), n)
    out = rows_of(emb, np.tile(np.arange(n), copies))
    later = copy > 0

    def noisy(x):
        x = x.copy()
        scale = 0.01 * np.abs(x[later]).mean(axis=tuple(range(1, x.ndim)) or None, keepdims=x.ndim > 1)
        x[later] += (scale * rng.standard_normal(x[later].shape)).astype(x.dtype)
        return x

    changes = {"pair": out.pair + (int(emb.pair.max()) + 1) * copy,
               "nll_mean": noisy(out.nll_mean), "nll_sum": noisy(out.nll_sum)}
    for name in ("pooled", "prenorm", "pooled_sink_excluded", "prenorm_sink_excluded"):
        changes[name] = {k: noisy(v) for k, v in getattr(out, name).items()}
    return dataclasses.replace(out, **changes)


def warm(emb, params) -> None:
    """Every compiled kernel of the analysis loaded (compiled and cached on a first run) on a small
    subset: the analysis in the cosines' default form and in the unit-vector form (the form of many
    pairs), and the Gram form in pieces (no table held) on every side."""
    import numpy as np
    from uaprobe.analysis.run.pipeline import analyze_model
    from uaprobe.analysis.geometry.uniformity import Cosines

    first = {}
    for row, (cat, pair) in enumerate(zip(emb.category, emb.pair)):
        first.setdefault(str(cat), set())
        if len(first[str(cat)]) < 12:
            first[str(cat)].add(int(pair))
    small = rows_of(emb, np.array([r for r, (c, p) in enumerate(zip(emb.category, emb.pair))
                                   if int(p) in first[str(c)]]))
    for form in (None, "vectors"):
        analyze_model(small, params=params, model_id="warm", form=form)
    a = np.stack([small.pooled["mean"][small.side == s] for s in (0, 1)])[:, :12]
    cos = Cosines(a[0], a[1], form="gram")
    cos.gram_bytes = 0  # no table held: every call builds and sums the table in pieces
    for side in ("a", "b", "diff"):
        cos.uniformity(np.arange(12)[None, :] % 3, n_groups=3, side=side)


def child(args: argparse.Namespace) -> int:
    try:
        from uaprobe.repro import numerics
    except ImportError:  # a revision from before the toolkit moved into uaprobe.repro
        from uaprobe import numerics  # type: ignore[no-redef]

    numerics.pin(analysis=True)
    from uaprobe.analysis.run.pipeline import analyze_model
    from uaprobe.config import load_params
    from uaprobe.extraction.store import read_embeddings

    emb = first_layers(read_embeddings(args.embeddings), args.layers)
    params = load_params(REPO / "params.yaml")
    if args.warm:
        warm(emb, params.analysis)
        return 0
    emb = tiled(emb, args.copies)
    start, cpu = time.perf_counter(), time.process_time()
    analyze_model(emb, params=params.analysis, model_id="bench")
    print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}))
    return 0


# --- the parent: both codes, alternately ------------------------------------------------------


def embeddings_file() -> Path:
    """The first model's extraction, or a synthetic file of its shape."""
    sys.path.insert(0, str(REPO / "src"))
    from uaprobe.config import load_params

    real = REPO / "data" / "embeddings" / f"{load_params(REPO / 'params.yaml').models[0]}.h5"
    if real.exists():
        return real
    out = REPO / "bench" / "out" / "synthetic-default.h5"
    if not out.exists():
        sys.path.insert(0, str(REPO / "tests"))
        from synthetic_h5 import write_synthetic_h5

        dataset = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
        write_synthetic_h5(out, pairs_per_category=tuple(len(c["pairs"]) for c in dataset.values()), n_layers=30,
                           hidden=576, n_prompts=16, tokens_per_prompt=12, seed=0, model_id="synthetic-default")
    return out


def timed(src: Path, h5: Path, copies: int, layers: int, *extra: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", "--embeddings", str(h5),
                           "--copies", str(copies), "--layers", str(layers), *extra], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1]) if not extra else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD~1", help="the git revision to compare with (default HEAD~1)")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs of each code at each size")
    ap.add_argument("--layers-4600", dest="layers_4600", type=int, default=3,
                    help="layer views analysed at 4600 pairs (default 3)")
    ap.add_argument("--results", type=Path, default=None, help="write DIR/<cpu model>.json")
    ap.add_argument("--rounds-4600", dest="rounds_4600", type=int, default=1,
                    help="timed runs of each code at 4600 pairs (default 1)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--embeddings", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--copies", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--layers", type=int, default=1000, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    h5 = embeddings_file()
    against = git("rev-parse", "--short=12", args.against)
    here = git("rev-parse", "--short=12", "HEAD") + ("+" if git("status", "--porcelain", "src") else "")
    sizes = []
    with tempfile.TemporaryDirectory(prefix="uaprobe-bench-") as tmp:
        codes = {"this": REPO / "src", "previous": export_src(against, Path(tmp))}
        for src in codes.values():
            timed(src, h5, 1, 1000, "--warm")  # untimed: compiles and caches the code's kernels
        for copies in SIZES:
            layers = 1000 if copies == 1 else args.layers_4600
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
            rounds = args.rounds if copies == 1 else args.rounds_4600
            for _ in range(rounds):
                for name, src in codes.items():
                    runs[name].append(timed(src, h5, copies, layers))
                    print(f"  {230 * copies} pairs, {name}: {runs[name][-1]['seconds']:.1f} s", flush=True)
            med = {name: statistics.median(r["seconds"] for r in runs[name]) for name in codes}
            sizes.append({"pairs": 230 * copies, "layers": "all" if copies == 1 else layers,
                          "seconds": round(med["this"], 2), "previous_seconds": round(med["previous"], 2),
                          "ratio": round(med["this"] / med["previous"], 3),
                          "runs": {name: [round(r["seconds"], 2) for r in runs[name]] for name in codes}})
    record = {"cpu_model": cpu_model(), "cores": os.cpu_count(), "commit": here, "against": against,
              "embeddings": h5.name, "rounds": args.rounds, "sizes": sizes}
    print("| pairs | layers | this | previous | ratio |\n|---|---|---|---|---|")
    for s in sizes:
        print(f"| {s['pairs']} | {s['layers']} | {s['seconds']:.1f} s | {s['previous_seconds']:.1f} s | {s['ratio']:.2f}x |")
    print("analyze plain: " + "; ".join(f"{s['pairs']} pairs {s['seconds']:.1f} s vs {s['previous_seconds']:.1f} s = "
                                        f"{s['ratio']:.2f} x" for s in sizes))
    if args.results is not None:
        write_record(args.results, cpu_slug(record["cpu_model"]), record)
    return 0


def write_record(results: Path, stem: str, record: dict) -> Path:
    """Write a benchmark's ``record`` as ``results/<stem>.json`` (the file bench/report.py renders) and say where."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{stem}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"written to {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return path


if __name__ == "__main__":
    sys.exit(main())
