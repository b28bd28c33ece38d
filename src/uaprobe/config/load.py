"""Reading ``params.yaml``: strict YAML (a repeated key is an error), the sections of
:mod:`uaprobe.config.sections`, and the ``preset`` applied over them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from uaprobe.config.sections import AnalysisParams, Params
from uaprobe.conflicts import check_bytes
from uaprobe.errors import ConfigError, unreadable, unusable

PRESETS: Mapping[str, Mapping[str, str]] = {
    "original": {"pooling.drop": "first", "extract.dtype": "float16"},
}
"""What each ``preset`` sets. ``original``: the original study's notebooks exactly -- position 0
dropped from every pooled state (``hidden[0, 1:]``) and float16 weights and activations (they ran
in float16 on a GPU). Their every-4th-layer view needs no setting: every layer is computed, and
every analysis that depends on the view reports it (``seed_layers``, the seed view's sign changes
and scaling peaks, the phases)."""


def params_from_mapping(mapping: Any) -> Params:
    """Build :class:`Params` from an already parsed YAML document."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"top level: got {type(mapping).__name__}, expected a mapping of sections")
    return apply_preset(Params.build(mapping))


def analysis_from_mapping(mapping: Any) -> AnalysisParams:
    """Build the ``analysis`` section alone (as dvc.lock records it for a stage) from a parsed mapping."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"analysis: got {type(mapping).__name__}, expected a mapping")
    return AnalysisParams.build(mapping)


def apply_preset(params: Params) -> Params:
    """``params`` with the settings of its ``preset`` (:data:`PRESETS`) in place."""
    if params.preset == "none":
        return params
    values = PRESETS[params.preset]
    return params.model_copy(update={
        "pooling": params.pooling.model_copy(update={"drop": values["pooling.drop"]}),
        "extract": params.extract.model_copy(update={"dtype": values["extract.dtype"]}),
    })


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
