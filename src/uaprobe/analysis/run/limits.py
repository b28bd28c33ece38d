"""What an analysis of one extraction file can be asked to do: checked at the start of the stage,
before anything is allocated.

Two kinds of value in ``params.yaml`` are valid on their own and impossible for a given file or
machine, and each is refused here with its key, the allowed range and the reason:

- ``analysis.abtt_k``: ``abtt`` removes the top ``k`` principal directions of a layer's centred states
  (N statements x hidden size D), whose rank is at most ``min(N - 1, D)``. Removing as many
  directions as the rank leaves rounding noise (|residual| / |states| about 1e-14) whose
  correlations mean nothing, so ``k`` must stay below that bound. The representation sweep runs
  ``abtt`` whatever ``analysis.representation`` is, so the bound holds always for the main file, and
  for the control file where it is transformed.
- The resampling counts (``analysis.bootstrap_resamples``, ``analysis.permutations``,
  ``analysis.bins.partitions``, ``analysis.robustness.null_partitions``,
  ``analysis.robustness.anisotropy_bootstrap``): each sizes arrays of one row per draw. Their bytes
  are estimated from the file's sizes (pairs, layers) and compared with the memory
  available; a run that cannot fit is refused before it starts, naming the key whose draws take the
  most and the largest value that fits.

The estimates (:func:`memory_needs`) count the largest arrays each count sizes at once, as the
analyses allocate them (bootstrap multiplicities and indices, (n, B) and (rows, B); the permutation
operand of the pair models, (n, m B); the partitions' labels and uniformities), with a margin:
they are upper bounds of what the analyses hold (tested against the peak traced while they run), not
of the few hundred MiB every run needs whatever the counts.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from uaprobe.config import AnalysisParams
from uaprobe.errors import ConfigError
from uaprobe.extraction.store import POOLINGS as STORED_POOLINGS
from uaprobe.extraction.store import Embeddings

FLOAT = 8
"""Bytes of one float64 or int64 element: every resampling array's element."""

POOLINGS = len(STORED_POOLINGS)
"""The poolings (mean, last, first token) every per-layer statistic is computed for."""

ROWS_PER_LAYER = 8 * POOLINGS
"""Rows of the (rows, B) bootstrap correlations per layer: every pooling under every view and form."""

BASE_BYTES = 512 * 2**20
"""What a run holds whatever its counts (the states, their transforms, the libraries): a margin."""


@dataclass(frozen=True)
class Sizes:
    """The sizes of one extraction file that the analyses' arrays scale with."""

    statements: int
    """N: statements of both framings."""
    layers: int
    """L + 1: the token embeddings and every block."""
    hidden: int
    """D: the hidden size."""
    categories: int
    """C: the categories (the pair models' fixed effects)."""

    @property
    def pairs(self) -> int:
        return self.statements // 2


def sizes_of(emb: Embeddings) -> Sizes:
    """The :class:`Sizes` of an extraction file read by :func:`uaprobe.extraction.store.read_embeddings`."""
    return Sizes(statements=len(emb.text), layers=emb.n_layers + 1, hidden=int(emb.pooled["mean"].shape[-1]),
                 categories=int(np.unique(np.asarray(emb.category)).size))


def abtt_bound(sizes: Sizes) -> int:
    """The largest rank the centred states of one layer can have: ``min(N - 1, D)``."""
    return max(0, min(sizes.statements - 1, sizes.hidden))


def check_abtt(params: AnalysisParams, sizes: Sizes, *, source: str) -> None:
    """Refuse an ``analysis.abtt_k`` at or above the rank bound of the states of ``source``."""
    bound = abtt_bound(sizes)
    if params.abtt_k < bound:
        return
    allowed = f"an integer from 1 to {bound - 1}" if bound > 1 else "nothing: the states have no direction to spare"
    raise ConfigError(
        f"analysis.abtt_k: got {params.abtt_k}, expected {allowed} for {source}. `abtt` removes the top principal "
        f"directions of each layer's centred states ({sizes.statements} statements x hidden size {sizes.hidden}), "
        f"whose rank is at most {bound}: removing {params.abtt_k} would leave only rounding noise. Lower it "
        f"(`dvc exp run -S analysis.abtt_k=5`)")


def memory_needs(params: AnalysisParams, sizes: Sizes) -> dict[str, int]:
    """Estimated bytes of the arrays each resampling count sizes (an upper bound), by its params key."""
    n, layers = sizes.pairs, sizes.layers
    rob = params.robustness
    return {
        # multiplicities and indices (B, n) of the pair-level and category-level draws (up to five at
        # once across the threads), and the bootstrap correlations (rows, B); measured with 230 pairs and
        # 31 layers at 150,000 resamples: 0.97 of 7 n + rows, hence the margin
        "analysis.bootstrap_resamples": FLOAT * params.bootstrap_resamples * (8 * n + ROWS_PER_LAYER * layers),
        # the pair models' orders (B, n) and, at once, two permuted operands (n, m B): the length-only one, m =
        # C + 2 (the preference's residual, the C - 1 centred category indicators, both lengths), and an
        # incremental one with the S lexical seeds' columns besides; a row block's projections; measured with
        # 96 pairs, 6 categories and one seed at 20,000 permutations: 0.84 of (2 C + S + 6) n + 256; the
        # max-T step-down, the mixed models and the length-matched families add about 5 n (0.93 of the sum)
        "analysis.permutations": FLOAT * params.permutations
        * ((2 * sizes.categories + rob.lexical_seeds + 12) * n + 4 * 64),
        # the labels of every partition of every bin count and both schemes, with their group sums (per pair),
        # and the per-bin uniformities of every view (rows x bins)
        "analysis.bins.partitions": FLOAT * params.bins.partitions * len(params.bins.k)
        * (14 * n + max(params.bins.k) * ROWS_PER_LAYER),
        "analysis.robustness.null_partitions": FLOAT * rob.null_partitions * 2 * (n + POOLINGS * layers),
        "analysis.robustness.anisotropy_bootstrap": FLOAT * rob.anisotropy_bootstrap * 4 * POOLINGS * layers,
    }


def memory_total(params: AnalysisParams, sizes: Sizes) -> int:
    """Estimated bytes of one file's whole analysis: every count's arrays and what every run needs."""
    return BASE_BYTES + sum(memory_needs(params, sizes).values())


def at_once(totals: Sequence[int], *, available: int | None, workers: int) -> int:
    """How many of the analyses of ``totals`` bytes each (every one fits alone) may run at once, at most
    ``workers``: the most whose largest ``totals`` fit in ``available`` together (None: unknown, ``workers``)."""
    if available is None:
        return max(1, min(workers, len(totals)))
    largest = sorted(totals, reverse=True)
    k = 1
    while k < min(workers, len(largest)) and sum(largest[:k + 1]) <= available:
        k += 1
    return k


def _value(params: AnalysisParams, key: str) -> int:
    obj: object = params
    for part in key.split(".")[1:]:
        obj = getattr(obj, part)
    return int(obj)  # type: ignore[call-overload]


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check_memory(params: AnalysisParams, sizes: Sizes, *, available: int | None, source: str) -> None:
    """Refuse counts whose arrays cannot fit in ``available`` bytes (None: unknown, nothing is refused),
    naming the key that takes the most and the largest value of it that fits."""
    if available is None:
        return
    needs = memory_needs(params, sizes)
    total = memory_total(params, sizes)
    if total <= available:
        return
    key = max(needs, key=lambda k: needs[k])
    value = _value(params, key)
    room = available - (total - needs[key])
    fit = int(value * room / needs[key]) if room > 0 and needs[key] else 0
    advice = (f"at most about {fit:,} fit: lower it (`dvc exp run -S {key}={fit}`)" if fit >= 1 else
              "the other counts already fill it: lower them too")
    raise ConfigError(
        f"{key}: got {value:,}, which needs about {_gib(needs[key])} of memory for {source} ({sizes.pairs} pairs, "
        f"{sizes.layers} layers; {_gib(total)} with everything else), and this machine has {_gib(available)} "
        f"available; {advice}")


def available_memory(meminfo: Path = Path("/proc/meminfo"), cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes this process may still allocate: the least of the system's available memory, the room left
    under its cgroup's limit (a container) and its address-space limit; None where none is known."""
    limits: list[int] = []
    try:
        for line in meminfo.read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        cap, used = (cgroup / "memory.max").read_text().strip(), (cgroup / "memory.current").read_text().strip()
        if cap != "max":
            limits.append(int(cap) - int(used))
    except (OSError, ValueError):
        pass
    room = _address_space_room()
    if room is not None:
        limits.append(room)
    return min(limits) if limits else None


def _address_space_room() -> int | None:
    """Bytes left under the process's address-space limit (``ulimit -v``); None where there is none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pages = 0
    return soft - pages * os.sysconf("SC_PAGE_SIZE")


def check(params: AnalysisParams, sizes: Sizes, *, available: int | None, source: str,
          transformed: bool = True) -> None:
    """Every check of this module for one file: ``abtt_k`` where its states are transformed (the main file
    always: the representation sweep), then the memory."""
    if transformed:
        check_abtt(params, sizes, source=source)
    check_memory(params, sizes, available=available, source=source)
