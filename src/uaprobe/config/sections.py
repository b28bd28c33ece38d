"""The sections of ``params.yaml`` as frozen pydantic models, a docstring per field.

Every model is strict (no string is read as a number, no number as a flag), rejects unknown keys
and non-finite numbers, and checks its impossible values in one ``_check``; a failure there is an
:class:`Invalid` naming the field relative to the model, which :mod:`uaprobe.config.messages` turns
into the ``key: got value, expected ...`` sentence of a :class:`~uaprobe.errors.ConfigError`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Mapping, Self, Sequence

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints, ValidationError, \
    field_validator, model_validator

from uaprobe.config.messages import Invalid, message
from uaprobe.errors import ConfigError
from uaprobe.names import Representation

SourceKind = Literal["hub", "local", "gguf", "packaged"]
DropPolicy = Literal["special", "first"]
DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DeviceName = Literal["auto", "cpu", "cuda"]
PresetName = Literal["none", "original"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def _a_list(value: Any) -> Any:
    """A YAML list (or a tuple given in code) and nothing else that iterates: a set has no order."""
    if not isinstance(value, (list, tuple)):
        raise ValueError("not a list")
    return value


Text = Annotated[str, StringConstraints(min_length=1)]
"""A non-empty string."""
Ints = Annotated[tuple[int, ...], Strict(False), BeforeValidator(_a_list)]
"""A YAML list of integers, held as a tuple (the items stay strict)."""
Floats = Annotated[tuple[float, ...], Strict(False), BeforeValidator(_a_list)]
Texts = Annotated[tuple[Text, ...], Strict(False), BeforeValidator(_a_list)]


class Section(BaseModel):
    """One section of ``params.yaml``: strict, frozen, closed to unknown keys. :meth:`build` makes it from a
    parsed mapping, each failure a ConfigError naming the key under :attr:`KEY`; keywords in code make it too
    (a failure there is pydantic's ValidationError: a bug of the caller, not a user's input)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)
    KEY: ClassVar[str] = ""
    """Where the section sits in ``params.yaml`` (the prefix of its keys in messages)."""

    @classmethod
    def build(cls, mapping: Any) -> Self:
        """The section from a parsed YAML mapping, each failure a ConfigError whose keys sit under :attr:`KEY`."""
        try:
            return cls.model_validate(mapping)
        except ValidationError as exc:
            raise ConfigError(message(exc, cls, cls.KEY)) from None


def _require(ok: bool, field: str, value: Any, expected: str) -> None:
    if not ok:
        raise Invalid(field, f"got {value!r}, expected {expected}")


class ModelSpec(Section):
    """One model of the catalog."""

    display: Text
    """Name shown in figures and tables, e.g. ``Pythia-6.9B``."""
    source: SourceKind
    """Where the weights come from: ``hub`` (id@revision, honours the HF cache and
    ``HF_HUB_OFFLINE``), ``local`` (a directory with config and weights), ``gguf`` (a GGUF file
    path) or ``packaged`` (a GGUF file shipped inside an installed Python package)."""
    location: Text
    """Hub id, directory, GGUF file path, or importable package name (for ``packaged``)."""
    revision: Text | None = None
    """Pinned hub revision (commit or immutable branch); required for ``hub``."""
    gguf_file: Text | None = None
    """For ``packaged``: the GGUF file name inside the package (default: its only ``.gguf``)."""
    params_millions: float | None = None
    """Parameter count in millions, for the scaling plots (informational)."""
    dtype: DtypeName = "auto"
    """Compute dtype: ``auto`` is float32 on CPU and bfloat16 on GPU; float16 is refused for
    Gemma, which overflows in it."""
    device_map_auto: bool = False
    """Spread the model over all visible GPUs with ``device_map="auto"`` (large models)."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.source == "hub" and not self.revision:
            raise Invalid("revision", f"missing for hub model {self.location!r}; a hub model needs a pinned revision "
                          "(a commit hash or an immutable branch such as Pythia's `step143000`)")
        if self.source == "hub" and not _HUB_ID.match(self.location):
            raise Invalid("location", f"{self.location!r} is not a hub id; expected `name` or `organisation/name`")
        if self.revision is not None and self.source != "hub":
            raise Invalid("revision", f"only hub models take a revision (source is {self.source!r}); remove it")
        if self.gguf_file is not None and self.source != "packaged":
            raise Invalid("gguf_file", f"only packaged models take a gguf_file (source is {self.source!r}); for "
                          "source: gguf put the file's path in `location`")
        if self.params_millions is not None:
            _require(self.params_millions > 0, "params_millions", self.params_millions, "a number > 0 or null")
        return self


class ExtractParams(Section):
    """How the extraction stage runs the forward passes."""

    KEY: ClassVar[str] = "extract"

    batch_size: int = 64
    """At most this many statements per forward pass (length-sorted batches)."""
    max_batch_tokens: int = 832
    """At most this many padded tokens per forward pass: statements x the longest statement in the
    batch. This, not the number of statements, bounds the memory of a pass (every layer's hidden
    states and the logits over the vocabulary); a statement longer than the budget runs alone."""
    device: DeviceName = "auto"
    """``auto`` picks CUDA when available, else CPU."""
    max_length: int | None = None
    """Refuse statements longer than this many tokens (default: the model's context)."""
    launcher: Text = "python"
    """The command the extract stage runs under: ``python`` (one process), or a data-parallel
    launcher such as ``torchrun --standalone --nproc_per_node=4``."""
    dtype: DtypeName = "auto"
    """Compute dtype of every model whose catalog entry leaves ``dtype`` at ``auto``: ``auto`` is
    float32 on CPU and bfloat16 on GPU; ``float16`` (the original study's) is refused for Gemma,
    which overflows in it."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(self.batch_size >= 1, "batch_size", self.batch_size, "an integer >= 1")
        _require(self.max_batch_tokens >= 1, "max_batch_tokens", self.max_batch_tokens, "an integer >= 1")
        if self.max_length is not None:
            _require(self.max_length >= 2, "max_length", self.max_length, "an integer >= 2 or null")
        return self


class PoolingParams(Section):
    """Which token positions the pooled states cover."""

    KEY: ClassVar[str] = "pooling"

    drop: DropPolicy = "special"
    """``special``: exclude the special tokens actually present (BOS, EOS); ``first``: the seeds'
    ``hidden[0, 1:]`` -- drop position 0 whatever it is and take position 0 as the first token."""


def _at_least(params: object, **minimums: int) -> None:
    """Each named integer field of ``params`` is at least its minimum."""
    for name, low in minimums.items():
        value = getattr(params, name)
        _require(value >= low, name, value, f"an integer >= {low}")


class BinsParams(Section):
    """Random partitions of the pairs into k bins (seed 002)."""

    KEY: ClassVar[str] = "analysis.bins"

    k: Ints | Literal["auto"] = (10, 15, 20, 25, 30)
    """Bin counts to try; ``auto``: those of the default that the dataset's pairs allow, or up to five from 3 to
    the largest it allows (:func:`uaprobe.analysis.run.fit.resolve`, which the analyses see the choice of)."""
    partitions: int = 200
    """Random partitions per k."""
    ci_k: int | Literal["auto"] = 20
    """The k of the one seeded partition that gets a bootstrap CI of r; ``auto``: the largest chosen k up to 20."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.k != "auto":
            _require(len(self.k) > 0 and all(k >= 3 for k in self.k), "k", list(self.k),
                     "a non-empty list of integers >= 3 (a correlation needs 3 points), or auto")
        if self.ci_k != "auto":
            _require(self.ci_k >= 3, "ci_k", self.ci_k, "an integer >= 3, or auto")
        _at_least(self, partitions=1)
        return self


class RobustnessParams(Section):
    """Controls, nulls and resampling of the robustness analysis."""

    KEY: ClassVar[str] = "analysis.robustness"

    lexical_seeds: int = 5
    """Seeds of the model-free lexical baseline (random Gaussian token embeddings, mean-pooled)."""
    null_partitions: int = 1000
    """Random assignments of the pairs to groups of the categories' sizes (the size-matched null)."""
    l_star_tolerance: float = 0.001
    """Layers whose lambda1/sum is within this fraction of the maximum tie with L*."""
    anisotropy_bootstrap: int = 100
    """Bootstrap resamples of the anisotropy prompts for the distribution of L*."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _at_least(self, lexical_seeds=1, null_partitions=1, anisotropy_bootstrap=1)
        _require(0.0 <= self.l_star_tolerance < 1.0, "l_star_tolerance", self.l_star_tolerance,
                 "a number in [0, 1)")
        return self


class PowerParams(Section):
    """The power of the exact category-level test, simulated under the panel's own category structure."""

    KEY: ClassVar[str] = "analysis.power"

    planted: Floats = (0.5, 0.7, 0.9)
    """The planted population correlations whose power is reported."""
    draws: int = 2000
    """Simulated preferences per planted correlation (the same noise draws for every one)."""
    target: float = 0.8
    """The power that defines the minimum detectable effect."""
    grid_step: float = 0.05
    """The step of the grid of planted correlations searched for the minimum detectable effect."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(len(self.planted) > 0 and all(0.0 <= r < 1.0 for r in self.planted), "planted",
                 list(self.planted), "a non-empty list of correlations in [0, 1)")
        _at_least(self, draws=10)
        _require(0.0 < self.target < 1.0, "target", self.target, "a power in (0, 1)")
        _require(0.0 < self.grid_step <= 0.5, "grid_step", self.grid_step, "a step in (0, 0.5]")
        return self


class LengthMatchedParams(Section):
    """The length-matched subset of the pairs."""

    KEY: ClassVar[str] = "analysis.length_matched"

    max_token_difference: int = 1
    """Pairs whose two statements differ by at most this many content tokens (default policy) are kept."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(self.max_token_difference >= 0, "max_token_difference",
                 self.max_token_difference, "an integer >= 0")
        return self


class PrimaryParams(Section):
    """The pre-declared choices of the primary tests, fixed before the tests are run."""

    KEY: ClassVar[str] = "analysis.primary"

    depth: float = 1.0
    """The layer of the primary joint test and of the pair-level family, as a share of the depth:
    round(depth x L) (1.0: the last layer). The per-layer curve is reported beside it."""
    statistic: Literal["median_r", "share_positive"] = "median_r"
    """The primary joint statistic of the specification curve (the other is secondary)."""
    left_out: Text = "ground_truth_numeric"
    """The category the second joint test leaves out (default: the dataset's category whose pairs differ most in length)."""
    pooling: Text = "mean"
    """The pooling the summary of the pair-level family reports (every pooling is in the family)."""
    nll: Literal["mean", "sum"] = "mean"
    """The NLL of the primary universe's preference: the per-token mean, the original study's estimand (the
    summed NLL puts the statements' length into the preference: another estimand, a named robustness check)."""
    poolings: Texts = ("mean", "last")
    """The poolings of the primary universe (first-token pooling, one or two tokens of context in a causal LM, is a
    named robustness check, outside the primary median)."""
    across_models: Literal["holm", "bonferroni"] = "holm"
    """How α is split across the panel's models: the correction of the models' primary p (``results/panel.json``,
    key ``primary``); the primary test runs once per model, so the panel's verdict rests on the corrected p."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(0.0 <= self.depth <= 1.0, "depth", self.depth,
                 "a share of the depth in [0, 1] (1.0: the last layer)")
        _require(self.pooling in ("mean", "last", "first"), "pooling", self.pooling,
                 "`mean`, `last` or `first`")
        _require(len(self.poolings) > 0 and len(set(self.poolings)) == len(self.poolings)
                 and set(self.poolings) <= {"mean", "last", "first"}, "poolings", list(self.poolings),
                 "a non-empty list of distinct poolings among `mean`, `last` and `first`")
        return self

    def layer(self, n_layers: int) -> int:
        """The pre-declared layer of a model with ``n_layers`` blocks (0 = the token embeddings)."""
        return int(round(self.depth * n_layers))

    def left_out_index(self, categories: Sequence[str]) -> int:
        """The index of ``left_out`` among the dataset's ``categories``; a clear error if absent."""
        if self.left_out not in categories:
            raise ConfigError(f"params.yaml: analysis.primary.left_out is {self.left_out!r}, not a category of the "
                              f"dataset ({', '.join(categories)}); set it to one of them")
        return list(categories).index(self.left_out)


class AnalysisParams(Section):
    """Every statistical knob of the analyses."""

    KEY: ClassVar[str] = "analysis"

    seed: int = 42
    """Seed of the one ``numpy.random.Generator`` each analysis builds for itself."""
    bootstrap_resamples: int = 10_000
    """Bootstrap resamples for every CI."""
    permutations: int = 10_000
    """Permutations for every permutation p-value."""
    ci_level: float = 0.95
    """Confidence level of every interval."""
    preference: Literal["mean", "sum"] = "mean"
    """Per-statement NLL used for the preference NLL(B) - NLL(A): per-token mean (the seeds) or sum."""
    alpha: float = 0.05
    """Family-wise / false-discovery level of the multiple-comparison corrections."""
    bins: BinsParams = Field(default_factory=BinsParams)
    """Random bins (seed 002)."""
    aligned_r: float = 0.5
    """Seed 003: r above this is ALIGNED."""
    inverted_r: float = -0.3
    """Seed 003: r below this is INVERTED; between the two, DECOUPLED."""
    neutral_ua: float = 0.02
    """Seed 003: |UA| below this counts as neutral for the per-category aligned flag."""
    neutral_preference: float = 0.1
    """Seed 003: |preference| below this counts as neutral for the per-category aligned flag."""
    stable_depth_std: float = 10.0
    """Seed 001: peak depth is called stable across the panel if its std (in % depth) is below this."""
    spectrum_top: int = 100
    """Seed 004: how many leading eigenvalues of each layer's spectrum are stored."""
    robustness: RobustnessParams = Field(default_factory=RobustnessParams)
    """Controls and nulls: lexical baseline, size-matched null, L* ties and bootstrap."""
    representation: Representation = "raw"
    """The transform of the pooled states before every analysis that reads them
    (:mod:`uaprobe.analysis.geometry.representation`): ``raw`` (none), ``zscore`` (each dimension
    standardized over all statements of the layer) or ``abtt`` (all-but-the-top: the mean and the
    top ``abtt_k`` principal directions removed)."""
    abtt_k: int = 5
    """How many leading principal directions ``abtt`` removes (Mu & Viswanath 2018)."""
    primary: PrimaryParams = Field(default_factory=PrimaryParams)
    """The pre-declared primary tests: layer, joint statistic, left-out category, reported pooling."""
    power: PowerParams = Field(default_factory=PowerParams)
    """The simulated power of the exact category-level test."""
    length_matched: LengthMatchedParams = Field(default_factory=LengthMatchedParams)
    """The length-matched pairs."""
    degenerate_vif: float = 10.0
    """A pair-level test whose metric has a variance inflation factor above this on its covariates is degenerate:
    reported, and kept out of its family's corrections."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(self.seed >= 0, "seed", self.seed, "an integer >= 0 (numpy seeds are non-negative)")
        _require(self.bootstrap_resamples >= 1, "bootstrap_resamples", self.bootstrap_resamples,
                 "an integer >= 1")
        _require(self.permutations >= 1, "permutations", self.permutations, "an integer >= 1")
        _require(0.0 < self.ci_level < 1.0, "ci_level", self.ci_level, "a number in (0, 1)")
        _require(0.0 < self.alpha < 1.0, "alpha", self.alpha, "a number in (0, 1)")
        _require(-1.0 <= self.aligned_r <= 1.0, "aligned_r", self.aligned_r, "a correlation in [-1, 1]")
        _require(-1.0 <= self.inverted_r <= 1.0, "inverted_r", self.inverted_r, "a correlation in [-1, 1]")
        _require(self.neutral_ua >= 0, "neutral_ua", self.neutral_ua, "a number >= 0")
        _require(self.neutral_preference >= 0, "neutral_preference", self.neutral_preference,
                 "a number >= 0")
        _require(self.inverted_r < self.aligned_r, "inverted_r", self.inverted_r,
                 f"a number below analysis.aligned_r ({self.aligned_r})")
        _require(self.spectrum_top >= 1, "spectrum_top", self.spectrum_top, "an integer >= 1")
        _require(self.stable_depth_std > 0, "stable_depth_std", self.stable_depth_std, "a number > 0")
        _require(self.abtt_k >= 1, "abtt_k", self.abtt_k, "an integer >= 1")
        _require(self.degenerate_vif > 1.0, "degenerate_vif", self.degenerate_vif,
                 "a number > 1 (a VIF is at least 1)")
        return self


class Params(Section):
    """The whole of ``params.yaml``."""

    models: Texts
    """The panel ``dvc repro`` runs: ids from ``catalog``."""
    catalog: dict[str, ModelSpec]
    """Every model the project knows, by id."""
    extract: ExtractParams = Field(default_factory=ExtractParams)
    pooling: PoolingParams = Field(default_factory=PoolingParams)
    analysis: AnalysisParams = Field(default_factory=AnalysisParams)
    preset: PresetName = "none"
    """``original`` sets every setting of the original study's notebooks (:data:`PRESETS`), over
    the values of ``pooling`` and ``extract`` in the file: ``dvc exp run -S preset=original``."""

    @field_validator("catalog", mode="before")
    @classmethod
    def _catalog_ids(cls, value: Any) -> Any:
        if not isinstance(value, Mapping) or not value:
            raise Invalid("", f"got {value!r}, expected a mapping of model id -> model entry")
        for model_id in value:
            if isinstance(model_id, bool) or not isinstance(model_id, str):
                raise Invalid("", f"model id {model_id!r} must be a string of letters, digits, '-' or '_'")
            if not model_id.replace("-", "").replace("_", "").isalnum():
                raise Invalid("", f"model id {model_id!r} must be letters, digits, '-' or '_': it names files and is "
                              "a DVC parameter key (`catalog.<id>`), where a '.' would split it (write pythia-1-4b, "
                              "not pythia-1.4b)")
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        _require(len(self.models) > 0, "models", list(self.models), "a non-empty list of catalog ids")
        for model_id in self.models:
            if model_id not in self.catalog:
                raise Invalid("models", f"{model_id!r} has no entry in `catalog`; known ids: {sorted(self.catalog)}. "
                              "Add a catalog entry with a source, or pick a known id.")
        if len(set(self.models)) != len(self.models):
            raise Invalid("models", f"ids repeat in {list(self.models)}; list each model once")
        return self

    def dtype_of(self, model_id: str) -> str:
        """The compute dtype setting of one model: its catalog ``dtype`` unless ``auto``, else ``extract.dtype``."""
        spec = self.model(model_id)
        return spec.dtype if spec.dtype != "auto" else self.extract.dtype

    def model(self, model_id: str) -> ModelSpec:
        """The catalog entry of ``model_id``, or a ConfigError naming the known ids."""
        try:
            return self.catalog[model_id]
        except KeyError:
            raise ConfigError(
                f"catalog: no model {model_id!r}; known ids: {sorted(self.catalog)}"
            ) from None
