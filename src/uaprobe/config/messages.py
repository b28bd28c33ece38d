"""A params file's first problem as the one sentence a user reads: ``key: got value, expected ...``.

pydantic reports every failure of a :class:`~pydantic.ValidationError` with its location; this module
names that location as ``params.yaml`` spells it (``analysis.bins.k[1]``, ``catalog.<id>.source``)
and says what the field takes, read from the field's own annotation, so the expected values are
written once: in :mod:`uaprobe.config.sections`.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails


class Invalid(ValueError):
    """An impossible value found by a section's own check: ``field`` (relative to the section; empty for
    the field being validated) and the sentence after the key."""

    def __init__(self, field: str, text: str) -> None:
        super().__init__(text)
        self.field = field
        self.text = text


def message(exc: ValidationError, root: type[BaseModel], key: str) -> str:
    """The first problem of ``exc``, raised validating ``root`` whose keys sit under ``key``.

    The first in the order of the file's sections and fields, each section's unknown keys before its fields
    (a typo is the likeliest cause of whatever else failed there); unknown keys are named together."""
    errors = _in_file_order(exc.errors(include_url=False), root)
    first = errors[0]
    if first["type"] == "extra_forbidden":
        parent = first["loc"][:-1]
        names = sorted(str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == parent)
        where, section, _ = _locate(root, parent, key)
        return f"{where or 'top level'}: unknown key(s) {names}; allowed: {sorted(_bare(section).model_fields)}"
    return _explain(errors, root, key, 0)


def _in_file_order(errors: list[ErrorDetails], root: type[BaseModel]) -> list[ErrorDetails]:
    """``errors`` sorted as a reader of the sections meets them: fields in their declared order, a section's
    unknown keys before its fields, catalog entries and list items in their order in the file."""
    entries: dict[tuple[int | str, ...], int] = {}  # pydantic reports a mapping's entries in the file's order

    def rank(error: ErrorDetails) -> tuple[int, ...]:
        loc, tp, ranks = error["loc"], root, []
        for i, part in enumerate(loc):
            tp = _optional_inner(_bare(tp))
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                fields = list(tp.model_fields)
                if part not in fields:  # an unknown key
                    ranks.append(-1)
                    break
                ranks.append(fields.index(str(part)))
                tp = tp.model_fields[str(part)].annotation
            elif typing.get_origin(tp) is dict:
                ranks.append(entries.setdefault(loc[: i + 1], len(entries)))
                tp = typing.get_args(tp)[1]
            elif typing.get_origin(tp) is tuple:
                ranks.append(int(part))
                tp = typing.get_args(tp)[0]
            else:  # a union's tag: the alternatives keep pydantic's order
                ranks.append(0)
                if i + 1 < len(loc):
                    tp = _member(tp)
        return tuple(ranks)

    return sorted(errors, key=rank)


def _explain(errors: list[ErrorDetails], tp: Any, key: str, start: int) -> str:
    first = errors[0]
    where, annotation, union_at = _locate(tp, first["loc"][start:], key)
    if union_at is None:
        return _leaf(first, where, annotation)
    at = start + union_at  # the position of the union member's tag in the location
    group = [e for e in errors if e["loc"][:at] == first["loc"][:at]]
    inside = [e for e in group if len(e["loc"]) > at + 1]
    if not inside:  # no alternative had the value's shape: say every alternative
        return f"{where}: got {first['input']!r}, expected {describe(annotation)}"
    return _explain(inside, _member(annotation), where, at + 1)  # the value has one alternative's shape


def _leaf(error: ErrorDetails, where: str, annotation: Any) -> str:
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, Invalid):
        return f"{_join(where, cause.field)}: {cause.text}"
    if error["type"] == "missing":
        return f"{where}: missing; expected {describe(annotation)}"
    return f"{where}: got {error['input']!r}, expected {describe(annotation)}"


def _locate(tp: Any, loc: tuple[int | str, ...], key: str) -> tuple[str, Any, int | None]:
    """The key and annotation at ``loc`` under ``tp``; stopped at a union whose member tag is next in
    ``loc`` (its position is the third item), else the third item is None."""
    for i, part in enumerate(loc):
        tp = _optional_inner(_bare(tp))
        origin = typing.get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            tp, key = tp.model_fields[str(part)].annotation, _join(key, str(part))
        elif origin is dict:
            tp, key = typing.get_args(tp)[1], _join(key, str(part))
        elif origin is tuple:
            tp, key = typing.get_args(tp)[0], f"{key}[{part}]"
        elif _is_union(tp):
            return key, tp, i
        else:  # pragma: no cover - a location pydantic does not make for these annotations
            raise TypeError(f"cannot follow {part!r} into {tp!r}")
    return key, tp, None


def describe(tp: Any) -> str:
    """What an annotation takes, in the words of the error messages."""
    tp = _bare(tp)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if _is_union(tp) or origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"a list of {describe(typing.get_args(tp)[0])}"
    if origin is dict:
        return "a mapping"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"a mapping with keys {sorted(tp.model_fields)}"
    words = {float: "a finite number", str: "a non-empty string", int: "an integer", bool: "true or false"}
    return words.get(tp, getattr(tp, "__name__", str(tp)))


def _bare(tp: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``."""
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _members(tp: Any) -> list[Any]:
    return [a for a in typing.get_args(tp) if a is not type(None)] \
        if typing.get_origin(tp) in (typing.Union, types.UnionType) else []


def _is_union(tp: Any) -> bool:
    """A union of two or more alternatives besides null (pydantic tags each alternative's failures)."""
    return len(_members(tp)) > 1


def _optional_inner(tp: Any) -> Any:
    """``X | None`` -> ``X`` (pydantic validates it as a nullable ``X``, without a tag); else ``tp``."""
    members = _members(tp)
    return _bare(members[0]) if len(members) == 1 else tp


def _member(union: Any) -> Any:
    """The alternative of ``union`` that has parts (a Literal has none to fail inside)."""
    (shaped,) = [a for a in _members(union) if typing.get_origin(_bare(a)) is not Literal]
    return shaped


def _join(key: str, field: str) -> str:
    return f"{key}.{field}" if key and field else key or field
