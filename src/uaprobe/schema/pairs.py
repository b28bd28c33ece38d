"""The pair-level files of one model: ``pairs.json`` (the within-category centroid score),
``option_b.json`` (the original study's pair-level analysis) and ``neutral_control.json``."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import Flag, PerLayer, Record, Stat
from uaprobe.schema.categories import POLICY
from uaprobe.schema.common import Peak, ResultsHeader


class PairsFinal(Record):
    """r at the last layer, with its interval."""

    layer: int = Field(description="L")
    r: Stat = Field(description="r(score, preference) over the pairs at L")
    p: Stat = Field(description="its t-test p-value")
    bootstrap_ci_low: Stat = Field(description="percentile CI (resampling pairs), low end")
    bootstrap_ci_high: Stat = Field(description="high end")


class PairsPrenorm(Record):
    """The pre-final-norm block, as scalars and a flat score."""

    score: list[Stat] = Field(description="[n_pairs] the score")
    pearson_r: Stat = Field(description="r(score, preference)")
    pearson_p: Stat = Field(description="its t-test p-value")
    spearman_rho: Stat = Field(description="Spearman rank correlation")
    spearman_p: Stat = Field(description="its p-value")
    bootstrap_ci_low: Stat = Field(description="percentile CI (resampling pairs), low end")
    bootstrap_ci_high: Stat = Field(description="high end")
    bootstrap_valid: int = Field(description="resamples behind the interval")
    fisher_ci_low: Stat = Field(description="Fisher-z CI, low end")
    fisher_ci_high: Stat = Field(description="high end")
    permutation_p: Stat = Field(description="permutation p-value")


class PairsPooling(Record):
    """The within-category centroid score of one pooling, lists over the layers."""

    score: PerLayer[list[Stat]] = Field(description="[L+1][n_pairs] cos(A_i, centroid_A(c)) - cos(B_i, centroid_B(c))")
    pearson_r: PerLayer[Stat] = Field(description="r(score, preference) over all pairs")
    pearson_p: PerLayer[Stat] = Field(description="its t-test p-value")
    spearman_rho: PerLayer[Stat] = Field(description="Spearman rank correlation")
    spearman_p: PerLayer[Stat] = Field(description="its p-value")
    bootstrap_ci_low: PerLayer[Stat] = Field(description="percentile CI (resampling pairs), low end")
    bootstrap_ci_high: PerLayer[Stat] = Field(description="high end")
    bootstrap_valid: PerLayer[int] = Field(description="resamples behind the interval")
    fisher_ci_low: PerLayer[Stat] = Field(description="Fisher-z CI, low end")
    fisher_ci_high: PerLayer[Stat] = Field(description="high end")
    permutation_p: PerLayer[Stat] = Field(description="permutation p-value")
    holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `pearson_p` across layers")
    holm_reject: PerLayer[Flag] = Field(description="`holm_p` <= alpha")
    bh_p: PerLayer[Stat] = Field(description="BH-adjusted `pearson_p` across layers")
    bh_reject: PerLayer[Flag] = Field(description="`bh_p` <= alpha")
    peak_abs: Peak = Field(description="layer of max |r|")
    final: PairsFinal = Field(description="r at the last layer")
    prenorm: PairsPrenorm = Field(description="the pre-final-norm block")


class Pairs(ResultsHeader):
    """``pairs.json``: the within-category centroid score of every pair (this project's statistic)."""

    policy: str = Field(description=POLICY)
    pair: list[int] = Field(description="[n_pairs] pair ids")
    category: list[str] = Field(description="[n_pairs] category names")
    preference: list[Stat] = Field(description="[n_pairs] preferences")
    centroid: str = Field(description="a sentence stating the centroid definition")
    permutation_mode: str = Field(description="`exact` or `random`")
    poolings: dict[str, PairsPooling] = Field(description="per pooling")


class Phase(Record):
    """One phase of the layers (early, mid, late)."""

    layers: list[int] = Field(description="the phase's layers")
    mean_r: Stat = Field(description="mean of `pearson_r` over the phase's layers")
    bootstrap_ci_low: Stat = Field(description="percentile CI of that mean (resampling pairs), low end")
    bootstrap_ci_high: Stat = Field(description="high end")
    bootstrap_valid: int = Field(description="resamples behind the interval")
    permutation_p: Stat = Field(description="permutation p-value of the mean")


class Phases(Record):
    """Phase means of a metric's r (``uaprobe.analysis.phases``)."""

    early: Phase = Field(description="the first third of the seeds' layers")
    mid: Phase = Field(description="the middle third")
    late: Phase = Field(description="the last third")
    late_inversion: bool = Field(description="the late phase's interval lies below zero")
    sign_change: Flag = Field(description="early mean > 0 > late mean")


class OptionBMetric(Record):
    """One per-pair metric, lists over the layers."""

    definition: str = Field(description="a sentence defining the metric")
    mean: PerLayer[Stat] = Field(description="the metric's mean over the pairs")
    pearson_r: PerLayer[Stat] = Field(description="r(metric, preference) over the pairs")
    pearson_p: PerLayer[Stat] = Field(description="its t-test p-value")
    bootstrap_ci_low: PerLayer[Stat] = Field(description="percentile CI (resampling pairs), low end")
    bootstrap_ci_high: PerLayer[Stat] = Field(description="high end")
    bootstrap_valid: PerLayer[int] = Field(description="resamples behind the interval")
    spearman_rho: PerLayer[Stat] = Field(description="Spearman rank correlation")
    spearman_p: PerLayer[Stat] = Field(description="its p-value")
    fisher_ci_low: PerLayer[Stat] = Field(description="Fisher-z CI, low end")
    fisher_ci_high: PerLayer[Stat] = Field(description="high end")
    permutation_p: PerLayer[Stat] = Field(description="permutation p-value")
    holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `pearson_p` across layers")
    holm_reject: PerLayer[Flag] = Field(description="`holm_p` <= alpha")
    bh_p: PerLayer[Stat] = Field(description="BH-adjusted `pearson_p`")
    bh_reject: PerLayer[Flag] = Field(description="`bh_p` <= alpha")
    permutation_holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `permutation_p`")
    permutation_holm_reject: PerLayer[Flag] = Field(description="`permutation_holm_p` <= alpha")
    permutation_bh_p: PerLayer[Stat] = Field(description="BH-adjusted `permutation_p`")
    permutation_bh_reject: PerLayer[Flag] = Field(description="`permutation_bh_p` <= alpha")
    partial_r: PerLayer[Stat] = Field(description="r with the content-token difference partialled out of both")
    partial_p: PerLayer[Stat] = Field(description="its t-test p-value (n - 3 df)")
    phases: Phases = Field(description="phase means of `pearson_r`")


class PhaseLayers(Record):
    """The layers of each phase."""

    early: list[int] = Field(description="early layers")
    mid: list[int] = Field(description="middle layers")
    late: list[int] = Field(description="late layers")


class OptionBPooling(Record):
    """The five metrics (and their leave-one-out variants) of one pooling."""

    n_pairs: int = Field(description="pairs behind every r")
    k_neighbours: int = Field(description="k of the kNN density")
    permutation_mode: str = Field(description="`exact` or `random`")
    phase_layers: PhaseLayers = Field(description="the layers of each phase")
    metrics: dict[str, OptionBMetric] = Field(
        description="`centroid_asymmetry`, `cross_centroid`, `within_pair_sim`, `knn_density_asymmetry`, "
                    "`margin_asymmetry`, and `*_loo` of the centroid metrics")


class OptionB(ResultsHeader):
    """``option_b.json``: the original study's pair-level analysis (Option B) and its phase means."""

    policy: str = Field(description=POLICY)
    preference_definition: str = Field(description="a sentence defining the preference")
    length_difference: str = Field(description="a sentence defining the length covariate")
    poolings: dict[str, OptionBPooling] = Field(description="per pooling (layers 0..L, no prenorm block)")


class ControlCategory(Record):
    """The Option B analysis on one category of the control pairs."""

    n_pairs: int = Field(description="the category's pairs")
    poolings: dict[str, OptionBPooling] = Field(description="per pooling, as in `option_b.json`")


class NeutralControl(ResultsHeader):
    """``neutral_control.json``: the Option B analysis on each category of ``data/neutral_control.json``."""

    categories: dict[str, ControlCategory] = Field(description="per control category")
    preference: dict[str, list[Stat]] = Field(description="per control category, its pairs' preferences")
