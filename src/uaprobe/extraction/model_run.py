"""One model's extraction run: the model loaded once, the dataset's statements (and the control pairs) through
it in batches, streamed into the extraction files.

:func:`extract_model` checks the prompts, the output paths and the statement lengths before any forward pass;
streams batches into ``<out>.partial`` and moves the complete file into place, so ``<out>`` is always the
previous complete file, the new complete file, or absent. Under ``torchrun`` (more than one rank) each rank
computes its share of the batches into a shard file and rank 0 assembles them
(:mod:`uaprobe.extraction.distributed`). Interrupted (``KeyboardInterrupt``): the partial file stays, closed
cleanly, and a rerun with ``resume`` continues from its last complete batch. Failed: the partial file is removed.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm import tqdm

import uaprobe
from uaprobe.config import Params, load_params
from uaprobe.extraction import extract
from uaprobe.extraction.batches import length_sorted_batches
from uaprobe.extraction.dataset import Dataset, load_control, load_prompts, sha256_of
from uaprobe.extraction.distributed import ShardWriter, current_rank, read_shard, shard_batches, shard_path
from uaprobe.extraction.models import load_model, pick_device
from uaprobe.extraction.policy import SINK_EXCLUDED
from uaprobe.extraction.store import ExtractionWriter, check_output_path
from uaprobe.extraction.tokens import (check_content, check_lengths, content_counts, encode, literal_special_tokens,
                                       prepare_tokenizer, statement_tokens, token_lengths)
from uaprobe.errors import UAProbeError
from uaprobe.stage import ParamsWatch

__all__ = ["control_path_for", "extract_model", "out_of_memory_message"]

log = logging.getLogger(__name__)


def control_path_for(out: Path) -> Path:
    """Where the control pairs' extraction goes beside ``out``: ``<stem>.control.h5``."""
    return out.with_name(out.stem + ".control.h5")


def extract_model(*, model_id: str, params: Params, dataset: Dataset, dataset_path: Path, prompts_path: Path,
                  out: Path, numerics_record: str, cpu_threads: int, watch: ParamsWatch | None = None,
                  resume: bool = True, progress: bool = True, control_path: Path | None = None) -> Path:
    """Extract ``model_id`` of ``params`` over ``dataset`` (read from ``dataset_path``) and the prompts into ``out``
    (and the control pairs of ``control_path`` into :func:`control_path_for` ``(out)``); returns ``out``.
    ``resume`` continues a partial file of an interrupted run; ``watch`` (params.yaml as at the start) is checked
    before each file is moved into place. ``numerics_record`` (the pinned numerics, as JSON) goes into the files'
    attributes; a CPU run uses ``cpu_threads`` threads (the bytes depend on how ATen splits a tensor among them)."""
    spec = params.model(model_id).model_copy(update={"dtype": params.dtype_of(model_id)})
    control = load_control(control_path) if control_path is not None else None
    prompts = load_prompts(prompts_path)
    device = pick_device(params.extract.device)
    check_output_path(out)
    if control is not None:
        check_output_path(control_path_for(out))
    rank = current_rank()
    device = _setup_device(device, rank, cpu_threads=cpu_threads)

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
                        hidden_size=hidden_size, bos_added=bos_added, numerics_record=numerics_record)
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
        if watch is not None:
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
    return path


def _setup_device(device: torch.device, rank, *, cpu_threads: int) -> torch.device:
    """The rank's device (its own GPU under torchrun), the process group, the seed and the CPU threads."""
    if rank.world > 1:
        import torch.distributed as dist

        if device.type == "cuda":
            device = torch.device("cuda", rank.local_rank)
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        log.info("rank %d of %d on %s", rank.rank, rank.world, device)
    torch.manual_seed(0)
    if device.type == "cpu":  # the bytes depend on how ATen splits a tensor among threads
        torch.set_num_threads(cpu_threads)
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
                prompts_path: Path, n_layers: int, hidden_size: int, bos_added: bool, numerics_record: str) -> dict:
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
        "numerics": numerics_record,
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


def out_of_memory_message(out: Path, params_path: Path, exc: BaseException) -> str:
    """What an out-of-memory failure of the extraction into ``out`` says: the batch limits of ``params_path``
    (placeholders if it does not load) and the one to lower."""
    try:
        params = load_params(params_path).extract
        limits = f"extract.max_batch_tokens={params.max_batch_tokens} and extract.batch_size={params.batch_size}"
    except UAProbeError:
        limits = "extract.max_batch_tokens=? and extract.batch_size=?"
    return (f"{out}: out of memory with {limits} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
            "lower extract.max_batch_tokens in params.yaml: the padded tokens per forward pass bound its memory "
            "(extract.batch_size only caps the statements per pass)")
