"""The manuscript's outputs given in memory: a test's files hold only the keys its phrases read, so their records
are built unchecked, from each file as it is when it is read (a test may edit a file between two reads)."""

from __future__ import annotations

import typing
from typing import Any

from uaprobe.publishing.provenance.outputs import Outputs, R
from uaprobe.schema import Record
from uaprobe.schema.base import _nullable, _strip


class InMemory(Outputs):
    """:class:`Outputs` whose files are given (``files``), read as unchecked records."""

    def record_at(self, file: str, kind: type[R]) -> R:
        """The file as an unchecked record of ``kind``, built from the file as it is now."""
        return unchecked(kind, self.doc(file))  # type: ignore[return-value]


def unchecked(model: type[Record], doc: dict[str, Any]) -> Record:
    """``doc`` as a record of ``model``, unchecked, the records below it built the same way."""
    fields = {name: _unchecked(info.annotation, doc[info.alias or name])
              for name, info in model.model_fields.items() if (info.alias or name) in doc}
    return model.model_construct(**fields)


def _unchecked(annotation: Any, value: Any) -> Any:
    annotation = _strip(_nullable(_strip(annotation)[0])[0])[0]
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Record) and isinstance(value, dict):
        return unchecked(annotation, value)
    if typing.get_origin(annotation) is dict and isinstance(value, dict):
        return {k: _unchecked(args[1], v) for k, v in value.items()}
    if typing.get_origin(annotation) is list and isinstance(value, list):
        return [_unchecked(args[0], v) for v in value]
    return value
