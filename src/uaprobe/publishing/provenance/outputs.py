"""The tracked outputs the paper reads, loaded once, and read as values that know their source.

:func:`load_outputs` reads ``params.yaml``, every results and metrics file of the panel, the figure
manifest and the published reference values. The results files are read as their records, by attribute:
:meth:`Outputs.record` (and :meth:`Outputs.panel`) for the decisions a phrase makes, :meth:`Outputs.value` (and
:meth:`Outputs.panel_value`) for a number it shows, a
:class:`~uaprobe.publishing.provenance.values.Value` that knows the key it stands at in its file and the format it
is shown in. The quoted data files (``data/published/``), ``params.yaml`` and the derived keys of
:mod:`~uaprobe.publishing.provenance.values` (a median over specifications) are read by key path:
:meth:`Outputs.at`, :meth:`Outputs.v`, and :meth:`Outputs.under` for the values under one key prefix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

from uaprobe import escape
from uaprobe.config import Params, load_params
from uaprobe.errors import UAProbeError
from uaprobe.names import PANEL_RESULTS, short_names
from uaprobe.publishing.provenance.trace import Trace, traced
from uaprobe.publishing.provenance.values import Ledger, Source, Value, lookup
from uaprobe.schema import MODELS, Record, load_json, read_results
from uaprobe.schema.manifest import FigureEntry, Manifest
from uaprobe.schema.panel import Panel

R = TypeVar("R", bound=Record)
KIND_OF: dict[type[Record], str] = {model: kind for kind, model in MODELS.items()}
"""The kind (file stem) of each results model."""

FIGURES_DIR = "figures"
"""The figures stage's output directory, relative to the root (holds ``manifest.json``)."""

PUBLISHED_PYTHIA = "data/published/pythia-6-9b.json"
"""The original study's published Pythia-6.9B numbers, with their source (quoted, not computed)."""

PUBLISHED_R_LAYERS = "category_level/r"
"""The key of its category-level r per layer in :data:`PUBLISHED_PYTHIA`."""

PUBLISHED_R = f"{PUBLISHED_R_LAYERS}/-1"
"""The key of its category-level r at the last layer (the r the paper sets beside this panel's)."""

PUBLISHED_REFERENCE = "data/published/reference-models.json"
"""The original study's published scientific-facts values of its four reference models."""


class ManuscriptDataError(UAProbeError):
    """A tracked output the manuscript reads is missing or malformed."""


def find_root(start: str | Path | None = None) -> Path:
    """The repository root: the nearest directory at or above ``start`` with ``params.yaml``."""
    here = (Path.cwd() if start is None else Path(start)).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "params.yaml").is_file():
            return candidate
    raise ManuscriptDataError(f"no params.yaml at or above {here}; render from inside the repository")


@dataclass
class Outputs:
    """Everything the manuscript reads, by file (relative to the root), loaded on first use."""

    root: Path
    params: Params
    models: tuple[str, ...]
    ledger: Ledger
    files: dict[str, Any] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)

    def doc(self, file: str) -> Any:
        if file not in self.files:
            if file == "params.yaml":
                self.files[file] = yaml.safe_load((self.root / file).read_text(encoding="utf-8"))
            elif file.startswith("data/"):  # quoted, tracked in git
                self.files[file] = load_json(self.root / file, shown=file, fix=f"restore it with `git checkout -- {file}`")
            else:  # checked against its schema; the values as the file holds them
                typed = read_results(self.root, file)
                if isinstance(typed, Record):
                    self.records[file] = typed
                self.files[file] = (typed.model_dump(mode="json", by_alias=True, exclude_unset=True)
                                    if isinstance(typed, Record) else typed)
        return self.files[file]

    @staticmethod
    def model_file(model: str, stem: str) -> str:
        return f"results/models/{model}/{stem}.json"

    def raw_at(self, file: str, key: str) -> Any:
        return lookup(self.doc(file), key, file=file)

    def has(self, file: str, key: str) -> bool:
        """Whether ``file`` exists and holds ``key`` (an object the stage writes only where its input exists, say)."""
        try:
            node: Any = self.doc(file)
        except UAProbeError:
            return False
        for part in key.split("/"):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    def at(self, file: str, key: str, fmt: str = "r") -> Value:
        """The value at ``key`` of ``file``, shown in format ``fmt``."""
        return Value(self.raw_at(file, key), fmt, Source(file, key), self.ledger)

    def v(self, model: str, stem: str, key: str, fmt: str = "r") -> Value:
        """The value at ``key`` of ``results/models/<model>/<stem>.json``, shown in format ``fmt``."""
        return self.at(self.model_file(model, stem), key, fmt)

    def record_at(self, file: str, kind: type[R]) -> R:
        """``file`` as its record."""
        self.doc(file)
        found = self.records[file]
        if not isinstance(found, kind):
            raise TypeError(f"{file} is a {type(found).__name__}, not a {kind.__name__}")
        return found

    def value_at(self, file: str, kind: type[R], get: Callable[[R], Any], fmt: str = "r") -> Value:
        """The field ``get`` reads of :meth:`record_at`, shown in format ``fmt``, with its key in the file. ``get``
        reads the record by attribute and item (``lambda r: r.family.tests.vif[3]``); it is given a
        :class:`~uaprobe.publishing.provenance.trace.Trace` of the record, which records the keys it takes."""
        raw, key = traced(get(Trace(self.record_at(file, kind))))  # type: ignore[arg-type]
        return Value(raw, fmt, Source(file, key), self.ledger)

    def record(self, model: str, kind: type[R], *, stem: str | None = None) -> R:
        """``results/models/<model>/<stem>.json`` as its record (``stem``: the kind's, unless it lives elsewhere,
        as ``sink_excluded/option_b``)."""
        return self.record_at(self.model_file(model, stem or KIND_OF[kind]), kind)

    def has_record(self, model: str, kind: type[R], *, stem: str | None = None) -> bool:
        """Whether :meth:`record` finds the file (one the stage writes only where its input exists, say)."""
        try:
            self.record(model, kind, stem=stem)
        except UAProbeError:
            return False
        return True

    def value(self, model: str, kind: type[R], get: Callable[[R], Any], fmt: str = "r", *,
              stem: str | None = None) -> Value:
        """:meth:`value_at` of ``results/models/<model>/<stem>.json``."""
        return self.value_at(self.model_file(model, stem or KIND_OF[kind]), kind, get, fmt)

    def panel(self) -> Panel:
        """``results/panel.json`` as its record."""
        return self.record_at(PANEL_RESULTS, Panel)

    def panel_value(self, get: Callable[[Panel], Any], fmt: str = "r") -> Value:
        """:meth:`value_at` of ``results/panel.json``."""
        return self.value_at(PANEL_RESULTS, Panel, get, fmt)

    def reader(self, model: str, kind: type[R], *, stem: str | None = None) -> Callable[..., Value]:
        """:meth:`value` of one file: ``read(lambda r: r.sink.max_norm_ratio, "f1")``."""
        return lambda get, fmt="r": self.value(model, kind, get, fmt, stem=stem)

    def under(self, file: str, prefix: str = "", *, fmt: str = "r", suffix: str = "") -> Block:
        """The values under the key ``prefix`` of ``file`` (a table's row or block of cells)."""
        return Block(self, file, prefix, fmt, suffix)

    def full_name_text(self, model_id: str) -> str:
        """The model's full name (``display`` in params.yaml) as plain text."""
        return self.params.model(model_id).display

    def display_text(self, model_id: str) -> str:
        """The model's short name as plain text: the shortest leading run of the hyphen-separated parts of its
        full name that no other model of the panel shares (``SmolLM2-135M-Instruct`` -> ``SmolLM2``)."""
        full = self.full_name_text(model_id)
        return short_names([self.full_name_text(m) for m in self.models]).get(full, full)

    def full_name(self, model_id: str) -> str:
        """The model's full name as Markdown text (escaped: a name is data, never markup), as the panel table
        and its first mention give it."""
        return escape.markdown(self.full_name_text(model_id))

    def display(self, model_id: str) -> str:
        """The model's short name (:meth:`display_text`) as Markdown text (escaped)."""
        return escape.markdown(self.display_text(model_id))

    @property
    def figures(self) -> list[FigureEntry]:
        """The figures of ``figures/manifest.json``, in its order (none when the figures have not been drawn)."""
        manifest = f"{FIGURES_DIR}/manifest.json"
        return list(self.record_at(manifest, Manifest).figures) if (self.root / manifest).is_file() else []


@dataclass(frozen=True)
class Block:
    """The values under one key prefix of one file: ``block(key)`` is the value at ``<prefix>/<key>``, then
    ``/<suffix>`` where one is given, shown in ``fmt`` unless the call names another format."""

    out: Outputs
    file: str
    prefix: str = ""
    fmt: str = "r"
    suffix: str = ""

    def __call__(self, key: str, fmt: str | None = None) -> Value:
        path = "/".join(part for part in (self.prefix, key, self.suffix) if part)
        return self.out.at(self.file, path, self.fmt if fmt is None else fmt)


def load_outputs(root: str | Path | None = None) -> Outputs:
    """The outputs of the repository at or above ``root``; every results file the paper reads is read (and
    checked) at once, so a missing or malformed one stops the render before any cell runs."""
    root = find_root(root)
    params = load_params(root / "params.yaml")
    out = Outputs(root=root, params=params, models=tuple(params.models), ledger=Ledger(root))
    for m in out.models:
        for stem in ("layerwise", "validation", "bins", "pairs", "preference", "anisotropy", "robustness",
                     "option_b", "neutral_control", "sink_excluded/layerwise", "sink_excluded/option_b",
                     "specification_curve", "dimensions", "pair_models"):
            out.doc(out.model_file(m, stem))
    out.doc(PANEL_RESULTS)
    out.doc("params.yaml")
    return out
