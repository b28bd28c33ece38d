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


class ClusterInterval(Record):
    """A two-stage cluster bootstrap interval of r, per layer."""

    low: PerLayer[Stat] = Field(description="percentile CI (categories, then pairs within them, resampled), low end")
    high: PerLayer[Stat] = Field(description="high end")


class PhaseInterval(Record):
    """The cluster bootstrap interval of one phase mean of r."""

    low: Stat = Field(description="percentile CI of the phase mean, low end")
    high: Stat = Field(description="high end")


class ClusterBootstrap(Record):
    """Intervals of the pair-level r that respect the categories the pairs are grouped in."""

    scheme: str = Field(description="a sentence stating the two-stage bootstrap")
    resamples: int = Field(description="the resamples (`analysis.bootstrap_resamples`)")
    level: float = Field(description="the confidence level (`analysis.ci_level`)")
    distinct_categories_min: int = Field(description="fewest distinct categories in any resample")
    degenerate: int = Field(description="resamples holding 3 or fewer distinct categories")
    poolings: dict[str, dict[str, ClusterInterval]] = Field(
        description="per pooling and statistic (`score` in pairs.json; the metric in option_b.json)")
    phases: dict[str, dict[str, dict[str, PhaseInterval]]] | None = Field(
        description="option_b.json: per pooling, metric and phase (`early`, `mid`, `late`), the interval of the phase "
                    "mean of r; `null` in pairs.json (no phases)")


class Pairs(ResultsHeader):
    """``pairs.json``: the within-category centroid score of every pair (this project's statistic).

    Per pair i of category c, at each layer: ``score = cos(A_i, centroid_A(c)) - cos(B_i,
    centroid_B(c))``, where ``centroid_S(c)`` is the mean of the unit-normalised side-S statements of
    category c (the pair's own statement included); r is the Pearson correlation of the score with
    the preference across all pairs. It is not the original study's pair-level analysis, whose
    centroids are global (``option_b.json``).
    """

    policy: str = Field(description=POLICY)
    pair: list[int] = Field(description="[n_pairs] pair ids")
    category: list[str] = Field(description="[n_pairs] category names")
    preference: list[Stat] = Field(description="[n_pairs] preferences")
    centroid: str = Field(description="a sentence stating the centroid definition")
    permutation_mode: str = Field(description="`exact` or `random`")
    poolings: dict[str, PairsPooling] = Field(description="per pooling")
    cluster_bootstrap: ClusterBootstrap = Field(description="r's intervals from a two-stage cluster bootstrap")


class Phase(Record):
    """One phase of the layers (early, mid, late)."""

    layers: list[int] = Field(description="the phase's layers")
    mean_r: Stat = Field(description="mean of `pearson_r` over the phase's layers")
    bootstrap_ci_low: Stat = Field(description="percentile CI of that mean (resampling pairs), low end")
    bootstrap_ci_high: Stat = Field(description="high end")
    bootstrap_valid: int = Field(description="resamples behind the interval")
    permutation_p: Stat = Field(description="permutation p-value of the mean")


class Phases(Record):
    """Phase means of a metric's r (``uaprobe.analysis.inference.phases``).

    The phases are the seeds' view of the layers (0, 4, 8, ..., plus L) cut into consecutive thirds,
    the extra points going to early: for 32 layers exactly the follow-up paper's early 0-8, mid
    12-20, late 24-32; with fewer than 3 points in that view, all layers. Each bootstrap resample of
    the pairs gives every layer's r; their mean over the phase is one draw (the same for the
    permutations).
    """

    early: Phase = Field(description="the first third of the seeds' layers")
    mid: Phase = Field(description="the middle third")
    late: Phase = Field(description="the last third")
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
    """``option_b.json``: the original study's pair-level analysis (Option B) and its phase means.

    The five per-pair metrics of the original study's ``Option_B_Pair_Level.ipynb`` (code:
    ``uaprobe.analysis.pairs.option_b``), per layer, from the pooled states ``A_i``, ``B_i`` with the
    **global** centroids ``c_A``, ``c_B`` (the mean of all A, of all B states; the pair's own
    statements included) and the notebook's ``cos(x, y) = x.y / (|x||y| + 1e-10)``:

    | metric | per pair i |
    |---|---|
    | `centroid_asymmetry` | `cos(A_i, c_A) - cos(B_i, c_B)` (the follow-up paper's metric) |
    | `cross_centroid` | `cos(A_i, c_B) - cos(B_i, c_A)` |
    | `within_pair_sim` | `cos(A_i, B_i)` |
    | `knn_density_asymmetry` | `z(d_A)_i - z(d_B)_i`, `d_X_i = 1 / (mean cosine distance from X_i to its k nearest X statements + 1e-10)`, k = min(10, n - 1), the statement itself one of the k; `z` standardises over pairs with the population std + 1e-10 |
    | `margin_asymmetry` | `norm(A_i - m) - norm(B_i - m)` (Euclidean), `m = (c_A + c_B) / 2` |
    | `*_loo` of the centroid metrics | the same with pair i left out of `c_A` and `c_B` |

    States are the extraction's (its ``pooling_drop``); the preference is ``analysis.preference``.
    """

    policy: str = Field(description=POLICY)
    preference_definition: str = Field(description="a sentence defining the preference")
    length_difference: str = Field(description="a sentence defining the length covariate")
    poolings: dict[str, OptionBPooling] = Field(description="per pooling (layers 0..L, no prenorm block)")
    cluster_bootstrap: ClusterBootstrap = Field(
        description="r's intervals from a two-stage cluster bootstrap, per pooling and metric of the original")


class ControlCategory(Record):
    """The Option B analysis on one category of the control pairs."""

    n_pairs: int = Field(description="the category's pairs")
    poolings: dict[str, OptionBPooling] = Field(description="per pooling, as in `option_b.json`")


class NeutralControl(ResultsHeader):
    """``neutral_control.json``: the Option B analysis on each category of ``data/neutral_control.json``.

    The control pairs are extracted by the same model load into ``data/embeddings/<id>.control.h5``;
    each category is analysed on its own: centroids, neighbours and correlations over that
    category's pairs only.
    """

    categories: dict[str, ControlCategory] = Field(description="per control category")
    preference: dict[str, list[Stat]] = Field(description="per control category, its pairs' preferences")
