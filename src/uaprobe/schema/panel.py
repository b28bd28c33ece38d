"""The panel's files, written by ``compare``: ``results/panel.json`` (seed 001, scaling across the
models) and ``metrics/panel.json``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from uaprobe.schema.base import Flag, Index, Record, Stat
from uaprobe.schema.common import NUMERICS, Peak
from uaprobe.schema.specs import PowerSet


class CurveSignChange(Record):
    """A sign change of a model's curve."""

    layer_before: int = Field(description="the layer before the change")
    layer_after: int = Field(description="the layer after the change")
    midpoint_depth_pct: float = Field(description="depth of the midpoint, % of L")


class ModelCurve(Record):
    """One model's layer curve (from its ``layerwise.json``)."""

    display: str = Field(description="display name")
    params_millions: float | None = Field(description="parameters in millions, from the catalog; null when the "
                                                      "catalog does not give it")
    n_layers: int = Field(description="L")
    layers: list[int] = Field(description="the layers of the curve (all, or the seed's view)")
    depth_pct: list[float] = Field(description="their depth, % of L")
    r: list[Stat] = Field(description="r(UA, mean preference) at those layers")
    peak_positive: Peak = Field(description="max r")
    peak_negative: Peak = Field(description="min r")
    final_r: Stat = Field(description="r at L")
    sign_changes: list[CurveSignChange] = Field(description="sign changes of the curve")


class ScalingSummary(Record):
    """Peak positions across the panel."""

    peak_positive_depth_mean: Stat = Field(description="mean depth of the max r, % of L")
    peak_positive_depth_std: Stat = Field(description="its std (ddof 0, as the seed)")
    peak_negative_depth_mean: Stat = Field(description="mean depth of the min r")
    peak_negative_depth_std: Stat = Field(description="its std")
    n_models_with_peak: int = Field(description="models with a defined peak")
    stable: Flag = Field(description="the seed's verdict: peak_positive_depth_std < stable_depth_std")


class ScalingView(Record):
    """Every model's curve of one pooling, and their summary."""

    models: dict[str, ModelCurve] = Field(description="per model id, panel order")
    summary: ScalingSummary = Field(description="peak positions across the panel")


class PanelAnisotropy(Record):
    """One model's L* (from its ``anisotropy.json``)."""

    l_star: Index = Field(description="L*")
    l_star_depth_pct: Stat = Field(description="its depth, % of L")
    is_bell_curve: Flag = Field(description="the seed's bell-curve verdict")


class PanelPrimaryModel(Record):
    """One model's primary joint p and its correction across the panel."""

    p: Stat = Field(description="the primary joint p of its `specification_curve.json` (`primary.p`), uncorrected")
    adjusted_p: Stat = Field(description="that p corrected across the panel's models (`correction`)")
    reject: Flag = Field(description="`adjusted_p` <= `alpha`")


class PanelPrimary(Record):
    """The primary test across the panel: it runs once per model, so α is split across the models as
    ``analysis.primary.across_models`` declares before any result."""

    statistic: str = Field(description="`analysis.primary.statistic`")
    correction: str = Field(description="`analysis.primary.across_models`: `holm` or `bonferroni` over the models")
    alpha: float = Field(description="`analysis.alpha`")
    models: dict[str, PanelPrimaryModel] = Field(description="per model id, panel order")


class PairPower(Record):
    """The smallest population partial r the family's tests detect with power `PanelPairFamily.power_target`
    (Fisher-z approximation, two-sided: :func:`uaprobe.analysis.inference.multiplicity.partial_r_mde`)."""

    n: int | None = Field(description="the pairs (the fewest over the family's tests)")
    n_covariates: int | None = Field(description="the covariates beside the intercept (the most over its tests)")
    mde: Stat = Field(description="at alpha, uncorrected")
    mde_panel: Stat = Field(description="at alpha / `n_tests` of the panel: the first step of its Holm correction")


class PanelPairFamilyModel(Record):
    """One family of one model in the panel-wide pair-level family: one entry per row of that family's
    ``tests`` in ``pair_models.json``."""

    holm_p: list[Stat] = Field(description="the test's p Holm-adjusted across the panel-wide family (a merged test: "
                                           "that of the test it is merged into)")
    holm_reject: list[Flag] = Field(description="`holm_p` <= alpha")
    n_reject: int = Field(description="counted tests with `holm_reject` true")
    maxt_p: list[Stat] = Field(description="the family's max-T step-down p (`pair_models.json`) times the "
                                           "panel's `n_families` (Bonferroni across the families; capped at 1)")
    maxt_reject: list[Flag] = Field(description="`maxt_p` <= alpha")
    n_maxt_reject: int = Field(description="counted tests with `maxt_reject` true")
    power: PairPower = Field(description="the minimum detectable partial r of the family's tests")


class PanelPairFamily(Record):
    """Every pair-level test at the pre-declared layer -- the three families of ``pair_models.json``, every
    model -- Holm-corrected as one family."""

    families: dict[str, str] = Field(description="family name -> its key in `pair_models.json`")
    alpha: float = Field(description="`analysis.alpha`")
    n_tests: int = Field(description="the counted tests with a defined p, over every family and model")
    n_degenerate: int = Field(description="the distinct degenerate tests kept out (VIF above "
                                          "`analysis.degenerate_vif`), over every family and model")
    n_reject: int = Field(description="how many of them survive")
    holm_floor: Stat = Field(description="the smallest Holm p the family can give: `n_tests` / (1 + B)")
    n_families: int = Field(description="the model x family pairs that test anything: the Bonferroni factor of "
                                        "the panel's max-T p")
    n_maxt_reject: int = Field(description="counted tests whose panel max-T p is at most alpha, over the panel")
    power_target: float = Field(description="the power of the minimum detectable effects (`analysis.power.target`)")
    models: dict[str, dict[str, PanelPairFamilyModel]] = Field(description="per model id and family name")


class PanelOriginal(Record):
    """The original study's published per-category (UA, mean preference) at its last layer, tested as the panel's
    category-level r is (:func:`uaprobe.analysis.panel.compare.original_points`)."""

    source: str = Field(description="the file of the published numbers")
    categories: list[str] = Field(description="its categories, in the file's order")
    ua: list[float] = Field(description="their published UA")
    preference: list[float] = Field(description="their published mean preference")
    r: Stat = Field(description="Pearson's r of the points")
    p: Stat = Field(description="its exact two-sided permutation p over every order of the preferences")
    orders: int = Field(description="the orders of the test")
    p_floor: Stat = Field(description="the smallest p the test can attain with this UA")
    leave_one_out_r: list[Stat] = Field(description="r with each category left out, in `categories` order")
    power: PowerSet = Field(description="the exact test's power with the published UA held fixed")


class Panel(Record):
    """``results/panel.json``: seed 001, the layer curves across the panel."""

    models: list[str] = Field(description="model ids, panel order")
    stable_depth_std: float = Field(description="the seed's threshold of a stable peak depth")
    settings: dict[str, Any] = Field(description="the `analysis` section of params.yaml used")
    poolings: dict[str, ScalingView] = Field(description="per pooling, every layer")
    seed_layers_view: dict[str, ScalingView] = Field(description="per pooling, every model restricted to its "
                                                                 "`seed_layers` (the published numbers)")
    sink_excluded: dict[str, ScalingView] | None = Field(None, description="the sink-excluded policy's view "
                                                                           "(mean pooling)")
    anisotropy: dict[str, PanelAnisotropy] = Field(description="per model, its L*")
    primary: PanelPrimary | None = Field(None, description="the models' primary joint p corrected across the panel")
    original: PanelOriginal | None = Field(None, description="the original study's published category points "
                                                             "under this panel's category-level test")
    pair_family: PanelPairFamily | None = Field(None, description="every pair-level test at the pre-declared "
                                                                  "layer of every model as one Holm family")
    nan_reasons: dict[str, str] = Field(description="for the path of every missing value, why it is missing")
    numerics: dict[str, Any] | None = Field(None, description=NUMERICS)


class PanelPoolingMetrics(Record):
    """Peak positions of one pooling."""

    peak_positive_depth_mean: Stat = Field(description="mean depth of the max r, % of L")
    peak_positive_depth_std: Stat = Field(description="its std")
    peak_negative_depth_mean: Stat = Field(description="mean depth of the min r")
    peak_negative_depth_std: Stat = Field(description="its std")
    stable: Flag = Field(description="the seed's verdict")


class PanelMetrics(Record):
    """``metrics/panel.json``: the panel's headline scalars (null: see ``results/panel.json``)."""

    poolings: dict[str, PanelPoolingMetrics] = Field(description="per pooling")
    final_r: dict[str, Stat] = Field(description="per model, r at L (mean pooling)")
    peak_positive_depth_pct: dict[str, Stat] = Field(description="per model, depth of the max r (mean pooling)")
    sink_excluded_final_r: dict[str, Stat] | None = Field(None, description="per model, the sink-excluded r at L")
