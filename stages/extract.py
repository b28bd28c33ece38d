"""DVC stage `extract`: one model's pooled hidden states, NLL and anisotropy token states -> HDF5.

    python stages/extract.py --model smollm2-135m

Validates params and dataset before the model loads; streams batches into
``data/embeddings/<model>.h5.partial`` (resumed if an earlier run was interrupted) and moves the
complete file into place.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from tqdm import tqdm

import uaprobe
from uaprobe import extract
from uaprobe.config import load_params
from uaprobe.dataset import load_dataset, load_prompts, sha256_of
from uaprobe.errors import UAProbeError
from uaprobe.models import load_model, pick_device
from uaprobe.store import ExtractionWriter

log = logging.getLogger("uaprobe.extract")


def run(*, model_id: str, params_path: Path, dataset_path: Path, prompts_path: Path, out: Path,
        resume: bool = True, progress: bool = True) -> Path:
    params = load_params(params_path)
    spec = params.model(model_id)
    dataset = load_dataset(dataset_path)
    prompts = load_prompts(prompts_path)
    device = pick_device(params.extract.device)
    torch.manual_seed(0)

    log.info("loading %s from %s on %s", model_id, spec.source, device)
    started = time.perf_counter()
    model, tokenizer, source, dtype = load_model(spec, model_id, device=device)
    extract.prepare_tokenizer(tokenizer)
    log.info("loaded %s in %.1f s (%s, %d layers)", spec.display, time.perf_counter() - started, dtype,
             model.config.num_hidden_layers if hasattr(model.config, "num_hidden_layers") else -1)

    texts = dataset.texts
    lengths = extract.token_lengths(tokenizer, texts)
    limit = min(params.extract.max_length or 1 << 30, extract.context_length(model))
    extract.check_lengths(lengths, [f"{dataset_path}: {s.json_path}" for s in dataset.statements], limit=limit)
    extract.check_lengths(extract.token_lengths(tokenizer, prompts),
                          [f"{prompts_path}: line {i + 1}" for i in range(len(prompts))], limit=limit)
    bos_added = bool(tokenizer("a", return_special_tokens_mask=True)["special_tokens_mask"][0])

    aniso, aniso_index, aniso_special = extract.anisotropy_states(model, tokenizer, prompts,
                                                                  batch_size=params.extract.batch_size)
    n_layers, hidden_size = aniso.shape[1] - 1, aniso.shape[2]
    attrs = {
        "model_id": model_id,
        "display": spec.display,
        "source": spec.source,
        "location": source.description,
        "revision": spec.revision or "",
        "dtype": str(dtype).removeprefix("torch."),
        "device": device.type,
        "pooling_drop": params.pooling.drop,
        "batch_size": params.extract.batch_size,
        "dataset_sha256": dataset.sha256,
        "prompts_sha256": sha256_of(prompts_path),
        "uaprobe_version": uaprobe.__version__,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "n_layers": n_layers,
        "hidden_size": hidden_size,
        "bos_added": bos_added,
        "params_millions": spec.params_millions or 0.0,
    }
    writer = ExtractionWriter(
        out, texts=texts, categories=[s.category for s in dataset.statements],
        pairs=np.array([s.pair for s in dataset.statements]), sides=np.array([s.side for s in dataset.statements]),
        n_layers=n_layers, hidden_size=hidden_size, prompts=prompts, aniso_states=aniso,
        aniso_prompt_index=aniso_index, aniso_special=aniso_special, attrs=attrs, resume=resume,
    )
    try:
        batches = extract.length_sorted_batches(lengths, params.extract.batch_size)
        todo = [rows for rows in batches if not writer.done[rows].all()]
        if len(todo) < len(batches):
            log.info("resuming %s: %d of %d batches already written", writer.tmp, len(batches) - len(todo), len(batches))
        bar = tqdm(total=len(texts), initial=len(texts) - sum(len(r) for r in todo), unit="stmt",
                   desc=f"extract {model_id}", disable=not progress)

        def on_batch(rows: np.ndarray, result: extract.BatchResult) -> None:
            writer.write(rows, result)
            bar.update(len(rows))

        extract.iterate_batches(model, tokenizer, texts, todo, drop=params.pooling.drop, model_name=model_id,
                                on_batch=on_batch)
        bar.close()
        path = writer.finish()
    finally:
        writer.close()
    log.info("wrote %s (%d statements, %d layers + embeddings, d=%d)", path, len(texts), n_layers, hidden_size)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="model id from params.yaml `catalog`")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--dataset", type=Path, default=Path("data/dataset.json"))
    parser.add_argument("--prompts", type=Path, default=Path("data/anisotropy_prompts.txt"))
    parser.add_argument("--out", type=Path, help="default: data/embeddings/<model>.h5")
    parser.add_argument("--no-resume", action="store_true", help="discard a partial file from an interrupted run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = args.out or Path("data/embeddings") / f"{args.model}.h5"
    try:
        run(model_id=args.model, params_path=args.params, dataset_path=args.dataset, prompts_path=args.prompts,
            out=out, resume=not args.no_resume, progress=True)
    except UAProbeError as exc:
        log.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
