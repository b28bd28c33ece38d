"""``dimensions.json`` and ``specification_curve.json``: the representation axis across every choice
(:mod:`uaprobe.analysis.dimensions`, :mod:`uaprobe.analysis.speccurve`)."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import PerLayer, Record, Stat
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
        description="exact two-sided permutation p over every order of the categories' preferences, the identity "
                    "included")
    permutation_count: list[int] = Field(description="the orders enumerated (720 for six categories, 120 with one "
                                                     "left out)")


class JointTest(Record):
    """The curve-level statistics and their exact joint permutation p."""

    n_specs: int = Field(description="specifications with a defined r")
    median_r: Stat = Field(description="median r over them")
    median_p: Stat = Field(description="share of the relabellings with |median r| at least as large")
    share_positive: Stat = Field(description="share of them with r > 0")
    share_p: Stat = Field(description="share of the relabellings with |share - 1/2| at least as large")


class SpecificationCurve(ResultsHeader):
    """``results/models/<id>/specification_curve.json``: the category-level r(UA, mean preference) of every
    specification (pooling x position-0 policy x representation x NLL x layer x left-out category) and the
    exact joint test of the whole curve (every relabelling of the categories' preferences applied to every
    specification at once; see :mod:`uaprobe.analysis.speccurve`)."""

    categories: list[str] = Field(description="the categories")
    n_specs: int = Field(description="number of specifications")
    choices: SpecChoices = Field(description="the options of each choice")
    relabellings: int = Field(description="permutations of the categories the joint test enumerates (C!)")
    specs: SpecColumns = Field(description="the specifications as parallel columns, sorted by r")
    joint: dict[str, JointTest] = Field(description="`all` specifications and those with `no_left_out` category")
