"""``figures.html``, the supplement of every figure the figures stage draws: each figure of
``figures/manifest.json`` in the manifest's order, with its caption (the registry's), the results files
and arrays it plots, and its image's md5, the image embedded so that the page stands alone."""

from __future__ import annotations

import base64
import html
from collections.abc import Callable

from uaprobe.publishing.figures.figure_registry import BY_KEY, data_line
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.schema.manifest import FigureEntry

FIGURES_HTML = "figures.html"
"""The supplementary page of every figure, written beside the paper."""

STYLE = ("body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}"
         "figure{margin:2em 0;border-top:1px solid #ccc;padding-top:1em}img{max-width:100%}"
         "figcaption{font-size:0.95em}code{font-size:0.85em;word-break:break-all}")


def figure_caption(out: Outputs, entry: FigureEntry) -> str:
    """The registry's caption of a manifest entry, with the model's name (``the panel`` for a panel figure)."""
    return BY_KEY[entry.key].caption.format(display=out.display_text(entry.model) if entry.model else "the panel")


def figures_html(out: Outputs, read: Callable[[str], bytes], md5: Callable[[str], str],
                 shown: set[str] = frozenset()) -> str:  # type: ignore[assignment]
    """The page: every manifest entry as a numbered figure (S1, S2, ...); ``read`` gives a PNG's bytes by its
    path from the root, ``md5`` its digest; ``shown``: the manifest keys the paper shows as well."""
    parts = ["<h1>Every figure of the pipeline</h1>",
             f"<p>{FIGURES_HTML}: supplementary file of the paper. The figures stage draws these figures from the "
             "results files named under each; the paper shows those marked so. Vector versions (SVG) lie beside "
             "each PNG under <code>figures/</code>.</p>"]
    for i, entry in enumerate(out.figures, start=1):
        png = entry.png
        image = base64.b64encode(read(png)).decode("ascii")
        where = " Also in the paper." if entry.key in shown else ""
        sources = data_line(entry).removeprefix("Data: ")
        parts.append(
            f'<figure id="S{i}">\n<img src="data:image/png;base64,{image}" alt="{html.escape(entry.key)}">\n'
            f"<figcaption><b>Figure S{i}.</b> {html.escape(figure_caption(out, entry))}{where}<br>"
            f"Data: {html.escape(sources).replace('`', '')}<br>"
            f"Image: <code>{html.escape(png)}</code>, md5 <code>{md5(png)}</code></figcaption>\n</figure>")
    title = "Every figure of the pipeline"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n" + "\n".join(parts)
            + "\n</body>\n</html>\n")
