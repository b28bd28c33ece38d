"""``metrics/models/<id>.json``: one model's headline scalars, written by ``analyze`` for
``dvc metrics show/diff``. A ``null`` is a missing value whose reason is in the matching results file."""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field, model_validator

from uaprobe.schema.base import Flag, Index, Label, Record, Stat


class LayerwiseMetrics(Record):
    """``layerwise.json``, one pooling."""

    final_r: Stat = Field(description="r at L")
    final_p: Stat = Field(description="its t-test p")
    final_permutation_p: Stat = Field(description="its permutation p")
    layer0_r: Stat = Field(description="r at layer 0 (the token embeddings, before any context), beside `final_r`")
    layer0_permutation_p: Stat = Field(description="its permutation p")
    prenorm_r: Stat = Field(description="r of the pre-final-norm block")
    peak_positive_r: Stat = Field(description="max r")
    peak_positive_layer: Index = Field(description="its layer")
    peak_negative_r: Stat = Field(description="min r")
    peak_negative_layer: Index = Field(description="its layer")
    n_sign_changes: int = Field(description="sign changes of r")
    n_holm_reject: int = Field(description="layers significant after Holm (t-test)")
    n_bh_reject: int = Field(description="layers significant after BH (t-test)")


class ValidationMetrics(Record):
    """``validation.json``, the `mean` variant's summary row."""

    mean_ua: Stat = Field(description="mean UA over categories")
    std_ua: Stat = Field(description="its std")
    ci_low: Stat = Field(description="bootstrap CI of the mean UA, low end")
    ci_high: Stat = Field(description="high end")
    cohens_d: Stat = Field(description="Cohen's d")
    r: Stat = Field(description="r(UA, mean preference)")
    mean_preference: Stat = Field(description="mean preference over categories")


class BinsMetrics(Record):
    """``bins.json``, one scheme (mean pooling); plus ``final_r_mean_k<k>`` (mean r at L) for every k."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Stat] = Field(init=False)

    @model_validator(mode="after")
    def _only_k_keys(self) -> BinsMetrics:
        for key in self.__pydantic_extra__ or {}:
            if not re.fullmatch(r"final_r_mean_k[0-9]+", key):
                raise ValueError(f"key {key!r} is neither a field nor final_r_mean_k<k>")
        return self

    ci_final_r: Stat = Field(description="r at L of the ci_k partition")
    ci_final_low: Stat = Field(description="its bootstrap CI, low end")
    ci_final_high: Stat = Field(description="high end")
    n_layers_ci_excludes_zero: int = Field(description="layers whose CI excludes 0")


class PairsMetrics(Record):
    """``pairs.json``, one pooling."""

    final_r: Stat = Field(description="r at L")
    final_ci_low: Stat = Field(description="its bootstrap CI, low end")
    final_ci_high: Stat = Field(description="high end")
    final_cluster_ci_low: Stat = Field(description="its two-stage cluster bootstrap CI (categories, then pairs), low end")
    final_cluster_ci_high: Stat = Field(description="high end")
    peak_abs_r: Stat = Field(description="r of max |r|")
    peak_abs_layer: Index = Field(description="its layer")


class AnisotropyMetrics(Record):
    """``anisotropy.json``."""

    l_star: Index = Field(description="L*")
    l_star_depth_pct: Stat = Field(description="its depth, % of L")
    is_bell_curve: Flag = Field(description="the seed's bell-curve verdict")
    is_bell_curve_significant: Flag = Field(description="both slopes significant")
    n_l_star_ties: int = Field(description="layers that tie with L*")
    l_star_all_tokens: Index = Field(description="L* with every token")
    l_star_sink_excluded: Index = Field(description="L* without position 0")
    distance_to_last_inversion: Index = Field(description="L* - the last positive-to-negative change of r")


class PreferenceMetrics(Record):
    """``preference.json`` (mean pooling)."""

    r_categories_mean_vs_sum: Stat = Field(description="agreement of the two preferences over categories")
    final_r_mean: Stat = Field(description="r at L with the mean NLL")
    final_r_sum: Stat = Field(description="r at L with the summed NLL")


class SinkExcludedMetrics(Record):
    """The sink-excluded policy's headline."""

    final_r: Stat = Field(description="r at L")
    n_sign_changes: int = Field(description="sign changes of r")
    n_layers_permutation_holm: int = Field(description="layers significant after Holm (permutation p)")


class SinkMetrics(Record):
    """The attention sink."""

    max_norm_ratio: Stat = Field(description="max over layers of the median norm ratio of position 0")
    max_norm_ratio_layer: Index = Field(description="its layer")


class LengthMetrics(Record):
    """The length confound."""

    pair_r: Stat = Field(description="r(pair score, preference)")
    pair_r_partial: Stat = Field(description="token difference partialled out")
    pair_r_partial_category_fe: Stat = Field(description="also category indicators")
    pair_r_tokens_preference: Stat = Field(description="r(token difference, preference)")
    category_r_tokens_ua: Stat = Field(description="r(token difference, UA) over categories")


class LocoMetrics(Record):
    """The most influential category."""

    most_influential: Label = Field(description="its name (the one label among the metrics)")
    final_r_without: Stat = Field(description="r at L without it")


class LexicalMetrics(Record):
    """The lexical baseline."""

    final_r_mean: Stat = Field(description="category-level r, mean over seeds")
    pair_r_mean: Stat = Field(description="pair-level r, mean over seeds")


class RobustnessMetrics(Record):
    """``robustness.json``."""

    sink_excluded: SinkExcludedMetrics = Field(description="the sink-excluded policy")
    sink: SinkMetrics = Field(description="the attention sink")
    length: LengthMetrics = Field(description="the length confound")
    loco: LocoMetrics = Field(description="the most influential category")
    lexical_baseline: LexicalMetrics = Field(description="the lexical baseline")
    size_matched_null_final_p: Stat = Field(description="p of r at L against the size-matched null")


class InferenceMetrics(Record):
    """Counts of significant layers (mean pooling, the run's policy)."""

    n_layers_permutation_holm: int = Field(description="Holm, permutation p")
    n_layers_permutation_bh: int = Field(description="BH, permutation p")
    n_layers_parametric_holm: int = Field(description="Holm, t-test p")
    bootstrap_degenerate: int = Field(description="degenerate bootstrap resamples")


class OptionBMetrics(Record):
    """``option_b.json``, one pooling and metric, at L."""

    final_r: Stat = Field(description="r(metric, preference)")
    final_ci_low: Stat = Field(description="its bootstrap CI, low end")
    final_ci_high: Stat = Field(description="high end")
    final_permutation_p: Stat = Field(description="its permutation p")
    final_partial_r: Stat = Field(description="r with the token difference partialled out")
    n_permutation_holm_reject: int = Field(description="layers significant after Holm (permutation p)")
    final_r_loo: Stat | None = Field(None, description="r of the leave-one-out variant; centroid metrics only")


class PairModelsMetrics(Record):
    """``pair_models.json``, one policy and metric, mean pooling."""

    n_holm_layers: int = Field(description="layers whose permutation p survives Holm across the layers")
    partial_r_min: Stat = Field(description="smallest partial r (length out) over the layers")
    partial_r_max: Stat = Field(description="largest partial r over the layers")
    lexical_median_partial_r: Stat = Field(description="the lexical baseline's partial r, median over the seeds")
    lexical_any_seed_significant: bool = Field(description="some lexical seed's permutation p <= alpha")
    declared_partial_r: Stat = Field(description="partial r at the pre-declared layer (`analysis.primary.depth`)")
    declared_family_holm_p: Stat = Field(description="its p Holm-adjusted in the one pair-level family "
                                                     "(`pair_models.json` `family`)")
    incremental_partial_r: Stat = Field(description="partial r at that layer with the lexical metric among the "
                                                    "covariates (`incremental`)")
    incremental_family_holm_p: Stat = Field(description="its p Holm-adjusted in the incremental family")
    incremental_without_category_partial_r: Stat = Field(
        description="the incremental partial r over the pairs of every category but `analysis.primary.left_out`")
    incremental_without_category_holm_p: Stat = Field(description="its p Holm-adjusted in that family")


class PhaseMetrics(Record):
    """The phase means of ``centroid_asymmetry``, one pooling."""

    early_mean_r: Stat = Field(description="mean r over the early layers")
    mid_mean_r: Stat = Field(description="over the middle layers")
    late_mean_r: Stat = Field(description="over the late layers")
    late_ci_low: Stat = Field(description="bootstrap interval of the late mean (pairs resampled independently, "
                                          "no coverage claimed), low end")
    late_ci_high: Stat = Field(description="high end")
    sign_change: Flag = Field(description="early mean > 0 > late mean")


class ControlMetrics(Record):
    """``neutral_control.json``, one category and metric (mean pooling, L)."""

    final_r: Stat = Field(description="r(metric, preference)")
    final_permutation_p: Stat = Field(description="its permutation p")


class SpecCurveMetrics(Record):
    """``specification_curve.json``: the primary joint test and the test without one category."""

    n_specs: int = Field(description="distinct specifications of the universe with a defined r")
    n_merged: int = Field(description="identical specifications merged")
    primary_estimate: Stat = Field(description="the primary statistic (`analysis.primary.statistic`) over the universe")
    primary_p: Stat = Field(description="its exact joint permutation p")
    primary_p_floor: float = Field(description="the smallest p the test can give (1/C!)")
    without_category_estimate: Stat = Field(description="the primary statistic with `analysis.primary.left_out` left "
                                                        "out")
    without_category_p: Stat = Field(description="its exact joint permutation p over (C-1)! relabellings, unadjusted")
    without_category_holm_p: Stat = Field(description="that p Holm-adjusted in the secondary family")
    layer_zero_estimate: Stat = Field(description="the primary statistic over the universe's choices at layer 0")
    full_universe_estimate: Stat = Field(description="the primary statistic over every pooling and NLL at the "
                                                     "declared layer (`joint/full_universe`)")
    full_universe_p: Stat = Field(description="its exact joint permutation p (a comparison, in no family)")
    nll_sign_changes: int = Field(description="distinct (pooling, policy, representation) at the declared layer whose r "
                                              "changes sign from the mean to the summed NLL (`nll_sign`)")
    nll_rows: int = Field(description="how many such rows there are")


class ModelMetrics(Record):
    """``metrics/models/<id>.json``: one model's headline scalars."""

    layerwise: dict[str, LayerwiseMetrics] = Field(description="per pooling")
    validation: ValidationMetrics = Field(description="the validation table")
    bins: dict[str, BinsMetrics] = Field(description="per scheme (mean pooling)")
    pairs: dict[str, PairsMetrics] = Field(description="per pooling")
    anisotropy: AnisotropyMetrics = Field(description="the anisotropy profile")
    preference: PreferenceMetrics = Field(description="mean against summed NLL")
    robustness: RobustnessMetrics = Field(description="the controls")
    inference: InferenceMetrics = Field(description="significant layers")
    option_b: dict[str, dict[str, OptionBMetrics]] = Field(description="per pooling and metric of the original")
    phases: dict[str, PhaseMetrics] = Field(description="per pooling")
    pair_models: dict[str, dict[str, PairModelsMetrics]] = Field(
        description="per policy (`default`, `sink_excluded`) and metric of the original, mean pooling")
    specification_curve: SpecCurveMetrics = Field(description="the specification curve's joint test")
    neutral_control: dict[str, dict[str, ControlMetrics]] | None = Field(
        None, description="per control category and metric; absent without the control extraction")
