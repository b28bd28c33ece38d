"""docs/performance.md's generated figures, from the JSON files ``bench/compare.py --results`` writes.

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


def render(record: dict) -> str:
    """The markdown of one results file: the machine and the two revisions, then one row per size."""
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
