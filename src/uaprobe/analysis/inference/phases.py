"""Phase means of a layer curve of r (the follow-up paper's summary).

The original study's second paper ("Layer-wise Embedding-Output Dynamics Across LLM Families:
Evidence for Phase-Structured Decision Commitment", D'Elia 2026, section "Phase Partitions")
averages the pair-level curve r(l) over a fixed partition of the layers it sampled: for its
32-layer models early = layers 0-8, mid = 12-20, late = 24-32 on the every-4th-layer grid
(0, 4, ..., 32: three layers each), for 18-layer Gemma-2B 0-6, 8-12, 14-18 on an every-2nd grid.
Both are the sampled layers cut into consecutive thirds, the extra point of an uneven count going to
early. :func:`partition` applies that rule to the seeds' view of any depth (``0, 4, 8, ...`` plus
the last layer; all layers where that view has fewer than 3 points), which for 32 layers is the
paper's partition exactly.

The paper calls a late-layer inversion "significant" when the late phase's interval excludes zero
on the negative side. No such verdict is drawn here: the interval of each phase mean is a percentile
bootstrap that resamples the pairs independently (each resample gives every layer's r; their mean
over the phase's layers is one draw), which ignores that the pairs are grouped in categories, and a
bootstrap over the few categories has no coverage either
(:mod:`uaprobe.analysis.inference.clusterboot`). ``sign_change`` says whether the early mean is positive and the
late mean negative (the paper's "phase structure" in its simplest reading).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import curves, stats
from uaprobe.schema import missing
from uaprobe.schema.pairs import Phase, Phases

PHASES: tuple[str, ...] = ("early", "mid", "late")


def partition(n_layers: int) -> dict[str, tuple[int, ...]]:
    """Early / mid / late layers of a model with ``n_layers`` blocks (layer 0 = embeddings).

    The seeds' view (:func:`uaprobe.analysis.inference.curves.seed_layers`) cut into consecutive thirds;
    ``len // 3`` points each for late and mid, the rest early. With fewer than 3 points in that
    view, all layers ``0..n_layers``; with fewer than 3 layers, no partition (empty phases).
    """
    view = curves.seed_layers(n_layers)
    if len(view) < 3:
        view = list(range(n_layers + 1))
    if len(view) < 3:
        return {name: () for name in PHASES}
    third = len(view) // 3
    early = len(view) - 2 * third
    return {"early": tuple(view[:early]), "mid": tuple(view[early:early + third]), "late": tuple(view[early + third:])}


def phase_mean(values: np.ndarray, layers: Sequence[int]) -> np.ndarray:
    """The mean over a phase's ``layers`` of ``values`` (V, ...) indexed by layer on axis 0: shape ``values.shape[1:]``,
    NaN for a phase without layers (and wherever a layer's value is undefined). The one phase mean."""
    values = np.asarray(values, dtype=float)
    idx = list(layers)
    return values[idx].mean(axis=0) if idx else np.full(values.shape[1:], np.nan)


def phase_means(r: np.ndarray, part: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """:func:`phase_mean` of ``r`` (indexed by layer) for each phase."""
    return {name: float(phase_mean(r, layers)) for name, layers in part.items()}


def phase_results(*, r: np.ndarray, boot_r: np.ndarray, perm_r: np.ndarray, mode: str,
                  partition: Mapping[str, Sequence[int]], level: float) -> Phases:
    """Phase means of one curve with intervals (pairs resampled independently), permutation p-values and the
    sign-change verdict.

    Args:
        r: (V,) observed r per layer.
        boot_r: (V, B) r of each bootstrap resample of the pairs per layer (NaN where undefined).
        perm_r: (V, P) r of each permutation of the preferences per layer.
        mode: ``exact`` or ``random`` (how ``perm_r``'s permutations were drawn).
        partition: phase -> layers.
        level: interval level.
    """
    r = np.asarray(r, dtype=float)
    out: dict[str, Phase] = {}
    means: dict[str, float] = {}
    for name in PHASES:
        layers = list(partition.get(name, ()))
        if not layers:
            why = "the model has too few layers for three phases"
            out[name] = Phase(layers=[], mean_r=missing.value(np.nan, why), bootstrap_ci_low=missing.value(np.nan, why),
                              bootstrap_ci_high=missing.value(np.nan, why), bootstrap_valid=0,
                              permutation_p=missing.value(np.nan, why))
            means[name] = np.nan
            continue
        mean = float(phase_mean(r, layers))
        undefined = "r is undefined at a layer of the phase" if not np.isfinite(mean) else ""
        draws = phase_mean(boot_r, layers)  # NaN where a layer's resample had no variance
        lo, hi, valid = stats.percentile_interval(draws[None, :], level=level)
        lo, hi, valid = float(lo[0]), float(hi[0]), int(valid[0])
        if undefined:
            lo = hi = np.nan
        p = float(stats.tail_p(np.array([mean]), phase_mean(perm_r, layers)[None, :], mode=mode)[0])
        p_why = undefined or ("every permuted phase mean is undefined" if not np.isfinite(p) else "")
        ci_why = undefined or ("no bootstrap resample had variance at every layer of the phase" if valid == 0 else "")
        out[name] = Phase(layers=layers, mean_r=missing.value(mean, undefined),
                          bootstrap_ci_low=missing.value(lo, ci_why), bootstrap_ci_high=missing.value(hi, ci_why),
                          bootstrap_valid=valid if not undefined else 0, permutation_p=missing.value(p, p_why))
        means[name] = mean
    sc_defined = bool(np.isfinite(means["early"]) and np.isfinite(means["late"]))
    return Phases(**out, sign_change=missing.flag(sc_defined and means["early"] > 0 > means["late"],
                                                  defined=sc_defined, reason="an early or late phase mean is undefined"))


__all__: Sequence[str] = ("PHASES", "partition", "phase_mean", "phase_means", "phase_results")
