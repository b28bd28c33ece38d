"""What a render returns, and how it fails."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from uaprobe.errors import UAProbeError


class RenderError(UAProbeError):
    """The manuscript could not be rendered (a cell failed, a tool is missing, pandoc refused)."""


class ManuscriptSyntaxError(RenderError):
    """The manuscript uses Quarto syntax the fallback renderer does not support."""


class InlineValueError(RenderError):
    """An inline expression's value is of a kind Quarto prints differently from the fallback (a plain str)."""


@dataclass(frozen=True)
class RenderResult:
    """What a render wrote and which engine wrote it."""

    html: Path
    pdf: Path
    engine: Literal["quarto", "fallback"]
