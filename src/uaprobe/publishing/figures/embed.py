"""The figures in the manuscript: markdown images of the figures stage's PNGs, one per model where
the figure is per model, labelled for cross-references; the arrays each plots are named in the supplement
(``figures.html`` and ``provenance.html``), not in the paper's captions."""

from __future__ import annotations

import os
import re
from pathlib import Path

from uaprobe.publishing.provenance.outputs import ManuscriptDataError, Outputs
from uaprobe.publishing.prose.primitives.markdown import join_words
from uaprobe.schema.manifest import FigureEntry


def slug(text: str) -> str:
    """A label-safe form of a model id (letters, digits and single hyphens)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def figure_entries(out: Outputs, key: str) -> list[FigureEntry]:
    """The manifest entries of figure ``key``, in panel order (one per model, or one for the panel)."""
    entries = [e for e in out.figures if e.key == key]
    if not entries:
        raise ManuscriptDataError(f"figures/manifest.json: no figure {key!r}; run the `figures` stage")
    order = {m: i for i, m in enumerate(out.models)}
    return sorted(entries, key=lambda e: order.get(e.model or "", -1))


def figure_label(key: str, model_id: str | None = None) -> str:
    return f"fig-{slug(key)}" + (f"-{slug(model_id)}" if model_id else "")


def figure_markdown(out: Outputs, key: str, caption: str, *, paper_dir: str | Path | None = None,
                    width: str = "100%") -> str:
    """Markdown figures for ``key`` (one per model where per model), captioned with the arrays each plots:
    the first with ``caption`` (``{display}`` replaced by the model's name), each further one with the model's
    name and a reference to the first, so that no caption repeats another; ``width``: of the text width."""
    paper_dir = Path.cwd() if paper_dir is None else Path(paper_dir)
    blocks = []
    first: str | None = None
    for e in figure_entries(out, key):
        model = e.model
        name = out.display(model) if model else "the panel"
        text = caption.format(display=name) if first is None else f"{name}, as @{first}."
        first = first or figure_label(key, model)
        png = out.root / e.png
        path = os.path.relpath(png, paper_dir.resolve()).replace(os.sep, "/")
        blocks.append(f"![{text}]({path}){{#{figure_label(key, model)} width=\"{width}\"}}")
    return "\n\n".join(blocks) + "\n\n"


def figure_refs(out: Outputs, key: str) -> str:
    """Cross-references to every figure of ``key``: ``@fig-key-a and @fig-key-b``."""
    return join_words([f"@{figure_label(key, e.model)}" for e in figure_entries(out, key)])
