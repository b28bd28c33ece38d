"""Batched forward passes: masked pooling of every layer and per-sequence NLL, from one pass.

For a batch of B right-padded sequences of length T, one forward pass with
``output_hidden_states=True`` gives L+1 hidden states (index 0 = token embeddings, L = last block
after the final norm) and the logits. From them, on the device:

- pooled states over *content* positions: mean, first and last content token, shape (B, L+1, D);
- the last block's residual before the final norm (captured by a hook on the final norm), pooled
  the same way, shape (B, D);
- the NLL of each sequence from the logits in float32: sum, mean and number of scored tokens.

Which positions are content is the pooling policy (:func:`content_positions`):
``special`` excludes the special tokens actually present (BOS, EOS); ``first`` reproduces the
seeds' ``hidden[0, 1:]``: position 0 is dropped from the mean whatever it is, and taken as the first
token. Every batch is also pooled under ``sink_excluded`` (special tokens and position 0 out: the
attention sink, whether it is a BOS or the first word), and position 0's dominance is measured
(:mod:`uaprobe.extraction.sink`), so both policies come from one forward pass.

Right padding keeps every content position's computation identical to the unpadded sequence
(causal attention never looks right), so no position ids are needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from uaprobe.extraction import layout
from uaprobe.errors import DatasetError, NumericalError
from uaprobe.extraction.sink import sink_statistics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Positions:
    """Which positions of a right-padded batch each pooled state covers."""

    mean_mask: torch.Tensor
    """(B, T) bool: positions averaged by mean pooling."""
    first: torch.Tensor
    """(B,) long: index of the first token."""
    last: torch.Tensor
    """(B,) long: index of the last token."""


def content_positions(attention_mask: torch.Tensor, special_tokens_mask: torch.Tensor, drop: str) -> Positions:
    """Positions per pooling policy, for right-padded ``attention_mask`` (B, T).

    ``special``: content = attended and not special; first/last = first/last content position.
    ``first``: the seeds' convention: mean over attended positions 1..; first = 0; last = last
    attended position.
    ``sink_excluded``: content = attended, not special and not position 0 (the attention sink, a BOS
    or the first word); first/last = first/last such position.
    """
    attended = attention_mask.bool()
    positions = torch.arange(attended.shape[1], device=attended.device).expand_as(attended)
    if drop in ("special", "sink_excluded"):
        content = attended & ~special_tokens_mask.bool()
        if drop == "sink_excluded":
            content = content & (positions > 0)
        big = torch.full_like(positions, attended.shape[1])
        first = torch.where(content, positions, big).min(dim=1).values
        last = torch.where(content, positions, torch.full_like(positions, -1)).max(dim=1).values
    elif drop == "first":
        content = attended & (positions > 0)
        first = torch.zeros(attended.shape[0], dtype=torch.long, device=attended.device)
        last = attended.sum(dim=1) - 1
    else:
        raise ValueError(f"unknown pooling policy {drop!r}; expected 'special', 'first' or 'sink_excluded'")
    return Positions(content, first.long(), last.long())


def pool(hidden: torch.Tensor | Sequence[torch.Tensor], where: Positions) -> dict[str, torch.Tensor]:
    """Pool hidden states over the positions -> mean/first/last, float32.

    ``hidden`` is one (B, T, D) tensor -> each result (B, D); or a sequence of L+1 such tensors
    (every layer's states, as the model returns them) -> each result (B, L+1, D). Layers are pooled
    one at a time, so the (B, L+1, T, D) stack of all states is never built.
    """
    if isinstance(hidden, torch.Tensor):
        return _pool_one(hidden, where)
    per_layer = [_pool_one(h, where) for h in hidden]
    return {k: torch.stack([p[k] for p in per_layer], dim=1) for k in ("mean", "first", "last")}


def _pool_one(hidden: torch.Tensor, where: Positions) -> dict[str, torch.Tensor]:
    """(B, T, D) -> mean over the mask (a batched matrix product), first and last position; each (B, D)."""
    hidden = hidden.to(where.mean_mask.device).float()
    weights = where.mean_mask.to(hidden.dtype)
    mean = torch.bmm(weights.unsqueeze(1), hidden).squeeze(1) / weights.sum(dim=1, keepdim=True)
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return {"mean": mean, "first": hidden[rows, where.first], "last": hidden[rows, where.last]}


NLL_CHUNK_ELEMENTS = 1 << 24
"""Logit elements per cross-entropy call (64 MiB of float32): bounds its log-softmax temporary."""


def sequence_nll(logits: torch.Tensor, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                 chunk_elements: int = NLL_CHUNK_ELEMENTS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sequence NLL of a right- or left-padded batch, in float32.

    Token t+1 is scored from position t where both are real tokens
    (``mask[:, :-1] & mask[:, 1:]``). Returns (sum (B,), mean (B,), scored-token count (B,)).
    The mean equals the Hugging Face ``loss`` of the same sequence run alone, unpadded.

    The cross-entropy runs over blocks of whole sequences of at most ``chunk_elements`` logits (at
    least one sequence), so its log-softmax temporary is bounded by the block, not the batch: the
    logits are the largest tensor of a forward pass, and a full-size copy would double them. Each
    sequence's values do not depend on the blocks.
    """
    batch, length, vocab = logits.shape
    scored = attention_mask[:, :-1].bool() & attention_mask[:, 1:].bool()
    # targets aligned with every position (the last one scores nothing), so the (B*T, V) logits are
    # read in place: no shifted copy, no transpose
    targets = torch.full_like(input_ids, -100)
    targets[:, :-1] = input_ids[:, 1:].masked_fill(~scored, -100)
    rows = max(1, chunk_elements // max(1, length * vocab))
    token_nll = torch.cat([
        F.cross_entropy(logits[start:start + rows].reshape(-1, vocab).float(),
                        targets[start:start + rows].reshape(-1), reduction="none", ignore_index=-100)
        for start in range(0, batch, rows)
    ]).view(batch, length)
    total = token_nll.sum(dim=1, dtype=torch.float64)
    count = scored.sum(dim=1)
    return total, total / count, count


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


SINK_EXCLUDED = "sink_excluded"
"""The second pooling policy every extraction stores beside the configured one."""


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


@dataclass(frozen=True)
class Encoded:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    special_tokens_mask: torch.Tensor


def encode(tokenizer: Any, texts: Sequence[str]) -> Encoded:
    """Tokenize a batch, right-padded, with the special-tokens mask.

    Padding is done here rather than by the tokenizer, so a tokenizer with no pad token at all works:
    padded positions hold the pad id (or id 0 if there is none), are masked out of attention and
    pooling and are never scored, so their id never reaches a result.
    """
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    rows, special_rows = enc["input_ids"], enc["special_tokens_mask"]
    width = max([len(r) for r in rows] + [1])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    special = torch.ones((len(rows), width), dtype=torch.long)
    for b, (ids, spec) in enumerate(zip(rows, special_rows)):
        input_ids[b, :len(ids)] = torch.as_tensor(ids, dtype=torch.long)
        attention[b, :len(ids)] = 1
        special[b, :len(ids)] = torch.as_tensor(spec, dtype=torch.long)
    return Encoded(input_ids, attention, special)


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Right padding, with the EOS (or UNK) token as pad token if the tokenizer has none.

    A tokenizer with neither gets no new token (that would need a new embedding row and change the
    softmax): :func:`encode` pads with id 0, which is masked out everywhere.
    """
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token if tokenizer.eos_token is not None else tokenizer.unk_token
        log.info("tokenizer has no pad token; padding with %r (masked out everywhere)",
                 tokenizer.pad_token if tokenizer.pad_token is not None else "id 0")
    return tokenizer


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


def budget_batches(order: Sequence[int] | np.ndarray, lengths: Sequence[int] | np.ndarray, batch_size: int,
                   max_batch_tokens: int | None = None) -> list[np.ndarray]:
    """Cut the rows ``order`` (indices into ``lengths``) into consecutive batches, keeping their order.

    A batch holds at most ``batch_size`` rows and at most ``max_batch_tokens`` padded tokens (rows x
    the longest row in it; no token limit if None), since that is what the memory of a forward pass
    grows with: every layer's hidden states and the (rows, longest, vocabulary) logits. A new batch
    starts whenever the next row would break either limit. A row that alone exceeds the token budget
    gets a batch of its own: one row is the least a forward pass can take (``extract.max_length`` is
    what refuses statements too long to run).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_batch_tokens is not None and max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1 or None, got {max_batch_tokens}")
    rows = np.asarray(order, dtype=np.int64)
    sizes = np.asarray(lengths, dtype=np.int64)
    batches: list[np.ndarray] = []
    start = longest = 0
    for i, row in enumerate(rows.tolist()):
        longest = max(longest, int(sizes[row]))
        count = i - start + 1
        over_budget = max_batch_tokens is not None and count * longest > max_batch_tokens
        if count > 1 and (count > batch_size or over_budget):
            batches.append(rows[start:i])
            start, longest = i, int(sizes[row])
    if start < len(rows):
        batches.append(rows[start:])
    return batches


def length_sorted_batches(lengths: Sequence[int] | np.ndarray, batch_size: int, *,
                          max_batch_tokens: int | None = None) -> list[np.ndarray]:
    """Row indices sorted by token length (stable: ties keep dataset order), cut into batches.

    Each batch holds at most ``batch_size`` statements and at most ``max_batch_tokens`` padded
    tokens (statements x the longest statement in the batch; no token limit if None), so the memory
    of a forward pass is bounded by the budget, whatever the number or length of the statements.
    A statement that alone exceeds the budget gets a batch of its own (see :func:`budget_batches`).
    """
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    return budget_batches(order, lengths, batch_size, max_batch_tokens)


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
    ``max_batch_tokens`` padded tokens (see :func:`budget_batches`).
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


def token_lengths(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(list(texts))["input_ids"]]


def check_lengths(lengths: Sequence[int], labels: Sequence[str], *, limit: int) -> None:
    """Refuse statements longer than ``limit`` tokens, naming the first one."""
    for n, label in zip(lengths, labels):
        if n > limit:
            raise DatasetError(f"{label}: {n} tokens, more than the limit of {limit} "
                               "(the model's context, or extract.max_length); shorten the statement")


def content_counts(tokenizer: Any, texts: Sequence[str], drop: str) -> list[int]:
    """Content tokens per text under the pooling policy (what :func:`content_positions` pools over)."""
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    if drop == "special":
        return [len(s) - sum(s) for s in enc["special_tokens_mask"]]
    if drop == "first":
        return [len(ids) - 1 for ids in enc["input_ids"]]
    if drop == SINK_EXCLUDED:
        return [sum(1 for i, m in enumerate(s) if i > 0 and not m) for s in enc["special_tokens_mask"]]
    raise ValueError(f"unknown pooling policy {drop!r}; expected 'special', 'first' or 'sink_excluded'")


def statement_tokens(tokenizer: Any, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every statement's token ids, flat: (ids (total,) int32, offsets (N+1,) int64, special (total,) bool).

    Statement i holds ``ids[offsets[i]:offsets[i+1]]``, as the model reads it (special tokens the
    tokenizer adds included, flagged in ``special``).
    """
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    lengths = [len(ids) for ids in enc["input_ids"]]
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    ids = np.array([i for row in enc["input_ids"] for i in row], dtype=np.int32)
    special = np.array([bool(m) for row in enc["special_tokens_mask"] for m in row], dtype=bool)
    return ids, offsets, special


def check_content(counts: Sequence[int], lengths: Sequence[int], labels: Sequence[str], *, drop: str) -> None:
    """Refuse statements with nothing to pool or nothing to score, naming the first one (before any forward pass).

    ``counts`` are content tokens (:func:`content_counts`), ``lengths`` all tokens (:func:`token_lengths`):
    the NLL scores tokens 2..T, so a one-token statement has no likelihood.
    """
    for n, length, label in zip(counts, lengths, labels):
        if length < 2:
            raise DatasetError(
                f"{label}: {length} token(s); the NLL of a statement scores every token after the first, so it "
                "needs at least 2 tokens; lengthen the statement"
            )
        if n < 1:
            raise DatasetError(
                f"{label}: no content tokens under pooling.drop={drop!r} (the statement is a single token, or "
                "only special tokens such as a literal end-of-text marker); lengthen or rewrite it"
                + (", or use pooling.drop: special" if drop == "first" else "")
            )


def literal_special_tokens(tokenizer: Any, texts: Sequence[str]) -> list[tuple[int, str]]:
    """(row, token) for texts whose own characters spell a special token (e.g. a literal ``<|endoftext|>``).

    Tokenizers turn such text into the special token's id, which the special-tokens mask does not
    flag (it marks only tokens the tokenizer adds), so the token is pooled and scored as content.
    """
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    found = []
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    for row, (ids, mask) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"])):
        literal = [i for i, m in zip(ids, mask) if i in special and not m]
        if literal:
            found.append((row, tokenizer.convert_ids_to_tokens(literal[0])))
    return found


def context_length(model: Any) -> int:
    config = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None) or getattr(getattr(config, "text_config", None), name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 1 << 30
