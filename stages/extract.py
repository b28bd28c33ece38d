"""DVC stage `extract`: one model's pooled hidden states, NLL and anisotropy token states -> HDF5.

    python stages/extract.py --model smollm2-135m [--control data/neutral_control.json]

Checks params, the dataset and the analysis parameters it decides (:mod:`uaprobe.analysis.run.fit`), then runs
:func:`uaprobe.extraction.model_run.extract_model` into ``data/embeddings/<model>.h5`` (the control pairs beside
it). Interrupted (Ctrl-C, SIGTERM, SIGKILL): the partial file stays, and the same command resumes it
(``--no-resume`` starts over). Failed: the partial file is removed, exit code 2 with the error logged.
"""

from __future__ import annotations

from uaprobe.repro import numerics

# Pinned CPU code paths, before numpy and torch are imported; only when run as a script.
if __name__ == "__main__":
    numerics.pin()

import argparse
import logging
import signal
from pathlib import Path

import torch

from uaprobe.analysis.run import fit
from uaprobe.config import load_params
from uaprobe.errors import UAProbeError
from uaprobe.extraction.dataset import load_dataset
from uaprobe.extraction.distributed import current_rank
from uaprobe.extraction.model_run import extract_model, out_of_memory_message
from uaprobe.repro.lockfile import check_recompute
from uaprobe.stage import ParamsWatch, run_stage

log = logging.getLogger("uaprobe.stages.extract")


def run(*, model_id: str, params_path: Path, dataset_path: Path, prompts_path: Path, out: Path,
        resume: bool = True, progress: bool = True, control_path: Path | None = None) -> Path:
    """Extract ``model_id`` of ``params_path`` into ``out`` (the control pairs beside it); returns ``out``."""
    watch = ParamsWatch("extract", params_path, item=model_id)
    params = load_params(params_path)
    params.model(model_id)  # refused before anything is read: an unknown model id, then what the dataset decides
    dataset = load_dataset(dataset_path)
    fit.check(params.analysis, categories=dataset.categories, n_pairs=dataset.n_pairs, source=str(dataset_path))
    # a failed `dvc pull` is not a reason to recompute what dvc.lock records
    check_recompute(params_path.parent, f"extract@{model_id}")
    path = extract_model(model_id=model_id, params=params, dataset=dataset, dataset_path=dataset_path,
                         prompts_path=prompts_path, out=out, numerics_record=numerics.record_json(),
                         cpu_threads=numerics.EXTRACTION_THREADS, watch=watch, resume=resume, progress=progress,
                         control_path=control_path)
    if current_rank().is_main:  # one record of the machine, by the rank that wrote the file
        log.info("machine: %s", numerics.log_machine(numerics.stage_name(f"extract@{model_id}"), params_path.parent))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model id from params.yaml `catalog`")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--dataset", type=Path, default=Path("data/dataset.json"))
    parser.add_argument("--prompts", type=Path, default=Path("data/anisotropy_prompts.txt"))
    parser.add_argument("--out", type=Path, help="default: data/embeddings/<model>.h5")
    parser.add_argument("--no-resume", action="store_true", help="discard a partial file from an interrupted run")
    parser.add_argument("--control", type=Path, default=None,
                        help="control pairs (e.g. data/neutral_control.json) to extract into <out stem>.control.h5")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = args.out or Path("data/embeddings") / f"{args.model}.h5"
    try:
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        numerics.check_mkl(torch)  # MKL answered by the dispatch library, proven by a product, or nothing is run
        run(model_id=args.model, params_path=args.params, dataset_path=args.dataset, prompts_path=args.prompts,
            out=out, resume=not args.no_resume, progress=True, control_path=args.control)
    except UAProbeError as exc:
        log.error("%s", exc)
        return 2
    except (torch.OutOfMemoryError, MemoryError) as exc:
        log.error("%s", out_of_memory_message(out, args.params, exc))
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.args[0] if exc.args and isinstance(exc.args[0], int) else signal.SIGINT
        log.error("%s: stopped by %s", out, signal.Signals(signum).name)
        return 128 + int(signum)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _interrupt(signum: int, _frame: object) -> None:
    """SIGTERM (e.g. from a job scheduler or `kill`) stops the run like Ctrl-C: the partial file is kept."""
    raise KeyboardInterrupt(signum)


if __name__ == "__main__":
    run_stage("extract", main)
