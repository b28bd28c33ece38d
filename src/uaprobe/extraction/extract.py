"""Batched forward passes: masked pooling of every layer and per-sequence NLL, from one pass.

For a batch of B right-padded sequences of length T (:func:`uaprobe.extraction.tokens.encode`), one
forward pass with ``output_hidden_states=True`` gives L+1 hidden states (index 0 = token embeddings,
L = last block after the final norm) and the logits. From them, on the device
(:mod:`uaprobe.extraction.pooling`):

- pooled states over *content* positions: mean, first and last content token, shape (B, L+1, D);
- the last block's residual before the final norm (captured by a hook on the final norm), pooled
  the same way, shape (B, D);
- the NLL of each sequence from the logits in float32: sum, mean and number of scored tokens.

Every batch is pooled under the configured policy and under ``sink_excluded`` (special tokens and
position 0 out: the attention sink, whether it is a BOS or the first word), and position 0's
dominance is measured (:mod:`uaprobe.extraction.sink`), so both policies come from one forward pass.
Every result is checked finite, naming the first layer that is not.

Right padding keeps every content position's computation identical to the unpadded sequence
(causal attention never looks right), so no position ids are needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uaprobe.extraction import layout
from uaprobe.errors import DatasetError, NumericalError
from uaprobe.extraction.batches import budget_batches
from uaprobe.extraction.policy import SINK_EXCLUDED
from uaprobe.extraction.pooling import content_positions, pool, sequence_nll
from uaprobe.extraction.sink import sink_statistics
from uaprobe.extraction.tokens import Encoded, encode, token_lengths


@contextmanager
def capture_input(module: torch.nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Record the input of ``module`` (e.g. the final norm) at every forward call."""
    store: dict[str, torch.Tensor] = {}

    def hook(_mod: torch.nn.Module, args: tuple[Any, ...]) -> None:
        store["input"] = args[0]

    handle = module.register_forward_pre_hook(hook)
    try:
        yield store
    finally:
        handle.remove()


def final_norm(model: torch.nn.Module) -> torch.nn.Module:
    """The norm applied after the last block (``norm`` in Llama/Gemma, ``final_layer_norm`` in GPT-NeoX)."""
    base = model.base_model
    for name in ("norm", "final_layer_norm", "ln_f", "final_layernorm"):
        module = getattr(base, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    raise NumericalError(
        f"{type(model).__name__}: no final norm found on {type(base).__name__} "
        "(looked for norm, final_layer_norm, ln_f, final_layernorm); add its name to uaprobe.extraction.extract.final_norm"
    )


@dataclass(frozen=True)
class BatchResult:
    """Everything one forward pass yields for B statements, on the CPU as numpy."""

    pooled: dict[str, np.ndarray]
    """mean/first/last -> (B, L+1, D) float32, under the configured policy"""
    prenorm: dict[str, np.ndarray]
    """mean/first/last -> (B, D) float32"""
    nll_sum: np.ndarray
    nll_mean: np.ndarray
    n_tokens: np.ndarray
    n_content: np.ndarray
    pooled_sink_excluded: dict[str, np.ndarray]
    """mean/first/last -> (B, L+1, D) float32, special tokens and position 0 excluded"""
    prenorm_sink_excluded: dict[str, np.ndarray]
    n_content_sink_excluded: np.ndarray
    sink: dict[str, np.ndarray]
    """:data:`uaprobe.extraction.sink.SINK_STATISTICS` -> (B, L+1)"""

    def datasets(self) -> dict[str, np.ndarray]:
        """HDF5 dataset path -> (B, ...) array: the rows of this batch, for every streamed dataset of
        :data:`uaprobe.extraction.layout.DATASETS`."""
        return {spec.name: layout.streamed_value(self, spec.stream) for spec in layout.DATASETS if spec.stream}

    @staticmethod
    def from_datasets(d: dict[str, np.ndarray]) -> "BatchResult":
        """The inverse of :meth:`datasets`."""
        pools = layout.POOLINGS
        return BatchResult(
            pooled={p: d[f"pooled/{p}"] for p in pools}, prenorm={p: d[f"prenorm/{p}"] for p in pools},
            nll_sum=d["nll/sum"], nll_mean=d["nll/mean"], n_tokens=d["n_tokens"], n_content=d["n_content"],
            pooled_sink_excluded={p: d[f"pooled_{SINK_EXCLUDED}/{p}"] for p in pools},
            prenorm_sink_excluded={p: d[f"prenorm_{SINK_EXCLUDED}/{p}"] for p in pools},
            n_content_sink_excluded=d[f"n_content_{SINK_EXCLUDED}"],
            sink={k.removeprefix("sink/"): v for k, v in d.items() if k.startswith("sink/")},
        )


def _numerical_fix(name: str, dtype: torch.dtype | None) -> str:
    if dtype in (torch.float16, torch.bfloat16):
        return (f"the model runs in {str(dtype).removeprefix('torch.')}, which overflows in some models (Gemma in "
                f"float16): set `catalog.{name}.dtype: float32` in params.yaml")
    return (f"the model already runs in {str(dtype).removeprefix('torch.') if dtype else 'its dtype'}, so its "
            "weights are the likely cause: re-download or reinstall the model")


def _check_finite(name: str, tensor: torch.Tensor, what: str, *, layer_dim: int | None = None,
                  dtype: torch.dtype | None = None) -> None:
    """Raise :class:`NumericalError` if ``tensor`` holds NaN or inf, naming the first layer that does.

    ``layer_dim`` is the axis that indexes layers (hidden-state index: 0 = token embeddings, L = last
    block), if any.
    """
    bad = ~torch.isfinite(tensor)
    if bad.any():
        where = ""
        if layer_dim is not None:
            per_layer = bad.movedim(layer_dim, 0).reshape(bad.shape[layer_dim], -1).any(dim=1)
            layer = int(per_layer.nonzero()[0, 0])
            where = (f" from layer {layer} on (hidden-state index; 0 = token embeddings, "
                     f"{bad.shape[layer_dim] - 1} = last block)")
        raise NumericalError(f"model {name!r}: {what} contain NaN or inf{where}; {_numerical_fix(name, dtype)}")


@torch.inference_mode()
def forward_batch(model: Any, enc: Encoded, *, drop: str, model_name: str = "model") -> BatchResult:
    """One forward pass over a right-padded batch -> pooled states of every layer, pre-norm states, NLL."""
    device = next(model.parameters()).device
    ids = enc.input_ids.to(device)
    mask = enc.attention_mask.to(device)
    special = enc.special_tokens_mask.to(device)
    where = content_positions(mask, special, drop)
    where_sx = content_positions(mask, special, SINK_EXCLUDED)
    counts = where.mean_mask.sum(dim=1)
    counts_sx = where_sx.mean_mask.sum(dim=1)
    for policy, c in ((drop, counts), (SINK_EXCLUDED, counts_sx)):
        if bool((c == 0).any()):
            raise DatasetError(
                f"a statement has no content tokens under the pooling policy {policy!r} "
                "(it is empty, a single token, or a single token after the BOS); lengthen it"
            )
    with capture_input(final_norm(model)) as captured:
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
    pooled = pool(out.hidden_states, where)  # each (B, L+1, D)
    prenorm = pool(captured["input"].to(device), where)
    pooled_sx = pool(out.hidden_states, where_sx)
    prenorm_sx = pool(captured["input"].to(device), where_sx)
    nll_sum, nll_mean, n_tokens = sequence_nll(out.logits.to(device), ids, mask)
    dtype = next(model.parameters()).dtype
    # Every pooling at once, so the error names the first layer where any of them breaks.
    _check_finite(model_name, torch.stack([pooled[p] for p in ("mean", "first", "last")], dim=0),
                  "hidden states", layer_dim=2, dtype=dtype)
    _check_finite(model_name, torch.stack([prenorm[p] for p in ("mean", "first", "last")], dim=0),
                  "pre-final-norm states of the last block", dtype=dtype)
    _check_finite(model_name, nll_sum, "log-likelihoods", dtype=dtype)
    return BatchResult(
        pooled={k: v.cpu().numpy() for k, v in pooled.items()},
        prenorm={k: v.cpu().numpy() for k, v in prenorm.items()},
        nll_sum=nll_sum.cpu().numpy(),
        nll_mean=nll_mean.cpu().numpy(),
        n_tokens=n_tokens.cpu().numpy().astype(np.int32),
        n_content=counts.cpu().numpy().astype(np.int32),
        pooled_sink_excluded={k: v.cpu().numpy() for k, v in pooled_sx.items()},
        prenorm_sink_excluded={k: v.cpu().numpy() for k, v in prenorm_sx.items()},
        n_content_sink_excluded=counts_sx.cpu().numpy().astype(np.int32),
        sink=sink_statistics(out.hidden_states, mask),
    )


@torch.inference_mode()
def token_states(model: Any, enc: Encoded, *, model_name: str = "model") -> list[tuple[np.ndarray, np.ndarray]]:
    """Every token state of every sequence at every layer: per row ((T_i, L+1, D) float32, (T_i,) special)."""
    device = next(model.parameters()).device
    out = model(input_ids=enc.input_ids.to(device), attention_mask=enc.attention_mask.to(device),
                output_hidden_states=True, use_cache=False)
    hidden = torch.stack([h.to(device) for h in out.hidden_states], dim=2).float()  # (B, T, L+1, D)
    attended = enc.attention_mask.bool().to(device)
    _check_finite(model_name, hidden[attended], "token states of the anisotropy prompts", layer_dim=1,
                  dtype=next(model.parameters()).dtype)
    rows = []
    for b in range(hidden.shape[0]):
        keep = enc.attention_mask[b].bool()
        rows.append((hidden[b][keep.to(device)].cpu().numpy(), enc.special_tokens_mask[b][keep].numpy().astype(bool)))
    return rows


def iterate_batches(model: Any, tokenizer: Any, texts: Sequence[str], batches: Sequence[np.ndarray], *,
                    drop: str, model_name: str = "model",
                    on_batch: Callable[[np.ndarray, BatchResult], None]) -> None:
    """Run :func:`forward_batch` on each batch of row indices and hand the result to ``on_batch``."""
    for rows in batches:
        enc = encode(tokenizer, [texts[i] for i in rows])
        on_batch(rows, forward_batch(model, enc, drop=drop, model_name=model_name))


def anisotropy_states(model: Any, tokenizer: Any, prompts: Sequence[str], *, batch_size: int,
                      max_batch_tokens: int | None = None,
                      model_name: str = "model") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token states of every prompt, concatenated: ((T, L+1, D) float32, (T,) prompt index, (T,) special).

    The prompts run in file order, in batches of at most ``batch_size`` prompts and
    ``max_batch_tokens`` padded tokens (see :func:`uaprobe.extraction.batches.budget_batches`).
    """
    states, index, special = [], [], []
    lengths = token_lengths(tokenizer, prompts)
    for rows in budget_batches(range(len(prompts)), lengths, batch_size, max_batch_tokens):
        chunk = [prompts[i] for i in rows]
        for row, (h, s) in zip(rows.tolist(), token_states(model, encode(tokenizer, chunk), model_name=model_name)):
            states.append(h)
            special.append(s)
            index.append(np.full(len(s), row, dtype=np.int32))
    return np.concatenate(states), np.concatenate(index), np.concatenate(special)


def context_length(model: Any) -> int:
    config = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None) or getattr(getattr(config, "text_config", None), name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 1 << 30
