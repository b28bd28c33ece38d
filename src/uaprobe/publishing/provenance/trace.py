"""A results record read through, key by key: where in its file a value the paper shows stands.

The paper reads the loaded records by attribute (``r.family.tests.vif[3]``), so that a field renamed in the
schema fails where it is read, not as a key string that no longer resolves. :class:`Trace` stands in for the
record while a getter reads it: each field or item taken is checked against the record's model and its JSON
key recorded, so the value comes back with its path in the file (``family/tests/vif/3``), the provenance page's
key.
"""

from __future__ import annotations

from typing import Any

from uaprobe.schema import Record


class Trace:
    """A value of a record and the JSON keys that led to it from the record's top."""

    __slots__ = ("_node", "_path")

    def __init__(self, node: Any, path: tuple[str | int, ...] = ()) -> None:
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> Trace:
        node = object.__getattribute__(self, "_node")
        path = object.__getattribute__(self, "_path")
        info = type(node).model_fields.get(name) if isinstance(node, Record) else None
        if info is None:
            raise AttributeError(f"{type(node).__name__} at {'/'.join(map(str, path)) or 'the top'} has no field "
                                 f"{name!r}")
        return Trace(getattr(node, name), (*path, info.alias or name))

    def __getitem__(self, key: str | int) -> Trace:
        node = object.__getattribute__(self, "_node")
        return Trace(node[key], (*object.__getattribute__(self, "_path"), key))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a traced record is read, not written")


def traced(result: Any) -> tuple[Any, str]:
    """The value a getter read through a :class:`Trace`, and its ``/``-separated key path."""
    if not isinstance(result, Trace):
        raise TypeError(f"expected a value read from the record, got {type(result).__name__} (a getter returns "
                        "the field it read, not a value computed from it)")
    return object.__getattribute__(result, "_node"), "/".join(map(str, object.__getattribute__(result, "_path")))
