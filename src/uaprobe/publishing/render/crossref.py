"""Quarto's cross-references on the pandoc AST: figures, tables and sections numbered, ``@fig-…``,
``@tbl-…`` and ``@sec-…`` turned into links, the caption prefixes written here so that both
writers show the same numbers."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from uaprobe.publishing.render.qmd import QUARTO_CROSSREF_PREFIXES, SUPPORTED_CROSSREF_PREFIXES
from uaprobe.publishing.render.result import ManuscriptSyntaxError

def _stringify(inlines: Any) -> str:
    if isinstance(inlines, list):
        return "".join(_stringify(x) for x in inlines)
    if isinstance(inlines, dict):
        kind = inlines.get("t")
        if kind == "Str":
            return inlines["c"]
        if kind in ("Space", "SoftBreak", "LineBreak"):
            return " "
        if "c" in inlines:
            return _stringify(inlines["c"])
    return ""


def _walk_blocks(blocks: list[Any]) -> Iterator[dict[str, Any]]:
    """Every block in document order, depth first (divs, figures, lists, quotes)."""
    for block in blocks:
        if not isinstance(block, dict):
            continue
        yield block
        kind, content = block.get("t"), block.get("c")
        if kind in ("Div",):
            yield from _walk_blocks(content[1])
        elif kind == "BlockQuote":
            yield from _walk_blocks(content)
        elif kind in ("BulletList",):
            for item in content:
                yield from _walk_blocks(item)
        elif kind == "OrderedList":
            for item in content[1]:
                yield from _walk_blocks(item)


def _section_numbers(blocks: list[Any]) -> dict[str, str]:
    """Pandoc's ``--number-sections`` numbers of the headers with ids (unnumbered ones skipped)."""
    counters = [0] * 7
    numbers: dict[str, str] = {}
    for block in _walk_blocks(blocks):
        if block.get("t") != "Header":
            continue
        level, (ident, classes, _kv), _inl = block["c"]
        if "unnumbered" in classes:
            if ident.startswith("sec-"):
                numbers[ident] = ""
            continue
        counters[level] += 1
        for deeper in range(level + 1, 7):
            counters[deeper] = 0
        if ident:
            numbers[ident] = ".".join(str(c) for c in counters[1:level + 1])
    return numbers


def _prefix_caption(caption: list[Any], text: str) -> None:
    """Put ``text:`` ("Figure 2:") in front of a caption."""
    label = [{"t": "Str", "c": text.replace(" ", "\u00a0") + ":"}, {"t": "Space"}]
    body = caption[1]
    if body and body[0].get("t") in ("Plain", "Para"):
        body[0]["c"] = label + body[0]["c"]
    else:
        body.insert(0, {"t": "Plain", "c": label[:1]})


def _number_table_div(blocks: list[Any], index: int, *, targets: dict[str, str], counts: dict[str, int],
                      where: str) -> None:
    """A ``tbl-`` div: its one table numbered, labelled and put in the div's place."""
    ident, inner = blocks[index]["c"][0][0], blocks[index]["c"][1]
    tables = [b for b in inner if b.get("t") == "Table"]
    if len(tables) != 1:
        raise ManuscriptSyntaxError(f"{where}: {ident} holds {len(tables)} tables; expected one")
    table = tables[0]
    counts["tbl"] += 1
    text = f"Table {counts['tbl']}"
    _register(targets, ident, text, where)
    table["c"][0] = [ident, table["c"][0][1], table["c"][0][2]]
    _prefix_caption(table["c"][1], text)
    blocks[index] = table


def _number(blocks: list[Any], *, targets: dict[str, str], counts: dict[str, int], where: str) -> None:
    """Number the figures and tables of ``blocks`` in document order (into ``targets``)."""
    for index, block in enumerate(blocks):
        kind = block.get("t")
        if kind == "Figure":
            ident = block["c"][0][0]
            if ident.startswith("fig-"):
                counts["fig"] += 1
                text = f"Figure {counts['fig']}"
                _register(targets, ident, text, where)
                _prefix_caption(block["c"][1], text)
        elif kind == "Div":
            ident = block["c"][0][0]
            if ident.startswith("tbl-"):
                _number_table_div(blocks, index, targets=targets, counts=counts, where=where)
            elif ident.startswith(tuple(f"{p}-" for p in QUARTO_CROSSREF_PREFIXES)):
                raise ManuscriptSyntaxError(f"{where}: a div labelled {ident} is not supported")
            else:
                _number(block["c"][1], targets=targets, counts=counts, where=where)
        elif kind == "Para" or kind == "Plain":
            for inline in block["c"]:
                if inline.get("t") == "Image" and inline["c"][0][0].startswith("fig-"):
                    raise ManuscriptSyntaxError(
                        f"{where}: image {inline['c'][0][0]} is not a figure: put it alone in its "
                        "paragraph with a caption"
                    )
        elif kind == "BlockQuote":
            _number(block["c"], targets=targets, counts=counts, where=where)


def _links(node: dict[str, Any], targets: dict[str, str], where: str) -> dict[str, Any] | tuple[Any, ...]:
    """A ``Cite`` of cross-references as links to their targets (a citation of works is left as it is)."""
    citations = node["c"][0]
    kinds = {c["citationId"].split("-", 1)[0] if "-" in c["citationId"] else "" for c in citations}
    crossref = {k for k in kinds if k in QUARTO_CROSSREF_PREFIXES}
    if not crossref:
        return node
    if crossref - set(SUPPORTED_CROSSREF_PREFIXES):
        raise ManuscriptSyntaxError(
            f"{where}: cross-reference(s) {[c['citationId'] for c in citations]} are not supported "
            f"(supported: {', '.join(f'@{p}-…' for p in SUPPORTED_CROSSREF_PREFIXES)})"
        )
    if kinds - crossref:
        raise ManuscriptSyntaxError(f"{where}: {_stringify(node['c'][1])!r} mixes cross-references and citations")
    links: list[Any] = []
    for i, citation in enumerate(citations):
        ident = citation["citationId"]
        if ident not in targets:
            raise ManuscriptSyntaxError(f"{where}: unresolved cross-reference @{ident}")
        if targets[ident] == "":
            raise ManuscriptSyntaxError(f"{where}: @{ident} points at an unnumbered section (set number-sections: true)")
        text = targets[ident]
        if citation["citationMode"]["t"] == "SuppressAuthor":
            text = text.split(" ", 1)[1]
        if i:
            links.extend([{"t": "Str", "c": ","}, {"t": "Space"}])
        content = [{"t": "Str", "c": text.replace(" ", "\u00a0")}]
        links.append({"t": "Link", "c": [["", ["crossref"], []], content, ["#" + ident, ""]]})
    return tuple(links)


def _replace(node: Any, targets: dict[str, str], where: str) -> Any:
    """``node`` with every cross-reference replaced by its links (a tuple splices into its list)."""
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            replaced = _replace(item, targets, where)
            if isinstance(replaced, tuple):
                out.extend(replaced)
            else:
                out.append(replaced)
        return out
    if not isinstance(node, dict):
        return node
    if node.get("t") == "Cite":
        return _links(node, targets, where)
    return {key: _replace(value, targets, where) for key, value in node.items()}


def resolve_crossrefs(document: dict[str, Any], *, number_sections: bool, where: str) -> dict[str, Any]:
    """Number figures, tables and sections; turn ``@fig-…``/``@tbl-…``/``@sec-…`` into links.

    Captions get their "Figure N:" / "Table N:" prefix here, so both writers show the same numbers.
    Raises :class:`ManuscriptSyntaxError` for an unknown or unsupported reference.
    """
    document = copy.deepcopy(document)
    blocks = document["blocks"]
    targets: dict[str, str] = {}
    _number(blocks, targets=targets, counts={"fig": 0, "tbl": 0}, where=where)
    for ident, num in _section_numbers(blocks).items():
        if ident.startswith("sec-"):
            if not number_sections or not num:
                targets[ident] = ""
            else:
                _register(targets, ident, f"Section {num}", where)
    document["blocks"] = _replace(blocks, targets, where)
    return document


def _register(targets: dict[str, str], ident: str, text: str, where: str) -> None:
    if ident in targets:
        raise ManuscriptSyntaxError(f"{where}: label {ident} is used twice")
    targets[ident] = text
