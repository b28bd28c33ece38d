"""The author's loop as a user meets it, this checkout's code beside another revision's, in one run.

    python bench/loop.py [--against REV] [--rounds 2] [--results DIR] [--work DIR]

Each code is a scratch clone of the repository (``HEAD`` and ``REV``, default ``HEAD~1``) under a
temporary directory, with its own DVC cache holding this checkout's cache objects (hard links), from
which the outputs of its ``dvc.lock`` are checked out (nothing is written to this checkout or its
cache); both clones run with this checkout's virtual environment, each with its own ``src/`` first on
``PYTHONPATH``. A first ``dvc repro`` in each clone, untimed, brings its outputs up to its code, and the figures are drawn
again (``dvc repro -f -s figures``: a code that keeps what it drew keeps it, as after an author's own run);
that state is saved, the store of earlier products (``.cache/``) with it; where it did not run every stage, one untimed round of the two edits below does
(Python's bytecode and the compiled kernels of that code cached, as in an author's checkout).
``--work DIR`` keeps the clones for a later run, which brings them to the revisions and reuses their
outputs and caches. Then, ``--rounds`` times, the two codes alternating, each clone:

1. **edit loop**: ``analysis.preference`` edited from ``mean`` to ``sum`` in ``params.yaml``, then
   ``dvc repro`` (run cache off, so that every changed stage runs);
2. the saved state restored (``dvc.lock``, ``params.yaml``, the manuscript, ``metrics/``, ``plots/``,
   then ``dvc checkout``);
3. **manuscript edit**: one sentence appended to ``paper/paper.qmd``, then ``dvc repro``; restored again.

Every time is the wall time of the whole ``dvc repro``; a stage's time runs from DVC's ``Running
stage`` line to the next stage's (its command and DVC's hashing and caching of its outputs), summed
per stage family (``analyze`` is every model's). Each figure is the median of its rounds. Prints,
per code, ``edit loop: T s (analyze A s, compare C s, figures F s, paper P s); manuscript edit: M s``
and the ratios, and with ``--results`` writes ``DIR/loop-<cpu model>.json`` (``make bench-loop``:
``bench/results``, which ``bench/report.py`` renders into docs/performance.md). The machine may be
shared with other work: compare the ratios of one run, not the times of different runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import cpu_model, cpu_slug, write_record  # noqa: E402  (bench/compare.py)
from report import loop_line  # noqa: E402  (bench/report.py)

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("analyze", "compare", "figures", "paper")
EDIT = ("  preference: mean ", "  preference: sum  ")
"""The parameter edit: ``analysis.preference`` from ``mean`` to ``sum`` (its line in params.yaml)."""
SENTENCE = "\nThis sentence was appended to time a manuscript-only edit.\n"
SAVED = ("dvc.lock", "params.yaml", "paper/paper.qmd", "metrics", "plots", ".cache")
"""What ``dvc checkout`` does not restore: the lock, the edited sources, the uncached outputs, the store of
products of earlier runs (:mod:`uaprobe.memo`: it holds what the run before the edit made, no more)."""
RUNNING = re.compile(r"Running stage '([^']+)'")


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class Clone:
    """One code's scratch copy of the project."""

    def __init__(self, rev: str, folder: Path) -> None:
        self.root = folder / "project"
        self.saved = folder / "saved"
        fresh = not (self.root / ".git").is_dir()
        if fresh:
            git("clone", "-q", "--no-checkout", str(REPO), str(self.root))
        else:  # a clone of an earlier run (--work): brought to the revision, its outputs kept
            git("fetch", "-q", "origin", cwd=self.root)
        git("checkout", "-q", rev, cwd=self.root)
        bin_dir = Path(sys.executable).parent
        self.env = {**os.environ, "UAPROBE_VENV": str(bin_dir.parent), "PYTHONPATH": str(self.root / "src"),
                    "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}
        self.dvc = str(bin_dir / "dvc")
        if fresh:
            # its own cache, holding this checkout's objects as hard links (copies across file systems): the
            # outputs check out from it, and nothing the runs write reaches this checkout's cache
            shared = Path(subprocess.run([self.dvc, "cache", "dir"], cwd=REPO, env=self.env, check=True,
                                         capture_output=True, text=True).stdout.strip())
            cache = self.root / ".dvc" / "cache"
            if shared.is_dir():
                shutil.copytree(shared, cache, copy_function=_link_or_copy,
                                ignore=shutil.ignore_patterns("runs", "tmp"))
            self.run([self.dvc, "config", "--local", "cache.dir", str(cache)])
            self.run([self.dvc, "checkout", "-q"])

    def run(self, cmd: list[str]) -> None:
        done = subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed in {self.root}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")

    def repro(self) -> dict:
        """``dvc repro`` timed: the total and each stage family's seconds."""
        marks: list[tuple[float, str]] = []
        start = time.perf_counter()
        proc = subprocess.Popen([self.dvc, "repro", "--no-run-cache"], cwd=self.root, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            tail = (tail + [line])[-60:]
            m = RUNNING.search(line)
            if m:
                marks.append((time.perf_counter(), m.group(1)))
        end = time.perf_counter()
        if proc.wait():
            raise SystemExit(f"dvc repro failed in {self.root}:\n{''.join(tail)}")
        stages: dict[str, float] = {}
        for (t, name), (t_next, _) in zip(marks, marks[1:] + [(end, "")]):
            family = name.split("@")[0]
            stages[family] = stages.get(family, 0.0) + t_next - t
        return {"seconds": round(end - start, 2), "stages": {k: round(v, 2) for k, v in stages.items()},
                "ran": [name for _, name in marks]}

    def save(self) -> None:
        shutil.rmtree(self.saved, ignore_errors=True)
        for name in SAVED:
            src, dst = self.root / name, self.saved / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.exists():
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)

    def restore(self) -> None:
        for name in SAVED:
            src, dst = self.saved / name, self.root / name
            if dst.is_dir():
                shutil.rmtree(dst)
            if src.exists():
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        self.run([self.dvc, "checkout", "-q"])

    def edit_loop(self) -> dict:
        params = self.root / "params.yaml"
        text = params.read_text(encoding="utf-8")
        if text.count(EDIT[0]) != 1:
            raise SystemExit(f"{params}: no single line starting {EDIT[0].strip()!r} to edit")
        params.write_text(text.replace(EDIT[0], EDIT[1]), encoding="utf-8")
        try:
            return self.repro()
        finally:
            self.restore()

    def manuscript_edit(self) -> dict:
        with (self.root / "paper" / "paper.qmd").open("a", encoding="utf-8") as qmd:
            qmd.write(SENTENCE)
        try:
            return self.repro()
        finally:
            self.restore()


def summary(runs: list[dict]) -> dict:
    """The median of the runs' totals and of each family's seconds."""
    return {"seconds": round(statistics.median(r["seconds"] for r in runs), 2),
            "stages": {f: round(statistics.median(r["stages"].get(f, 0.0) for r in runs), 2) for f in FAMILIES}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", default="HEAD~1", help="the git revision to compare with (default HEAD~1)")
    ap.add_argument("--rounds", type=int, default=2, help="timed loops of each code (default 2)")
    ap.add_argument("--results", type=Path, default=None, help="write DIR/loop-<cpu model>.json")
    ap.add_argument("--work", type=Path, default=None,
                    help="keep the clones in DIR/this and DIR/previous, and reuse those of an earlier run there "
                         "(default: a temporary directory, removed at the end)")
    args = ap.parse_args(argv)
    revs = {"this": git("rev-parse", "--short=12", "HEAD"), "previous": git("rev-parse", "--short=12", args.against)}
    if git("status", "--porcelain", "--untracked-files=no"):
        print("note: this checkout has uncommitted changes; the benchmark times HEAD", flush=True)
    load = [os.getloadavg()[0]]
    runs: dict[str, dict[str, list[dict]]] = {name: {"edit": [], "manuscript": []} for name in revs}
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="uaprobe-loop-")))
        clones, warm = {}, {}
        for name, rev in revs.items():
            clones[name] = Clone(rev, work / name)
            first = clones[name].repro()  # untimed: the outputs of this code
            # untimed: the figures drawn again, as the author's last run drew them, into the code's store of them
            clones[name].run([clones[name].dvc, "repro", "-f", "-s", "figures"])
            print(f"  {name} ({rev}): brought up to date in {first['seconds']:.1f} s "
                  f"({', '.join(first['ran']) or 'nothing'})", flush=True)
            clones[name].save()
            warm[name] = set(FAMILIES) <= {stage.split("@")[0] for stage in first["ran"]}
        for name, clone in clones.items():  # untimed: every stage's code run once from this clone
            if not warm[name]:
                clone.edit_loop()
                clone.manuscript_edit()
                print(f"  {name}: warm", flush=True)
        for i in range(args.rounds):
            order = list(revs) if i % 2 == 0 else list(revs)[::-1]
            for name in order:
                for kind, step in (("edit", clones[name].edit_loop), ("manuscript", clones[name].manuscript_edit)):
                    runs[name][kind].append(step())
                    load.append(os.getloadavg()[0])
                    r = runs[name][kind][-1]
                    print(f"  round {i + 1}, {name}, {kind}: {r['seconds']:.1f} s "
                          f"({', '.join(f'{k} {v:.1f}' for k, v in r['stages'].items())})", flush=True)
    codes = {name: {"commit": revs[name], "edit": summary(runs[name]["edit"]),
                    "manuscript": summary(runs[name]["manuscript"]), "runs": runs[name]} for name in revs}
    record = {"benchmark": "loop", "cpu_model": cpu_model(), "cores": os.cpu_count(), "rounds": args.rounds,
              "load_average": [round(min(load), 2), round(max(load), 2)],
              "edit": "analysis.preference mean -> sum", "codes": codes,
              "ratio": {kind: round(codes["this"][kind]["seconds"] / codes["previous"][kind]["seconds"], 3)
                        for kind in ("edit", "manuscript")}}
    for name in revs:
        print(f"{name} ({revs[name]}): {loop_line(codes[name])}")
    print(f"ratio this / previous: edit loop {record['ratio']['edit']:.2f} x, manuscript edit "
          f"{record['ratio']['manuscript']:.2f} x (load average {load[0]:.1f} to {max(load):.1f})")
    if args.results is not None:
        write_record(args.results, f"loop-{cpu_slug(record['cpu_model'])}", record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
