"""DVC stage `extract`: one model's pooled hidden states, NLL and anisotropy token states -> HDF5.

    python stages/extract.py --model smollm2-135m

Validates params, dataset, prompts, the analysis parameters the dataset decides (:mod:`uaprobe.analysis.run.fit`)
and the output path before the model loads, and the statement
lengths before any forward pass; streams batches into ``data/embeddings/<model>.h5.partial`` and
moves the complete file into place, so ``<model>.h5`` is always the previous complete file, the new
complete file, or absent.

Under ``torchrun`` (more than one rank) each rank computes its share of the batches into a shard
file and rank 0 assembles them (:mod:`uaprobe.extraction.distributed`).

With ``--control data/neutral_control.json`` the same loaded model also extracts the control pairs
into a second file of the same layout, ``<out stem>.control.h5`` (``data/embeddings/<model>.control.h5``).

Interrupted (Ctrl-C, SIGTERM, SIGKILL): the partial file stays, and rerunning the same command
resumes from its last complete batch (``--no-resume`` starts over). Failed (bad input, disk full,
read-only output, NaN in the model): the partial file is removed -- the fix changes the inputs or
frees the disk, so there is nothing worth resuming -- and the exit code is 2 with the error logged.
"""

from __future__ import annotations

from uaprobe.repro import numerics

# Pinned CPU code paths (uaprobe.repro.numerics), before numpy and torch are imported; only when run as a
# script (importing the module changes nothing).
if __name__ == "__main__":
    numerics.pin()

import argparse
import dataclasses
import logging
import signal
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm import tqdm

import uaprobe
from uaprobe.analysis.run import fit
from uaprobe.config import load_params
from uaprobe.errors import UAProbeError
from uaprobe.extraction import extract
from uaprobe.extraction.batches import length_sorted_batches
from uaprobe.extraction.dataset import Dataset, load_control, load_dataset, load_prompts, sha256_of
from uaprobe.extraction.distributed import ShardWriter, current_rank, read_shard, shard_batches, shard_path
from uaprobe.extraction.models import load_model, pick_device
from uaprobe.extraction.pooling import SINK_EXCLUDED
from uaprobe.extraction.store import ExtractionWriter, check_output_path
from uaprobe.extraction.tokens import (check_content, check_lengths, content_counts, encode, literal_special_tokens,
                                       prepare_tokenizer, statement_tokens, token_lengths)
from uaprobe.repro.lockfile import check_recompute
from uaprobe.stage import ParamsWatch, run_stage

__all__ = ["control_path_for", "main", "run"]

log = logging.getLogger("uaprobe.extraction.extract")


def control_path_for(out: Path) -> Path:
    """Where the control pairs' extraction goes beside ``out``: ``<stem>.control.h5``."""
    return out.with_name(out.stem + ".control.h5")


def run(*, model_id: str, params_path: Path, dataset_path: Path, prompts_path: Path, out: Path,
        resume: bool = True, progress: bool = True, control_path: Path | None = None) -> Path:
    """Extract ``model_id`` of ``params_path`` over the dataset and prompts into ``out`` (and the
    control pairs into :func:`control_path_for` ``(out)``); returns ``out``. ``resume`` continues a
    partial file of an interrupted run."""
    watch = ParamsWatch("extract", params_path, item=model_id)
    params = load_params(params_path)
    spec = dataclasses.replace(params.model(model_id), dtype=params.dtype_of(model_id))
    dataset = load_dataset(dataset_path)
    # every analysis parameter the dataset decides (bins, the left-out category, ...), all at once, before
    # the model loads: the analyze stage would refuse them after the extraction
    fit.check(params.analysis, categories=dataset.categories, n_pairs=dataset.n_pairs, source=str(dataset_path))
    control = load_control(control_path) if control_path is not None else None
    prompts = load_prompts(prompts_path)
    device = pick_device(params.extract.device)
    check_output_path(out)
    # a failed `dvc pull` is not a reason to recompute what dvc.lock records
    check_recompute(params_path.parent, f"extract@{model_id}")
    if control is not None:
        check_output_path(control_path_for(out))
    rank = current_rank()
    device = _setup_device(device, rank)

    log.info("loading %s from %s on %s", model_id, spec.source, device)
    started = time.perf_counter()
    model, tokenizer, source, dtype = load_model(spec, model_id, device=device)
    prepare_tokenizer(tokenizer)
    log.info("loaded %s in %.1f s (%s, %d layers)", spec.display, time.perf_counter() - started, dtype,
             model.config.num_hidden_layers if hasattr(model.config, "num_hidden_layers") else -1)

    texts = dataset.texts
    lengths = token_lengths(tokenizer, texts)
    limit = min(params.extract.max_length or 1 << 30, extract.context_length(model))
    _check_statements(tokenizer, dataset, prompts, lengths=lengths, limit=limit, drop=params.pooling.drop,
                      dataset_path=dataset_path, prompts_path=prompts_path)
    bos_added = bool(tokenizer("a", return_special_tokens_mask=True)["special_tokens_mask"][0])

    batches = length_sorted_batches(lengths, params.extract.batch_size,
                                    max_batch_tokens=params.extract.max_batch_tokens)
    if rank.world > 1:
        _compute_shard(model, tokenizer, texts, batches, out=out, rank=rank, drop=params.pooling.drop,
                       model_id=model_id, progress=progress)
        if not rank.is_main:
            _finish_distributed()
            return out
    aniso, aniso_index, aniso_special = extract.anisotropy_states(model, tokenizer, prompts,
                                                                  batch_size=params.extract.batch_size,
                                                                  max_batch_tokens=params.extract.max_batch_tokens,
                                                                  model_name=model_id)
    n_layers, hidden_size = aniso.shape[1] - 1, aniso.shape[2]
    attrs = _file_attrs(model_id=model_id, spec=spec, source=source, dtype=dtype, device=device, params=params,
                        dataset=dataset, prompts_path=prompts_path, n_layers=n_layers,
                        hidden_size=hidden_size, bos_added=bos_added)
    writer = ExtractionWriter(
        out, texts=texts, categories=[s.category for s in dataset.statements],
        pairs=np.array([s.pair for s in dataset.statements]), sides=np.array([s.side for s in dataset.statements]),
        n_layers=n_layers, hidden_size=hidden_size, prompts=prompts, aniso_states=aniso,
        aniso_prompt_index=aniso_index, aniso_special=aniso_special,
        tokens=statement_tokens(tokenizer, texts), attrs=attrs,
        resume=resume and rank.world == 1,
    )
    try:
        if rank.world > 1:
            for r in range(rank.world):
                for rows, result in read_shard(shard_path(out, r, rank.world)):
                    writer.write(rows, result)
        else:
            _write_batches(model, tokenizer, texts, batches, writer=writer, drop=params.pooling.drop,
                           model_id=model_id, progress=progress)
        watch.check()  # params.yaml as at the start, or the partial file is discarded
        path = writer.finish()
    except KeyboardInterrupt:
        # Interrupted: keep the partial file, closed cleanly, for the next run to resume.
        writer.close()
        log.warning("interrupted: %d of %d statements are saved in %s; rerun the same command to resume",
                    int(writer.done.sum()), len(texts), writer.tmp)
        raise
    except BaseException:
        # Failed: the fix changes the inputs or frees the disk, so the partial file is not worth keeping.
        writer.discard()
        raise
    finally:
        if rank.world > 1:
            for r in range(rank.world):
                shard_path(out, r, rank.world).unlink(missing_ok=True)
            _finish_distributed()
    log.info("wrote %s (%d statements, %d layers + embeddings, d=%d)", path, len(texts), n_layers, hidden_size)
    if control is not None and control_path is not None:
        _extract_control(model, tokenizer, control=control, control_path=control_path, out=control_path_for(out),
                         attrs=attrs, prompts=prompts, aniso=(aniso, aniso_index, aniso_special), params=params,
                         limit=limit, model_id=model_id, resume=resume, watch=watch)
    log.info("machine: %s", numerics.log_machine(numerics.stage_name(f"extract@{model_id}"), params_path.parent))
    return path


def _setup_device(device: torch.device, rank) -> torch.device:
    """The rank's device (its own GPU under torchrun), the process group, the seed and the CPU threads."""
    if rank.world > 1:
        import torch.distributed as dist

        if device.type == "cuda":
            device = torch.device("cuda", rank.local_rank)
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        log.info("rank %d of %d on %s", rank.rank, rank.world, device)
    torch.manual_seed(0)
    if device.type == "cpu":  # the bytes depend on how ATen splits a tensor among threads (uaprobe.repro.numerics)
        torch.set_num_threads(numerics.EXTRACTION_THREADS)
    return device


def _check_statements(tokenizer, dataset: Dataset, prompts: list[str], *, lengths: list[int], limit: int, drop: str,
                      dataset_path: Path, prompts_path: Path) -> None:
    """Every statement and prompt within the context, every statement with content tokens under both
    position-0 policies; a warning for a statement that spells a special token."""
    labels = [f"{dataset_path}: {s.json_path}" for s in dataset.statements]
    check_lengths(lengths, labels, limit=limit)
    check_lengths(token_lengths(tokenizer, prompts),
                  [f"{prompts_path}: line {i + 1}" for i in range(len(prompts))], limit=limit)
    for policy in (drop, SINK_EXCLUDED):
        check_content(content_counts(tokenizer, dataset.texts, policy), lengths, labels, drop=policy)
    for row, token in literal_special_tokens(tokenizer, dataset.texts):
        log.warning("%s: %s spells the special token %r, which the model reads as that token (pooled and "
                    "scored as content); rewrite the statement if that is not intended",
                    dataset_path, dataset.statements[row].json_path, token)


def _file_attrs(*, model_id: str, spec, source, dtype: torch.dtype, device: torch.device, params, dataset: Dataset,
                prompts_path: Path, n_layers: int, hidden_size: int, bos_added: bool) -> dict:
    """The extraction file's attributes: what was run, on what, with which versions (provenance)."""
    return {
        "model_id": model_id,
        "display": spec.display,
        "source": spec.source,
        "location": source.description,
        "revision": spec.revision or "",
        "dtype": str(dtype).removeprefix("torch."),
        "device": device.type,
        "pooling_drop": params.pooling.drop,
        "batch_size": params.extract.batch_size,
        "max_batch_tokens": params.extract.max_batch_tokens,
        "dataset_sha256": dataset.sha256,
        "prompts_sha256": sha256_of(prompts_path),
        "uaprobe_version": uaprobe.__version__,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "n_layers": n_layers,
        "hidden_size": hidden_size,
        "bos_added": bos_added,
        "params_millions": spec.params_millions or 0.0,
        "numerics": numerics.record_json(),
    }


def _write_batches(model, tokenizer, texts: list[str], batches: list[np.ndarray], *, writer: ExtractionWriter,
                   drop: str, model_id: str, progress: bool) -> None:
    """The forward passes of the batches the writer does not hold yet (a resumed file holds some)."""
    todo = [rows for rows in batches if not writer.done[rows].all()]
    if len(todo) < len(batches):
        log.info("resuming %s: %d of %d batches already written", writer.tmp, len(batches) - len(todo), len(batches))
    with tqdm(total=len(texts), initial=len(texts) - sum(len(r) for r in todo), unit="stmt",
              desc=f"extract {model_id}", disable=not progress) as bar:

        def on_batch(rows: np.ndarray, result: extract.BatchResult) -> None:
            writer.write(rows, result)
            bar.update(len(rows))

        extract.iterate_batches(model, tokenizer, texts, todo, drop=drop, model_name=model_id, on_batch=on_batch)


def _extract_control(model, tokenizer, *, control: Dataset, control_path: Path, out: Path, attrs: dict,
                     prompts: list[str], aniso: tuple[np.ndarray, np.ndarray, np.ndarray], params, limit: int,
                     model_id: str, resume: bool, watch: ParamsWatch | None = None) -> Path:
    """The control pairs through the already loaded model, into a file of the extraction layout
    (the same anisotropy states and provenance, with the control file's sha256 as the dataset's)."""
    drop, batch_size, max_batch_tokens = params.pooling.drop, params.extract.batch_size, params.extract.max_batch_tokens
    texts = control.texts
    labels = [f"{control_path}: categories.{s.json_path}" for s in control.statements]
    lengths = token_lengths(tokenizer, texts)
    check_lengths(lengths, labels, limit=limit)
    check_content(content_counts(tokenizer, texts, drop), lengths, labels, drop=drop)
    batches = length_sorted_batches(lengths, batch_size, max_batch_tokens=max_batch_tokens)
    aniso_states, aniso_index, aniso_special = aniso
    writer = ExtractionWriter(
        out, texts=texts, categories=[s.category for s in control.statements],
        pairs=np.array([s.pair for s in control.statements]), sides=np.array([s.side for s in control.statements]),
        n_layers=aniso_states.shape[1] - 1, hidden_size=aniso_states.shape[2], prompts=prompts,
        aniso_states=aniso_states, aniso_prompt_index=aniso_index, aniso_special=aniso_special,
        tokens=statement_tokens(tokenizer, texts), attrs=dict(attrs, dataset_sha256=control.sha256),
        resume=resume,
    )
    try:
        todo = [rows for rows in batches if not writer.done[rows].all()]
        extract.iterate_batches(model, tokenizer, texts, todo, drop=drop, model_name=model_id, on_batch=writer.write)
        if watch is not None:
            watch.check()
        path = writer.finish()
        log.info("wrote %s (%d control statements)", path, len(texts))
        return path
    except KeyboardInterrupt:
        writer.close()
        raise
    except BaseException:
        writer.discard()
        raise


def _compute_shard(model, tokenizer, texts: list[str], batches: list[np.ndarray], *, out: Path, rank, drop: str,
                   model_id: str, progress: bool) -> None:
    """This rank's share of the batches, streamed into its shard file; then wait for every rank."""
    import torch.distributed as dist

    mine = shard_batches(batches, rank=rank.rank, world=rank.world)
    out.parent.mkdir(parents=True, exist_ok=True)
    shard = ShardWriter(shard_path(out, rank.rank, rank.world))
    bar = tqdm(total=sum(len(r) for _, r in mine), unit="stmt", desc=f"extract {model_id} [rank {rank.rank}]",
               disable=not progress, position=rank.rank)
    try:
        for index, rows in mine:
            result = extract.forward_batch(model, encode(tokenizer, [texts[i] for i in rows]), drop=drop,
                                           model_name=model_id)
            shard.write(index, rows, result)
            bar.update(len(rows))
    finally:
        bar.close()
        shard.close()
    dist.barrier()


def _finish_distributed() -> None:
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def batch_limits(params_path: Path) -> str:
    """The batch limits of params.yaml, for an out-of-memory message (placeholders if it does not load)."""
    try:
        params = load_params(params_path).extract
    except UAProbeError:
        return "extract.max_batch_tokens=? and extract.batch_size=?"
    return f"extract.max_batch_tokens={params.max_batch_tokens} and extract.batch_size={params.batch_size}"


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
