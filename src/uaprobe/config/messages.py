"""A params file's first problem as the one sentence a user reads: ``key: got value, expected ...``.

pydantic reports every failure of a :class:`~pydantic.ValidationError` with its location; this module
names that location as ``params.yaml`` spells it (``analysis.bins.k[1]``, ``catalog.<id>.source``)
and says what the field takes, read from the field's own annotation, so the expected values are
written once: in :mod:`uaprobe.config.sections`.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Iterator, Literal

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
        ranks = []
        for i, part, kind, parent, _ in _steps(root, error["loc"]):
            if kind == "field":
                ranks.append(list(parent.model_fields).index(str(part)))
            elif kind == "entry":
                ranks.append(entries.setdefault(error["loc"][: i + 1], len(entries)))
            elif kind == "item":
                ranks.append(int(part))
            else:  # an unknown key comes first; a union's alternatives keep pydantic's order
                ranks.append(-1 if kind == "unknown" else 0)
        return tuple(ranks)

    return sorted(errors, key=rank)


def _explain(errors: list[ErrorDetails], tp: Any, key: str, start: int) -> str:
    first = errors[0]
    where, annotation, union_at = _locate(tp, first["loc"][start:], key)
    if union_at is None:
        return _leaf(first, where, annotation)
    at = start + union_at  # the position of the union member's tag in the location
    inside = [e for e in errors if e["loc"][:at] == first["loc"][:at] and len(e["loc"]) > at + 1]
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
    for i, part, kind, parent, child in _steps(tp, loc):
        if kind == "tag":
            return key, parent, i
        key, tp = (f"{key}[{part}]" if kind == "item" else _join(key, str(part))), child
    return key, tp, None


def _steps(tp: Any, loc: tuple[int | str, ...]) -> Iterator[tuple[int, int | str, str, Any, Any]]:
    """Each part of a location under the annotation ``tp``: (position, part, what it names, the annotation it
    is in, the annotation it names). A part names a ``field`` of a section (or an ``unknown`` key, the walk's
    end), an ``entry`` of a mapping, an ``item`` of a list, or the ``tag`` of a union's alternative (the
    annotation it names: the alternative with parts, where the location goes on into it)."""
    for i, part in enumerate(loc):
        parent = _optional_inner(_bare(tp))
        origin = typing.get_origin(parent)
        if isinstance(parent, type) and issubclass(parent, BaseModel):
            if str(part) not in parent.model_fields:
                yield i, part, "unknown", parent, None
                return
            kind, tp = "field", parent.model_fields[str(part)].annotation
        elif origin is dict:
            kind, tp = "entry", typing.get_args(parent)[1]
        elif origin is tuple:
            kind, tp = "item", typing.get_args(parent)[0]
        elif _is_union(parent):
            kind, tp = "tag", (_member(parent) if i + 1 < len(loc) else parent)
        else:  # pragma: no cover - a location pydantic does not make for these annotations
            raise TypeError(f"cannot follow {part!r} into {parent!r}")
        yield i, part, kind, parent, tp


def describe(tp: Any) -> str:
    """What an annotation takes, in the words of the error messages."""
    tp = _bare(tp)
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
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
