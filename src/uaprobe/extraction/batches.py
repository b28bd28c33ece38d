"""Cutting statements into batches bounded by a row count and a padded-token budget.

The memory of a forward pass grows with the padded tokens of its batch (rows x the longest row), so
:func:`budget_batches` caps those as well as the rows; :func:`length_sorted_batches` sorts the
statements by length first, so each batch pads little.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
