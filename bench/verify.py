"""Benchmark: `uaprobe verify`'s re-hashing of the workspace against `md5sum` over the same files, side by side.

    python bench/verify.py [--repo .] [--synthetic-mb 512] [--repeats 3]

With ``--repo`` a DVC project whose outputs are in the workspace, the files are the outputs its
``dvc.lock`` records (every file of a directory output); otherwise (or with ``--synthetic-mb``) a
temporary directory of four files of that total size and a directory of small JSON files. Each
round runs ``md5sum`` over the files and then the workspace check of :mod:`uaprobe.repro.verify` (DVC's md5
and `.dir` hashing, its own threads), from a warm page cache; the best of ``--repeats`` rounds is
printed as ``verify: T s vs md5sum T0 s = R x``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from uaprobe.repro.lockfile import Output, read_lock
from uaprobe.repro.hashing import workspace_hash
from uaprobe.repro.verify import workspace_problems


def synthetic(root: Path, megabytes: int) -> list[Output]:
    """Four large files and a directory of 200 small JSON files; their outputs with the right md5."""
    rng = os.urandom
    outs = []
    for i in range(4):
        path = root / f"big{i}.bin"
        with open(path, "wb") as fh:
            for _ in range(megabytes // 4):
                fh.write(rng(1 << 20))
        outs.append(Output(path.name, hashlib.md5(path.read_bytes()).hexdigest(), "bench", size=path.stat().st_size))
    small = root / "results"
    small.mkdir()
    for i in range(200):
        (small / f"r{i}.json").write_text('{"r": %d}' % i)
    outs.append(Output("results", workspace_hash(root, "results"), "bench", size=sum(
        p.stat().st_size for p in small.iterdir())))
    return outs


def files_of(root: Path, outs: list[Output]) -> list[str]:
    out = []
    for o in outs:
        path = root / o.path
        out += sorted(str(p) for p in path.rglob("*") if p.is_file()) if path.is_dir() else [str(path)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=None)
    ap.add_argument("--synthetic-mb", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="uaprobe-bench-verify-") as tmp:
        if args.repo is not None:
            root = args.repo.resolve()
            outs = [o for s in read_lock(root).values() for o in s.outs if (root / o.path).exists()]
        else:
            root = Path(tmp)
            outs = synthetic(root, args.synthetic_mb)
        files = files_of(root, outs)
        size = sum(os.path.getsize(f) for f in files)
        print(f"{len(files)} files, {size / 2**20:.0f} MiB, {len(outs)} outputs, {os.cpu_count()} CPUs", file=sys.stderr)
        best_md5sum = best_verify = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            subprocess.run(["md5sum", *files], check=True, stdout=subprocess.DEVNULL)
            best_md5sum = min(best_md5sum, time.perf_counter() - started)
            started = time.perf_counter()
            problems = workspace_problems(root, outs, None, has_remote=False)
            best_verify = min(best_verify, time.perf_counter() - started)
            if problems:
                print("\n".join(line for p in problems for line in p.lines()), file=sys.stderr)
                return 1
    print(f"verify: {best_verify:.2f} s vs md5sum {best_md5sum:.2f} s = {best_verify / best_md5sum:.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
