"""The category-level files of one model: ``layerwise.json`` (seed 000), ``validation.json``
(seed 003), ``bins.json`` (seed 002) and ``preference.json`` (NLL mean vs sum)."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import Flag, Label, PerLayer, Record, Stat
from uaprobe.schema.common import Peak, ResultsHeader, SignChange

POLICY = "the pooling policy of this file: `special`, `first` (the run's) or `sink_excluded`"


class LayerwiseFinal(Record):
    """r at the last layer."""

    layer: int = Field(description="L")
    r: Stat = Field(description="r(UA, mean preference) across categories at L")
    p: Stat = Field(description="its t-test p-value")


class LayerwisePrenorm(Record):
    """The pre-final-norm residual of the last block: one entry of the per-layer lists, as scalars."""

    u_a: list[Stat] = Field(description="per category U(A statements)")
    u_b: list[Stat] = Field(description="per category U(B statements)")
    ua: list[Stat] = Field(description="per category UA = U(A) - U(B)")
    pearson_r: Stat = Field(description="r(UA, mean preference) across categories")
    pearson_p: Stat = Field(description="t-test p-value of r")
    spearman_rho: Stat = Field(description="Spearman rank correlation")
    spearman_p: Stat = Field(description="its p-value")
    bootstrap_ci_low: Stat = Field(description="percentile bootstrap CI of r (resampling categories), low end")
    bootstrap_ci_high: Stat = Field(description="high end")
    bootstrap_valid: int = Field(description="resamples behind the interval")
    fisher_ci_low: Stat = Field(description="Fisher-z CI of r, low end")
    fisher_ci_high: Stat = Field(description="high end")
    permutation_p: Stat = Field(description="permutation p-value of r")
    loco_r: list[Stat] = Field(description="r with category j left out")
    loco_driver: Label = Field(description="the category whose removal moves r most")
    loco_max_shift: Stat = Field(description="that largest |r - loco_r|")


class LayerwisePooling(Record):
    """Seed 000 for one pooling: lists over the layers 0..L."""

    u_a: PerLayer[list[Stat]] = Field(description="[L+1][n_cat] per-category U(A)")
    u_b: PerLayer[list[Stat]] = Field(description="[L+1][n_cat] per-category U(B)")
    ua: PerLayer[list[Stat]] = Field(description="[L+1][n_cat] per-category UA: the x of r")
    pearson_r: PerLayer[Stat] = Field(description="r(UA, mean preference) across categories")
    pearson_p: PerLayer[Stat] = Field(description="t-test p-value of r")
    spearman_rho: PerLayer[Stat] = Field(description="Spearman rank correlation")
    spearman_p: PerLayer[Stat] = Field(description="its p-value")
    bootstrap_ci_low: PerLayer[Stat] = Field(description="percentile CI of r (resampling categories), low end")
    bootstrap_ci_high: PerLayer[Stat] = Field(description="high end")
    bootstrap_valid: PerLayer[int] = Field(description="resamples behind the interval")
    fisher_ci_low: PerLayer[Stat] = Field(description="Fisher-z CI of r, low end")
    fisher_ci_high: PerLayer[Stat] = Field(description="high end")
    permutation_p: PerLayer[Stat] = Field(description="permutation p-value of r")
    holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `pearson_p` across layers")
    holm_reject: PerLayer[Flag] = Field(description="`holm_p` <= alpha")
    bh_p: PerLayer[Stat] = Field(description="Benjamini-Hochberg-adjusted `pearson_p` across layers")
    bh_reject: PerLayer[Flag] = Field(description="`bh_p` <= alpha")
    permutation_holm_p: PerLayer[Stat] = Field(description="Holm-adjusted `permutation_p`")
    permutation_holm_reject: PerLayer[Flag] = Field(description="`permutation_holm_p` <= alpha")
    permutation_bh_p: PerLayer[Stat] = Field(description="BH-adjusted `permutation_p`")
    permutation_bh_reject: PerLayer[Flag] = Field(description="`permutation_bh_p` <= alpha")
    loco_r: PerLayer[list[Stat]] = Field(description="[L+1][n_cat] r with category j left out")
    loco_driver: PerLayer[Label] = Field(description="the category whose removal moves r most")
    loco_max_shift: PerLayer[Stat] = Field(description="that largest |r - loco_r|")
    sign_changes: list[SignChange] = Field(description="consecutive layers with r_i * r_(i+1) < 0 (divergence)")
    seed_layers_sign_changes: list[SignChange] = Field(description="the same over `seed_layers` only")
    peak_positive: Peak = Field(description="layer of max r (reported even if negative, as seed 001)")
    peak_negative: Peak = Field(description="layer of min r")
    final: LayerwiseFinal = Field(description="r at the last layer")
    prenorm: LayerwisePrenorm = Field(description="the pre-final-norm block")


class Layerwise(ResultsHeader):
    """``layerwise.json``: seed 000 (layer-wise UA) with the reviewer's statistics.

    Per pooling and layer, the per-category U(A), U(B) and UA and their correlation r with the mean
    preference across the categories, with every interval, p-value and correction of the
    Conventions. The pre-final-norm residual of the last block is the block ``prenorm`` of every
    pooling, never part of the per-layer lists.
    """

    policy: str = Field(description=POLICY)
    categories: list[str] = Field(description="category names, dataset order")
    n_pairs: list[int] = Field(description="pairs per category")
    preference: str = Field(description="the NLL behind the preference: `mean` or `sum`")
    mean_preference: list[Stat] = Field(description="per category mean preference: the y of every r")
    permutation_mode: str = Field(description="`exact` (all n! orders) or `random`")
    permutation_count: int = Field(description="permutations behind each p-value")
    permutation_p_floor: float = Field(description="the smallest `permutation_p` the test can give: 1/P (exact) or "
                                                   "1/(1 + P) (random)")
    permutation_holm_floor: float = Field(description="the smallest `permutation_holm_p` over the L+1 layers: "
                                                      "(L+1) x `permutation_p_floor`, at most 1 (31/720 = 0.043 for 30 "
                                                      "blocks and 6 categories)")
    bootstrap_degenerate: int = Field(description="bootstrap resamples holding 3 or fewer distinct categories")
    poolings: dict[str, LayerwisePooling] = Field(description="per pooling (`mean`, `last`, `first`)")


class ValidationRow(Record):
    """One category of the validation table (the final layer)."""

    category: str = Field(description="category name")
    n_pairs: int = Field(description="its pairs")
    u_a: Stat = Field(description="U(A statements)")
    u_b: Stat = Field(description="U(B statements)")
    ua: Stat = Field(description="UA")
    mean_preference: Stat = Field(description="mean preference of its pairs")
    pct_prefer_a: Stat = Field(description="% of its pairs with preference > 0")
    aligned: Flag = Field(description="UA and mean preference of the same sign, or both below the neutral thresholds")


class ValidationGlobal(Record):
    """The validation table's summary row."""

    total_pairs: int = Field(description="pairs over all categories")
    mean_ua: Stat = Field(description="mean UA over categories")
    std_ua: Stat = Field(description="std of UA over categories (ddof 0)")
    ci_low: Stat = Field(description="percentile bootstrap CI of the mean UA, low end")
    ci_high: Stat = Field(description="high end")
    ci_level: float = Field(description="the interval's level")
    ci_valid: int = Field(description="resamples behind the interval")
    cohens_d: Stat = Field(description="mean_ua / (std_ua + 1e-10); null when UA is the same in every category")
    r: Stat = Field(description="r(UA, mean preference) across categories")
    mean_preference: Stat = Field(description="mean over categories")
    label: Label = Field(description="`ALIGNED` (r > aligned_r), `INVERTED` (r < inverted_r) or `DECOUPLED`")


class ValidationVariant(Record):
    """One pooling (or its prenorm block) at the final layer."""

    table: list[ValidationRow] = Field(description="one row per category, dataset order")
    global_: ValidationGlobal = Field(alias="global", description="the summary row")


class Thresholds(Record):
    """The seed's thresholds, from params."""

    aligned_r: float = Field(description="r above this is ALIGNED")
    inverted_r: float = Field(description="r below this is INVERTED")
    neutral_ua: float = Field(description="|UA| below this counts as neutral")
    neutral_preference: float = Field(description="|preference| below this counts as neutral")


class Validation(ResultsHeader):
    """``validation.json``: seed 003 (the validation table).

    The final layer (``layer`` = L) of every pooling, and its prenorm block, as ``variants.<v>``.
    A category is *aligned* when UA and its mean preference have the same sign, or when
    ``|UA| < neutral_ua`` and ``|preference| < neutral_preference``. ``cohens_d`` is
    ``mean_ua / (std_ua + 1e-10)``, null when UA is the same in every category (where the seed's
    1e-10 would give ``mean * 1e10``); ``label`` is ``ALIGNED`` if r > ``aligned_r``, ``INVERTED`` if
    r < ``inverted_r``, else ``DECOUPLED``.
    """

    policy: str = Field(description=POLICY)
    layer: int = Field(description="the layer of the table (L)")
    thresholds: Thresholds = Field(description="the seed's thresholds, from params")
    variants: dict[str, ValidationVariant] = Field(
        description="`mean`, `last`, `first`, `mean_prenorm`, `last_prenorm`, `first_prenorm` (`mean` is the seed's)")


class BinsByK(Record):
    """The random partitions into k bins."""

    r_mean: PerLayer[Stat] = Field(description="mean r over the partitions with a defined r")
    r_std: PerLayer[Stat] = Field(description="its std (ddof 0)")
    p_mean: PerLayer[Stat] = Field(description="mean t-test p over the same partitions")
    n_valid: PerLayer[int] = Field(description="partitions with a defined r")
    share_positive: PerLayer[Stat] = Field(description="share of the partitions with r > 0")
    share_excludes_zero: PerLayer[Stat] = Field(description="share whose Fisher-z interval excludes 0")
    bins_used_mean: float = Field(description="mean number of bins with >= 2 pairs per partition")
    bin_size_min: int = Field(description="smallest bin over all partitions")
    bin_size_max: int = Field(description="largest bin over all partitions")


class CiPartition(Record):
    """The one seeded partition with k = ci_k."""

    k: int = Field(description="= ci_k")
    assignment: list[int] = Field(description="[n_pairs] bin of each pair, pair order")
    bin_ids: list[int] = Field(description="the bins with >= 2 pairs (the points of r)")
    bin_sizes: list[int] = Field(description="their sizes")
    mean_preference: list[Stat] = Field(description="[n_bins] mean preference per bin")
    u_a: PerLayer[list[Stat]] = Field(description="[L+1][n_bins] U(A)")
    u_b: PerLayer[list[Stat]] = Field(description="[L+1][n_bins] U(B)")
    ua: PerLayer[list[Stat]] = Field(description="[L+1][n_bins] UA")
    r: PerLayer[Stat] = Field(description="r(UA, mean preference) across bins")
    p: PerLayer[Stat] = Field(description="its t-test p-value")
    spearman_rho: PerLayer[Stat] = Field(description="Spearman rank correlation")
    bootstrap_ci_low: PerLayer[Stat] = Field(description="percentile CI of r (resampling bins), low end")
    bootstrap_ci_high: PerLayer[Stat] = Field(description="high end")
    bootstrap_valid: PerLayer[int] = Field(description="resamples behind the interval")
    fisher_ci_low: PerLayer[Stat] = Field(description="Fisher-z CI, low end")
    fisher_ci_high: PerLayer[Stat] = Field(description="high end")
    permutation_p: PerLayer[Stat] = Field(description="permutation p-value of r")
    ci_excludes_zero: PerLayer[Flag] = Field(description="the bootstrap CI excludes 0")


class BinsComparison(Record):
    """The n = 6 categories (``layerwise.json``, same pooling) against the ``ci_k`` bins."""

    categories_r: PerLayer[Stat] = Field(description="r across categories")
    categories_ci_low: PerLayer[Stat] = Field(description="its bootstrap CI, low end")
    categories_ci_high: PerLayer[Stat] = Field(description="high end")
    categories_ci_width: PerLayer[Stat] = Field(description="width of that CI")
    categories_ci_excludes_zero: PerLayer[Flag] = Field(description="that CI excludes 0")
    bins_ci_width: PerLayer[Stat] = Field(description="width of the bins' CI")
    change: PerLayer[Label] = Field(description="the seed's label: `NOW SIGNIFICANT`, `Lost significance`, "
                                                "`No change`")
    n_significant_categories: int = Field(description="layers whose categories' CI excludes 0")
    n_significant_bins: int = Field(description="layers whose bins' CI excludes 0")
    mean_ci_width_categories: Stat = Field(description="mean CI width over layers, categories")
    mean_ci_width_bins: Stat = Field(description="mean CI width over layers, bins")
    ci_width_reduction_pct: Stat = Field(description="how much narrower the bins' intervals are, %")


class BinsScheme(Record):
    """One way of drawing the partitions (`randint`: the seed's; `balanced`: equal sizes)."""

    by_k: dict[str, BinsByK] = Field(description="per k (the key is k as a string)")
    ci_partition: CiPartition = Field(description="the one seeded partition with k = ci_k")
    comparison: BinsComparison = Field(description="categories against the ci_k bins")


class BinsPooling(Record):
    """The random-bins analysis of one pooling."""

    schemes: dict[str, BinsScheme] = Field(description="per scheme (`randint`, `balanced`)")


class Bins(ResultsHeader):
    """``bins.json``: seed 002 (random partitions of the pairs into bins).

    Two schemes per pooling (layers only, no prenorm block): ``randint``, the seed's way (every pair
    gets ``Generator.integers(0, k)``; bins with fewer than ``min_bin_pairs`` pairs are skipped, so a
    partition may have fewer than k bins), and ``balanced`` (a random permutation of the pairs cut
    into k bins whose sizes differ by at most one). Seed 002 replaced the interval by [-1, 1] when
    fewer than 100 resamples had variance; here the interval always comes from the valid resamples
    and ``bootstrap_valid`` says how many there were. The per-pair preferences are in
    ``preference.json``.
    """

    policy: str = Field(description=POLICY)
    n_pairs: int = Field(description="pairs of the dataset")
    k: list[int] = Field(description="the numbers of bins")
    partitions: int = Field(description="random partitions per k")
    ci_k: int = Field(description="k of the partition with a bootstrap CI")
    schemes: list[str] = Field(description="the partition schemes")
    min_bin_pairs: int = Field(description="bins with fewer pairs are skipped")
    poolings: dict[str, BinsPooling] = Field(description="per pooling")


class PreferencePairs(Record):
    """Per pair, pair order (all lists ``[n_pairs]``)."""

    pair: list[int] = Field(description="pair ids")
    category: list[str] = Field(description="category names")
    nll_mean_a: list[float] = Field(description="mean token NLL of A")
    nll_mean_b: list[float] = Field(description="mean token NLL of B")
    nll_sum_a: list[float] = Field(description="summed NLL of A")
    nll_sum_b: list[float] = Field(description="summed NLL of B")
    n_tokens_a: list[int] = Field(description="scored tokens of A")
    n_tokens_b: list[int] = Field(description="scored tokens of B")
    preference_mean: list[float] = Field(description="NLL_mean(B) - NLL_mean(A)")
    preference_sum: list[float] = Field(description="NLL_sum(B) - NLL_sum(A)")


class PreferencePrenorm(Record):
    """The four correlations for the pre-final-norm block."""

    r_mean: Stat = Field(description="r(UA, preference from the mean NLL)")
    p_mean: Stat = Field(description="its p-value")
    r_sum: Stat = Field(description="r(UA, preference from the summed NLL)")
    p_sum: Stat = Field(description="its p-value")


class PreferencePooling(Record):
    """Category-level r(UA, preference) with each NLL, per layer."""

    r_mean: PerLayer[Stat] = Field(description="with the mean NLL")
    p_mean: PerLayer[Stat] = Field(description="its p-value")
    r_sum: PerLayer[Stat] = Field(description="with the summed NLL")
    p_sum: PerLayer[Stat] = Field(description="its p-value")
    sign_agree: PerLayer[Flag] = Field(description="the two r have the same sign")
    prenorm: PreferencePrenorm = Field(description="the same four for the pre-final-norm block")


class Preference(ResultsHeader):
    """``preference.json``: the NLL mean against the NLL sum as the preference.

    ``selected`` names the NLL used everywhere else (``analysis.preference``).
    """

    policy: str = Field(description=POLICY)
    pairs: PreferencePairs = Field(description="per pair NLLs and preferences")
    categories: list[str] = Field(description="category names, dataset order")
    category_preference_mean: list[Stat] = Field(description="[n_cat] mean preference (mean NLL)")
    category_preference_sum: list[Stat] = Field(description="[n_cat] mean preference (summed NLL)")
    r_pairs_mean_vs_sum: Stat = Field(description="agreement of the two preferences over pairs")
    r_categories_mean_vs_sum: Stat = Field(description="agreement of the two over categories")
    poolings: dict[str, PreferencePooling] = Field(description="per pooling")
    selected: str = Field(description="the NLL used everywhere else")
