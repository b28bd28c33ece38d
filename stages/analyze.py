"""DVC stage `analyze`: every per-model analysis of every model of the panel.

Reads params.yaml and data/embeddings/<id>.h5 of each model of `models` (or of each --model); writes
results/models/<id>/*.json, metrics/models/<id>.json and plots/<kind>/<id>.csv (schema: docs/results.md).
The models are analysed on --workers processes (every core by default; the bytes do not depend on it), and
every file is written at the end, all or nothing.
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

from uaprobe.analysis.run.batch import ModelJob, Targets, analyze_models, check_all
from uaprobe.atomic import check_writable, write_files
from uaprobe.config import load_params
from uaprobe.forking import worker_count
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.stages.analyze")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="catalog id of a model to analyse (repeatable; default: "
                    "every model of `models` in params.yaml); names its input and outputs")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--embeddings", type=Path, default=None, help="one --model's file (default: "
                    "data/embeddings/<model>.h5)")
    ap.add_argument("--results", type=Path, default=Path("results/models"), help="writes <dir>/<model>/*.json")
    ap.add_argument("--metrics", type=Path, default=Path("metrics/models"), help="writes <dir>/<model>.json")
    ap.add_argument("--plots", type=Path, default=Path("plots"), help="writes <dir>/<kind>/<model>.csv")
    control = ap.add_mutually_exclusive_group()
    control.add_argument("--control", type=Path, default=None, help="one --model's control pairs' extraction: "
                         "adds neutral_control.json and the metrics key neutral_control")
    control.add_argument("--controls", action="store_true", help="every model's control pairs' extraction, "
                         "<model>.control.h5 beside its file")
    ap.add_argument("--workers", type=int, default=worker_count(),
                    help="processes to analyse the models on (default: every core; the bytes do not depend on it)")
    args = ap.parse_args(argv)
    if (args.embeddings or args.control) and len(args.model or ()) != 1:
        ap.error("--embeddings and --control name one model's files: give exactly one --model with them")
    if args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    watch = ParamsWatch("analyze", args.params)
    params = load_params(args.params)
    jobs = []
    for model_id in args.model or params.models:
        params.model(model_id)  # a catalog id, or the error says which are
        h5 = args.embeddings or Path("data/embeddings") / f"{model_id}.h5"
        control = args.control or (h5.with_name(f"{h5.stem}.control.h5") if args.controls else None)
        jobs.append(ModelJob(model_id, h5, control))
    at_once = check_all(jobs, params.analysis, workers=args.workers)  # every model's inputs, before any analysis
    writable = [(args.results / job.model_id, "--results") for job in jobs]
    for directory, option in (*writable, (args.metrics, "--metrics"), (args.plots, "--plots")):
        check_writable(directory, fix=f"make it writable or point {option} elsewhere")
    targets = Targets(results=args.results, metrics=args.metrics, plots=args.plots)
    files = analyze_models(jobs, params.analysis, targets, workers=at_once)
    watch.check()  # params.yaml as at the start, or nothing is written
    write_files(files)  # all or nothing: a full disk leaves every earlier output as it was
    log.info("machine: %s", numerics.log_machine(numerics.stage_name("analyze"), args.params.parent, analysis=True))
    return 0


if __name__ == "__main__":
    run_stage("analyze", main)
