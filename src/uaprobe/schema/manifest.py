"""``figures/manifest.json``: every figure the ``figures`` stage drew, with the results files it read."""

from __future__ import annotations

from pydantic import Field

from uaprobe.schema.base import Record


class FigureEntry(Record):
    """One figure."""

    key: str = Field(description="the figure's name (`layerwise`, `bins`, ..., `scaling`)")
    model: str | None = Field(description="the model id; null for a figure of the whole panel")
    stage: str = Field(description="`figures`")
    sources: list[str] = Field(description="the results files it was drawn from, relative to the root")
    files: dict[str, str] = Field(description="per format, the file, relative to the root")
    png: str = Field(description="the PNG file (the manuscript's image)")


class Manifest(Record):
    """``figures/manifest.json``."""

    stage: str = Field(description="`figures`")
    formats: list[str] = Field(description="the formats drawn")
    figures: list[FigureEntry] = Field(description="every figure, per model then the panel's")
