"""The attention sink: how much position 0 dominates a statement's hidden states, per layer.

Every causal language model turns the token at position 0 (the BOS where the tokenizer adds one,
else the statement's first word) into an attention sink: from the middle layers on its hidden state
carries massive activations, concentrated in a few dimensions, and a mean over positions that
includes it is mostly that one token's direction. For one right-padded batch this module measures,
per statement and layer, from the hidden state ``h_0`` at position 0 and the states ``h_t`` of the
other attended positions ``t > 0``:

- ``norm``: ``||h_0||``;
- ``norm_ratio``: ``||h_0|| / median_t ||h_t||`` (median over ``t > 0``; the mean of the two middle
  values for an even count);
- ``mean_share``: position 0's share of the mean over all attended positions ``m``: the projection
  ``<h_0 / n, m> / ||m||^2`` (the shares of all positions sum to 1);
- ``top_dim``: the dimension of largest ``|h_0[d]|``, and ``top_dim_share``: ``h_0[d]^2 / ||h_0||^2``
  at that dimension.

All in float64 on the CPU from the float32 states, so the values do not depend on the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from uaprobe.extraction.store import SINK_STATISTICS


def sink_statistics(hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor) -> dict[str, np.ndarray]:
    """Position-0 statistics of every statement and layer: name -> (B, L+1) array.

    Args:
        hidden_states: L+1 tensors (B, T, D), every layer's states of a right-padded batch.
        attention_mask: (B, T), 1 for real tokens; every row has at least 2 (position 0 and one more).
    """
    mask = attention_mask.detach().cpu().numpy().astype(bool)
    if (mask.sum(axis=1) < 2).any() or not mask[:, 0].all():
        raise ValueError("every statement needs position 0 and at least one more attended position")
    others = mask.copy()
    others[:, 0] = False
    count = mask.sum(axis=1).astype(np.float64)
    out: dict[str, list[np.ndarray]] = {name: [] for name in SINK_STATISTICS}
    rows = np.arange(mask.shape[0])
    for h in hidden_states:
        x = h.detach().to("cpu", torch.float32).numpy().astype(np.float64)  # (B, T, D)
        norms = np.linalg.norm(x, axis=-1)  # (B, T)
        h0 = x[:, 0]
        n0 = norms[:, 0]
        median_other = np.nanmedian(np.where(others, norms, np.nan), axis=1)
        m = (x * mask[..., None]).sum(axis=1) / count[:, None]
        top = np.abs(h0).argmax(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["norm"].append(n0)
            out["norm_ratio"].append(n0 / median_other)
            out["mean_share"].append((h0 * m).sum(axis=-1) / (count * (m * m).sum(axis=-1)))
            out["top_dim"].append(top)
            out["top_dim_share"].append(h0[rows, top] ** 2 / (n0 * n0))
    stats = {name: np.stack(v, axis=1) for name, v in out.items()}
    stats["top_dim"] = stats["top_dim"].astype(np.int32)
    return stats
