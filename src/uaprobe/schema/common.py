"""What every per-model results file carries (the header), and the small records several files share."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from uaprobe.schema.base import Index, PerLayer, Record, Stat


class Extraction(Record):
    """Provenance copied from the HDF5 attributes of the extraction file."""

    model_id: str = Field(description="catalog id of the model the file was extracted from")
    display: str = Field(description="display name of the model")
    source: str = Field(description="model source kind: `hub`, `local`, `gguf`, `packaged`")
    location: str = Field(description="where the weights came from (hub id, directory, GGUF file)")
    revision: str = Field(description="pinned hub revision (empty for other sources)")
    dtype: str = Field(description="dtype of the forward pass (`float32`, `bfloat16`)")
    pooling_drop: str = Field(description="the run's pooling policy: `special` (special tokens out) or `first` "
                                          "(position 0 out)")
    dataset_sha256: str = Field(description="sha256 of the dataset the statements came from")
    prompts_sha256: str = Field(description="sha256 of the anisotropy prompts")
    uaprobe_version: str = Field(description="version of the package that extracted")
    bos_added: bool = Field(description="whether the tokenizer put a BOS token at position 0")


NUMERICS = ("`extraction` (the HDF5 attribute `numerics`) and `analysis` (the analysis process): `isa`, `pins`, "
            "`threads`, `machine` and per library its version and kernels (see Conventions); absent from files "
            "written outside the stages")


class Representation(Record):
    """The transform of the pooled states every analysis of the file read (``analysis.representation``)."""

    kind: str = Field(description="`raw`, `zscore` or `abtt` (docs: the representation axis)")
    abtt_k: int = Field(description="principal directions `abtt` removes (recorded whatever the kind)")


class ResultsHeader(Record):
    """The keys every per-model results file starts with (``results/models/<id>/*.json``)."""

    model: str = Field(description="catalog id of the model")
    display: str = Field(description="display name of the model")
    n_layers: int = Field(description="L, the number of transformer blocks")
    layers: list[int] = Field(description="0..L (0 = token embeddings, L = last block after the final norm)")
    depth_pct: PerLayer[float] = Field(description="100 * layer / L, per layer")
    seed_layers: list[int] = Field(description="the layers the seed notebooks looked at (every 4th, plus L)")
    settings: dict[str, Any] = Field(description="the whole `analysis` section of params.yaml used")
    representation: Representation = Field(
        description="the transform of the pooled states before every analysis that reads them; token-level "
                    "analyses (anisotropy, the sink) read raw states")
    extraction: Extraction = Field(description="provenance copied from the HDF5 attributes")
    nan_reasons: dict[str, str] = Field(description="for the `/`-separated path of every missing value (`null`), "
                                                    "why it is missing")
    numerics: dict[str, Any] | None = Field(None, description=NUMERICS)


class SignChange(Record):
    """Two consecutive layers (of all layers, or of the seed's view) whose r have opposite signs."""

    layer_before: int = Field(description="the layer before the change")
    layer_after: int = Field(description="the layer after the change")
    r_before: float = Field(description="r at `layer_before`")
    r_after: float = Field(description="r at `layer_after`")
    midpoint_depth_pct: float = Field(description="depth of the midpoint of the two layers, % of L")


class Peak(Record):
    """Where a per-layer r is largest (or smallest, or largest in magnitude)."""

    layer: Index = Field(description="the layer")
    r: Stat = Field(description="r at that layer")
    depth_pct: Stat = Field(description="its depth, % of L")


class Spread(Record):
    """A statistic over several seeds or draws."""

    mean: Stat = Field(description="mean over the values")
    min: Stat = Field(description="smallest value")
    max: Stat = Field(description="largest value")
    values: list[Stat] = Field(description="every value, in seed order")
