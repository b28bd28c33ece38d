"""DVC stage `extract`: one model's pooled hidden states, NLL and anisotropy token states -> HDF5.

    python stages/extract.py --model smollm2-135m

Validates params, dataset, prompts and the output path before the model loads, and the statement
lengths before any forward pass; streams batches into ``data/embeddings/<model>.h5.partial`` and
moves the complete file into place, so ``<model>.h5`` is always the previous complete file, the new
complete file, or absent.

With ``--control data/neutral_control.json`` the same loaded model also extracts the control pairs
into a second file of the same layout, ``<out stem>.control.h5`` (``data/embeddings/<model>.control.h5``).

Interrupted (Ctrl-C, SIGTERM, SIGKILL): the partial file stays, and rerunning the same command
resumes from its last complete batch (``--no-resume`` starts over). Failed (bad input, disk full,
read-only output, NaN in the model): the partial file is removed -- the fix changes the inputs or
frees the disk, so there is nothing worth resuming -- and the exit code is 2 with the error logged.
"""

from __future__ import annotations

from uaprobe import numerics

# Pinned CPU code paths (uaprobe.numerics), before numpy and torch are imported; only when run as a
# script (importing the module changes nothing).
if __name__ == "__main__":
    numerics.pin()

import argparse
import logging
import signal
from pathlib import Path

import torch

from uaprobe.errors import UAProbeError
from uaprobe.extraction.job import batch_limits, control_path_for, run
from uaprobe.stage import run_stage

__all__ = ["control_path_for", "main", "run"]

log = logging.getLogger("uaprobe.extraction.extract")


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
        log.error("%s: out of memory with %s (%s); lower extract.max_batch_tokens in params.yaml: the padded "
                  "tokens per forward pass bound its memory (extract.batch_size only caps the statements per pass)",
                  out, batch_limits(args.params), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
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
