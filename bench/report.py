"""docs/performance.md's generated figures, from the JSON files ``bench/compare.py --results`` and
``bench/loop.py --results`` write.

    python bench/report.py [--check]

Every block of docs/performance.md between ``<!-- bench: bench/results/NAME.json -->`` and
``<!-- end bench -->`` is :func:`render` of that file; this script rewrites the blocks (``make
bench`` runs it after the benchmark), ``--check`` only compares them (exit 1 where one differs;
``tests/test_bench_docs.py`` does the same), so no figure of the page goes stale silently.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "performance.md"
BLOCK = re.compile(r"(<!-- bench: (?P<path>[^ ]+) -->\n)(?P<body>.*?)(<!-- end bench -->)", re.S)


LOOP_ROWS = (("edit loop, `dvc repro`", "edit", None), ("analyze, every model", "edit", "analyze"),
             ("compare", "edit", "compare"), ("figures", "edit", "figures"), ("paper", "edit", "paper"),
             ("manuscript edit, `dvc repro`", "manuscript", None))
"""The rows of a loop results file: the edit loop's total, its stages, the manuscript edit's total."""


def loop_line(code: dict) -> str:
    """bench/loop.py's line for one code: ``edit loop: T s (analyze A s, ...); manuscript edit: M s``."""
    e, s = code["edit"], code["edit"]["stages"]
    return (f"edit loop: {e['seconds']:.1f} s (" + ", ".join(f"{f} {s[f]:.1f} s" for f in ("analyze", "compare",
                                                                                           "figures", "paper"))
            + f"); manuscript edit: {code['manuscript']['seconds']:.1f} s")


def render_loop(record: dict) -> str:
    """The markdown of one ``bench/loop.py`` results file: the machine, the two revisions, one row per stage."""
    this, prev = record["codes"]["this"], record["codes"]["previous"]
    lo, hi = record["load_average"]
    lines = [f"{record['cpu_model']}, {record['cores']} cores, load average {lo:.1f} to {hi:.1f} during the run; this "
             f"code: commit `{this['commit']}`, previous: `{prev['commit']}`; the edit: {record['edit']}; "
             + (f"each figure the median of {record['rounds']} runs, the two codes alternating:" if record["rounds"] > 1
                else "one run of each code, one after the other:"), "",
             "| step | this code | previous | ratio | runs (this; previous) |", "|---|---|---|---|---|"]

    def seconds(code: dict, kind: str, stage: str | None) -> float:
        return code[kind]["seconds"] if stage is None else code[kind]["stages"][stage]

    def runs(code: dict, kind: str, stage: str | None) -> str:
        return ", ".join(f"{r['seconds'] if stage is None else r['stages'].get(stage, 0.0):.1f}"
                         for r in code["runs"][kind])

    for label, kind, stage in LOOP_ROWS:
        t, t0 = seconds(this, kind, stage), seconds(prev, kind, stage)
        ratio = f"{t / t0:.2f}x" if t0 else "n/a"
        lines.append(f"| {label} | {t:.1f} s | {t0:.1f} s | {ratio} | {runs(this, kind, stage)}; "
                     f"{runs(prev, kind, stage)} |")
    lines += ["", f"This code: `{loop_line(this)}`; previous: `{loop_line(prev)}`."]
    return "\n".join(lines) + "\n"


def render(record: dict) -> str:
    """The markdown of one results file: the machine and the two revisions, then one row per size (a
    ``bench/loop.py`` file: one row per step of the loop, :func:`render_loop`)."""
    if record.get("benchmark") == "loop":
        return render_loop(record)
    lines = [f"{record['cpu_model']}, {record['cores']} cores; this code: commit `{record['commit']}`, previous: "
             f"`{record['against']}`; {record['embeddings']}; each figure the median of its runs, the two codes "
             "alternating:", "",
             "| pairs | layers | this code | previous | ratio | runs (this; previous) |", "|---|---|---|---|---|---|"]
    for s in record["sizes"]:
        runs = "; ".join(", ".join(f"{t:.1f}" for t in s["runs"][name]) for name in ("this", "previous"))
        lines.append(f"| {s['pairs']} | {s['layers']} | {s['seconds']:.1f} s | {s['previous_seconds']:.1f} s "
                     f"| {s['ratio']:.2f}x | {runs} |")
    return "\n".join(lines) + "\n"


def blocks(text: str) -> list[tuple[str, str]]:
    """(cited path, body) of every generated block of ``text``."""
    return [(m.group("path"), m.group("body")) for m in BLOCK.finditer(text)]


def rewrite(text: str, root: Path = REPO) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(json.loads((root / m.group("path")).read_text(encoding="utf-8")))
                     + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 where a block differs")
    args = ap.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    new = rewrite(text)
    if args.check:
        if new != text:
            print(f"{DOC}: a generated block differs from the results file it cites; run python bench/report.py")
            return 1
        return 0
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"rewrote the generated blocks of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
