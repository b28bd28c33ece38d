"""Every kind of results file, its model and its writer; reading and checking a file through its model.

:func:`validate` checks a document against its kind's model and what the model's markers say
(:mod:`uaprobe.schema.base`): every ``null`` of a missing value has its reason in ``nan_reasons``
and every reason names a ``null``; every per-layer list has one entry per layer. Any fault ends in
one :class:`ResultsFileError` naming the file, the key and the stage that rewrites the file.
Writers call :func:`results_text`; readers call :func:`read_results` and get the typed model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from uaprobe.schema.text import json_text
from uaprobe.errors import UAProbeError
from uaprobe.schema.base import Record, _field_name, declared, json_path, walk
from uaprobe.schema.categories import Bins, Layerwise, Preference, Validation
from uaprobe.schema.geometry import Anisotropy, Robustness
from uaprobe.schema.manifest import Manifest
from uaprobe.schema.metrics import ModelMetrics
from uaprobe.schema.pairmodels import PairModels
from uaprobe.schema.pairs import NeutralControl, OptionB, Pairs
from uaprobe.schema.panel import Panel, PanelMetrics
from uaprobe.schema.specs import Dimensions, SpecificationCurve


class ResultsFileError(UAProbeError):
    """A results file is missing, not JSON, or does not match its schema."""


MODELS: Mapping[str, type[Record]] = {
    "layerwise": Layerwise, "validation": Validation, "bins": Bins, "pairs": Pairs, "preference": Preference,
    "option_b": OptionB, "pair_models": PairModels, "neutral_control": NeutralControl, "anisotropy": Anisotropy,
    "robustness": Robustness, "dimensions": Dimensions, "specification_curve": SpecificationCurve,
    "metrics": ModelMetrics, "panel": Panel, "panel_metrics": PanelMetrics, "manifest": Manifest,
}
"""The model of each kind of results file."""

WRITER: Mapping[str, str] = {**{kind: "analyze" for kind in MODELS}, "panel": "compare", "panel_metrics": "compare",
                             "manifest": "figures"}
"""The stage that writes each kind (named in the fix)."""

PATHS: Mapping[str, str] = {
    **{kind: f"results/models/<id>/{kind}.json" for kind in MODELS},
    "metrics": "metrics/models/<id>.json", "panel": "results/panel.json", "panel_metrics": "metrics/panel.json",
    "manifest": "figures/manifest.json",
}
"""Where each kind lives (the per-model kinds but ``anisotropy``, ``robustness``, ``pair_models``,
``neutral_control``, ``dimensions`` and ``specification_curve`` also under ``results/models/<id>/sink_excluded/``)."""

SINK_EXCLUDED = ("layerwise", "validation", "bins", "pairs", "preference", "option_b")
"""The kinds written under both pooling policies."""


def kind_of(relative: str | Path) -> str:
    """The kind of a results file from its path relative to the root (``results/models/<id>/bins.json`` -> ``bins``)."""
    parts = Path(relative).parts
    name = Path(relative).stem
    if parts[:1] == ("metrics",):
        return "panel_metrics" if name == "panel" else "metrics"
    return name


def _fix(kind: str) -> str:
    return f"rerun the {WRITER.get(kind, 'producing')} stage (`dvc repro`)"


def load_json(path: Path, *, shown: str | Path | None = None, fix: str = "rerun `dvc repro`") -> Any:
    """A JSON file's content; a missing, unreadable or malformed file is a :class:`ResultsFileError`."""
    shown = path if shown is None else shown
    if path.is_dir():
        raise ResultsFileError(f"{shown}: is a directory, expected a JSON file; remove it and {fix}")
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ResultsFileError(f"{shown}: not found; {fix}") from None
    except OSError as exc:
        raise ResultsFileError(f"{shown}: cannot be read ({exc.strerror or exc}); {fix}") from None
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"{shown}: not UTF-8 (byte {exc.start}); {fix}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(f"{shown}: not valid JSON ({exc}); {fix}") from None


_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "a bool", int: "an int", float: "a float",
               type(None): "null"}
_EXPECTED = {"float_type": "a number", "int_type": "an int", "bool_type": "a bool", "string_type": "a string",
             "list_type": "a list", "dict_type": "an object", "model_type": "an object",
             "model_attributes_type": "an object"}


def _what(error: Mapping[str, Any]) -> str:
    key = json_path(error["loc"])
    if error["type"] == "missing":
        return f"key {key!r} is missing"
    if error["type"] == "extra_forbidden":
        return f"key {key!r} is not in the schema of this file"
    held = _JSON_TYPES.get(type(error["input"]), type(error["input"]).__name__)
    expected = _EXPECTED.get(error["type"])
    if expected:
        return f"key {key!r} holds {held}, expected {expected}"
    return f"key {key!r}: {error['msg'][0].lower()}{error['msg'][1:]}"


def validate(doc: Any, kind: str, *, shown: str | Path, fix: str | None = None) -> Record:
    """``doc`` as its kind's model, checked for missing-value reasons and per-layer lengths."""
    fix = fix or _fix(kind)
    model = MODELS.get(kind)
    if model is None:
        raise ResultsFileError(f"{shown}: no results schema for a file named like this (kinds: "
                               f"{', '.join(sorted(MODELS))}); {fix}")
    if not isinstance(doc, dict):
        raise ResultsFileError(f"{shown}: expected a JSON object at the top level, got "
                               f"{_JSON_TYPES.get(type(doc), type(doc).__name__)}; {fix}")
    try:
        typed = model.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ResultsFileError(f"{shown}: {_what(errors[0])}{more}; {fix}") from None
    check_markers(typed, shown=shown, fix=fix)
    typed._source = str(shown)
    return typed


def check_markers(typed: BaseModel, *, shown: str | Path, fix: str) -> None:
    """What pydantic's types cannot say: nulls against ``nan_reasons``, per-layer list lengths."""
    reasons: dict[str, str] | None = getattr(typed, "nan_reasons", None)
    n_layers = len(typed.layers) if isinstance(getattr(typed, "layers", None), list) else None
    nulls: set[str] = set()
    for node in walk(typed, type(typed), scalars=False):
        key = json_path(node.path)
        if node.path[:1] == ("nan_reasons",):
            continue
        if node.value is None and node.reasoned:
            nulls.add(key)
            if reasons is not None and key not in reasons:
                raise ResultsFileError(f"{shown}: key {key!r} is null (a missing value) without a reason in "
                                       f"nan_reasons; {fix}")
        if node.by_layer and n_layers is not None and len(node.value) != n_layers:
            raise ResultsFileError(f"{shown}: key {key!r} has {len(node.value)} entries, expected one per layer "
                                   f"({n_layers}); {fix}")
    for key in sorted(set(reasons or ()) - nulls):
        raise ResultsFileError(f"{shown}: nan_reasons names {key!r}, which is not a missing value; {fix}")


def read_results(root: Path, relative: str, *, kind: str | None = None) -> Any:
    """Load ``root / relative`` as its typed model (errors name ``relative``, the key and the stage).

    A JSON file that is no results file (no kind of :data:`MODELS`, e.g. the published reference
    values under ``data/published/``) is checked for being a JSON object and returned as it is."""
    kind = kind or kind_of(relative)
    doc = load_json(Path(root) / relative, shown=relative, fix=_fix(kind))
    if kind not in MODELS:
        if not isinstance(doc, dict):
            raise ResultsFileError(f"{relative}: expected a JSON object at the top level, got "
                                   f"{_JSON_TYPES.get(type(doc), type(doc).__name__)}; {_fix(kind)}")
        return doc
    return validate(doc, kind, shown=relative)


def results_text(doc: Mapping[str, Any], *, kind: str, shown: str | Path) -> str:
    """The JSON text of a results file (:func:`uaprobe.schema.text.json_text`), after checking
    ``doc`` against its schema: a writer never writes a file its readers would refuse."""
    validate(doc, kind, shown=shown, fix=f"the {WRITER.get(kind, 'producing')} stage built a file its schema "
                                         "refuses (uaprobe.schema); report it")
    return json_text(doc)


def check_key(kind: str, key: str) -> None:
    """Fail unless the schema of ``kind`` declares the key path ``key`` (``/``-separated, ``*`` for any key
    or index): a :class:`KeyPathError` at the first key it lacks."""
    parts = key.split("/")
    for i in range(len(parts)):
        try:
            declared(MODELS[kind], parts[:i + 1])
        except KeyError:
            raise KeyPathError("/".join(parts[:i + 1]), parts[i]) from None


class KeyPathError(LookupError):
    """A key path that leaves its document at ``at`` (the path up to and including ``part``)."""

    def __init__(self, at: str, part: str) -> None:
        super().__init__(at)
        self.at, self.part = at, part


def resolve(node: Any, parts: Sequence[str]) -> Any:
    """The value at ``parts`` (JSON keys; list indices as integers, ``-1`` the last) under ``node``: a
    typed record, or the JSON a file holds. A key the file leaves out is missing, as in the file."""
    done: list[str] = []
    for part in parts:
        done.append(part)
        try:
            if isinstance(node, Record):
                name = _field_name(type(node), part)
                if name is None or name not in node.model_fields_set:
                    raise KeyError(part)
                node = getattr(node, name)
            elif isinstance(node, Mapping):
                node = node[part]
            elif isinstance(node, list):
                node = node[int(part)]
            else:
                raise KeyError(part)
        except (KeyError, IndexError, ValueError):
            raise KeyPathError("/".join(done), part) from None
    return node
