"""``pair_models.json``: the Option B metrics against the preference over the pairs, length
partialled out, permutation within categories (``uaprobe.analysis.pairs.pairmodels``)."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import Flag, PerLayer, Record, Stat
from uaprobe.schema.common import ResultsHeader


class PairModelMetric(Record):
    """One metric of one pooling and policy, lists over the layers."""

    partial_r: PerLayer[Stat] = Field(description="partial r(metric, preference | intercept, category indicators, "
                                                  "n_content(A), n_content(B)) over the pairs")
    permutation_p: PerLayer[Stat] = Field(description="Freedman-Lane permutation p, residuals permuted within "
                                                      "categories")
    holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `permutation_p` across the layers")
    holm_reject: PerLayer[Flag] = Field(description="`holm_p` <= alpha")
    holm_layers: list[int] = Field(description="the layers with `holm_reject` true")
    n_holm_layers: int = Field(description="how many")
    partial_r_min: Stat = Field(description="smallest `partial_r` over the layers")
    partial_r_max: Stat = Field(description="largest `partial_r` over the layers")


class LexicalPairModelMetric(Record):
    """One metric of the lexical baseline, lists over the seeds (each seed one "layer": a family of
    one test, whose Holm p is its p)."""

    partial_r: list[Stat] = Field(description="[seeds] partial r, as for the model's states")
    permutation_p: list[Stat] = Field(description="[seeds] its Freedman-Lane permutation p (the same draws)")
    significant: list[Flag] = Field(description="[seeds] `permutation_p` <= alpha")
    median_partial_r: Stat = Field(description="median of `partial_r` over the seeds")
    median_permutation_p: Stat = Field(description="median of `permutation_p` over the seeds")
    any_seed_significant: bool = Field(description="some seed's `significant` is true")


class LexicalPairModels(Record):
    """The model-free lexical baseline (``uaprobe.analysis.inference.controls.lexical_embeddings``) of one policy."""

    seeds: list[int] = Field(description="the seeds: analysis.seed + 0..lexical_seeds-1")
    dim: int = Field(description="dimension of the random token vectors (the model's hidden size)")
    pooling: str = Field(description="`mean`: the mean of the vectors of the tokens the policy pools")
    metrics: dict[str, LexicalPairModelMetric] = Field(description="per metric")


class PairModelsPolicy(Record):
    """One position-0 policy."""

    policy: str = Field(description="the policy: the run's (`special` or `first`) or `sink_excluded`")
    poolings: dict[str, dict[str, PairModelMetric]] = Field(description="per pooling and metric")
    lexical_baseline: LexicalPairModels = Field(description="the same models on the lexical baseline")


class FamilyTests(Record):
    """Parallel columns, one entry per test of the family (policy x pooling x metric at the pre-declared layer)."""

    policy: list[str] = Field(description="the policy key (`default`, `sink_excluded`)")
    pooling: list[str] = Field(description="the pooling")
    metric: list[str] = Field(description="the metric")
    n: list[int] = Field(description="the pairs the test runs over")
    n_covariates: list[int] = Field(description="its covariates beside the intercept, q")
    partial_r: list[Stat] = Field(description="the partial r")
    partial_r_low: list[Stat] = Field(description="its Fisher-z interval's lower end at `ci_level`, with n - q - 3 "
                                                  "degrees of freedom for q covariates beside the intercept (the pairs "
                                                  "treated as independent given the covariates)")
    partial_r_high: list[Stat] = Field(description="the interval's upper end")
    permutation_p: list[Stat] = Field(description="its Freedman-Lane permutation p")
    holm_p: list[Stat] = Field(description="Holm-adjusted across the family (null for a degenerate test)")
    holm_reject: list[Flag] = Field(description="`holm_p` <= alpha")
    maxt_p: list[Stat] = Field(description="Westfall-Young max-T step-down adjusted p over the family's joint "
                                           "within-category permutations, on each test's own permutation p (the "
                                           "min-P form; null for a degenerate test)")
    maxt_reject: list[Flag] = Field(description="`maxt_p` <= alpha")
    degenerate: list[bool] = Field(description="`vif` exceeds `degenerate_vif`: reported, kept out of the family")
    at_floor: list[Flag] = Field(description="`permutation_p` equals `p_floor`: no permuted r as extreme")
    reported: list[bool] = Field(description="the pooling is `reported_pooling`")
    same_as: list[int] = Field(description="the index of the test it is: itself, or the earlier identical test "
                                           "(bit-identical metric values, the same p, partial r within 1e-12: the "
                                           "same states under both policies) it is merged into, with its Holm p; only "
                                           "tests that are themselves count in the family")
    vif: list[Stat] = Field(description="the variance inflation factor 1 / (1 - R^2) of the metric on the test's "
                                        "covariates: how far they span it")
    base_partial_r: list[Stat] = Field(description="the partial r of the same pairs given the category indicators "
                                                   "and lengths alone (null in a family without lexical "
                                                   "covariates): a sign that differs from `partial_r` is set by the "
                                                   "lexical covariate (suppression)")
    pearson_r: list[Stat] = Field(description="the metric's r with the preference over the same pairs, without "
                                              "covariates")


class PairFamily(Record):
    """Every pair-level test at the pre-declared layer as one Holm family: metrics x poolings x policies."""

    layer: int = Field(description="the pre-declared layer: round(`analysis.primary.depth` x L)")
    reported_pooling: str = Field(description="`analysis.primary.pooling`: the pooling the summary reports, declared "
                                              "before any result (the others are in the family all the same)")
    n_tests: int = Field(description="distinct defined tests in the family (its size for Holm)")
    n_merged: int = Field(description="tests merged into an identical one")
    n_degenerate: int = Field(description="distinct tests kept out of the family as degenerate (VIF above "
                                          "`degenerate_vif`)")
    degenerate_vif: float = Field(description="`analysis.degenerate_vif`")
    n_reject: int = Field(description="tests with `holm_reject` true")
    n_maxt_reject: int = Field(description="tests with `maxt_reject` true")
    alpha: float = Field(description="level of the Holm and max-T corrections")
    ci_level: float = Field(description="level of the partial r's intervals (`analysis.ci_level`)")
    p_floor: float = Field(description="the smallest permutation p: 1 / (1 + B)")
    holm_floor: float = Field(description="the smallest Holm-adjusted p of the family: `n_tests` x `p_floor` "
                                          "(capped at 1); a family that cannot reach alpha tests nothing")
    tests: FamilyTests = Field(description="the tests")


class IncrementalPolicy(Record):
    """The incremental models of one position-0 policy."""

    policy: str = Field(description="the policy: the run's (`special` or `first`) or `sink_excluded`")
    poolings: dict[str, dict[str, PairModelMetric]] = Field(
        description="per pooling and metric: partial r given the length and lexical covariates, its Freedman-Lane "
                    "permutation p (the same draws), Holm across the layers")


class IncrementalWithout(Record):
    """The incremental family without one category's pairs: what survives length, the lexical
    baseline and the left-out category together."""

    left_out: str = Field(description="the category whose pairs are left out (`analysis.primary.left_out`)")
    n_pairs: int = Field(description="the pairs tested (the metrics are those computed over all pairs)")
    family: PairFamily = Field(description="the incremental tests at the pre-declared layer over these pairs, one "
                                           "Holm family (their own within-category permutations)")


class Incremental(Record):
    """Each model metric tested over the lexical baseline: the lexical metric of the same pair and
    pooling, one column per lexical seed, joins the length covariates."""

    covariates: str = Field(description="a sentence naming the covariates")
    lexical_pooling: str = Field(description="a sentence: how the lexical states of each pooling are built")
    seeds: list[int] = Field(description="the lexical seeds whose metrics are covariates")
    policies: dict[str, IncrementalPolicy] = Field(description="`default` and `sink_excluded`")
    family: PairFamily = Field(description="the incremental tests at the pre-declared layer as one Holm family")
    without_category: IncrementalWithout = Field(description="the same family without the left-out category's pairs")


class MixedTests(Record):
    """One entry per (policy, pooling, metric) at the pre-declared layer."""

    policy: list[str] = Field(description="`default` or `sink_excluded`")
    pooling: list[str] = Field(description="the pooling")
    metric: list[str] = Field(description="the metric")
    slope: list[Stat] = Field(description="the fixed slope: the preference's change per standard deviation of the "
                                          "metric (a typical category)")
    se: list[Stat] = Field(description="its standard error")
    p: list[Stat] = Field(description="its two-sided Wald z p (liberal with few categories)")
    low: list[Stat] = Field(description="the slope's Wald interval at `ci_level`, lower end")
    high: list[Stat] = Field(description="its upper end")
    sd_intercept: list[Stat] = Field(description="the standard deviation of the categories' random intercepts")
    sd_slope: list[Stat] = Field(description="the standard deviation of the categories' random slopes")
    converged: list[bool] = Field(description="an optimiser converged")
    method: list[str] = Field(description="the optimiser that converged (empty: none)")


class Mixed(Record):
    """The family's tests as linear mixed models with the categories as groups (statsmodels' `MixedLM`,
    :mod:`uaprobe.analysis.pairs.mixed`): a random intercept and a random slope of the metric per category."""

    model: str = Field(description="a sentence: the model, its fit and its test")
    layer: int = Field(description="the pre-declared layer")
    ci_level: float = Field(description="level of the slopes' intervals")
    alpha: float = Field(description="`analysis.alpha`")
    n_groups: int = Field(description="the categories (groups)")
    n_converged: int = Field(description="fits that converged")
    n_below_alpha: int = Field(description="fits whose p is at or below alpha, uncorrected")
    tests: MixedTests = Field(description="the fits")


class LengthMatchedCategory(Record):
    """The category-level r over the length-matched pairs, one pooling."""

    ua: list[Stat] = Field(description="per category: UA over its length-matched pairs (null: fewer than two)")
    preference: list[Stat] = Field(description="per category: the mean preference over them")
    n_categories: int = Field(description="categories with at least two length-matched pairs")
    orders: int = Field(description="the orders the exact test enumerates (n_categories!)")
    r: Stat = Field(description="r across those categories")
    permutation_p: Stat = Field(description="its exact two-sided permutation p")


class LengthMatchedCategories(Record):
    """The category level over the length-matched pairs."""

    poolings: dict[str, LengthMatchedCategory] = Field(description="per primary pooling (`analysis.primary.poolings`)")


class LengthMatchedPairs(Record):
    """The pair level over the length-matched pairs."""

    family: PairFamily = Field(description="the base covariates' family over the kept pairs (their own "
                                           "within-category permutations)")


class LengthMatched(Record):
    """The category- and pair-level analyses on the pairs whose statements differ by at most
    `max_token_difference` content tokens (:mod:`uaprobe.analysis.run.length_matched`)."""

    max_token_difference: int = Field(description="`analysis.length_matched.max_token_difference`")
    policy: str = Field(description="the policy whose content-token counts pick the pairs")
    layer: int = Field(description="the pre-declared layer")
    n_pairs: int = Field(description="the pairs kept")
    n_pairs_all: int = Field(description="every pair")
    pairs_per_category: list[int] = Field(description="the pairs kept per category")
    pairs_per_category_all: list[int] = Field(description="every pair per category")
    category: LengthMatchedCategories = Field(description="the category-level r over the kept pairs")
    pair: LengthMatchedPairs = Field(description="the pair-level family over the kept pairs")


class PairModels(ResultsHeader):
    """``pair_models.json``: each Option B metric against the preference at the pair level, with the
    length of both statements as covariates and a permutation test that keeps the categories.

    Per metric of the original (``option_b.json``: `centroid_asymmetry`, `cross_centroid`,
    `within_pair_sim`, `knn_density_asymmetry`, `margin_asymmetry`), pooling, layer and position-0
    policy: the partial r of the metric with the preference `NLL(B) - NLL(A)` over the pairs given an
    intercept, one indicator per category (fixed effects) and the content tokens of A
    and of B (the counts behind the pooled states under that policy); its Freedman-Lane permutation p
    (the metric's residuals on the covariates permuted within each category, `analysis.permutations` draws of one seeded generator, the same for
    every metric, pooling, layer and policy; `p = (1 + #{|r*| >= |r|}) / (1 + B)`); Holm across the
    layers of each metric, pooling and policy at `analysis.alpha`. The lexical baseline (random
    Gaussian token vectors, one per seed of `analysis.robustness.lexical_seeds`) is analysed the
    same way. Both policies are in this one file, under `policies` (`default`: the run's
    `pooling_drop`; `sink_excluded`: position 0 out as well).
    """

    n_pairs: int = Field(description="pairs behind every r")
    k_neighbours: int = Field(description="k of the kNN density")
    categories: list[str] = Field(description="the categories (the permutation strata)")
    pairs_per_category: list[int] = Field(description="pairs of each category")
    preference_definition: str = Field(description="a sentence defining the preference")
    covariates: str = Field(description="a sentence naming the covariates")
    permutation_scheme: str = Field(description="a sentence stating the permutation test")
    permutations: int = Field(description="B, the permutation draws")
    alpha: float = Field(description="level of the Holm correction")
    definitions: dict[str, str] = Field(description="per metric, a sentence defining it")
    policies: dict[str, PairModelsPolicy] = Field(description="`default` and `sink_excluded`")
    family: PairFamily = Field(description="the length-only models at the pre-declared layer as one Holm family")
    incremental: Incremental = Field(description="the models with the lexical metric among the covariates")
    mixed: Mixed = Field(description="the family's tests as mixed models with the categories as groups")
    length_matched: LengthMatched = Field(description="the category and pair level over the length-matched pairs")
