"""The building blocks of the results schema: a strict base model and the field types that say
which values may be missing and which lists run over the layers.

A missing statistic is written as ``null`` and its reason is recorded in the file's top-level
``nan_reasons`` under the value's ``/``-separated path. The schema says where a ``null`` may stand:

- :data:`Stat`, :data:`Flag`, :data:`Label`, :data:`Index` are a number, a bool, a string, an
  integer *or a missing value*: a ``null`` there needs a recorded reason;
- a plain ``X | None`` field is ``null`` by meaning (documented on the field), not a missing value;
- every other field holds a value of its type, never ``null``.

:data:`PerLayer` marks a list with one entry per layer (as long as the file's ``layers``).
:func:`walk` visits a validated model together with these markers; the checks of
:mod:`uaprobe.schema.files` are built on it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, Union

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, PrivateAttr

T = TypeVar("T")


@dataclass(frozen=True)
class Reasoned:
    """Marker: a ``null`` here is a missing value whose reason is in ``nan_reasons`` (JSON Schema:
    ``"x-missing": true``)."""

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(core), "x-missing": True}


@dataclass(frozen=True)
class ByLayer:
    """Marker: a list with one entry per layer, ``len(layers)`` (JSON Schema: ``"x-per-layer": true``)."""

    def __get_pydantic_json_schema__(self, core: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        return {**handler(core), "x-per-layer": True}


REASONED = Reasoned()
BY_LAYER = ByLayer()

Stat = Annotated[float | None, REASONED]
"""A statistic: a float, or ``null`` with a recorded reason."""
Flag = Annotated[bool | None, REASONED]
"""A verdict: a bool, or ``null`` with a recorded reason."""
Label = Annotated[str | None, REASONED]
"""A label: a string, or ``null`` with a recorded reason."""
Index = Annotated[int | None, REASONED]
"""A layer or count that may be undefined: an int, or ``null`` with a recorded reason."""
PerLayer = Annotated[list[T], BY_LAYER]
"""A list over the layers ``0..L``."""


class Record(BaseModel):
    """A JSON object of a results file: every key declared, no other key, no type coercion
    (``1`` is no bool, ``"1"`` no number); an int is accepted where a float is declared.

    Read access by attribute (``doc.poolings["mean"].pearson_r``); the JSON keys that are no Python
    names have an alias (``global`` -> ``global_``). :meth:`__getitem__` and :meth:`get` read by
    JSON key, for code that still walks the files as mappings.
    """

    model_config = ConfigDict(strict=True, extra="forbid", protected_namespaces=(), populate_by_name=True,
                              frozen=True)
    _source: str = PrivateAttr("results file")
    """The file this record was read from (set on the top-level record by the readers)."""

    def __getitem__(self, key: str) -> Any:
        name = _field_name(type(self), key)
        if name is None:
            raise KeyError(key)
        return getattr(self, name)

    def get(self, key: str, default: Any = None) -> Any:
        name = _field_name(type(self), key)
        if name is None or name not in self.model_fields_set:
            return default
        return getattr(self, name)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (name := _field_name(type(self), key)) is not None \
            and name in self.model_fields_set

    def keys(self) -> list[str]:
        """The JSON keys present in the file."""
        return [info.alias or name for name, info in type(self).model_fields.items() if name in self.model_fields_set]


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
    """``X`` and whether the annotation was ``X | None``."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
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


def walk(value: Any, annotation: Any, path: tuple[str | int, ...] = (), meta: tuple[Any, ...] = ()) -> Iterator[Node]:
    """Every value below ``value`` (of type ``annotation``), depth first, with the schema's markers."""
    annotation, more = _strip(annotation)
    meta = meta + more
    inner, _ = _nullable(annotation)
    inner, more = _strip(inner)
    meta = meta + more
    yield Node(path, value, any(isinstance(m, Reasoned) for m in meta), any(isinstance(m, ByLayer) for m in meta))
    if value is None:
        return
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            if name in value.model_fields_set:
                yield from walk(getattr(value, name), info.annotation, (*path, info.alias or name),
                                tuple(info.metadata))
        return
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if isinstance(value, list) and origin is list and args:
        for i, item in enumerate(value):
            yield from walk(item, args[0], (*path, i))
    elif isinstance(value, dict) and origin is dict and len(args) == 2:
        for key, item in value.items():
            yield from walk(item, args[1], (*path, key))


def json_path(path: tuple[str | int, ...]) -> str:
    """The ``/``-separated form of a path (``poolings/mean/pearson_r/3``)."""
    return "/".join(map(str, path))
