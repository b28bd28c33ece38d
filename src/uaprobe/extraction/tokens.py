"""Tokenization: the right-padded batch a forward pass reads, and the checks on token counts before any pass.

:func:`prepare_tokenizer` sets right padding; :func:`encode` tokenizes and pads a batch with its
special-tokens mask. Before the model runs, :func:`check_lengths` refuses statements longer than the
limit and :func:`check_content` those with nothing to pool (:func:`content_counts`, per pooling
policy) or nothing to score; :func:`literal_special_tokens` finds texts that spell a special token.
:func:`statement_tokens` gives every statement's token ids, as stored beside the pooled states.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uaprobe.errors import DatasetError
from uaprobe.extraction.policy import check_drop, pooled_tokens

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Encoded:
    """A right-padded batch, each (B, T) of dtype long: token ids, attention mask (1 = a token of the text) and
    special-tokens mask (1 = a special token the tokenizer added, or padding)."""

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


def token_lengths(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    return [len(ids) for ids in tokenizer(list(texts))["input_ids"]]


def check_lengths(lengths: Sequence[int], labels: Sequence[str], *, limit: int) -> None:
    """Refuse statements longer than ``limit`` tokens, naming the first one."""
    for n, label in zip(lengths, labels):
        if n > limit:
            raise DatasetError(f"{label}: {n} tokens, more than the limit of {limit} "
                               "(the model's context, or extract.max_length); shorten the statement")


def content_counts(tokenizer: Any, texts: Sequence[str], drop: str) -> list[int]:
    """Content tokens per text under the pooling policy (what
    :func:`uaprobe.extraction.pooling.content_positions` pools over)."""
    check_drop(drop)
    enc = tokenizer(list(texts), return_special_tokens_mask=True)
    return [int(pooled_tokens(np.asarray(s, dtype=bool), np.arange(len(s)), drop).sum())
            for s in enc["special_tokens_mask"]]


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
