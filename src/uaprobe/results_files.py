"""Reading the results files that ``compare``, ``figures`` and ``paper`` consume, checked in one place.

:data:`REQUIRED` says, for each kind of results file, which keys its readers index and what each
must hold; :func:`read_results` loads a file and checks it before any work, so a missing, truncated
or foreign file ends in one message naming the file, the key and the stage that rewrites it,
instead of a ``KeyError`` deep inside a figure. (A typed schema of every results file can replace
this table; the readers call :func:`read_results` only.)

A key path is ``/``-separated; ``*`` stands for every key of a mapping (every pooling). A kind is
``list``, ``dict``, ``int``, ``bool``, ``str``, ``number`` (int or float), ``any`` (present, may be
null), or ``layers`` (a list with one entry per layer: as long as the file's ``layers``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from uaprobe.errors import UAProbeError

_HEADER = ("model:str", "display:str", "n_layers:int", "layers:list", "depth_pct:layers")

REQUIRED: Mapping[str, tuple[str, ...]] = {
    "layerwise": (*_HEADER, "categories:list", "poolings:dict", "poolings/*/pearson_r:layers",
                  "poolings/*/bootstrap_ci_low:layers", "poolings/*/bootstrap_ci_high:layers",
                  "poolings/*/loco_r:list"),
    "anisotropy": (*_HEADER, "l_star:any", "l_star_depth_pct:any", "bell_curve/is_bell_curve:any",
                   "spectrum:layers", "var_top1:layers"),
    "bins": (*_HEADER, "poolings/*/schemes:any"),
    "validation": (*_HEADER, "variants:dict", "variants/*/table:list"),
    "pairs": (*_HEADER, "poolings:dict", "poolings/*/pearson_r:layers"),
    "preference": (*_HEADER, "pairs:dict"),
    "robustness": ("model:str", "sink:dict", "sink/layers:list", "sink/norm_ratio_median:list",
                   "sink/mean_share_median:list"),
    "metrics": (),
    "panel": ("models:list", "poolings:dict", "poolings/*/models:dict", "poolings/*/summary:dict",
              "anisotropy:dict"),
    "panel_metrics": (),
    "manifest": ("figures:list",),
}
"""What the readers of each kind of results file need (see the module docstring for the notation). A kind not
listed here is checked only for being a JSON object."""

WRITER = {"layerwise": "analyze", "anisotropy": "analyze", "bins": "analyze", "validation": "analyze",
          "pairs": "analyze", "preference": "analyze", "robustness": "analyze", "metrics": "analyze", "panel": "compare",
          "panel_metrics": "compare", "manifest": "figures"}
"""The stage that writes each kind (named in the fix)."""

_TYPES: Mapping[str, tuple[type, ...]] = {"list": (list,), "dict": (dict,), "int": (int,), "bool": (bool,),
                                          "str": (str,), "number": (int, float), "layers": (list,)}


class ResultsFileError(UAProbeError):
    """A results file is missing, not JSON, or lacks what its readers need."""


def kind_of(relative: str) -> str:
    """The kind of a results file from its path relative to the root (``results/models/<id>/bins.json`` -> ``bins``)."""
    parts = Path(relative).parts
    name = Path(relative).stem
    if parts[:1] == ("metrics",):
        return "panel_metrics" if name == "panel" else "metrics"
    if name == "manifest":
        return "manifest"
    return name


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


def _walk(node: Any, keys: list[str], at: list[str]) -> list[tuple[str, Any]]:
    """(path, value) for every match of ``keys`` below ``node``; raises KeyError(path) for a missing key."""
    if not keys:
        return [("/".join(at), node)]
    key, rest = keys[0], keys[1:]
    if not isinstance(node, dict):
        raise KeyError("/".join(at) or "(top level)", "a mapping")
    if key == "*":
        return [hit for k in sorted(node) for hit in _walk(node[k], rest, [*at, k])]
    if key not in node:
        raise KeyError("/".join([*at, key]), None)
    return _walk(node[key], rest, [*at, key])


def check_results(doc: Any, kind: str, *, shown: str | Path) -> None:
    """Check ``doc`` (a loaded results file of ``kind``) against :data:`REQUIRED`."""
    fix = f"rerun the {WRITER.get(kind, 'producing')} stage (`dvc repro`)"
    if not isinstance(doc, dict):
        raise ResultsFileError(f"{shown}: expected a JSON object at the top level, got {type(doc).__name__}; {fix}")
    for rule in REQUIRED.get(kind, ()):
        path, _, expected = rule.partition(":")
        try:
            hits = _walk(doc, path.split("/"), [])
        except KeyError as exc:
            where, wanted = exc.args
            what = f"{where!r} is not {wanted}" if wanted else f"key {where!r} is missing"
            raise ResultsFileError(f"{shown}: {what}; {fix}") from None
        for where, value in hits:
            if expected == "any":
                continue
            types = _TYPES[expected]
            if not isinstance(value, types) or (expected in ("int", "number") and isinstance(value, bool)):
                raise ResultsFileError(f"{shown}: key {where!r} holds {type(value).__name__}, expected {expected}; "
                                       f"{fix}")
            if expected == "layers" and isinstance(doc.get("layers"), list) and len(value) != len(doc["layers"]):
                raise ResultsFileError(f"{shown}: key {where!r} has {len(value)} entries, expected one per layer "
                                       f"({len(doc['layers'])}); {fix}")


def read_results(root: Path, relative: str, *, kind: str | None = None) -> dict[str, Any]:
    """Load ``root / relative`` and check it has what its readers need (errors name ``relative``)."""
    kind = kind or kind_of(relative)
    doc = load_json(root / relative, shown=relative,
                    fix=f"rerun the {WRITER.get(kind, 'producing')} stage (`dvc repro`)")
    check_results(doc, kind, shown=relative)
    return doc


__all__ = ["REQUIRED", "ResultsFileError", "WRITER", "check_results", "kind_of", "load_json", "read_results"]
