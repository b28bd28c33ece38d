"""The pooling policy's rule, written once: which tokens of a statement a pooled state covers.

``special`` pools every token but the special tokens actually present (BOS, EOS); ``first`` reproduces the
seeds' ``hidden[0, 1:]``: position 0 is dropped from the mean whatever it is, and first-token pooling takes
it; ``sink_excluded`` (:data:`SINK_EXCLUDED`) drops the special tokens and position 0 (the attention sink,
whether it is a BOS or the first word). The extraction's batched pooling (:mod:`uaprobe.extraction.pooling`),
its content counts (:mod:`uaprobe.extraction.tokens`) and the analyses' flat token tables all ask
:func:`pooled_tokens` and :func:`takes_position_zero`: they work on numpy arrays and torch tensors alike.
"""

from __future__ import annotations

from typing import TypeVar

SINK_EXCLUDED = "sink_excluded"
"""The second pooling policy every extraction stores beside the configured one."""

DROPS: tuple[str, ...] = ("special", "first", SINK_EXCLUDED)
"""Every pooling policy (``pooling.drop``)."""

Mask = TypeVar("Mask")


def check_drop(drop: str) -> str:
    """``drop`` if it names a policy of :data:`DROPS`, else a ValueError naming them."""
    if drop not in DROPS:
        expected = ", ".join(map(repr, DROPS[:-1])) + f" or {DROPS[-1]!r}"
        raise ValueError(f"unknown pooling policy {drop!r}; expected {expected}")
    return drop


def pooled_tokens(special: Mask, position: Mask, drop: str) -> Mask:
    """Which tokens the policy ``drop`` pools (bool, the shape of ``special``), from each token's ``special``
    flag (bool) and its ``position`` within its statement (0 first)."""
    if check_drop(drop) == "special":
        return ~special  # type: ignore[operator]
    if drop == "first":
        return position > 0  # type: ignore[operator,return-value]
    return ~special & (position > 0)  # type: ignore[operator]


def takes_position_zero(drop: str) -> bool:
    """Whether first- and last-token pooling take position 0 and the statement's last token whatever they are
    (the seeds' convention, ``first``), rather than the first and last pooled token."""
    return check_drop(drop) == "first"


__all__ = ["DROPS", "SINK_EXCLUDED", "check_drop", "pooled_tokens", "takes_position_zero"]
