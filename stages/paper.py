"""DVC stage `paper`: render the manuscript to ``paper/_output/paper.html`` and ``paper.pdf``, and write
the supplementary files ``provenance.html``, ``provenance.csv`` and ``figures.html`` beside them.

    python stages/paper.py [--qmd paper/paper.qmd] [--out paper/_output] [--engine auto|quarto|fallback]

With a Quarto executable (``$UAPROBE_QUARTO``, ``$QUARTO_PATH``, ``quarto`` on PATH, or the
``quarto-cli`` package) it runs ``quarto render`` with the Jupyter engine and freezing off;
without one it uses the fallback renderer of :mod:`uaprobe.publishing.render` (Jupyter kernel + pandoc +
Typst). The manuscript's cells read the tracked outputs (results/, metrics/, figures/, dvc.lock,
params.yaml) from the repository root. The supplementary files list every value the rendered HTML
shows, with its file, the file's md5 and its key, and the paper's inputs, software and CPU code
paths (:mod:`uaprobe.publishing.provenance.supplement`).
"""

from __future__ import annotations

from uaprobe.repro import numerics

# Pinned CPU code paths (uaprobe.repro.numerics), before numpy is imported; only when run as a script.
if __name__ == "__main__":
    numerics.pin()

import argparse
import logging
import time
from pathlib import Path

from uaprobe.errors import UAProbeError
from uaprobe.publishing.figures import embed
from uaprobe.publishing.provenance import supplement
from uaprobe.publishing.figures.figures_page import FIGURES_HTML, figures_html
from uaprobe.publishing.provenance.reproducibility import input_hashes
from uaprobe.publishing.provenance.outputs import Outputs, find_root, load_outputs
from uaprobe.publishing.render import render_manuscript
from uaprobe.publishing.provenance.readback import parse_values
from uaprobe.publishing.provenance.values import SUPPLEMENT_HTML, file_md5
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.paper")


def write_supplement(root: Path, html: Path, output_dir: Path, out: Outputs) -> tuple[Path, Path, Path]:
    """Write ``provenance.html``, ``provenance.csv`` and ``figures.html`` (every figure the pipeline draws)
    into ``output_dir`` from the rendered ``html`` and the outputs ``out`` it was rendered from."""
    page = html.read_text(encoding="utf-8")
    shown = parse_values(page)
    md5s: dict[str, str] = {}

    def md5(file: str) -> str:
        if file not in md5s:
            md5s[file] = file_md5(root / file)
        return md5s[file]

    tables = supplement.supplement_tables(out, page, shown, input_hashes(root), md5)
    title = "Provenance of the numbers and inputs of the paper"
    targets = (output_dir / SUPPLEMENT_HTML, output_dir / supplement.SUPPLEMENT_CSV, output_dir / FIGURES_HTML)
    targets[0].write_text(supplement.provenance_html(title, tables, supplement.params_text(out)), encoding="utf-8")
    targets[1].write_text(supplement.provenance_csv(tables[0].rows), encoding="utf-8")
    in_paper = {e.key for e in out.figures if embed.figure_label(e.key, e.model) in page}
    targets[2].write_text(figures_html(out, lambda p: (root / p).read_bytes(), md5, in_paper), encoding="utf-8")
    return targets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qmd", type=Path, default=Path("paper/paper.qmd"))
    parser.add_argument("--out", type=Path, default=Path("paper/_output"))
    parser.add_argument("--engine", choices=("auto", "quarto", "fallback"), default="auto")
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed per code cell")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("traitlets").setLevel(logging.ERROR)  # jupyter_client's shutdown notices
    if not args.qmd.is_file():
        raise UAProbeError(f"{args.qmd}: manuscript not found; check --qmd")
    root = find_root(args.qmd.parent)
    watch = ParamsWatch("paper", root / "params.yaml")
    # every tracked output the manuscript reads, checked before the kernel starts
    out = load_outputs(root)  # every output the manuscript reads, checked before the kernel starts
    started = time.perf_counter()
    result = render_manuscript(args.qmd, output_dir=args.out, engine=args.engine, timeout=args.timeout)
    watch.check()  # the paper shows params.yaml as it was at the start, or the stage fails
    log.info("rendered %s with %s in %.1f s", args.qmd, result.engine, time.perf_counter() - started)
    log.info("wrote %s (%d bytes)", result.html, result.html.stat().st_size)
    log.info("wrote %s (%d bytes)", result.pdf, result.pdf.stat().st_size)
    for path in write_supplement(root, result.html, result.html.parent, out):
        log.info("wrote %s (%d bytes)", path, path.stat().st_size)
    return 0


if __name__ == "__main__":
    run_stage("paper", main)
