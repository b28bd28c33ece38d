"""DVC stage `compare`: the scaling analysis across the model panel (seed 001).

Reads params.yaml (the `models` list) and results/models/<id>/{layerwise,anisotropy}.json for
each id; writes results/panel.json, metrics/panel.json and plots/panel/<id>.csv
(schema: docs/results.md).
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
import json
import logging
import sys
from pathlib import Path
from typing import Any

from uaprobe.analysis.pipeline import compare_panel
from uaprobe.analysis.report import csv_text, json_text, write_text_atomic
from uaprobe.config import load_params
from uaprobe.errors import UAProbeError

log = logging.getLogger("uaprobe.stages.compare")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--results", type=Path, default=Path("results/models"), help="per-model results directory")
    ap.add_argument("--out-results", type=Path, default=Path("results/panel.json"))
    ap.add_argument("--out-metrics", type=Path, default=Path("metrics/panel.json"))
    ap.add_argument("--out-plots", type=Path, default=Path("plots/panel"))
    return ap.parse_args(argv)


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UAProbeError(f"{path}: not found; run the analyze stage for this model (`dvc repro`)") from None
    except json.JSONDecodeError as exc:
        raise UAProbeError(f"{path}: not valid JSON ({exc}); rerun the analyze stage") from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = load_params(args.params)
    ids = list(params.models)
    layerwise = {m: _load(args.results / m / "layerwise.json") for m in ids}
    aniso = {m: _load(args.results / m / "anisotropy.json") for m in ids}
    sink_excluded = {m: _load(args.results / m / "sink_excluded" / "layerwise.json") for m in ids}
    out = compare_panel(model_ids=ids, layerwise_results=layerwise, anisotropy_results=aniso,
                        sink_excluded_results=sink_excluded,
                        params_millions={m: params.model(m).params_millions for m in ids}, params=params.analysis)
    write_text_atomic(args.out_results, json_text(out.results["panel"]))
    write_text_atomic(args.out_metrics, json_text(out.metrics))
    for m, cols in out.plots.items():
        write_text_atomic(args.out_plots / f"{m}.csv", csv_text(cols))
    log.info("panel of %d model(s): results in %s, metrics in %s, plots in %s", len(ids), args.out_results,
             args.out_metrics, args.out_plots)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        sys.exit(main())
    except UAProbeError as exc:
        log.error("%s", exc)
        sys.exit(2)
