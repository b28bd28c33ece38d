"""DVC stage `analyze`: every per-model analysis of one extraction file.

Reads params.yaml and data/embeddings/<id>.h5; writes results/models/<id>/*.json,
metrics/models/<id>.json and plots/<kind>/<id>.csv (schema: docs/results.md).
"""

from __future__ import annotations

import os

# The analyses are many small BLAS/LAPACK calls: extra BLAS threads do not speed them up, and
# under CPU contention OpenBLAS's spinning threads slow some LAPACK calls down many times over.
# Set before numpy is imported, only when run as a script (importing the module changes nothing);
# an explicit setting in the environment wins.
if __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import argparse
import logging
import sys
from pathlib import Path

from tqdm import tqdm

from uaprobe.analysis.pipeline import analysis_steps, analyze_control, analyze_model
from uaprobe.analysis.report import csv_text, json_text, write_text_atomic
from uaprobe.analysis.uniformity import representation_for
from uaprobe.config import load_params
from uaprobe.errors import UAProbeError
from uaprobe.store import read_embeddings

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
    params = load_params(args.params)
    spec = params.model(args.model)
    h5 = args.embeddings or Path("data/embeddings") / f"{args.model}.h5"
    emb = read_embeddings(h5)
    n_pairs, hidden = len(emb.text) // 2, emb.pooled["mean"].shape[-1]
    log.info("%s: %d pairs, %d layers, hidden size %d: cosines as %s", args.model, n_pairs, emb.n_layers + 1, hidden,
             "Gram matrices" if representation_for(n_pairs, hidden) == "gram" else "sums of unit vectors")
    with tqdm(total=analysis_steps(params.analysis), desc=f"analyze {args.model}", unit="step") as bar:
        out = analyze_model(emb, params=params.analysis, model_id=args.model, display=spec.display, source=str(h5),
                            on_step=bar.update)
    if args.control is not None:
        ctrl = analyze_control(read_embeddings(args.control), params=params.analysis, model_id=args.model,
                               display=spec.display, source=str(args.control))
        out.results["neutral_control"] = ctrl["results"]
        out.metrics["neutral_control"] = ctrl["metrics"]
    res_dir = args.results / args.model
    for stem, obj in sorted(out.results.items()):
        write_text_atomic(res_dir / f"{stem}.json", json_text(obj))
    metrics_path = write_text_atomic(args.metrics / f"{args.model}.json", json_text(out.metrics))
    # one directory per kind of series, so that `dvc plots` can name each kind's columns once for the panel
    for stem, cols in sorted(out.plots.items()):
        write_text_atomic(args.plots / stem / f"{args.model}.csv", csv_text(cols))
    log.info("%s: results in %s (%s), metrics in %s, plots in %s (%s)", args.model, res_dir,
             ", ".join(sorted(out.results)), metrics_path, args.plots, ", ".join(f"{k}/{args.model}.csv" for k in sorted(out.plots)))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        sys.exit(main())
    except UAProbeError as exc:
        log.error("%s", exc)
        sys.exit(2)
