"""The PDF's float and table rules (``paper/tables.typ`` after the fallback's ``TYPST_PREAMBLE``),
checked by compiling small Typst documents with the ``typst`` wheel and asking where things landed:
an image stays on its caption's page, a table's caption stays with its first rows, captions are
ragged right, an interval never breaks inside its brackets and a short header never wraps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typst

from uaprobe.publishing.render.fallback import TYPST_PREAMBLE

REPO = Path(__file__).resolve().parents[1]
PAPER_RULES = (REPO / "paper" / "tables.typ").read_text(encoding="utf-8")

PANDOC_TEMPLATE_RULES = "#show figure.where(kind: table): set figure.caption(position: top)\n"
"""What pandoc's Typst template sets before the header includes (a table's caption above it)."""

PROBE = ('#let probe(name) = context [#metadata((name: name, page: here().page(), '
         'y: here().position().y.pt())) <probe>]\n')
"""An invisible mark that records its page and vertical position."""

ENGINES = {
    # engine: (rules before the manuscript's, figure kind of an image, of a table, caption argument)
    "fallback": (PANDOC_TEMPLATE_RULES + TYPST_PREAMBLE, "image", "table", "[{}]"),
    "quarto": ("", '"quarto-float-fig"', '"quarto-float-tbl"', "figure.caption(position: top, [{}])"),
}

LONG_CAPTION = " ".join(["A caption long enough to run over several lines of the page,"] * 5)


def _mark(name: str) -> str:
    return f'#probe("{name}")'


def _probes(tmp_path: Path, head: str, body: str) -> list[dict]:
    source = tmp_path / "probe.typ"
    source.write_text(head + PAPER_RULES + '\n#set page(paper: "a4")\n#set par(justify: true)\n' + PROBE + body,
                      encoding="utf-8")
    return json.loads(typst.query(str(source), "<probe>", field="value", root=str(tmp_path),
                                  ignore_system_fonts=True))


def _by_case(probes: list[dict]) -> dict[int, dict[str, dict]]:
    cases: dict[int, dict[str, dict]] = {}
    for p in probes:
        case, _, what = p["name"].partition(":")
        cases.setdefault(int(case), {})[what] = p
    return cases


# A figure or a table placed after a filler of 0, 1, ..., 24 cm at the top of a fresh page: one of
# them meets the page's end wherever the rules let a float break.
FILLERS_CM = range(25)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_image_never_parts_from_its_caption(tmp_path: Path, engine: str) -> None:
    head, image_kind, _, caption = ENGINES[engine]
    body = "".join(
        f"#pagebreak(weak: true)\n#v({cm}cm)\n"
        f"#figure([{_mark(f'{cm}:image')}#rect(width: 100%, height: 6cm)], kind: {image_kind}, supplement: [Figure],\n"
        f"  caption: {caption.format(_mark(f'{cm}:caption') + LONG_CAPTION)})\n"
        for cm in FILLERS_CM)
    cases = _by_case(_probes(tmp_path, head, body))
    assert sorted(cases) == list(FILLERS_CM)
    for cm, marks in cases.items():
        assert marks["image"]["page"] == marks["caption"]["page"], f"after {cm} cm the caption left its image"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_table_keeps_its_caption_with_its_first_rows_and_may_break(tmp_path: Path, engine: str) -> None:
    head, _, table_kind, caption = ENGINES[engine]
    rows = 100  # longer than a page: it has to break

    def table(cm: int) -> str:
        cells = ", ".join(f"[{_mark(f'{cm}:row{i}')}row {i}], [{i}]" for i in range(1, rows + 1))
        return (f"#figure(table(columns: 2, table.header([name], [value]), {cells}), kind: {table_kind},\n"
                f"  supplement: [Table], caption: {caption.format(_mark(f'{cm}:caption') + LONG_CAPTION)})\n")

    body = "".join(f"#pagebreak(weak: true)\n#v({cm}cm)\n{table(cm)}" for cm in FILLERS_CM)
    cases = _by_case(_probes(tmp_path, head, body))
    assert sorted(cases) == list(FILLERS_CM)
    for cm, marks in cases.items():
        assert marks["caption"]["page"] == marks["row1"]["page"], f"after {cm} cm the caption left its table"
        assert marks[f"row{rows}"]["page"] > marks["row1"]["page"], "a table longer than a page did not break"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_table_shorter_than_a_page_is_never_split(tmp_path: Path, engine: str) -> None:
    head, _, table_kind, caption = ENGINES[engine]
    rows = 14  # a third of a page

    def table(cm: int) -> str:
        cells = ", ".join(f"[{_mark(f'{cm}:row{i}')}row {i}], [{i}]" for i in range(1, rows + 1))
        return (f"#figure(table(columns: 2, table.header([name], [value]), {cells}), kind: {table_kind},\n"
                f"  supplement: [Table], caption: {caption.format(_mark(f'{cm}:caption') + 'A short table.')})\n")

    body = "".join(f"#pagebreak(weak: true)\n#v({cm}cm)\n{table(cm)}" for cm in FILLERS_CM)
    cases = _by_case(_probes(tmp_path, head, body))
    assert sorted(cases) == list(FILLERS_CM)
    for cm, marks in cases.items():
        assert marks["caption"]["page"] == marks["row1"]["page"] == marks[f"row{rows}"]["page"], \
            f"after {cm} cm the table was split"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_captions_are_ragged_right(tmp_path: Path, engine: str) -> None:
    head, image_kind, table_kind, caption = ENGINES[engine]
    style = "#context [#metadata((name: \"{}\", justify: par.justify, align: repr(align.alignment.x))) <probe>]"
    body = "".join(
        f"#figure(rect(), kind: {kind}, supplement: [X], caption: {caption.format(style.format(name) + LONG_CAPTION)})\n"
        for name, kind in (("image", image_kind), ("table", table_kind)))
    probes = _probes(tmp_path, head, body)
    assert [p["name"] for p in probes] == ["image", "table"]
    for p in probes:
        assert p["justify"] is False, f"the {p['name']} caption is justified"
        assert p["align"] in ("left", "start"), f"the {p['name']} caption is aligned {p['align']}"
    # the text outside captions keeps the document's justification
    assert _probes(tmp_path, head, "#context [#metadata((justify: par.justify)) <probe>]")[0]["justify"] is True


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_interval_stays_whole_and_short_headers_stay_on_one_line(tmp_path: Path, engine: str) -> None:
    """A table laid out as pandoc writes a pipe table: fixed percentage columns, a number column too
    narrow for its interval, sourced values as links (``[#link(<a>)[+0.85], #link(<b>)[+1.00]]``)."""
    head, _, table_kind, caption = ENGINES[engine]
    name = "A model name long enough to wrap in its column"
    body = (
        f"#figure(table(columns: (30%, 8%, 8%, 8%), align: (left, right, right, right),\n"
        f"  table.header([model], [{_mark('perm-start')}perm. p{_mark('perm-end')}],"
        f" [{_mark('holm-start')}Holm p{_mark('holm-end')}], [{_mark('one-start')}r{_mark('one-end')}]),\n"
        f"  table.hline(),\n"
        f"  [{name}], [0.248], [0.497],\n"
        f"  [+0.076 \\[{_mark('open')}#link(<low>)[−0.08],\n    #link(<high>)[+0.20]{_mark('close')}\\]],\n"
        f"), kind: {table_kind}, supplement: [Table], caption: {caption.format('Intervals')})\n"
        "#metadata(none) <low>\n#metadata(none) <high>\n")
    marks = {p["name"]: p for p in _probes(tmp_path, head, body)}
    def height(what: str) -> float:  # from a mark at the start of a cell to one at its end
        return marks[f"{what}-end"]["y"] - marks[f"{what}-start"]["y"]

    for what in ("perm", "holm"):  # as far apart as in a one-letter cell: one line
        assert height(what) == pytest.approx(height("one")), f"the {what} header wraps"
    assert marks["open"]["y"] == pytest.approx(marks["close"]["y"]), "the interval breaks inside its brackets"
