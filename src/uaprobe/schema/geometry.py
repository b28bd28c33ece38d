"""What explains or qualifies the headline of one model: ``anisotropy.json`` (seed 004, the
anisotropy profile) and ``robustness.json`` (the attention sink, the controls, the nulls)."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import Flag, Index, Label, PerLayer, Record, Stat
from uaprobe.schema.common import ResultsHeader, Spread

UNDEFINED_L_STAR = "absent when L* is undefined (lambda1/sum undefined at every layer)"


class LineFit(Record):
    """Least-squares line of lambda1/sum against the layer."""

    slope: Stat = Field(description="slope")
    intercept: Stat = Field(description="intercept")
    r: Stat = Field(description="Pearson r of the fit")
    p: Stat = Field(description="p-value of the slope")
    n_layers: int = Field(description="layers in the fit")


class BellCurve(Record):
    """The seed's bell-curve test around L*."""

    before: LineFit | None = Field(None, description="fit over layers [0, L*); " + UNDEFINED_L_STAR)
    after: LineFit | None = Field(None, description="fit over layers [L*, L]; " + UNDEFINED_L_STAR)
    is_bell_curve: Flag = Field(description="before.slope > 0 and after.slope < 0")
    is_bell_curve_significant: bool | None = Field(
        None, description="both slopes differ from 0 at alpha, in the seed's directions; " + UNDEFINED_L_STAR)


class AnisotropySignChange(Record):
    """A sign change of r(UA, preference) (``layerwise.json``), with its distance to L*."""

    layer_before: int = Field(description="the layer before the change")
    layer_after: int = Field(description="the layer after the change")
    r_before: float = Field(description="r at `layer_before`")
    r_after: float = Field(description="r at `layer_after`")
    midpoint_depth_pct: float = Field(description="depth of the midpoint, % of L")
    distance: Index = Field(description="L* - layer_after (missing where L* is)")


class CorrelationSignChanges(Record):
    """L* against the sign changes of the mean pooling's r."""

    pooling: str = Field(description="`mean`")
    sign_changes: list[AnisotropySignChange] = Field(description="from `layerwise.json`, with their distance")
    last_inversion_layer: Index = Field(description="`layer_after` of the last positive-to-negative change")
    distance_to_last_inversion: Index = Field(description="L* - last_inversion_layer")
    nearest_sign_change_layer: Index = Field(description="`layer_after` of the change nearest L*")
    distance_to_nearest: Index = Field(description="L* - that layer")


class LStarBootstrap(Record):
    """L* over bootstrap resamples of the prompts."""

    resamples: int = Field(description="resamples drawn")
    counts: PerLayer[int] = Field(description="how often each layer was L*")
    share_at_l_star: float = Field(description="share of resamples whose L* is the file's L*")
    share_in_ties: float = Field(description="share whose L* is one of `l_star_ties`")
    mode: int = Field(description="the most frequent L*")


class VariantBellCurve(Record):
    """The bell-curve slopes of a token-selection variant."""

    slope_before: Stat = Field(description="slope over [0, L*)")
    p_before: Stat = Field(description="its p-value")
    slope_after: Stat = Field(description="slope over [L*, L]")
    p_after: Stat = Field(description="its p-value")
    is_bell_curve_significant: bool = Field(description="both slopes significant in the seed's directions")


class AnisotropyVariant(Record):
    """lambda1/sum with another token selection."""

    n_tokens: int = Field(description="token states used")
    lambda1_ratio: PerLayer[Stat] = Field(description="lambda1 / sum(lambda) per layer")
    l_star: Index = Field(description="argmax of lambda1_ratio")
    l_star_ties: list[int] = Field(description="layers within `l_star_tolerance` of the maximum")
    bell_curve: VariantBellCurve | None = Field(None, description="the slopes; " + UNDEFINED_L_STAR)


class Anisotropy(ResultsHeader):
    """``anisotropy.json``: seed 004, the covariance spectrum of the prompts' token states per layer.

    From ``anisotropy/states`` of the HDF5 file. The spectrum is that of the covariance
    ``X_c^T X_c / (n - 1)`` of the centred ``n x D`` matrix, computed from the singular values of
    ``X_c``, padded with zeros to D values and floored at 1e-10 (as the seed's ``eigvalsh`` path
    did). A layer whose token states are all the same vector has missing spectrum measures rather
    than the floor's artefacts; ``mean_cos_to_mean`` is missing only when the mean state is the
    zero vector.
    """

    token_selection: str = Field(description="`content` (special tokens out) or `all` (every token, as seed 004)")
    n_tokens: int = Field(description="token states used")
    n_prompts: int = Field(description="prompts")
    hidden_size: int = Field(description="D")
    eigenvalue_variance: PerLayer[Stat] = Field(description="variance of the D eigenvalues")
    lambda1_ratio: PerLayer[Stat] = Field(description="lambda1 / sum(lambda)")
    effective_rank: PerLayer[Stat] = Field(description="exp of the entropy of lambda / sum(lambda)")
    mean_cos_to_mean: PerLayer[Stat] = Field(description="mean cosine of each token state to the mean state")
    var_top1: PerLayer[Stat] = Field(description="share of variance in the top component")
    var_top10: PerLayer[Stat] = Field(description="share in the top 10")
    var_top50: PerLayer[Stat] = Field(description="share in the top 50")
    spectrum: PerLayer[list[Stat]] = Field(description="[L+1][m] the top m eigenvalues, descending")
    spectrum_top: int = Field(description="m = min(spectrum_top, D)")
    l_star: Index = Field(description="L*: argmax of lambda1_ratio over the layers where it is defined")
    l_star_depth_pct: Stat = Field(description="its depth, % of L")
    l_star_value: Stat = Field(description="lambda1_ratio at L*")
    l_star_tolerance: float = Field(description="fraction of the maximum within which layers tie with L*")
    l_star_ties: list[int] = Field(description="the layers that tie with L*")
    l_star_bootstrap: LStarBootstrap | None = Field(None, description="L* over resamples of the prompts; "
                                                    + UNDEFINED_L_STAR)
    bell_curve: BellCurve = Field(description="the seed's bell-curve test")
    correlation_sign_changes: CorrelationSignChanges = Field(description="L* against the sign changes of r")
    variants: dict[str, AnisotropyVariant] = Field(
        description="`all_tokens` (position 0 in) and `sink_excluded` (position 0 and special tokens out)")


class Sink(Record):
    """Position 0 of every statement against its other tokens, per layer (medians over statements)."""

    layers: PerLayer[int] = Field(description="0..L")
    norm_ratio_median: PerLayer[Stat] = Field(description="||h0|| / median over t > 0 of ||h_t||")
    norm_ratio_q10: PerLayer[Stat] = Field(description="its 10th percentile")
    norm_ratio_q90: PerLayer[Stat] = Field(description="its 90th percentile")
    norm_median: PerLayer[Stat] = Field(description="||h0||")
    mean_share_median: PerLayer[Stat] = Field(description="<h0/n, m> / ||m||^2, m the mean over all positions")
    top_dim_mode: PerLayer[int] = Field(description="the most frequent largest dimension of h0")
    top_dim_mode_share: PerLayer[Stat] = Field(description="share of statements with that dimension")
    top_dim_share_median: PerLayer[Stat] = Field(description="h0[d]^2 / ||h0||^2 at its largest dimension")
    max_norm_ratio: Stat = Field(description="max over layers of `norm_ratio_median`")
    max_norm_ratio_layer: Index = Field(description="its layer")


class PolicySummary(Record):
    """The headline of one pooling policy (mean pooling)."""

    policy: str = Field(description="the policy's name")
    r: PerLayer[Stat] = Field(description="r(UA, mean preference) across categories")
    final_r: Stat = Field(description="r at L")
    final_spearman: Stat = Field(description="Spearman rho at L")
    final_permutation_p: Stat = Field(description="exact permutation p at L")
    n_sign_changes: int = Field(description="sign changes of r over the layers")
    n_positive_layers: int = Field(description="layers with r > 0")
    n_layers_permutation_holm: int = Field(description="layers whose permutation p survives Holm")
    n_layers_permutation_bh: int = Field(description="layers whose permutation p survives BH")
    n_layers_parametric_holm: int = Field(description="layers whose t-test p survives Holm")
    null_partitions: int = Field(description="random size-matched assignments")
    size_matched_null_p: PerLayer[Stat] = Field(description="two-sided p of r against the size-matched null")
    null_r_q025: PerLayer[Stat] = Field(description="2.5th percentile of the null r")
    null_r_q975: PerLayer[Stat] = Field(description="97.5th percentile of the null r")


class Policies(Record):
    """The two pooling policies side by side."""

    default: PolicySummary = Field(description="the run's policy")
    sink_excluded: PolicySummary = Field(description="position 0 and special tokens out")


class Length(Record):
    """The token-count difference as a confound."""

    covariate: str = Field(description="a sentence defining the covariate")
    mean_token_difference: list[Stat] = Field(description="per category, content tokens B - A")
    pair_r: Stat = Field(description="r(pair score, preference)")
    pair_r_partial: Stat = Field(description="the same, token difference partialled out")
    pair_r_partial_p: Stat = Field(description="its p-value")
    pair_r_partial_category_fe: Stat = Field(description="also partialling out category indicators")
    pair_r_partial_category_fe_p: Stat = Field(description="its p-value")
    pair_r_tokens_preference: Stat = Field(description="r(token difference, preference) over pairs")
    category_r_tokens_ua: Stat = Field(description="r(token difference, UA) over categories")
    category_r_tokens_preference: Stat = Field(description="r(token difference, preference) over categories")


NO_DRIVER = "absent when no category is the most influential (r or every leave-one-out r undefined)"


class Loco(Record):
    """The most influential category, from the data."""

    most_influential: Label = Field(description="the category whose removal moves r most")
    final_r_with: Stat = Field(None, description="r at L with every category; " + NO_DRIVER)
    final_r_without: Stat = Field(None, description="r at L without it; " + NO_DRIVER)
    sign_reversed: bool | None = Field(None, description="leaving it out reverses the sign of r; " + NO_DRIVER)
    loo_r: list[Stat] | None = Field(None, description="r at L with each category left out; " + NO_DRIVER)
    sink_excluded_final_r_without: Stat = Field(None, description="the sink-excluded r without it; " + NO_DRIVER)
    pair_r_without: Stat = Field(None, description="the pair-level r without it; " + NO_DRIVER)
    lexical_final_r_without: Spread | None = Field(None, description="the lexical baseline's r without it, over "
                                                                     "seeds; " + NO_DRIVER)


class RobustnessPreference(Record):
    """r at L with each NLL as the preference."""

    final_r_mean_nll: Stat = Field(description="with the mean NLL")
    final_r_sum_nll: Stat = Field(description="with the summed NLL")
    final_r_char_nll: Stat = Field(description="with the NLL per character: each statement's summed NLL over its "
                                               "characters (a normalisation no tokenizer sets)")
    final_p_char_nll: Stat = Field(description="its exact two-sided permutation p over the orders of the categories' "
                                               "preferences (Monte Carlo past the exact bound)")
    char_category_means: list[Stat] = Field(description="per category, the mean over its pairs of that preference, "
                                                        "NLL(B) - NLL(A) per character")
    selected: str = Field(description="the NLL used everywhere else")


class LexicalBaseline(Record):
    """The same UA from seeded random embeddings of each statement's tokens."""

    seeds: list[int] = Field(description="the seeds")
    dim: int = Field(description="the embeddings' size (the model's hidden size)")
    final_r: Spread = Field(description="category-level r over the seeds")
    pair_r: Spread = Field(description="pair-level r over the seeds")


class Inference(Record):
    """How the p-values and intervals were had, and the counts of significant layers."""

    permutation: str = Field(description="`exact` or `random`")
    bootstrap_resamples: int = Field(description="bootstrap resamples")
    bootstrap_degenerate: int = Field(description="resamples holding `bootstrap_degenerate_distinct` or fewer "
                                                  "distinct categories")
    bootstrap_degenerate_distinct: int = Field(description="3")
    n_layers_permutation_holm: int = Field(description="layers significant after Holm (permutation p)")
    n_layers_permutation_bh: int = Field(description="layers significant after BH (permutation p)")
    n_layers_parametric_holm: int = Field(description="layers significant after Holm (t-test p)")


class Robustness(ResultsHeader):
    """``robustness.json``: what could explain the headline away (mean pooling, layer L unless a key
    says otherwise): the attention sink, the two pooling policies with exact permutation p-values and
    a size-matched null, the length confound, the most influential category and a model-free
    lexical baseline.
    """

    pooling: str = Field(description="`mean`")
    layer: int = Field(description="L")
    sink: Sink = Field(description="position 0 per layer")
    policies: Policies = Field(description="the two pooling policies")
    length: Length = Field(description="the length confound")
    loco: Loco = Field(description="the most influential category")
    preference: RobustnessPreference = Field(description="mean against summed NLL")
    lexical_baseline: LexicalBaseline = Field(description="a model-free baseline")
    inference: Inference = Field(description="inference settings and counts")
