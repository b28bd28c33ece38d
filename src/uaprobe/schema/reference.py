"""The key-by-key reference of the results files in ``docs/results.md``, generated from the
models' JSON Schema (``uaprobe schema-doc`` rewrites it; a test checks the committed one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uaprobe.schema.common import ResultsHeader
from uaprobe.schema.files import MODELS, PATHS, SINK_EXCLUDED, WRITER

BEGIN = "<!-- schema:begin -->\n"
END = "<!-- schema:end -->"

ORDER = ("layerwise", "validation", "bins", "pairs", "option_b", "pair_models", "neutral_control", "preference",
         "anisotropy", "dimensions", "specification_curve",
         "robustness", "metrics", "panel", "panel_metrics", "manifest")
"""The order of the sections (every kind of :data:`~uaprobe.schema.files.MODELS` once)."""

_SCALARS = {"number": "number", "integer": "int", "boolean": "bool", "string": "string"}


def _anchor(name: str) -> str:
    return f"[`{name}`](#{name.lower()})"


def type_text(schema: dict[str, Any]) -> str:
    """A JSON Schema node in words: ``per layer: number or null (missing)``, ``map of [X](#x)``."""
    if "$ref" in schema:
        return _anchor(schema["$ref"].rsplit("/", 1)[-1])
    if "anyOf" in schema:
        kinds = [type_text(s) for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = len(kinds) < len(schema["anyOf"])
        text = " or ".join(kinds)
        if nullable:
            text += " or null (missing)" if schema.get("x-missing") else " or null"
        return text
    kind = schema.get("type")
    if kind == "array":
        inner = type_text(schema.get("items", {}))
        return ("per layer: " if schema.get("x-per-layer") else "list of ") + inner
    if kind == "object":
        extra = schema.get("additionalProperties")
        return f"map of {type_text(extra)}" if isinstance(extra, dict) and extra else "object"
    return _SCALARS.get(kind, "any")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(name: str, schema: dict[str, Any], *, skip: frozenset[str] = frozenset()) -> list[str]:
    lines = [f"#### `{name}`", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    required = set(schema.get("required", ()))
    rows = [(key, prop) for key, prop in schema.get("properties", {}).items() if key not in skip]
    if rows:
        lines += ["| key | type | meaning |", "|---|---|---|"]
        for key, prop in rows:
            shown = f"`{key}`" + ("" if key in required else " (optional)")
            lines.append(f"| {shown} | {_cell(type_text(prop))} | {_cell(prop.get('description', ''))} |")
        lines.append("")
    return lines


def _refs(schema: Any) -> list[str]:
    """The record names ``schema`` refers to, in order of first appearance."""
    out: list[str] = []
    if isinstance(schema, dict):
        if "$ref" in schema:
            out.append(schema["$ref"].rsplit("/", 1)[-1])
        for key, value in schema.items():
            if key != "$defs":
                out += _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            out += _refs(value)
    return out


def markdown() -> str:
    """The generated part of ``docs/results.md``: per kind of file, its records key by key."""
    header = ResultsHeader.model_json_schema(by_alias=True)
    header_keys = frozenset(header["properties"])
    done: set[str] = set()
    lines = ["## Results files, key by key", "",
             "Generated from the models of `uaprobe.schema` (`uaprobe schema-doc` rewrites this part). A type "
             "`... or null (missing)` is a missing value whose reason is in the file's `nan_reasons`; a plain "
             "`or null` is null by meaning; `per layer:` is a list with one entry per layer (`L + 1`); "
             "`map of` an object whose keys are named in the meaning (poolings, models, ...); `(optional)` a "
             "key that some files leave out.", ""]
    lines += ["### Every per-model results file", "",
              "Every file under `results/models/<id>/` starts with these keys (they are not repeated below).", ""]
    lines += _table("ResultsHeader", header)
    done.add("ResultsHeader")
    for name in _refs(header):
        if name not in done:
            done.add(name)
            lines += _table(name, header["$defs"][name])
    for kind in ORDER:
        model = MODELS[kind]
        schema = model.model_json_schema(by_alias=True)
        where = f"`{PATHS[kind]}`"
        if kind in SINK_EXCLUDED:
            where += f" and `{PATHS[kind].replace(f'{kind}.json', f'sink_excluded/{kind}.json')}`"
        lines += [f"### {where}", "", f"Written by `{WRITER[kind]}`; model `uaprobe.schema.{model.__name__}`.", ""]
        skip = header_keys if issubclass(model, ResultsHeader) else frozenset()
        lines += _table(model.__name__, schema, skip=skip)
        done.add(model.__name__)
        defs = schema.get("$defs", {})
        queue = [n for n in _refs({k: v for k, v in schema.items() if k != "$defs"})]
        while queue:
            name = queue.pop(0)
            if name in done:
                continue
            done.add(name)
            lines += _table(name, defs[name])
            queue += _refs(defs[name])
    return "\n".join(lines).rstrip("\n") + "\n"


def rewrite(doc: Path) -> bool:
    """Replace the generated part of ``doc`` (between the markers); True if it changed."""
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{doc}: the markers {BEGIN.strip()} and {END} are missing")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = head + BEGIN + markdown() + END + tail
    if new != text:
        doc.write_text(new, encoding="utf-8")
    return new != text


def generated_part(doc_text: str) -> str:
    """What stands between the markers of a ``docs/results.md`` text."""
    return doc_text.split(BEGIN, 1)[1].split(END, 1)[0]
