"""What a change did to the paper: every number it shows, compared between two revisions.

The rendered HTML of the newer revision names, for every value it shows, the file, the key and the
format (:mod:`uaprobe.publishing.provenance.values`). :func:`compare` reads each of those values at both
revisions from the results files themselves (git and the DVC cache or remote; nothing is rerun),
and :func:`diff_page` writes the newer paper with every changed value marked ``old → new``, shaded
by the size of the relative change, each table holding one flagged, the figures whose image changed
shown side by side, and a summary of the changes sorted by relative change.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from uaprobe.conflicts import check_bytes
from uaprobe.errors import UAProbeError
from uaprobe.publishing.provenance.readback import VALUE_TAG, parse_values, shown_text
from uaprobe.publishing.provenance.values import ValueSourceError, lookup

PAGE = "paper/_output/paper.html"
MANIFEST = "figures/manifest.json"

Reader = Callable[[str], bytes | None]
"""Reads a file of one revision by its path from the root; None when the revision does not have it, or
when it cannot be read (``Unreadable`` tells which)."""

Unreadable = Callable[[int, str], bool]
"""Whether a file the reader of side 0 (older) or 1 (newer) gave None for exists but could not be read
(a DVC output whose object is in no cache, e.g. after ``dvc gc``): such a file is not compared."""

NOT_COMPARED = "not compared"
"""The status of a value or figure whose file one side could not read: neither changed nor the same."""


@dataclass(frozen=True)
class Change:
    file: str
    key: str
    fmt: str
    status: str
    """``changed``, ``added`` (not in the older revision), ``removed`` (not in the newer one) or
    :data:`NOT_COMPARED` (its file unreadable at one side)."""
    old: str
    new: str
    relative: float | None
    """|new − old| / |old| for numbers (inf when old is 0); None otherwise."""


@dataclass(frozen=True)
class FigureChange:
    png: str
    old: bytes | None
    new: bytes | None
    status: str
    """``changed``, ``added``, ``removed`` or :data:`NOT_COMPARED`."""


def parse(data: bytes, file: str, label: str) -> Any:
    check_bytes(data, file, at=label)
    try:
        text = data.decode("utf-8")
        return yaml.safe_load(text) if file.endswith((".yaml", ".yml")) else json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise UAProbeError(f"{file} at {label}: not a valid results file ({type(exc).__name__}); rerun the stage that "
                           "writes it at that revision") from None


def _relative(old: Any, new: Any) -> float | None:
    if isinstance(old, bool) or isinstance(new, bool):
        return None
    if isinstance(old, int | float) and isinstance(new, int | float):
        return abs(new - old) / abs(old) if old else math.inf
    return None


def _differs(old: Any, new: Any, fmt: str) -> bool:
    """A number or label differs when its stored value does (even below the precision shown); a value the
    paper shows as a summary of a list or mapping (a count, a range of layers) differs when that summary does."""
    if isinstance(old, list | dict) or isinstance(new, list | dict):
        return shown_text(old, fmt) != shown_text(new, fmt)
    return bool(old != new)


def _never(_side: int, _file: str) -> bool:
    return False


def compare(page: str, read_old: Reader, read_new: Reader, *, old_page: str | None = None,
            labels: tuple[str, str] = ("old", "new"), unreadable: Unreadable = _never) -> list[Change]:
    """Every value the newer page shows whose stored value differs at the older revision, or which the
    older revision lacks, and (given its page) every value only the older page showed; a value whose file
    one side could not read is :data:`NOT_COMPARED`."""
    docs: dict[tuple[int, str], Any] = {}
    unread: set[tuple[int, str]] = set()

    def value(side: int, file: str, key: str) -> tuple[bool, Any]:
        if (side, file) not in docs:
            data = (read_old, read_new)[side](file)
            docs[side, file] = None if data is None else parse(data, file, labels[side])
            if data is None and unreadable(side, file):
                unread.add((side, file))
        doc = docs[side, file]
        if doc is None:
            return False, None
        try:
            return True, lookup(doc, key, file=file)
        except ValueSourceError:
            return False, None

    changes: list[Change] = []
    seen: set[tuple[str, str]] = set()
    for v in parse_values(page):
        if (v.file, v.key) in seen:
            continue
        seen.add((v.file, v.key))
        has_new, new = value(1, v.file, v.key)
        if not has_new and (1, v.file) in unread:
            changes.append(Change(v.file, v.key, v.fmt, NOT_COMPARED, "", v.text, None))
            continue
        if not has_new:
            raise UAProbeError(f"{v.file} at {labels[1]}: no key {v.key!r}, which its paper shows; the paper and its "
                               "results are from different runs: rerun `dvc repro`")
        has_old, old = value(0, v.file, v.key)
        if not has_old and (0, v.file) in unread:
            changes.append(Change(v.file, v.key, v.fmt, NOT_COMPARED, "", shown_text(new, v.fmt), None))
        elif not has_old:
            changes.append(Change(v.file, v.key, v.fmt, "added", "", shown_text(new, v.fmt), None))
        elif _differs(old, new, v.fmt):
            changes.append(Change(v.file, v.key, v.fmt, "changed", shown_text(old, v.fmt), shown_text(new, v.fmt),
                                  _relative(old, new)))
    for v in parse_values(old_page or ""):
        if (v.file, v.key) not in seen:
            seen.add((v.file, v.key))
            changes.append(Change(v.file, v.key, v.fmt, "removed", v.text, "", None))
    return sorted(changes, key=lambda c: (c.status == NOT_COMPARED, c.status != "changed",
                                          -(c.relative if c.relative is not None else math.inf), c.file, c.key))


def shade(relative: float | None) -> float:
    """The opacity of a change's mark: 0.2 for a tiny relative change, 0.9 from a doubling on (and for
    a change that has no relative size)."""
    if relative is None or math.isinf(relative):
        return 0.9
    return round(min(0.9, 0.2 + 0.7 * math.log10(1 + 99 * min(relative, 1.0)) / 2), 3)


def changed_figures(read_old: Reader, read_new: Reader, *, unreadable: Unreadable = _never) -> list[FigureChange]:
    """Every figure whose image differs between the revisions, and every one a side could not read
    (its manifest or its image unreadable there: :data:`NOT_COMPARED`)."""
    reads = (read_old, read_new)
    manifests = [read(MANIFEST) for read in reads]
    lost = [m is None and unreadable(side, MANIFEST) for side, m in enumerate(manifests)]
    pngs = [set() if m is None else {e["png"] for e in json.loads(m).get("figures", [])} for m in manifests]
    out = []
    for png in sorted(pngs[0] | pngs[1]):
        old, new = (read(png) if png in listed else None for read, listed in zip(reads, pngs))
        if any(lost) or any(b is None and unreadable(side, png) for side, b in enumerate((old, new))):
            out.append(FigureChange(png, old, new, NOT_COMPARED))
        elif old is None or new is None:
            out.append(FigureChange(png, old, new, "added" if old is None else "removed"))
        elif hashlib.md5(old).digest() != hashlib.md5(new).digest():
            out.append(FigureChange(png, old, new, "changed"))
    return out


def summary_lines(changes: Sequence[Change], figures: Sequence[FigureChange], labels: tuple[str, str]) -> list[str]:
    """The summary ``uaprobe paper-diff`` prints: its first line counts the values and figures that differ and
    those that could not be compared, then one line per difference."""
    differ = [c for c in changes if c.status != NOT_COMPARED]
    figs = [f for f in figures if f.status != NOT_COMPARED]
    lost = (len(changes) - len(differ), len(figures) - len(figs))
    unread = (f"; {lost[0]} value(s) and {lost[1]} figure(s) could not be compared (a file unreadable at one "
              "side, listed below)" if any(lost) else "")
    if not differ and not figs:
        if any(lost):
            return [f"no difference in what could be compared between {labels[0]} and {labels[1]}{unread}"]
        return [f"no change: every value and figure the paper shows is the same at {labels[0]} and {labels[1]}"]
    lines = [f"{len(differ)} value(s) and {len(figs)} figure(s) differ between {labels[0]} and {labels[1]}{unread} "
             "(largest relative change first):"]
    for c in differ:
        rel = "" if c.relative is None else (" (new)" if math.isinf(c.relative) else f" ({100 * c.relative:.3g} %)")
        if c.status == "changed" and c.old == c.new:
            rel += " (below the precision shown)"
        lines.append(f"  {c.status:8} {c.old or '—'} → {c.new or '—'}{rel}  {c.file}: {c.key}")
    lines += [f"  figure   {f.png}" + ("" if f.status == "changed" else f" ({f.status})") for f in figs]
    return lines


def _img(data: bytes | None) -> str:
    if data is None:
        return "<p>(absent)</p>"
    return f'<img style="max-width:100%" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def diff_page(page: str, changes: Sequence[Change], figures: Sequence[FigureChange],
              labels: tuple[str, str]) -> str:
    """The newer page with every changed value marked, tables holding one flagged, and the summary,
    the removed values and the changed figures (both revisions side by side) at the top."""
    by_source = {(c.file, c.key): c for c in changes if c.status not in ("removed", NOT_COMPARED)}

    def mark(match: re.Match[str]) -> str:
        tag = match.group(0)
        file = html.unescape(re.search(r'data-file="([^"]*)"', tag).group(1))  # type: ignore[union-attr]
        key = html.unescape(re.search(r'data-key="([^"]*)"', tag).group(1))  # type: ignore[union-attr]
        c = by_source.get((file, key))
        if c is None:
            return tag
        title = html.escape(f"{file}: {key}; {c.status} ({labels[0]} → {labels[1]})")
        return (f'<mark class="uav-diff" data-status="{c.status}" title="{title}" '
                f'style="background: rgba(230, 120, 0, {shade(c.relative)})">'
                f'{html.escape(c.old or "new")} → {html.escape(c.new)}</mark>')

    body = VALUE_TAG.sub(mark, page)
    body = re.sub(r"<table\b.*?</table>", lambda t: (
        f'<p class="uav-diff-flag"><strong>This table changed</strong> ({t.group(0).count("uav-diff")} values).</p>'
        + t.group(0)) if 'class="uav-diff"' in t.group(0) else t.group(0), body, flags=re.S)
    rows = "".join(f"<tr><td>{c.status}</td><td>{html.escape(c.old or '—')}</td><td>{html.escape(c.new or '—')}</td>"
                   f"<td>{'' if c.relative is None else html.escape(f'{100 * c.relative:.3g} %')}</td>"
                   f"<td><code>{html.escape(c.file)}</code></td><td><code>{html.escape(c.key)}</code></td></tr>"
                   for c in changes)
    figs = "".join(f"<h3>{html.escape(f.png)}</h3><div style='display:flex;gap:1em'><div style='flex:1'>"
                   f"<p>{html.escape(labels[0])}</p>{_img(f.old)}</div><div style='flex:1'>"
                   f"<p>{html.escape(labels[1])}</p>{_img(f.new)}</div></div>"
                   for f in figures if f.status != NOT_COMPARED)
    head = html.escape(summary_lines(changes, figures, labels)[0])
    summary = (f'<section id="paper-diff" style="border:2px solid #e67800;padding:1em;margin-bottom:2em">'
               f"<h2>Paper diff: {html.escape(labels[0])} → {html.escape(labels[1])}</h2><p>{head}</p>"
               + (f"<table><thead><tr><th>status</th><th>{html.escape(labels[0])}</th><th>{html.escape(labels[1])}</th>"
                  f"<th>relative change</th><th>file</th><th>key</th></tr></thead><tbody>{rows}</tbody></table>"
                  if changes else "") + figs + "</section>")
    return re.sub(r"(<body[^>]*>)", lambda b: b.group(1) + summary, body, count=1)
