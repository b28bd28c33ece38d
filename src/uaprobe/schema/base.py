"""The building blocks of the results schema: a strict base model and the field types that say
which values may be missing and which lists run over the layers.

A missing statistic is written as ``null`` and its reason is recorded in the file's top-level
``nan_reasons`` under the value's ``/``-separated path (an analysis builds a
:class:`~uaprobe.schema.missing.Missing` there; the writer reads the paths off the document). The
schema says where a ``null`` may stand:

- :data:`Stat`, :data:`Flag`, :data:`Label`, :data:`Index` are a number, a bool, a string, an
  integer *or a missing value*: a ``null`` there needs a recorded reason;
- a plain ``X | None`` field is ``null`` by meaning (documented on the field), not a missing value;
- every other field holds a value of its type, never ``null``.

:data:`PerLayer` marks a list with one entry per layer (as long as the file's ``layers``).
:func:`walk` visits a validated model together with these markers; the checks of
:mod:`uaprobe.schema.files` are built on it.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, Union

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, GetJsonSchemaHandler, PrivateAttr
from pydantic_core import CoreSchema, core_schema

from uaprobe.schema.missing import Missing

T = TypeVar("T")


def _keep_missing(value: Any, handler: Any) -> Any:
    return value if isinstance(value, Missing) else handler(value)


@dataclass(frozen=True)
class Reasoned:
    """Marker: a ``null`` here is a missing value whose reason is in ``nan_reasons`` (JSON Schema:
    ``"x-missing": true``). Until the file is written the value may be a :class:`Missing`: it is taken
    and dumped as it is, and everything else is checked against the annotation without it."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        kept = tuple(a for a in typing.get_args(source) if a is not Missing)
        inner = handler.generate_schema(Union[kept] if kept else source)
        return core_schema.no_info_wrap_validator_function(
            _keep_missing, inner, serialization=core_schema.wrap_serializer_function_ser_schema(_keep_missing))

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(core), "x-missing": True}


@dataclass(frozen=True)
class ByLayer:
    """Marker: a list with one entry per layer, ``len(layers)`` (JSON Schema: ``"x-per-layer": true``)."""

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(core), "x-per-layer": True}


REASONED = Reasoned()
BY_LAYER = ByLayer()

Stat = Annotated[float | Missing | None, REASONED]
"""A statistic: a float, or ``null`` with a recorded reason (a :class:`Missing` until the file is written)."""
Flag = Annotated[bool | Missing | None, REASONED]
"""A verdict: a bool, or ``null`` with a recorded reason."""
Label = Annotated[str | Missing | None, REASONED]
"""A label: a string, or ``null`` with a recorded reason."""
Index = Annotated[int | Missing | None, REASONED]
"""A layer or count that may be undefined: an int, or ``null`` with a recorded reason."""
PerLayer = Annotated[list[T], BY_LAYER]
"""A list over the layers ``0..L``."""


class Record(BaseModel):
    """A JSON object of a results file: every key declared, no other key, no type coercion
    (``1`` is no bool, ``"1"`` no number); an int is accepted where a float is declared.

    Read access by attribute (``doc.poolings["mean"].pearson_r``); the JSON keys that are no Python
    names have an alias (``global`` -> ``global_``).
    """

    model_config = ConfigDict(strict=True, extra="forbid", protected_namespaces=(), populate_by_name=True,
                              frozen=True)
    _source: str = PrivateAttr("results file")
    """The file this record was read from (set on the top-level record by the readers)."""


def _field_name(cls: type[BaseModel], key: str) -> str | None:
    for name, info in cls.model_fields.items():
        if (info.alias or name) == key:
            return name
    return None


def _strip(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``annotation`` without ``Annotated``, and the metadata it carried."""
    meta: tuple[Any, ...] = ()
    while typing.get_origin(annotation) is Annotated:
        args = typing.get_args(annotation)
        annotation, meta = args[0], meta + tuple(args[1:])
    return annotation, meta


def _nullable(annotation: Any) -> tuple[Any, bool]:
    """``X`` and whether the annotation was ``X | None`` (or ``X | Missing | None``)."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None) and a is not Missing]
        if len(args) < len(typing.get_args(annotation)):
            return (args[0] if len(args) == 1 else Union[tuple(args)]), True
    return annotation, False


@dataclass(frozen=True)
class Node:
    """One value of a validated document: its JSON path, its value and what the schema says of it."""

    path: tuple[str | int, ...]
    value: Any
    reasoned: bool
    """A ``null`` here needs a recorded reason."""
    by_layer: bool
    """A list with one entry per layer."""


@dataclass(frozen=True)
class _Shape:
    """What :func:`walk` needs to know of an annotation (computed once per annotation)."""

    reasoned: bool
    by_layer: bool
    container: str
    """``list``, ``dict`` or ``""``."""
    item: Any
    """The annotation of the list items or dict values."""
    scalar_items: bool
    """The items are scalars (no record, list or dict below them)."""


@functools.lru_cache(maxsize=None)
def _shape(annotation: Any, meta: tuple[Any, ...]) -> _Shape:
    annotation, more = _strip(annotation)
    inner, _ = _nullable(annotation)
    inner, most = _strip(inner)
    meta = meta + more + most
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    container = "list" if origin is list and args else "dict" if origin is dict and len(args) == 2 else ""
    item = (args[0] if container == "list" else args[1]) if container else None
    scalar = False
    if container:
        base, _ = _nullable(_strip(item)[0])
        scalar = _strip(base)[0] in (float, int, bool, str)
    return _Shape(any(isinstance(m, Reasoned) for m in meta), any(isinstance(m, ByLayer) for m in meta), container,
                  item, scalar)


def walk(value: Any, annotation: Any, path: tuple[str | int, ...] = (), meta: tuple[Any, ...] = (), *,
         scalars: bool = True) -> Iterator[Node]:
    """Every value below ``value`` (of type ``annotation``), depth first, with the schema's markers.

    With ``scalars=False`` the items of a list or mapping of scalars are visited only where they are
    ``null`` (what the checks need, and much faster on long per-layer lists)."""
    try:
        shape = _shape(annotation, meta)
    except TypeError:  # an unhashable annotation: the same, uncached
        shape = _shape.__wrapped__(annotation, meta)
    yield Node(path, value, shape.reasoned, shape.by_layer)
    if value is None:
        return
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            if name in value.model_fields_set:
                yield from walk(getattr(value, name), info.annotation, (*path, info.alias or name),
                                tuple(info.metadata), scalars=scalars)
        return
    if not shape.container:
        return
    items = enumerate(value) if isinstance(value, list) else value.items() if isinstance(value, dict) else ()
    if shape.scalar_items and not scalars:
        item_shape = _shape(shape.item, ())
        for key, item in items:
            if item is None:
                yield Node((*path, key), None, item_shape.reasoned, False)
        return
    for key, item in items:
        yield from walk(item, shape.item, (*path, key), scalars=scalars)


def json_path(path: tuple[str | int, ...]) -> str:
    """The ``/``-separated form of a path (``poolings/mean/pearson_r/3``)."""
    return "/".join(map(str, path))


def declared(annotation: Any, parts: typing.Sequence[str]) -> Any:
    """The annotation of the values at the key path ``parts`` below a value of ``annotation``: a record's
    field by its JSON key, any key of a mapping, any index of a list (``*`` stands for every field, key or index).
    A key the schema does not declare there is a :class:`KeyError` naming it."""
    for part in parts:
        annotation = _below(annotation, part)
    return annotation


def _below(annotation: Any, part: str) -> Any:
    inner = _strip(_nullable(_strip(annotation)[0])[0])[0]
    if typing.get_origin(inner) in (Union, types.UnionType):  # a union of records: any alternative's key
        for alternative in typing.get_args(inner):
            try:
                return _below(alternative, part)
            except KeyError:
                continue
        raise KeyError(part)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        if part == "*":  # every field: what any of them declares below
            fields = tuple(info.annotation for info in inner.model_fields.values())
            return Union[fields] if len(fields) > 1 else fields[0]
        name = _field_name(inner, part)
        if name is None:
            raise KeyError(part)
        return inner.model_fields[name].annotation
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin is list and args and (part == "*" or part.lstrip("-").isdigit()):
        return args[0]
    raise KeyError(part)
