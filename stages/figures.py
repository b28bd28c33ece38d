"""DVC stage `figures`: the paper's figures, drawn from the results files only.

    python stages/figures.py [--params params.yaml] [--root .] [--out figures] [--workers N] [--store DIR]

For every model of the panel (``models`` in params.yaml) it reads ``results/models/<id>/*.json``
and writes ``figures/models/<id>/<figure>.png`` (and ``.svg`` or ``.pdf`` where ``figures.formats``
asks for them); from ``results/panel.json`` it writes ``figures/panel/<figure>.png``.
``figures/manifest.json`` lists every figure with the results files it was drawn from (the
manuscript's captions cite them). The figures are drawn on ``--workers`` processes (default: every
core; the bytes do not depend on it), and a figure whose inputs did not change since the last run is
taken from ``--store`` (default ``.figures-store``, outside the outputs; ``--store none``: draw every
figure) instead of drawn again (:mod:`uaprobe.publishing.figures.drawing`). The output directory is
built aside and swapped in whole, so no figure of a model that left the panel survives.
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
from typing import Any

from uaprobe.atomic import OutputError, check_writable, replace_directory, write_error, write_file, write_files
from uaprobe.config import load_params
from uaprobe.errors import UAProbeError
from uaprobe.publishing.figures import drawing
from uaprobe.publishing.figures.figure_registry import FIGURES, PANEL, REFERENCE, manifest_entry, relative
from uaprobe.schema import load_json, read_results, validate
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.stages.figures")

STORE = ".figures-store"
"""The default figure store, relative to the root (git ignores it)."""


def jobs_of(params_path: Path, root: Path) -> list[drawing.Job]:
    """Every figure to draw, in the manifest's order (per model for each model, then the panel's), every
    input read and checked first."""
    params = load_params(params_path)
    names = sorted({name for spec in FIGURES if spec.scope in ("model", "models") for name in spec.sources})
    reference = load_json(root / REFERENCE, shown=REFERENCE, fix=f"restore it with `git checkout -- {REFERENCE}`")
    docs_by_model = {model_id: {**{name: read_results(root, f"results/models/{model_id}/{name}.json")
                                   for name in names}, "reference": reference} for model_id in params.models}
    panel = {PANEL: read_results(root, PANEL)}
    jobs = []
    for model_id, docs in docs_by_model.items():
        for spec in (f for f in FIGURES if f.scope == "model"):
            sources = tuple(f"results/models/{model_id}/{n}.json" for n in spec.sources)
            jobs.append(drawing.Job(spec, model_id, f"models/{model_id}/{spec.key}", sources, (*sources, REFERENCE),
                                    docs))
    for spec in (f for f in FIGURES if f.scope == "models"):
        sources = tuple(f"results/models/{m}/{n}.json" for m in docs_by_model for n in spec.sources)
        jobs.append(drawing.Job(spec, None, f"panel/{spec.key}", sources, (*sources, REFERENCE), docs_by_model))
    for spec in (f for f in FIGURES if f.scope == "panel"):
        jobs.append(drawing.Job(spec, None, f"panel/{spec.key}", tuple(spec.sources), tuple(spec.sources), panel))
    return jobs


def cost(job: drawing.Job) -> float:
    """The figures of every model side by side (the specification curve) take longest: they start first."""
    return 1.0 if job.spec.scope == "models" else 0.0


def run(*, params_path: Path, root: Path, out: Path, workers: int | None = None,
        store: Path | None = None) -> list[dict[str, Any]]:
    watch = ParamsWatch("figures", params_path)
    params = load_params(params_path)
    formats = params.figures.formats
    out = out.resolve()
    jobs = jobs_of(params_path, root)
    check_writable(out.parent, output=out, fix="make it writable or point --out elsewhere")
    out.parent.mkdir(parents=True, exist_ok=True)
    code = drawing.code_digest([Path(__file__)])
    keys = [drawing.job_key(job, root=root, models=params.models, formats=formats, code=code) for job in jobs]
    files, drawn = drawing.drawn_or_stored(jobs, keys=keys, store=None if store is None else drawing.FigureStore(store),
                                           formats=formats, workers=workers or drawing.worker_count(), cost=cost)
    entries: list[dict[str, Any]] = []
    try:
        build = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as exc:
        raise write_error(out, exc, "creating the build directory") from None
    try:
        for job, by_format in zip(jobs, files):
            written = write_files({build / f"{job.target}.{fmt}": data for fmt, data in by_format.items()})
            entries.append(manifest_entry(job.spec.key, job.model, written, build, out, root, list(job.sources)))
        manifest = {"stage": "figures", "formats": list(formats), "figures": entries}
        validate(manifest, "manifest", shown=relative(out / "manifest.json", root),
                 fix="the figures stage built a manifest its schema refuses (uaprobe.schema); report it")
        write_file(build / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
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
        log.info("%-10s %-14s -> %s", e["key"], e["model"] or "panel", ", ".join(e["files"].values()))
    log.info("drew %d of %d figures (%d unchanged, from the store)", drawn, len(jobs), len(jobs) - drawn)
    log.info("wrote %d figures (%s) and %s", len(entries), "+".join(formats), relative(out / "manifest.json", root))
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root holding results/")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    parser.add_argument("--workers", type=int, default=None, help="processes to draw on (default: every core)")
    parser.add_argument("--store", default=STORE,
                        help=f"the figures of the last run, reused where their inputs did not change (default "
                             f"{STORE} under --root; none: draw every figure)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if args.workers is not None and args.workers < 1:
        raise UAProbeError(f"--workers: got {args.workers}, expected an integer >= 1")
    store = None if args.store == "none" else args.root / args.store
    run(params_path=args.params, root=args.root, out=args.out, workers=args.workers, store=store)
    return 0


if __name__ == "__main__":
    run_stage("figures", main)
