"""Typed, validated parameters: the one place that reads ``params.yaml``.

Every section is a frozen dataclass with a docstring per field. :func:`load_params` builds them
from the YAML mapping and rejects unknown keys, wrong types and impossible values with a
:class:`~uaprobe.errors.ConfigError` that names the file, the key and the allowed values.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import yaml

from uaprobe.conflicts import check_bytes
from uaprobe.errors import ConfigError, unreadable, unusable
from uaprobe.names import Representation

SourceKind = Literal["hub", "local", "gguf", "packaged"]
DropPolicy = Literal["special", "first"]
DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DeviceName = Literal["auto", "cpu", "cuda"]
PresetName = Literal["none", "original"]

PRESETS: Mapping[str, Mapping[str, str]] = {
    "original": {"pooling.drop": "first", "extract.dtype": "float16"},
}
"""What each ``preset`` sets. ``original``: the original study's notebooks exactly -- position 0
dropped from every pooled state (``hidden[0, 1:]``) and float16 weights and activations (they ran
in float16 on a GPU). Their every-4th-layer view needs no setting: every layer is computed, and
every analysis that depends on the view reports it (``seed_layers``, the seed view's sign changes
and scaling peaks, the phases)."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


@dataclass(frozen=True)
class ModelSpec:
    """One model of the catalog."""

    display: str
    """Name shown in figures and tables, e.g. ``Pythia-6.9B``."""
    source: SourceKind
    """Where the weights come from: ``hub`` (id@revision, honours the HF cache and
    ``HF_HUB_OFFLINE``), ``local`` (a directory with config and weights), ``gguf`` (a GGUF file
    path) or ``packaged`` (a GGUF file shipped inside an installed Python package)."""
    location: str
    """Hub id, directory, GGUF file path, or importable package name (for ``packaged``)."""
    revision: str | None = None
    """Pinned hub revision (commit or immutable branch); required for ``hub``."""
    gguf_file: str | None = None
    """For ``packaged``: the GGUF file name inside the package (default: its only ``.gguf``)."""
    params_millions: float | None = None
    """Parameter count in millions, for the scaling plots (informational)."""
    dtype: DtypeName = "auto"
    """Compute dtype: ``auto`` is float32 on CPU and bfloat16 on GPU; float16 is refused for
    Gemma, which overflows in it."""
    device_map_auto: bool = False
    """Spread the model over all visible GPUs with ``device_map="auto"`` (large models)."""

    def __post_init__(self) -> None:
        # Keys are relative to the catalog entry; the loader prefixes ``catalog.<id>.``.
        if self.source == "hub" and not self.revision:
            raise ConfigError(
                f"revision: missing for hub model {self.location!r}; a hub model needs a pinned revision "
                "(a commit hash or an immutable branch such as Pythia's `step143000`)"
            )
        if self.source == "hub" and not _HUB_ID.match(self.location):
            raise ConfigError(f"location: {self.location!r} is not a hub id; expected `name` or `organisation/name`")
        if self.revision is not None and self.source != "hub":
            raise ConfigError(f"revision: only hub models take a revision (source is {self.source!r}); remove it")
        if self.gguf_file is not None and self.source != "packaged":
            raise ConfigError(
                f"gguf_file: only packaged models take a gguf_file (source is {self.source!r}); for source: gguf "
                "put the file's path in `location`"
            )
        if self.params_millions is not None and not self.params_millions > 0:
            raise ConfigError(f"params_millions: got {self.params_millions!r}, expected a number > 0 or null")


@dataclass(frozen=True)
class ExtractParams:
    """How the extraction stage runs the forward passes."""

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
    launcher: str = "python"
    """The command the extract stage runs under: ``python`` (one process), or a data-parallel
    launcher such as ``torchrun --standalone --nproc_per_node=4``."""
    dtype: DtypeName = "auto"
    """Compute dtype of every model whose catalog entry leaves ``dtype`` at ``auto``: ``auto`` is
    float32 on CPU and bfloat16 on GPU; ``float16`` (the original study's) is refused for Gemma,
    which overflows in it."""

    def __post_init__(self) -> None:
        _require(self.batch_size >= 1, "extract.batch_size", self.batch_size, "an integer >= 1")
        _require(self.max_batch_tokens >= 1, "extract.max_batch_tokens", self.max_batch_tokens, "an integer >= 1")
        if self.max_length is not None:
            _require(self.max_length >= 2, "extract.max_length", self.max_length, "an integer >= 2 or null")


@dataclass(frozen=True)
class PoolingParams:
    """Which token positions the pooled states cover."""

    drop: DropPolicy = "special"
    """``special``: exclude the special tokens actually present (BOS, EOS); ``first``: the seeds'
    ``hidden[0, 1:]`` -- drop position 0 whatever it is and take position 0 as the first token."""


def _at_least(params: object, section: str, **minimums: int) -> None:
    """Each named integer field of ``params`` is at least its minimum (the error names ``section.field``)."""
    for name, low in minimums.items():
        value = getattr(params, name)
        _require(value >= low, f"{section}.{name}", value, f"an integer >= {low}")


@dataclass(frozen=True)
class BinsParams:
    """Random partitions of the pairs into k bins (seed 002)."""

    k: tuple[int, ...] | Literal["auto"] = (10, 15, 20, 25, 30)
    """Bin counts to try; ``auto``: those of the default that the dataset's pairs allow, or up to five from 3 to
    the largest it allows (:func:`uaprobe.analysis.run.fit.resolve`, which the analyses see the choice of)."""
    partitions: int = 200
    """Random partitions per k."""
    ci_k: int | Literal["auto"] = 20
    """The k of the one seeded partition that gets a bootstrap CI of r; ``auto``: the largest chosen k up to 20."""

    def __post_init__(self) -> None:
        if self.k != "auto":
            _require(len(self.k) > 0 and all(k >= 3 for k in self.k), "analysis.bins.k", list(self.k),
                     "a non-empty list of integers >= 3 (a correlation needs 3 points), or auto")
        if self.ci_k != "auto":
            _require(self.ci_k >= 3, "analysis.bins.ci_k", self.ci_k, "an integer >= 3, or auto")
        _at_least(self, "analysis.bins", partitions=1)


@dataclass(frozen=True)
class RobustnessParams:
    """Controls, nulls and resampling of the robustness analysis."""

    lexical_seeds: int = 5
    """Seeds of the model-free lexical baseline (random Gaussian token embeddings, mean-pooled)."""
    null_partitions: int = 1000
    """Random assignments of the pairs to groups of the categories' sizes (the size-matched null)."""
    l_star_tolerance: float = 0.001
    """Layers whose lambda1/sum is within this fraction of the maximum tie with L*."""
    anisotropy_bootstrap: int = 100
    """Bootstrap resamples of the anisotropy prompts for the distribution of L*."""

    def __post_init__(self) -> None:
        _at_least(self, "analysis.robustness", lexical_seeds=1, null_partitions=1, anisotropy_bootstrap=1)
        _require(0.0 <= self.l_star_tolerance < 1.0, "analysis.robustness.l_star_tolerance", self.l_star_tolerance,
                 "a number in [0, 1)")


@dataclass(frozen=True)
class PowerParams:
    """The power of the exact category-level test, simulated under the panel's own category structure."""

    planted: tuple[float, ...] = (0.5, 0.7, 0.9)
    """The planted population correlations whose power is reported."""
    draws: int = 2000
    """Simulated preferences per planted correlation (the same noise draws for every one)."""
    target: float = 0.8
    """The power that defines the minimum detectable effect."""
    grid_step: float = 0.05
    """The step of the grid of planted correlations searched for the minimum detectable effect."""

    def __post_init__(self) -> None:
        _require(len(self.planted) > 0 and all(0.0 <= r < 1.0 for r in self.planted), "analysis.power.planted",
                 list(self.planted), "a non-empty list of correlations in [0, 1)")
        _at_least(self, "analysis.power", draws=10)
        _require(0.0 < self.target < 1.0, "analysis.power.target", self.target, "a power in (0, 1)")
        _require(0.0 < self.grid_step <= 0.5, "analysis.power.grid_step", self.grid_step, "a step in (0, 0.5]")


@dataclass(frozen=True)
class LengthMatchedParams:
    """The length-matched subset of the pairs."""

    max_token_difference: int = 1
    """Pairs whose two statements differ by at most this many content tokens (default policy) are kept."""

    def __post_init__(self) -> None:
        _require(self.max_token_difference >= 0, "analysis.length_matched.max_token_difference",
                 self.max_token_difference, "an integer >= 0")


@dataclass(frozen=True)
class PrimaryParams:
    """The pre-declared choices of the primary tests, fixed before the tests are run."""

    depth: float = 1.0
    """The layer of the primary joint test and of the pair-level family, as a share of the depth:
    round(depth x L) (1.0: the last layer). The per-layer curve is reported beside it."""
    statistic: Literal["median_r", "share_positive"] = "median_r"
    """The primary joint statistic of the specification curve (the other is secondary)."""
    left_out: str = "ground_truth_numeric"
    """The category the second joint test leaves out (default: the dataset's category whose pairs differ most in length)."""
    pooling: str = "mean"
    """The pooling the summary of the pair-level family reports (every pooling is in the family)."""
    nll: Literal["mean", "sum"] = "mean"
    """The NLL of the primary universe's preference: the per-token mean, the original study's estimand (the
    summed NLL puts the statements' length into the preference: another estimand, a named robustness check)."""
    poolings: tuple[str, ...] = ("mean", "last")
    """The poolings of the primary universe (first-token pooling, one or two tokens of context in a causal LM, is a
    named robustness check, outside the primary median)."""
    across_models: Literal["holm", "bonferroni"] = "holm"
    """How α is split across the panel's models: the correction of the models' primary p (``results/panel.json``,
    key ``primary``); the primary test runs once per model, so the panel's verdict rests on the corrected p."""

    def __post_init__(self) -> None:
        _require(0.0 <= self.depth <= 1.0, "analysis.primary.depth", self.depth,
                 "a share of the depth in [0, 1] (1.0: the last layer)")
        _require(self.statistic in ("median_r", "share_positive"), "analysis.primary.statistic", self.statistic,
                 "`median_r` or `share_positive`")
        _require(bool(self.left_out), "analysis.primary.left_out", self.left_out, "a category name of the dataset")
        _require(self.pooling in ("mean", "last", "first"), "analysis.primary.pooling", self.pooling,
                 "`mean`, `last` or `first`")
        _require(self.across_models in ("holm", "bonferroni"), "analysis.primary.across_models", self.across_models,
                 "`holm` or `bonferroni`")
        _require(self.nll in ("mean", "sum"), "analysis.primary.nll", self.nll, "`mean` or `sum`")
        _require(len(self.poolings) > 0 and len(set(self.poolings)) == len(self.poolings)
                 and set(self.poolings) <= {"mean", "last", "first"}, "analysis.primary.poolings", list(self.poolings),
                 "a non-empty list of distinct poolings among `mean`, `last` and `first`")

    def layer(self, n_layers: int) -> int:
        """The pre-declared layer of a model with ``n_layers`` blocks (0 = the token embeddings)."""
        return int(round(self.depth * n_layers))

    def left_out_index(self, categories: Sequence[str]) -> int:
        """The index of ``left_out`` among the dataset's ``categories``; a clear error if absent."""
        if self.left_out not in categories:
            raise ConfigError(f"params.yaml: analysis.primary.left_out is {self.left_out!r}, not a category of the "
                              f"dataset ({', '.join(categories)}); set it to one of them")
        return list(categories).index(self.left_out)


@dataclass(frozen=True)
class AnalysisParams:
    """Every statistical knob of the analyses."""

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
    bins: BinsParams = field(default_factory=BinsParams)
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
    robustness: RobustnessParams = field(default_factory=RobustnessParams)
    """Controls and nulls: lexical baseline, size-matched null, L* ties and bootstrap."""
    representation: Representation = "raw"
    """The transform of the pooled states before every analysis that reads them
    (:mod:`uaprobe.analysis.geometry.representation`): ``raw`` (none), ``zscore`` (each dimension
    standardized over all statements of the layer) or ``abtt`` (all-but-the-top: the mean and the
    top ``abtt_k`` principal directions removed)."""
    abtt_k: int = 5
    """How many leading principal directions ``abtt`` removes (Mu & Viswanath 2018)."""
    primary: PrimaryParams = field(default_factory=PrimaryParams)
    """The pre-declared primary tests: layer, joint statistic, left-out category, reported pooling."""
    power: PowerParams = field(default_factory=PowerParams)
    """The simulated power of the exact category-level test."""
    length_matched: LengthMatchedParams = field(default_factory=LengthMatchedParams)
    """The length-matched pairs."""
    degenerate_vif: float = 10.0
    """A pair-level test whose metric has a variance inflation factor above this on its covariates is degenerate:
    reported, and kept out of its family's corrections."""

    def __post_init__(self) -> None:
        _require(self.seed >= 0, "analysis.seed", self.seed, "an integer >= 0 (numpy seeds are non-negative)")
        _require(self.bootstrap_resamples >= 1, "analysis.bootstrap_resamples", self.bootstrap_resamples,
                 "an integer >= 1")
        _require(self.permutations >= 1, "analysis.permutations", self.permutations, "an integer >= 1")
        _require(0.0 < self.ci_level < 1.0, "analysis.ci_level", self.ci_level, "a number in (0, 1)")
        _require(0.0 < self.alpha < 1.0, "analysis.alpha", self.alpha, "a number in (0, 1)")
        _require(-1.0 <= self.aligned_r <= 1.0, "analysis.aligned_r", self.aligned_r, "a correlation in [-1, 1]")
        _require(-1.0 <= self.inverted_r <= 1.0, "analysis.inverted_r", self.inverted_r, "a correlation in [-1, 1]")
        _require(self.neutral_ua >= 0, "analysis.neutral_ua", self.neutral_ua, "a number >= 0")
        _require(self.neutral_preference >= 0, "analysis.neutral_preference", self.neutral_preference,
                 "a number >= 0")
        _require(self.inverted_r < self.aligned_r, "analysis.inverted_r", self.inverted_r,
                 f"a number below analysis.aligned_r ({self.aligned_r})")
        _require(self.spectrum_top >= 1, "analysis.spectrum_top", self.spectrum_top, "an integer >= 1")
        _require(self.stable_depth_std > 0, "analysis.stable_depth_std", self.stable_depth_std, "a number > 0")
        _require(self.abtt_k >= 1, "analysis.abtt_k", self.abtt_k, "an integer >= 1")
        _require(self.degenerate_vif > 1.0, "analysis.degenerate_vif", self.degenerate_vif,
                 "a number > 1 (a VIF is at least 1)")


@dataclass(frozen=True)
class Params:
    """The whole of ``params.yaml``."""

    models: tuple[str, ...]
    """The panel ``dvc repro`` runs: ids from ``catalog``."""
    catalog: Mapping[str, ModelSpec]
    """Every model the project knows, by id."""
    extract: ExtractParams = field(default_factory=ExtractParams)
    pooling: PoolingParams = field(default_factory=PoolingParams)
    analysis: AnalysisParams = field(default_factory=AnalysisParams)
    preset: PresetName = "none"
    """``original`` sets every setting of the original study's notebooks (:data:`PRESETS`), over
    the values of ``pooling`` and ``extract`` in the file: ``dvc exp run -S preset=original``."""

    def __post_init__(self) -> None:
        _require(len(self.models) > 0, "models", list(self.models), "a non-empty list of catalog ids")
        for model_id in self.models:
            if model_id not in self.catalog:
                raise ConfigError(
                    f"models: {model_id!r} has no entry in `catalog`; known ids: {sorted(self.catalog)}. "
                    "Add a catalog entry with a source, or pick a known id."
                )
        if len(set(self.models)) != len(self.models):
            raise ConfigError(f"models: ids repeat in {list(self.models)}; list each model once")

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


def _require(ok: bool, key: str, value: Any, expected: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: got {value!r}, expected {expected}")


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"a list of {_describe(typing.get_args(tp)[0])}"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return f"a mapping with keys {sorted(f.name for f in dataclasses.fields(tp))}"
    if tp is float:
        return "a finite number"
    if tp is str:
        return "a non-empty string"
    if tp is int:
        return "an integer"
    if tp is bool:
        return "true or false"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, key: str) -> Any:
    """Check ``value`` against the annotation ``tp`` and convert it (lists to tuples, nested dataclasses)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value in typing.get_args(tp) and not isinstance(value, bool):
            return value
    elif origin in (typing.Union, types.UnionType):
        nested: list[ConfigError] = []
        for arg in typing.get_args(tp):
            try:
                return _convert(arg, value, key)
            except ConfigError as exc:
                if str(exc).startswith(f"{key}["):  # the value has this alternative's shape; one item is wrong
                    nested.append(exc)
        if nested:
            raise nested[0]
    elif origin is tuple:
        if isinstance(value, (list, tuple)):
            (inner, _ellipsis) = typing.get_args(tp)
            return tuple(_convert(inner, v, f"{key}[{i}]") for i, v in enumerate(value))
    elif tp is type(None):
        if value is None:
            return None
    elif dataclasses.is_dataclass(tp):
        if isinstance(value, Mapping):
            return _build(tp, value, key)
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer too large for a float
                number = math.inf
            if math.isfinite(number):
                return number
    elif tp is str:
        if isinstance(value, str) and value:
            return value
    else:  # pragma: no cover - a new annotation needs a branch here
        raise TypeError(f"unsupported annotation {tp!r}")
    raise ConfigError(f"{key}: got {value!r}, expected {_describe(tp)}")


def _build(cls: type, mapping: Mapping[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(map(str, mapping)) - set(fields))
    if unknown:
        where = prefix or "top level"
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name not in mapping:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key}: missing; expected {_describe(hints[name])}")
            continue
        if cls is Params and name == "catalog":
            kwargs[name] = _build_catalog(mapping[name])
        else:
            kwargs[name] = _convert(hints[name], mapping[name], key)
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        if cls is ModelSpec and prefix:  # its checks name keys relative to the entry
            raise ConfigError(f"{prefix}.{exc}") from None
        raise


def _build_catalog(value: Any) -> dict[str, ModelSpec]:
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"catalog: got {value!r}, expected a mapping of model id -> model entry")
    catalog = {}
    for model_id, entry in value.items():
        if isinstance(model_id, bool) or not isinstance(model_id, str):
            raise ConfigError(f"catalog: model id {model_id!r} must be a string of letters, digits, '-' or '_'")
        if not isinstance(model_id, str) or not model_id.replace("-", "").replace("_", "").isalnum():
            raise ConfigError(
                f"catalog: model id {model_id!r} must be letters, digits, '-' or '_': it names files and is a "
                "DVC parameter key (`catalog.<id>`), where a '.' would split it (write pythia-1-4b, not pythia-1.4b)"
            )
        catalog[model_id] = _convert(ModelSpec, entry, f"catalog.{model_id}")
    return catalog


def params_from_mapping(mapping: Any) -> Params:
    """Build :class:`Params` from an already parsed YAML document."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"top level: got {type(mapping).__name__}, expected a mapping of sections")
    return apply_preset(_build(Params, mapping, ""))


def param_at(doc: Any, dotted: str) -> Any:
    """The value of DVC's dotted parameter key ``a.b.c`` in a parsed YAML document (a key that itself holds
    dots matches first); KeyError if absent. Results files take ``/``-paths instead
    (:func:`uaprobe.publishing.provenance.values.lookup`)."""
    if isinstance(doc, Mapping) and dotted in doc:
        return doc[dotted]
    head, _, rest = dotted.partition(".")
    if not rest or not isinstance(doc, Mapping) or head not in doc:
        raise KeyError(dotted)
    return param_at(doc[head], rest)


def differing(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf where two parsed YAML/JSON values differ: (dotted key under ``prefix``, value in a, value in b)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in differing(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))]
    return [] if a == b else [(prefix, a, b)]


def analysis_from_mapping(mapping: Any) -> AnalysisParams:
    """Build the ``analysis`` section alone (as dvc.lock records it for a stage) from a parsed mapping."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"analysis: got {type(mapping).__name__}, expected a mapping")
    return _build(AnalysisParams, mapping, "analysis")


def apply_preset(params: Params) -> Params:
    """``params`` with the settings of its ``preset`` (:data:`PRESETS`) in place."""
    if params.preset == "none":
        return params
    values = PRESETS[params.preset]
    return dataclasses.replace(
        params,
        pooling=dataclasses.replace(params.pooling, drop=values["pooling.drop"]),
        extract=dataclasses.replace(params.extract, dtype=values["extract.dtype"]),
    )


class _RepeatedKey(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(f"key {key!r} on line {line} repeats line {first}")
        self.key, self.line, self.first = key, line, first


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key repeated in one mapping is an error, not a silent overwrite."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges are overridable by design
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: the base constructor reports it
        line = key_node.start_mark.line + 1
        if first is not None:
            raise _RepeatedKey(key, line, first)
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read and validate ``params.yaml``; every error names the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        check_bytes(text.encode("utf-8"), path)
        mapping = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found; run from the repository root or pass --params") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid UTF-8 YAML ({exc})") from None
    except _RepeatedKey as exc:
        raise ConfigError(f"{path}: {exc}; YAML would keep only the last value silently. Keep one of them") from None
    except OSError as exc:
        raise ConfigError(unreadable(path, exc, "the params file", "pass a readable YAML file with --params")) from None
    except (RecursionError, ValueError) as exc:
        raise ConfigError(unusable(path, exc, "params file", "compare it with the shipped params.yaml")) from None
    try:
        return params_from_mapping(mapping)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
