"""Benchmark: `uaprobe review`'s recomputation against `dvc repro -f` of the same stages, side by side in one run.

    python bench/review.py [--repo .] [--rounds 1] [--jobs 1]

The stages are every stage of ``dvc.yaml`` but the extractions (the review recomputes those from the models on
top, where it can; ``dvc repro -f`` would too). ``--repo`` is a DVC project whose outputs are in the workspace
(``dvc pull`` first). Each round, in turn:

* the review's recomputation (:func:`uaprobe.repro.review.recompute_check` with ``extract=False``): the scratch
  copy, every stage by its own command, independent stages ``--jobs`` at a time, every output compared with
  ``dvc.lock``;
* ``dvc repro -f -s <stage> ...`` of the same stages in a copy of the project with its own cache (so this one's is
  not written), one stage after the other as DVC runs them, outputs cached and ``dvc.lock`` written.

It prints ``review recompute: T s vs dvc repro -f T0 s = R x`` (the best round of each) and each stage's time. The
absolute times depend on what else the machine runs; the ratio is of two runs made one after the other.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from uaprobe.repro import numerics


def dvc_repro(root: Path, tmp: Path, stages: list[str], extractions: list[str], outputs: list[str]) -> float:
    """``dvc repro -f -s`` of ``stages`` in a copy of ``root`` (its own cache); seconds."""
    from uaprobe.repro.recompute import scratch_copy, source_files, stage_env

    copy = scratch_copy(root, tmp / "repro", source_files(root, outputs), extractions)
    env = stage_env(copy)
    dvc = str(Path(sys.executable).with_name("dvc"))
    for args in (["config", "--local", "core.no_scm", "true"], ["cache", "dir", "--local", str(tmp / "cache")]):
        subprocess.run([dvc, *args], cwd=copy, env=env, check=True, capture_output=True)
    started = time.perf_counter()
    proc = subprocess.run([dvc, "repro", "-f", "-s", *stages], cwd=copy, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"dvc repro -f failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=Path("."))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    numerics.pin(strict=False)
    from uaprobe.repro.lockfile import read_lock
    from uaprobe.repro.recompute import pipeline
    from uaprobe.repro.review import recompute_check

    root = args.repo.resolve()
    stages = pipeline(root)
    names = [s.name for s in stages if not s.is_extraction]
    extractions = [o for s in stages if s.is_extraction for o in s.outs]
    outputs = [o for s in stages for o in s.outs]
    locked = read_lock(root)
    print(f"{len(names)} stages ({', '.join(names)}), {os.cpu_count()} CPUs, --jobs {args.jobs}", file=sys.stderr)
    best_review = best_repro = float("inf")
    per_stage: dict[str, float] = {}
    for _ in range(args.rounds):
        started = time.perf_counter()
        check, runs, _rows = recompute_check(root, locked, extract=False, keep=False, jobs=args.jobs,
                                             progress=lambda line: print(line, file=sys.stderr))
        took = time.perf_counter() - started
        if not check.passed:
            print("\n".join([check.summary, *check.details]), file=sys.stderr)
            return 1
        if took < best_review:
            best_review, per_stage = took, {r.stage.name: r.seconds for r in runs}
        with tempfile.TemporaryDirectory(prefix="uaprobe-bench-review-") as tmp:
            best_repro = min(best_repro, dvc_repro(root, Path(tmp), names, extractions, outputs))
    print("  " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in per_stage.items()))
    print(f"review recompute: {best_review:.1f} s vs dvc repro -f {best_repro:.1f} s = {best_review / best_repro:.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
