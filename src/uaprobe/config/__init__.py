"""Typed, validated parameters: the one place that reads ``params.yaml``.

Every section is a frozen pydantic model with a docstring per field (:mod:`.sections`);
:func:`load_params` reads the file (:mod:`.load`) and rejects unknown keys, wrong types and
impossible values with a :class:`~uaprobe.errors.ConfigError` that names the file, the key and the
allowed values (:mod:`.messages`).
"""

from uaprobe.config.keys import differing, param_at
from uaprobe.config.load import PRESETS, analysis_from_mapping, apply_preset, load_params, params_from_mapping
from uaprobe.config.sections import (AnalysisParams, BinsParams, DeviceName, DropPolicy, DtypeName, ExtractParams,
                                     LengthMatchedParams, ModelSpec, Params, PoolingParams, PowerParams, PresetName,
                                     PrimaryParams, RobustnessParams, Section, SourceKind)

__all__ = ["PRESETS", "AnalysisParams", "BinsParams", "DeviceName", "DropPolicy", "DtypeName", "ExtractParams",
           "LengthMatchedParams", "ModelSpec", "Params", "PoolingParams", "PowerParams", "PresetName", "PrimaryParams",
           "RobustnessParams", "Section", "SourceKind", "analysis_from_mapping", "apply_preset", "differing",
           "load_params", "param_at", "params_from_mapping"]
