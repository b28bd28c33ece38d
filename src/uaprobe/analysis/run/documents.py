"""What every results document of the analyze stage shares: its header, its reasons for missing
values, and the set of files, metrics and plot series a stage writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from uaprobe.analysis.inference import curves
from uaprobe.schema import Record, missing
from uaprobe.schema.common import ResultsHeader
from uaprobe.schema.document import document
from uaprobe.config import AnalysisParams

EXTRACTION_ATTRS = ("model_id", "display", "source", "location", "revision", "dtype", "pooling_drop",
                    "dataset_sha256", "prompts_sha256", "uaprobe_version", "bos_added")
"""HDF5 attributes copied into every results file (provenance)."""
@dataclass
class StageOutputs:
    """What a stage writes: results files (stem -> JSON object), one metrics object, CSV series
    (stem -> ordered columns); ``records``, the results files built as their models (stem -> record), which
    the metrics and the series are read from; ``pieces``, the metrics' parts as the schema's metrics records
    (key -> record, or a mapping of them) while the stage runs, from which ``metrics`` is built at its end."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    plots: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    records: dict[str, ResultsHeader] = field(default_factory=dict)
    pieces: dict[str, Any] = field(default_factory=dict)

    def add(self, stem: str, rec: ResultsHeader) -> None:
        """The results file ``stem``: its record, and the document written (:func:`finish`)."""
        self.records[stem] = rec
        self.results[stem] = finish(rec)


def settings(params: AnalysisParams) -> dict[str, Any]:
    """The analysis parameters as a JSON object (lists for tuples, in the fields' order)."""
    return params.model_dump(mode="json")


def plain(v: Any) -> Any:
    """An HDF5 attribute as a JSON value (numpy scalars to Python, bytes to text)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return v.decode("utf-8")
    return v


def header(*, model_id: str, display: str, n_layers: int, params: AnalysisParams,
            attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The keys every per-model results file starts with: the model, its layers, the settings, the
    representation and the extraction's provenance."""
    layers = list(range(n_layers + 1))
    return {
        "model": model_id,
        "display": display,
        "n_layers": n_layers,
        "layers": layers,
        "depth_pct": curves.depth_pct(layers, n_layers=n_layers).tolist(),
        "seed_layers": curves.seed_layers(n_layers),
        "settings": settings(params),
        "representation": {"kind": params.representation, "abtt_k": params.abtt_k},
        "extraction": {k: plain(attrs[k]) for k in EXTRACTION_ATTRS if k in attrs},
    }


def finish(body: dict[str, Any] | Record, header: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One results document: a file's record (:func:`uaprobe.schema.document.record`), or the header and a body, with every missing
    value as ``None`` and the reason of each under its path (:func:`uaprobe.schema.missing.take_reasons`; a
    body's own objects are changed)."""
    doc = document(body) if header is None else {**header, **document(body)}
    doc["nan_reasons"] = missing.take_reasons(doc)
    return doc
