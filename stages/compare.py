"""DVC stage `compare`: the scaling analysis across the model panel (seed 001).

Reads params.yaml (the `models` list) and results/models/<id>/{layerwise,anisotropy,specification_curve,pair_models}.json
for each id; writes results/panel.json, metrics/panel.json and plots/panel/<id>.csv
(schema: docs/results.md).
"""

from __future__ import annotations

from uaprobe.repro import numerics

# Pinned CPU code paths and one BLAS thread (uaprobe.repro.numerics), before numpy is imported; only when
# run as a script (importing the module changes nothing).
if __name__ == "__main__":
    numerics.pin(analysis=True)

import argparse
import logging
from pathlib import Path
from uaprobe.analysis.panel.compare import compare_panel
from uaprobe.schema.text import csv_text
from uaprobe.atomic import check_writable, write_files
from uaprobe.config import load_params
from uaprobe.schema import Record, read_results, results_text
from uaprobe.schema.files import load_json
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.stages.compare")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--results", type=Path, default=Path("results/models"), help="per-model results directory")
    ap.add_argument("--published", type=Path, default=Path("data/published/pythia-6-9b.json"),
                    help="the original study's published numbers, whose category points are tested as the panel's "
                         "are (skipped where the file is absent)")
    ap.add_argument("--out-results", type=Path, default=Path("results/panel.json"))
    ap.add_argument("--out-metrics", type=Path, default=Path("metrics/panel.json"))
    ap.add_argument("--out-plots", type=Path, default=Path("plots/panel"))
    return ap.parse_args(argv)


def _load(path: Path) -> Record:
    """A per-model results file, read through its schema (the kind is the file's stem)."""
    return read_results(Path("."), str(path), kind=path.stem)


def read_published_points(path: Path) -> object:
    """``category_level.final_table`` of the published numbers (its shape checked by
    :func:`uaprobe.analysis.panel.compare.original_points`), or an error naming the file."""
    doc = load_json(path, fix=f"restore it from git (`git checkout -- {path}`)")
    level = doc.get("category_level") if isinstance(doc, dict) else None
    return level.get("final_table") if isinstance(level, dict) else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    watch = ParamsWatch("compare", args.params)
    params = load_params(args.params)
    ids = list(params.models)
    layerwise = {m: _load(args.results / m / "layerwise.json") for m in ids}
    aniso = {m: _load(args.results / m / "anisotropy.json") for m in ids}
    sink_excluded = {m: _load(args.results / m / "sink_excluded" / "layerwise.json") for m in ids}
    primary_p = {m: _load(args.results / m / "specification_curve.json").primary.p for m in ids}
    pair_families = {}
    for m in ids:
        pm = _load(args.results / m / "pair_models.json")
        pair_families[m] = {"length": pm.family, "lexical": pm.incremental.family,
                            "lexical_without_category": pm.incremental.without_category.family}
    original = None
    if args.published.is_file():
        original = (str(args.published), read_published_points(args.published))
    for directory, option in ((args.out_results.parent, "--out-results"), (args.out_metrics.parent, "--out-metrics"),
                              (args.out_plots, "--out-plots")):
        check_writable(directory, fix=f"make it writable or point {option} elsewhere")
    out = compare_panel(model_ids=ids, layerwise_results=layerwise, anisotropy_results=aniso,
                        sink_excluded_results=sink_excluded, primary_p=primary_p, pair_families=pair_families,
                        original=original,
                        params_millions={m: params.model(m).params_millions for m in ids}, params=params.analysis)
    panel = {**out.results["panel"], "numerics": {"analysis": numerics.record(analysis=True)}}
    files = {args.out_results: results_text(panel, kind="panel", shown=args.out_results),
             args.out_metrics: results_text(out.metrics, kind="panel_metrics", shown=args.out_metrics)}
    files.update({args.out_plots / f"{m}.csv": csv_text(cols) for m, cols in out.plots.items()})
    watch.check()  # params.yaml as at the start, or nothing is written
    write_files(files)  # all or nothing: a full disk leaves every earlier output as it was
    log.info("machine: %s", numerics.log_machine(numerics.stage_name("compare"), args.params.parent, analysis=True))
    log.info("panel of %d model(s): results in %s, metrics in %s, plots in %s", len(ids), args.out_results,
             args.out_metrics, args.out_plots)
    return 0


if __name__ == "__main__":
    run_stage("compare", main)
