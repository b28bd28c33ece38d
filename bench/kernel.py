"""Benchmark: the unit-vector kernel of this checkout against the one of a git revision, side by side.

    python bench/kernel.py [--against main] [--pairs 4600] [--views 4] [--partitions 1000]

Both kernels sum the same unit vectors (n pairs, ``--views`` views of each side, D = 576) over the
same random bins (k = 10, 15, 20, 25, 30, equal shares of ``--partitions``), side ``diff``,
alternating three times in one process; it prints for each the best wall and CPU seconds, the
float64 additions per CPU second (``n D`` per partition, view and side), the load average, and the
largest difference between their outputs. The revision's ``src/uaprobe/analysis/kernels.py`` is
read with ``git show``; both signatures the kernel has had are understood: the blocked form in use,
``vector_squares(both, labels, sizes, views=, signed=)``, and the one before it (e92187c),
``vector_squares(both, order, bounds, terms=, n_out=)``.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from uaprobe.analysis import kernels
from uaprobe.analysis.uniformity import Groups, unit_rows

REPO = Path(__file__).resolve().parents[1]


def kernels_at(revision: str, folder: Path):
    """The ``kernels`` module of ``revision``, imported from a copy under ``folder``."""
    source = subprocess.run(["git", "show", f"{revision}:src/uaprobe/analysis/kernels.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    path = folder / "kernels_at_revision.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kernels_at_revision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def diff_call(module, both: np.ndarray, labels: np.ndarray, n_groups: int) -> Callable[[], np.ndarray]:
    """A call of the module's unit-vector kernel for side ``diff`` over every view pair of ``both``."""
    views = both.shape[1] // 2
    groups = Groups.of(labels, n_groups)
    if "terms" in inspect.signature(module.vector_squares).parameters:
        terms = [(v, v, 1.0) for v in range(views)] + [(views + v, v, -1.0) for v in range(views)]
        return lambda: module.vector_squares(both, groups.order, groups.group_bounds, terms=terms, n_out=views)
    pairs = [(v, views + v) for v in range(views)]
    return lambda: module.vector_squares(both, labels, groups.sizes, views=pairs, signed=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="main", help="git revision whose kernel is timed beside this one")
    parser.add_argument("--pairs", type=int, default=4600)
    parser.add_argument("--views", type=int, default=4)
    parser.add_argument("--dim", type=int, default=576)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    both = np.ascontiguousarray(unit_rows(rng.standard_normal((args.pairs, 2 * args.views, args.dim))))
    ks = (10, 15, 20, 25, 30)
    labels = np.concatenate([rng.integers(0, k, size=(args.partitions // len(ks), args.pairs)) for k in ks])
    additions = float(args.pairs) * args.dim * 2 * args.views * labels.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        calls = {args.against: diff_call(kernels_at(args.against, Path(tmp)), both, labels, max(ks)),
                 "this checkout": diff_call(kernels, both, labels, max(ks))}
        outputs = {name: call() for name, call in calls.items()}  # compiles
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for _ in range(args.repeats):
            for name, call in calls.items():
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{args.pairs} pairs, {args.views} views per side, D = {args.dim}, {labels.shape[0]} partitions, "
          f"side diff; kernels on {kernels.thread_count()} thread(s); load average {os.getloadavg()[0]:.1f}")
    for name, rows in times.items():
        wall = min(r[0] for r in rows)
        cpu = min(r[1] for r in rows)
        print(f"  {name:<14} best wall {wall:7.3f} s  cpu {cpu:7.3f} s  {additions / cpu / 1e9:5.2f} G additions "
              "per CPU second")
    first, second = outputs.values()
    print(f"  largest |difference| {np.abs(first - second).max():.1e} (largest value {np.abs(first).max():.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
