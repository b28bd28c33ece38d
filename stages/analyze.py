"""DVC stage `analyze`: every per-model analysis of one extraction file.

Reads params.yaml and data/embeddings/<id>.h5; writes results/models/<id>/*.json,
metrics/models/<id>.json and plots/<kind>/<id>.csv (schema: docs/results.md).
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

from tqdm import tqdm

from uaprobe.analysis.run import fit, limits
from uaprobe.analysis.run.pipeline import analysis_steps, analyze_model
from uaprobe.schema.text import csv_text
from uaprobe.analysis.geometry.uniformity import cosine_form_for
from uaprobe.atomic import check_writable, write_files
from uaprobe.config import load_params
from uaprobe.schema import results_text
from uaprobe.stage import ParamsWatch, run_stage
from uaprobe.extraction.store import read_embeddings

log = logging.getLogger("uaprobe.stages.analyze")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="catalog id of the model (names the input and outputs)")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--embeddings", type=Path, default=None, help="default: data/embeddings/<model>.h5")
    ap.add_argument("--results", type=Path, default=Path("results/models"), help="writes <dir>/<model>/*.json")
    ap.add_argument("--metrics", type=Path, default=Path("metrics/models"), help="writes <dir>/<model>.json")
    ap.add_argument("--plots", type=Path, default=Path("plots"), help="writes <dir>/<kind>/<model>.csv")
    ap.add_argument("--control", type=Path, default=None,
                    help="the control pairs' extraction (data/embeddings/<model>.control.h5): adds "
                         "neutral_control.json and the metrics key neutral_control")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    watch = ParamsWatch("analyze", args.params, item=args.model)
    params = load_params(args.params)
    spec = params.model(args.model)
    h5 = args.embeddings or Path("data/embeddings") / f"{args.model}.h5"
    emb = read_embeddings(h5)  # checked against uaprobe.extraction.layout: dtypes, shapes, attributes, finite values
    control = read_embeddings(args.control) if args.control is not None else None
    # values the file or the machine cannot take (abtt_k at the states' rank, counts beyond the memory),
    # refused before anything is allocated
    # the dataset's own value of every `auto` parameter, and every parameter the dataset cannot take, at once
    # (the extract stage ran the same check before the model loaded)
    analysis = fit.check(params.analysis, categories=list(dict.fromkeys(str(c) for c in emb.category)),
                         n_pairs=len(emb.text) // 2, source=str(h5))
    available = limits.available_memory()
    limits.check(analysis, limits.sizes_of(emb), available=available, source=str(h5))
    if control is not None:
        limits.check(analysis, limits.sizes_of(control), available=available, source=str(args.control),
                     transformed=analysis.representation == "abtt")
    res_dir = args.results / args.model
    for directory, option in ((res_dir, "--results"), (args.metrics, "--metrics"), (args.plots, "--plots")):
        check_writable(directory, fix=f"make it writable or point {option} elsewhere")
    n_pairs, hidden = len(emb.text) // 2, emb.pooled["mean"].shape[-1]
    log.info("%s: %d pairs, %d layers, hidden size %d: cosines as %s", args.model, n_pairs, emb.n_layers + 1, hidden,
             "Gram matrices" if cosine_form_for(n_pairs, hidden) == "gram" else "sums of unit vectors")
    with tqdm(total=analysis_steps(analysis), desc=f"analyze {args.model}", unit="step") as bar:
        out = analyze_model(emb, params=params.analysis, model_id=args.model, display=spec.display, source=str(h5),
                            on_step=bar.update, control=control, control_source=str(args.control))
    metrics_path = args.metrics / f"{args.model}.json"
    provenance = numerics.results_provenance(emb.attrs.get("numerics"), analysis=numerics.record(analysis=True))
    files = {res_dir / f"{stem}.json": results_text({**obj, "numerics": provenance}, kind=Path(stem).name,
                                                    shown=res_dir / f"{stem}.json")
             for stem, obj in sorted(out.results.items())}
    files[metrics_path] = results_text(out.metrics, kind="metrics", shown=metrics_path)
    # one directory per kind of series, so that `dvc plots` can name each kind's columns once for the panel
    files.update({args.plots / stem / f"{args.model}.csv": csv_text(cols) for stem, cols in sorted(out.plots.items())})
    watch.check()  # params.yaml as at the start, or nothing is written
    write_files(files)  # all or nothing: a full disk leaves every earlier output as it was
    log.info("machine: %s", numerics.log_machine(numerics.stage_name(f"analyze@{args.model}"), args.params.parent,
                                                 analysis=True))
    log.info("%s: results in %s (%s), metrics in %s, plots in %s (%s)", args.model, res_dir,
             ", ".join(sorted(out.results)), metrics_path, args.plots, ", ".join(f"{k}/{args.model}.csv" for k in sorted(out.plots)))
    return 0


if __name__ == "__main__":
    run_stage("analyze", main)
