"""The GGUF format: a file's header and tensor table, checked against its size before any tensor is read.

transformers dequantizes a GGUF file through the ``gguf`` package's reader, which takes a read past
the end of a file as a shorter array; :func:`read_gguf_summary` reads the header with a reader made
to refuse that, so a truncated or damaged file fails here with its cause rather than far from it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GGUF_MAGIC = b"GGUF"


class GGUFFormatError(ValueError):
    """The bytes of a GGUF file do not describe a complete model."""


@dataclass(frozen=True)
class GGUFSummary:
    """What the header of a GGUF file promises, checked against the file's size."""

    version: int
    architecture: str
    n_tensors: int
    expected_size: int
    """Bytes the header's tensor table needs: the end of the last tensor's data."""


def _checked_reader_class() -> type:
    """``gguf.GGUFReader``, made to refuse a file that does not hold what its header promises.

    The reader itself takes a read past the end of the file as a shorter array (and so loops or
    fails far from the cause): here such a read raises, an array cannot claim more entries than
    the file has bytes, and the tensor table is checked against the file's size before any tensor
    is mapped. The hooks are the reader's own methods, of the ``gguf`` version in requirements.lock.
    """
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

    class CheckedReader(GGUFReader):
        def _get(self, offset: int, dtype: Any, count: int = 1, override_order: Any = None) -> Any:
            out = super()._get(offset, dtype, count, override_order)
            if len(out) < int(count):
                raise GGUFFormatError(f"the header runs past the end of the file at byte {offset} "
                                      f"({self.data.size} bytes)")
            return out

        def _get_field_parts(self, orig_offs: int, raw_type: int) -> Any:
            if raw_type == GGUFValueType.ARRAY:
                count = int(self._get(orig_offs + 4, np.uint64)[0])
                if count > self.data.size - orig_offs:
                    raise GGUFFormatError(f"an array at byte {orig_offs} claims {count} entries in a "
                                          f"{self.data.size}-byte file")
            return super()._get_field_parts(orig_offs, raw_type)

        def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
            expected = start_offs
            for field in fields:
                _, _, _, dims, kind, offset = field.parts
                try:
                    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(int(kind[0]))]
                except (ValueError, KeyError):
                    raise GGUFFormatError(f"tensor {field.name!r} has unknown type {int(kind[0])}") from None
                n_elements = math.prod(int(d) for d in dims)
                expected = max(expected, start_offs + int(offset[0]) + n_elements // block * type_size)
            if expected > self.data.size:
                raise GGUFFormatError(f"truncated: {self.data.size} bytes, but its tensor table needs {expected}")
            super()._build_tensors(start_offs, fields)

    return CheckedReader


def read_gguf_summary(path: str | Path) -> GGUFSummary:
    """Read a GGUF file's header and tensor table with ``gguf.GGUFReader`` (no tensor data is read)
    and check the file holds every tensor the table lists.

    Raises :class:`GGUFFormatError` for a file that is not GGUF, has an unsupported version, has a
    header that runs past the end of the file, or is shorter than its tensor table says (truncated).
    A bit flip inside tensor data is not detectable here (GGUF carries no checksum).
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        head = fh.read(4)
    if size < 24:
        raise GGUFFormatError(f"{size} bytes, too short for a GGUF header")
    if head != GGUF_MAGIC:
        raise GGUFFormatError(f"starts with {head!r}, not the GGUF magic {GGUF_MAGIC!r}")
    try:
        reader = _checked_reader_class()(path)
    except GGUFFormatError:
        raise
    except (ValueError, KeyError, IndexError, OverflowError, TypeError) as exc:  # the reader's own checks
        raise GGUFFormatError(str(exc) or type(exc).__name__) from None
    arch = reader.get_field("general.architecture")
    architecture = arch.contents() if arch is not None else ""
    expected = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=reader.data_offset)
    return GGUFSummary(int(reader.get_field("GGUF.version").contents()),
                       architecture if isinstance(architecture, str) else "", len(reader.tensors), expected)
