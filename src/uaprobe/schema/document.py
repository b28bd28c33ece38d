"""A results file built as its model: the record of a file, and the JSON object a record is written as."""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from uaprobe.schema.base import Record
from uaprobe.schema.common import ResultsHeader

F = TypeVar("F", bound=ResultsHeader)


def record(model: type[F], header: Mapping[str, Any], **fields: Any) -> F:
    """The results file ``model`` of ``header`` and ``fields``, checked as it is built (a field the model lacks,
    or one it needs and is not given, fails here); its ``nan_reasons`` are read off the finished document
    (:func:`uaprobe.analysis.run.documents.finish`)."""
    return model(**header, **fields, nan_reasons={})


def document(value: Any) -> Any:
    """The JSON value of ``value``: a record as its keys (those it was built with; a missing value still a
    :class:`~uaprobe.schema.missing.Missing`); the records inside mappings and lists replaced in place."""
    if isinstance(value, Record):
        return value.model_dump(by_alias=True, exclude_unset=True)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in list(items):
        value[key] = document(item)
    return value
