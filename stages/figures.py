"""DVC stage `figures`: the paper's figures, drawn from the results files only.

    python stages/figures.py [--params params.yaml] [--root .] [--out figures]

For every model of the panel (``models`` in params.yaml) it reads ``results/models/<id>/*.json``
and writes ``figures/models/<id>/<figure>.png`` and ``.svg``; from ``results/panel.json`` it writes
``figures/panel/<figure>.png|svg``. ``figures/manifest.json`` lists every figure with the results
files it was drawn from (the manuscript's captions cite them). The output directory is built aside
and swapped in whole, so no figure of a model that left the panel survives.
"""

from __future__ import annotations

from uaprobe import numerics

# Pinned CPU code paths (uaprobe.numerics), before numpy is imported; only when run as a script.
if __name__ == "__main__":
    numerics.pin()

import argparse
import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from uaprobe.publishing import figure_spec, figures, figures_original, plotting
from uaprobe.atomic import OutputError, check_writable, replace_directory, write_error, write_file
from uaprobe.config import load_params
from uaprobe.schema import load_json, read_results, validate
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.publishing.figures")

STAGE = "figures"
FORMATS = ("png", "svg")


@dataclass(frozen=True)
class PerModelFigure:
    key: str
    sources: tuple[str, ...]
    """Results files of the model, ``results/models/<id>/<name>.json``."""
    draw: Callable[[Mapping[str, Any]], Figure]
    """Draws the figure from the files of ``sources``, read through their schema (name -> typed model)."""


def _unit(docs: Mapping[str, Any]) -> str:
    return "nats/token" if docs["layerwise"].preference == "mean" else "nats/statement"


PER_MODEL: tuple[PerModelFigure, ...] = (
    PerModelFigure("layerwise", ("layerwise", "sink_excluded/layerwise"), lambda d: figures.layerwise_figure(
        d["layerwise"], sink_excluded=d["sink_excluded/layerwise"])),
    PerModelFigure("sink", ("robustness",), lambda d: figures.sink_figure(d["robustness"])),
    PerModelFigure("bins", ("bins", "layerwise"), lambda d: figures.bins_figure(
        d["bins"], n_categories=len(d["layerwise"].categories))),
    PerModelFigure("validation", ("validation", "layerwise"), lambda d: figures.validation_figure(
        d["validation"], reference={name: (v["ua"], v["preference"]) for name, v in d["reference"]["models"].items()},
        reference_category=d["reference"]["category"],
        preference_unit=_unit(d))),
    PerModelFigure("anisotropy", ("anisotropy",), lambda d: figures.anisotropy_figure(d["anisotropy"])),
    PerModelFigure("spectrum", ("anisotropy",), lambda d: figures.spectrum_figure(d["anisotropy"])),
    PerModelFigure("pairs", ("pairs",), lambda d: figures.pairs_figure(d["pairs"])),
    PerModelFigure("loco", ("layerwise",), lambda d: figures.loco_figure(d["layerwise"])),
    PerModelFigure("option_b", ("option_b",), lambda d: figures_original.option_b_figure(d["option_b"])),
    PerModelFigure("specification_curve", ("specification_curve",),
                   lambda d: figure_spec.specification_curve_figure(d["specification_curve"])),
)
"""The per-model figures: key, the results files they read, how they are drawn."""


def run(*, params_path: Path, root: Path, out: Path) -> list[dict[str, Any]]:
    watch = ParamsWatch("figures", params_path)
    params = load_params(params_path)
    out = out.resolve()
    names = sorted({name for spec in PER_MODEL for name in spec.sources})
    # every input checked before anything is drawn
    docs_by_model = {model_id: {name: read_results(root, f"results/models/{model_id}/{name}.json") for name in names}
                     for model_id in params.models}
    panel = read_results(root, "results/panel.json")
    reference = _reference(root)
    for docs in docs_by_model.values():
        docs["reference"] = reference
    check_writable(out.parent, output=out, fix="make it writable or point --out elsewhere")
    out.parent.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    try:
        build = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    except OSError as exc:
        raise write_error(out, exc, "creating the build directory") from None
    try:
        for model_id, docs in docs_by_model.items():
            for spec in PER_MODEL:
                written = plotting.save_figure(spec.draw(docs), build / "models" / model_id / spec.key,
                                              formats=FORMATS)
                entries.append(_entry(spec.key, model_id, written, build, out, root,
                                      [f"results/models/{model_id}/{n}.json" for n in spec.sources]))
        written = plotting.save_figure(figures.scaling_figure(panel), build / "panel" / "scaling", formats=FORMATS)
        entries.append(_entry("scaling", None, written, build, out, root, ["results/panel.json"]))
        manifest = {"stage": STAGE, "formats": list(FORMATS), "figures": entries}
        validate(manifest, "manifest", shown=_rel(out / "manifest.json", root),
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
    log.info("wrote %d figures (%s) and %s", len(entries), "+".join(FORMATS), _rel(out / "manifest.json", root))
    return entries


REFERENCE = "data/published/reference-models.json"
"""The original study's published scientific-facts points, drawn beside the panel in the validation figure."""


def _reference(root: Path) -> Mapping[str, Any]:
    return load_json(root / REFERENCE, shown=REFERENCE, fix=f"restore it with `git checkout -- {REFERENCE}`")


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _entry(key: str, model_id: str | None, written: list[Path], build: Path, out: Path, root: Path,
           sources: list[str]) -> dict[str, Any]:
    files = {p.suffix.lstrip("."): _rel(out / p.relative_to(build), root) for p in written}
    return {"key": key, "model": model_id, "stage": STAGE, "sources": sources, "files": files, "png": files["png"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root holding results/")
    parser.add_argument("--out", type=Path, default=Path("figures"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    run(params_path=args.params, root=args.root, out=args.out)
    return 0


if __name__ == "__main__":
    run_stage("figures", main)
