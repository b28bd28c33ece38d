"""``dimensions.json`` and ``specification_curve.json``: the representation axis across every choice
(:mod:`uaprobe.analysis.geometry.dimensions`, :mod:`uaprobe.analysis.category.speccurve`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from uaprobe.schema.base import Flag, PerLayer, Record, Stat
from uaprobe.schema.common import ResultsHeader


class DimensionsPooling(Record):
    """One pooling of one policy, per layer."""

    mean_cosine: dict[str, PerLayer[Stat]] = Field(
        description="per representation (`raw`, `zscore`, `abtt`): the mean pairwise cosine of all statements "
                    "(both framings)")
    uniformity_share: dict[str, PerLayer[Stat]] = Field(
        description="`top1`, `top5`, `top10`: share of the raw mean pairwise cosine carried by the K dimensions "
                    "with the largest contributions c_d (see `definition`)")
    variance_share: dict[str, PerLayer[Stat]] = Field(
        description="`top1`, `top5`, `top10`: share of the raw centred variance on the top K principal components")


class DimensionsPolicy(Record):
    """One position-0 policy."""

    poolings: dict[str, DimensionsPooling] = Field(description="per pooling (`mean`, `last`, `first`)")


class Dimensions(ResultsHeader):
    """``results/models/<id>/dimensions.json``: how much of each layer's uniformity a few dimensions and
    a few principal directions carry, and the mean cosine under each representation; both policies."""

    tops: list[int] = Field(description="the K of the top-K shares (1, 5, 10)")
    definition: str = Field(description="the definitions of the three statistics, in words")
    policy_names: dict[str, str] = Field(
        description="`default` -> the extraction's pooling policy (`special` or `first`), `sink_excluded` -> itself")
    policies: dict[str, DimensionsPolicy] = Field(description="`default` and `sink_excluded`")


class SpecChoices(Record):
    """The options of each choice of the curve."""

    pooling: list[str] = Field(description="poolings")
    policy: list[str] = Field(description="position-0 policies (the default's name, then `sink_excluded`)")
    representation: list[str] = Field(description="`raw`, `zscore`, `abtt`")
    nll: list[str] = Field(description="`mean`, `sum`: which NLL makes the preference")
    layer: list[int] = Field(description="0..L")
    left_out: list[str | None] = Field(description="`null` (every category) or the left-out category")


class SpecColumns(Record):
    """One entry per specification, sorted by r ascending (undefined r last)."""

    pooling: list[str] = Field(description="the pooling")
    policy: list[str] = Field(description="the position-0 policy")
    representation: list[str] = Field(description="the representation")
    nll: list[str] = Field(description="the NLL kind")
    layer: list[int] = Field(description="the layer")
    left_out: list[str | None] = Field(description="the left-out category (`null`: none)")
    r: list[Stat] = Field(description="Pearson r over the categories of UA and mean preference")
    permutation_p: list[Stat] = Field(
        description="two-sided permutation p over the orders of the categories' preferences, the identity included: "
                    "exact over every order, or (b + 1) / (m + 1) over m random orders (`permutation_mode`)")
    permutation_count: list[int] = Field(description="the orders used, the identity included (720 for six categories, "
                                                     "120 with one left out; m + 1 beyond `max_exact_orders`)")
    permutation_mode: list[Literal["exact", "monte_carlo"]] = Field(
        description="`exact`: every order of the specification's categories; `monte_carlo`: the identity and "
                    "`analysis.permutations` random orders (more orders than `max_exact_orders`)")
    distinct: list[bool] = Field(
        description="false where the specification's category UA is bit-identical to that of a specification "
                    "listed before it in the universe's order (pooling, policy, representation, layer) with the same "
                    "NLL and left-out category: the same states, counted once by every joint test")


class UniverseAxis(Record):
    """One axis of the universe of analytic choices."""

    options: list[str | int] = Field(description="its options (the layer axis: the pre-declared layers)")
    reason: str = Field(description="one sentence: why the axis is an analytic choice (or how its options were fixed)")


class SpecId(Record):
    """One specification of the universe (every category)."""

    pooling: str = Field(description="the pooling")
    policy: str = Field(description="the position-0 policy")
    representation: str = Field(description="the representation")
    nll: str = Field(description="the NLL kind")
    layer: int = Field(description="the layer")


class MergedSpecs(Record):
    """Specifications with bit-identical category UA (the same states): counted once."""

    kept: SpecId = Field(description="the one counted (first in the universe's order)")
    merged: list[SpecId] = Field(description="the ones merged into it")


class RobustnessCheck(Record):
    """Options outside the primary universe, tested as a named robustness check."""

    options: list[str] = Field(description="the options left out of the primary universe")
    test: str = Field(description="the key of `joint` that tests them")
    reason: str = Field(description="one sentence: why they are another estimand or measure, not an axis")


class Universe(Record):
    """The universe of analytic choices of the primary joint test, declared before any result
    (``analysis.primary`` in params.yaml)."""

    axes: dict[str, UniverseAxis] = Field(
        description="`pooling`, `policy`, `representation`, `nll`, `layer`: the options and the reason of each")
    robustness_checks: dict[str, RobustnessCheck] = Field(
        description="`nll` (the summed NLL) and `pooling` (first-token pooling): the options outside the primary "
                    "universe, each with the joint test that checks it and its reason")
    declared: str = Field(description="a sentence: when the universe was declared, and what was declared first")
    depth: float = Field(description="`analysis.primary.depth`: the pre-declared depth (1.0 = the last layer); the "
                                     "layer axis holds the one layer round(depth x L)")
    not_axes: dict[str, str] = Field(
        description="choices that are no axis of the universe, each with its reason (`layer`: every other layer, "
                    "reported as the per-layer curve and the `every_layer` test; `left_out`: leaving a category out "
                    "is an influence diagnostic, reported per specification and as the `without_category` test)")
    duplicate_rule: str = Field(description="a sentence: how identical specifications are found and counted")
    n_listed: int = Field(description="specifications of the product of the axes")
    n_distinct: int = Field(description="those counted: the product less the merged duplicates")
    n_merged: int = Field(description="specifications merged into an identical one (`n_listed - n_distinct`)")
    merged: list[MergedSpecs] = Field(description="every group of identical specifications")


class NullBand(Record):
    """The permutation null band of a sorted curve: sort the curve under each relabelling of the categories'
    preferences (applied to every specification at once, the identity included), then take per rank the central
    `level` quantiles over the relabellings."""

    level: float = Field(description="the share of the relabelled curves between `low` and `high` (`analysis.ci_level`)")
    low: list[Stat] = Field(description="per rank of the sorted curve (smallest first, specifications with a defined r): "
                                        "the (1 - level)/2 quantile of the sorted relabelled curves")
    high: list[Stat] = Field(description="per rank: the (1 + level)/2 quantile of the sorted relabelled curves")


class BelowAlpha(Record):
    """The distinct specifications with every category (every layer and choice) whose own exact p is at or below
    alpha, uncorrected, against the same share under
    every relabelling of the categories' preferences (applied to every specification at once, each specification's
    p recomputed as if that relabelling were observed): chance gives `null_mean_share` on average, and the share of
    relabellings at least as high as the observed one is its exact p."""

    alpha: float = Field(description="`analysis.alpha`")
    n_specs: int = Field(description="distinct specifications with a defined r")
    n_below: int = Field(description="how many have their exact p <= alpha")
    share: float = Field(description="`n_below` / `n_specs` (0 where `n_specs` is 0)")
    null_mean_share: float = Field(description="the mean share over every relabelling: what chance gives")
    null_p: float = Field(description="the share of relabellings whose share is at least the observed one")
    relabellings: int = Field(description="the relabellings, the identity included (every order of the categories, "
                                          "or m + 1 random ones beyond `max_exact_orders`)")


class JointTest(Record):
    """The curve-level statistics of one set of distinct specifications and their exact joint
    permutation p (every relabelling of the categories applied to every specification at once)."""

    description: str = Field(description="a sentence: which specifications")
    layers: list[int] = Field(description="the layers of its specifications")
    left_out: str | None = Field(description="the category left out of every specification (`null`: none)")
    n_specs: int = Field(description="distinct specifications with a defined r")
    n_merged: int = Field(description="identical specifications merged (not counted)")
    relabellings: int = Field(description="the relabellings, the identity included: C! (every category) or (C-1)! "
                                          "(one out) when exact, m + 1 when Monte Carlo")
    mode: Literal["exact", "monte_carlo"] = Field(description="`exact`: every order; `monte_carlo`: the identity and "
                                                         "`analysis.permutations` random orders, p = (b + 1) / (m + 1)")
    p_floor: float = Field(description="the smallest p the test can give (its resolution): 1 / `relabellings`")
    median_r: Stat = Field(description="median r over them")
    median_p: Stat = Field(description="share of the relabellings with |median r| at least as large")
    share_positive: Stat = Field(description="share of them with r > 0")
    share_p: Stat = Field(description="share of the relabellings with |share - 1/2| at least as large")
    null_band: NullBand = Field(description="the null band of these specifications' sorted curve")
    poolings: list[str] = Field(description="the poolings of its specifications")
    nll: list[str] = Field(description="the NLL kinds of its specifications")


class PowerSet(Record):
    """The exact test's power over one set of categories (every one, or all but the pre-declared one)."""

    left_out: str | None = Field(description="the category left out (`null`: none)")
    n_categories: int = Field(description="the categories, n")
    orders: int = Field(description="the orders the test relabels with: every one, n!, while n! is within the exact "
                                    "bound; else the identity and `analysis.permutations` drawn orders")
    mode: Literal["exact", "monte_carlo"] = Field(description="`exact` (every order) or `monte_carlo` (drawn orders, "
                                                              "p = (b + 1) / (m + 1))")
    p_floor: Stat = Field(description="the smallest p the test can attain with these UA values: the p of a "
                                      "preference that is a copy of the UA (null: the UA is constant)")
    observed_r: Stat = Field(description="r of the specification's UA and the observed mean preferences")
    observed_p: Stat = Field(description="its exact two-sided p")
    planted: list[float] = Field(description="the planted population correlations (`analysis.power.planted`)")
    power: list[Stat] = Field(description="per planted correlation: the share of simulated preferences whose exact "
                                          "p is at or below alpha")
    median_r: list[Stat] = Field(description="per planted correlation: the median sample r of the simulations")
    grid: list[float] = Field(description="the planted correlations searched for the minimum detectable effect")
    grid_power: list[Stat] = Field(description="the power at each of them")
    mde: Stat = Field(description="the minimum detectable effect: the smallest planted correlation on `grid` whose "
                                  "power reaches `target` (null: none below 1 does)")


class PrimaryPower(Record):
    """The power of the primary test, the median r over the primary universe's distinct specifications, tested
    jointly; the preferences planted on the UA of `Power.specification` (:func:`uaprobe.analysis.category.power.primary_power`)."""

    statistic: Literal["median_r"] = Field(description="the primary statistic")
    n_specs: int = Field(description="the distinct specifications of the primary universe, S")
    model: str = Field(description="a sentence: the statistic and how the preferences are simulated")
    sets: list[PowerSet] = Field(description="every category, then without `analysis.primary.left_out`; `observed_r` "
                                             "is the median r, `observed_p` its joint p, `p_floor` one over the "
                                             "orders (the bound of any test over them)")


class Power(Record):
    """The power of the exact category-level test, simulated with the specification's category UA held fixed
    (:mod:`uaprobe.analysis.category.power`)."""

    specification: dict[str, str | int] = Field(
        description="the specification whose UA is held fixed: pooling, policy, representation, nll, layer")
    model: str = Field(description="a sentence: how the preferences are simulated")
    alpha: float = Field(description="the level a simulated test must reach (`analysis.alpha`)")
    draws: int = Field(description="simulated preferences per planted correlation (`analysis.power.draws`)")
    target: float = Field(description="the power of the minimum detectable effect (`analysis.power.target`)")
    grid_step: float = Field(description="the step of `grid` (`analysis.power.grid_step`)")
    sets: list[PowerSet] = Field(description="every category, then without `analysis.primary.left_out`")
    primary: PrimaryPower = Field(description="the same for the primary statistic, the median r over the primary "
                                              "universe")


class JointP(Record):
    """One joint p of the curve: which test, which statistic."""

    test: str = Field(description="the key of `joint`")
    statistic: str = Field(description="`median_r` or `share_positive`")
    estimate: Stat = Field(description="the statistic's value")
    p: Stat = Field(description="its exact joint permutation p")
    p_floor: float = Field(description="the smallest p its test can give (1 / relabellings)")
    mode: Literal["exact", "monte_carlo"] = Field(description="the mode of its joint test (`joint.<test>.mode`)")
    at_floor: Flag = Field(description="`p` equals `p_floor`: no relabelling but the identity is as extreme")


class SecondaryP(JointP):
    """A secondary joint p, Holm-adjusted across the secondary family."""

    holm_p: Stat = Field(description="Holm-adjusted p across `secondary.tests`")
    holm_reject: Flag = Field(description="`holm_p` <= alpha")


class Secondary(Record):
    """The secondary joint statistics: one Holm family."""

    alpha: float = Field(description="level of the Holm correction (`analysis.alpha`)")
    tests: list[SecondaryP] = Field(description="every joint p but the primary, Holm-adjusted together")


class LayerZero(Record):
    """The model's own lexical baseline: r at layer 0 (the token embeddings, before any context)
    beside r at the pre-declared layers, per distinct specification of the universe."""

    pooling: list[str] = Field(description="the pooling")
    policy: list[str] = Field(description="the position-0 policy")
    representation: list[str] = Field(description="the representation")
    nll: list[str] = Field(description="the NLL kind")
    layer: list[int] = Field(description="the pre-declared layer")
    r: list[Stat] = Field(description="r at that layer (every category)")
    r_layer_zero: list[Stat] = Field(description="r of the same specification at layer 0")


class NllSign(Record):
    """r under the per-token mean NLL and under the summed NLL, per distinct (pooling, policy,
    representation, layer) of the universe: does summing the NLL change r's sign?"""

    pooling: list[str] = Field(description="the pooling")
    policy: list[str] = Field(description="the position-0 policy")
    representation: list[str] = Field(description="the representation")
    layer: list[int] = Field(description="the pre-declared layer")
    r_mean: list[Stat] = Field(description="r with the per-token mean NLL")
    r_sum: list[Stat] = Field(description="r with the summed NLL")
    sign_changes: list[Flag] = Field(description="`r_mean` and `r_sum` have opposite signs")
    n_sign_changes: int = Field(description="how many rows change sign")


class SpecificationCurve(ResultsHeader):
    """``results/models/<id>/specification_curve.json``: the category-level r(UA, mean preference) of every
    specification (pooling x position-0 policy x representation x NLL x layer x left-out category), the
    universe of analytic choices of the one primary joint test (pre-declared layers, every category,
    identical specifications counted once), its exact joint test (every relabelling of the categories'
    preferences applied to every specification at once), the secondary joint tests with Holm across
    them, and the comparisons with layer 0 and the summed NLL (see :mod:`uaprobe.analysis.category.speccurve`)."""

    categories: list[str] = Field(description="the categories")
    n_specs: int = Field(description="number of specifications listed in `specs`")
    choices: SpecChoices = Field(description="the options of each choice")
    relabellings: int = Field(description="relabellings of the categories of the joint tests with every category, "
                                          "the identity included: C!, or m + 1 beyond `max_exact_orders`")
    mode: Literal["exact", "monte_carlo"] = Field(description="`exact` while C! is at most `max_exact_orders`, else `monte_carlo`")
    max_exact_orders: int = Field(description="the bound on the orders an exact test enumerates (8! = 40320)")
    specs: SpecColumns = Field(description="the specifications as parallel columns, sorted by r")
    null_band: NullBand = Field(description="the null band of the curve of every distinct specification (`specs` "
                                            "where `distinct`: every layer and left-out option; the curve the figure "
                                            "draws)")
    below_alpha: BelowAlpha = Field(description="the distinct specifications whose own exact p is at or below "
                                                "alpha, uncorrected")
    universe: Universe = Field(description="the universe of the primary test")
    joint: dict[str, JointTest] = Field(
        description="`declared`: the primary universe (the primary test's); `every_layer`: every layer 0..L instead "
                    "of the pre-declared ones (the depth curve as one test); `without_category`: the universe with "
                    "`analysis.primary.left_out` left out; comparisons in no family: `layer_zero`, the universe's "
                    "choices at layer 0 (the token embeddings: the model's lexical baseline); `full_universe`, every "
                    "pooling and NLL (the universe as first declared); `other_nll` and `other_poolings`, the named "
                    "robustness checks (the summed NLL; first-token pooling)")
    primary: JointP = Field(description="the one primary joint p: `analysis.primary.statistic` of `joint.declared`")
    secondary: Secondary = Field(description="the other statistics of `declared`, `every_layer` and "
                                             "`without_category`, Holm-adjusted as one family")
    layer_zero: LayerZero = Field(description="r at layer 0 beside r at the pre-declared layers")
    nll_sign: NllSign = Field(description="r under the mean and the summed NLL, and whether the sign changes")
    power: Power = Field(description="the simulated power of the exact category-level test")
