"""docs/performance.md's generated figures, from the JSON files ``bench/scale.py --results`` writes.

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
    """The markdown of one results file: the machine, then one row per size, then the components
    of the largest size."""
    m = record["machine"]
    lines = [f"{m['cpu_model']} ({m['cpu_vendor']}, {m['cores']} cores, kernels on {m['kernel_threads']} "
             f"thread(s); {', '.join(m['isa']) or 'no listed ISA extension'}), commit `{record['commit'][:12]}{'+modified' if record['commit'].endswith('+modified') else ''}`, "
             f"model {record['model']}, mode {record['mode']}:", "",
             "| pairs | analyze, wall | CPU | floor | ratio to floor | CPU / (floor x threads) | peak RSS "
             "| of it in the analysis |", "|---|---|---|---|---|---|---|---|"]
    for s in record["sizes"]:
        cpu_ratio = s["cpu_seconds"] / (s["floor_seconds"] * m["kernel_threads"])
        above = f"+{s['rss_above_start_mib'] / 1024:.2f} GiB" if "rss_above_start_mib" in s else "not recorded"
        lines.append(f"| {s['pairs']} | {s['seconds']:.1f} s | {s['cpu_seconds']:.1f} s | {s['floor_seconds']:.1f} s "
                     f"| {s['ratio']:.2f}x | {cpu_ratio:.2f}x | {s['peak_rss_mib'] / 1024:.2f} GiB "
                     f"| {above} |")
    last = record["sizes"][-1]
    lines += ["", f"Worst ratio to the floor over the sizes: {record['worst_ratio']:.2f}x. "
              f"At {last['pairs']} pairs, each component's floor and measured wall time:", "",
              "| component | floor | share | measured | share |", "|---|---|---|---|---|"]
    fl, me = last["floor_components"], last["measured_components"]
    total_f, total_m = sum(fl.values()), sum(me.values())
    for name in list(fl) + [n for n in me if n not in fl]:
        f_txt = f"{fl[name]:.2f} s | {100 * fl[name] / total_f:.1f} %" if name in fl else " | "
        m_txt = f"{me[name]:.2f} s | {100 * me[name] / total_m:.1f} %" if name in me else "(inside the others) | "
        mark = " (beside the main thread)" if name in last.get("beside_components", ()) else ""
        lines.append(f"| {name}{mark} | {f_txt} | {m_txt} |")
    r = last["rates"]
    gather = f", Gram gather {r['gather'] / 1e9:.2f} G entries/s" if "gather" in r else ""  # recorded since the gather kind
    if "gather_null" in r:
        gather += f" ({r['gather_null'] / 1e9:.2f} G entries/s into the null's groups of the categories' sizes)"
    lines += ["", f"Rates measured before that size: GEMM {r['gemm'] / 1e9:.1f} G multiply-adds/s, L2 sum "
              f"{r['add'] / 1e9:.1f} G additions/s{gather} (all worker threads), draws {r['draw'] / 1e6:.0f} M/s "
              "(one stream)."]
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
