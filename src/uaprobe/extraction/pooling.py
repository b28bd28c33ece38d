"""Which token positions a pooled state covers, masked pooling over them, and the per-sequence NLL.

All of it runs on the device, on the hidden states and logits of one forward pass over B
right-padded sequences of length T:

- pooled states over *content* positions: mean, first and last content token (:func:`pool`);
- the NLL of each sequence from the logits in float32: sum, mean and number of scored tokens
  (:func:`sequence_nll`).

Which positions are content is the pooling policy (:func:`content_positions`, by the rule of
:mod:`uaprobe.extraction.policy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from uaprobe.extraction.policy import pooled_tokens, takes_position_zero


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
    content = attended & pooled_tokens(special_tokens_mask.bool(), positions, drop)
    if takes_position_zero(drop):
        first = torch.zeros(attended.shape[0], dtype=torch.long, device=attended.device)
        last = attended.sum(dim=1) - 1
    else:
        big = torch.full_like(positions, attended.shape[1])
        first = torch.where(content, positions, big).min(dim=1).values
        last = torch.where(content, positions, torch.full_like(positions, -1)).max(dim=1).values
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
