"""DVC stage `figures`: the paper's figures, drawn from the results files only.

    python stages/figures.py [--params params.yaml] [--root .] [--out figures] [--workers N]

For every model of the panel (``models`` in params.yaml) it reads ``results/models/<id>/*.json``
and writes ``figures/models/<id>/<figure>.png`` and ``.svg``; from ``results/panel.json`` it writes
``figures/panel/<figure>.png|svg``. ``figures/manifest.json`` lists every figure with the results
files it was drawn from (the manuscript's captions cite them). The figures are drawn on ``--workers``
processes (every core by default; :mod:`uaprobe.publishing.figures.drawing`), the same bytes on any number. The
output directory is built aside and swapped in whole, so no figure of a model that left the panel survives.
"""

from __future__ import annotations

from uaprobe.repro import numerics

# Pinned CPU code paths (uaprobe.repro.numerics), before numpy is imported; only when run as a script.
if __name__ == "__main__":
    numerics.pin()

import argparse
import json
import logging
import shutil
import tempfile
from pathlib import Path

from uaprobe.atomic import OutputError, check_writable, replace_directory, write_error, write_file
from uaprobe.config import load_params
from uaprobe.memo import Memo
from uaprobe.publishing.figures import drawing, plotting
from uaprobe.publishing.figures.figure_registry import FIGURES, PANEL, REFERENCE, manifest_entry, relative
from uaprobe.schema import load_json, read_results
from uaprobe.schema.document import document
from uaprobe.schema.manifest import FigureEntry, Manifest
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.stages.figures")

FORMATS = ("png", "svg")


def run(*, params_path: Path, root: Path, out: Path, workers: int | None = None) -> list[FigureEntry]:
    watch = ParamsWatch("figures", params_path)
    params = load_params(params_path)
    out = out.resolve()
    names = sorted({name for spec in FIGURES if spec.scope in ("model", "models") for name in spec.sources})
    # every input checked before anything is drawn
    reference = load_json(root / REFERENCE, shown=REFERENCE, fix=f"restore it with `git checkout -- {REFERENCE}`")
    docs_by_model = {model_id: {**{name: read_results(root, f"results/models/{model_id}/{name}.json")
                                   for name in names}, "reference": reference} for model_id in params.models}
    panel = {PANEL: read_results(root, PANEL)}
    check_writable(out.parent, output=out, fix="make it writable or point --out elsewhere")
    plan = drawing.plan(FIGURES, docs_by_model, panel)
    drawn = drawing.draw_all([item.job for item in plan], formats=FORMATS, memo=Memo.at(root, "figures"),
                             workers=drawing.worker_count() if workers is None else workers)
    out.parent.mkdir(parents=True, exist_ok=True)
    entries: list[FigureEntry] = []
    try:
        build = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as exc:
        raise write_error(out, exc, "creating the build directory") from None
    try:
        for item, files in zip(plan, drawn):
            written = plotting.write_figure(files, build / item.target)
            entries.append(manifest_entry(item.job.spec.key, item.model, written, build, out, root, item.sources))
        manifest = Manifest(stage="figures", formats=list(FORMATS), figures=entries)
        write_file(build / "manifest.json", json.dumps(document(manifest), indent=2, sort_keys=True) + "\n")
        build.chmod(0o755)
        watch.check()  # params.yaml as at the start, or the earlier figures stay
        replace_directory(build, out)
    except OutputError as exc:  # name the output, not the build directory it was being drawn in
        shutil.rmtree(build, ignore_errors=True)
        raise OutputError(str(exc).replace(str(build), str(out))) from None
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    for e in entries:
        log.info("%-10s %-14s -> %s", e.key, e.model or "panel", ", ".join(e.files.values()))
    log.info("wrote %d figures (%s) and %s", len(entries), "+".join(FORMATS), relative(out / "manifest.json", root))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root holding results/")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    parser.add_argument("--workers", type=int, default=drawing.worker_count(),
                        help="processes to draw on (default: every core; the bytes do not depend on it)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    run(params_path=args.params, root=args.root, out=args.out, workers=args.workers)
    return 0


if __name__ == "__main__":
    run_stage("figures", main)
