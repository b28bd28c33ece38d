"""The supplementary files: one row per source a page shows, in the order of the numbers its links carry,
as CSV and as an HTML table whose rows are the links' targets."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from types import SimpleNamespace

from uaprobe.publishing.provenance import supplement
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.provenance.readback import Shown
from uaprobe.publishing.provenance.values import SUPPLEMENT_HTML, Ledger
from uaprobe.schema.manifest import FigureEntry


def shown(text: str, file: str, key: str, number: int | None, index: int) -> Shown:
    return Shown(text, file, key, "r", index, False, number)


def test_value_rows_keep_one_row_per_number_in_number_order() -> None:
    page = [shown("+0.5", "b.json", "x", 2, 0), shown("+0.1", "a.json", "y", 1, 1), shown("+0.5", "b.json", "x", 2, 2),
            shown("7", "a.json", "n", None, 3)]
    rows = supplement.value_rows(page, lambda f: f"md5-of-{f}")
    assert rows == [["1", "+0.1", "a.json", "md5-of-a.json", "y", "r"], ["2", "+0.5", "b.json", "md5-of-b.json", "x", "r"]]
    text = supplement.provenance_csv(rows)
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == list(supplement.CSV_HEADER) and parsed[1:] == rows


def test_the_html_page_anchors_every_value_row_and_escapes_the_cells() -> None:
    table = supplement.Table("Where", "note <b>", ("number", "value"), [["1", "<x>"], ["fig-a", "figure"]],
                             ["prov-1", None])
    page = supplement.provenance_html("Title", [table], "a: 1\n")
    assert page.startswith("<!DOCTYPE html>") and SUPPLEMENT_HTML in page
    assert '<tr id="prov-1"><td>1</td><td>&lt;x&gt;</td></tr>' in page
    assert "<tr><td>fig-a</td>" in page and "note &lt;b&gt;" in page and "<pre>a: 1\n</pre>" in page
    assert len(re.findall(r'id="prov-\d+"', page)) == 1


class _Manifest(Outputs):
    """Outputs whose figure manifest is given in memory."""

    @property
    def figures(self) -> list[FigureEntry]:
        return [FigureEntry.model_construct(**e) for e in self.files["figures/manifest.json"]["figures"]]


def test_figure_rows_list_only_the_figures_the_page_shows() -> None:
    params = SimpleNamespace(model=lambda m: SimpleNamespace(display=m))
    out = _Manifest(root=Path("."), params=params, models=("m",), ledger=Ledger(Path(".")),  # type: ignore[arg-type]
                    files={"figures/manifest.json": {"figures": [
                        {"key": "layerwise", "model": "m", "png": "figures/models/m/layerwise.png"},
                        {"key": "sink", "model": "m", "png": "figures/models/m/sink.png"}]}})
    page = '<figure id="fig-layerwise-m"><img></figure>'
    rows = supplement.figure_rows(out, page, lambda f: "h")
    assert [r[:4] for r in rows] == [["fig-layerwise-m", "figure", "figures/models/m/layerwise.png", "h"]]
    assert rows[0][4].startswith("results/models/m/layerwise.json: poolings/*/pearson_r")
