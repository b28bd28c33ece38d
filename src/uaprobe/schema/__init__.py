"""The typed schema of every results file: one pydantic model per kind of file, written by
``analyze``, ``compare`` and ``figures`` and read by the figures and the paper.

=====================  ==========================================  =======================
kind                   file                                        model
=====================  ==========================================  =======================
layerwise, validation  results/models/<id>/[sink_excluded/]*.json  :mod:`.categories`
bins, preference
pairs, option_b,       results/models/<id>/[sink_excluded/]*.json  :mod:`.pairs`
neutral_control
pair_models            results/models/<id>/pair_models.json        :mod:`.pairmodels`
anisotropy,            results/models/<id>/*.json                  :mod:`.geometry`
robustness
dimensions,            results/models/<id>/*.json                  :mod:`.specs`
specification_curve
metrics                metrics/models/<id>.json                    :mod:`.metrics`
panel, panel_metrics   results/panel.json, metrics/panel.json      :mod:`.panel`
manifest               figures/manifest.json                       :mod:`.manifest`
=====================  ==========================================  =======================

Read with :func:`read_results` (the typed model; ``model.model_dump(mode="json", by_alias=True,
exclude_unset=True)`` gives the plain JSON object back) and :func:`resolve` (a value by its key path);
write with :func:`results_text`. ``docs/results.md`` is generated from these models
(``uaprobe schema-doc``).
"""

from uaprobe.schema.base import Flag, Index, Label, PerLayer, Record, Stat
from uaprobe.schema.files import (MODELS, PATHS, WRITER, KeyPathError, ResultsFileError, check_key, kind_of, load_json,
                                  read_results, resolve, results_text, validate)

__all__ = ["Flag", "Index", "KeyPathError", "Label", "MODELS", "PATHS", "PerLayer", "Record", "ResultsFileError", "Stat", "WRITER",
           "check_key", "kind_of", "load_json", "read_results", "resolve", "results_text", "validate"]
