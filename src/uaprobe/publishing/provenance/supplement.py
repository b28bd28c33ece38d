"""The paper's supplementary files: where every number comes from, and what the paper was made from.

The paper stage writes two files next to the rendered paper (``paper/_output``):

- ``provenance.csv``: one row per value the paper shows (its number, the value as shown, the file it
  was read from with the file's md5, the key path in that file and the format), then one row per
  figure the paper shows (its label, its image file with the image's md5, the arrays it plots);
- ``provenance.html``: the same rows as a table whose rows are the targets of the paper's links
  (``provenance.html#prov-N``), followed by the paper's inputs with the md5 DVC computes for each,
  the hashes ``dvc.lock`` records for the outputs it reads, the software, the CPU code paths and the
  parameters.

The rows come from the rendered HTML page (:func:`~uaprobe.publishing.provenance.readback.parse_values`), so they
list exactly what the paper shows. Every function here returns text; the stage writes it.
"""

from __future__ import annotations

import csv
import html
import importlib.metadata
import io
import platform
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from uaprobe.publishing.figures.embed import figure_label
from uaprobe.publishing.figures.figure_registry import data_line
from uaprobe.publishing.provenance.reproducibility import InputHash, inputs_digest
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.provenance.readback import Shown
from uaprobe.schema.categories import Layerwise
from uaprobe.publishing.provenance.values import ANCHOR, SUPPLEMENT_HTML, file_md5

SUPPLEMENT_CSV = "provenance.csv"
"""The machine-readable twin of :data:`~uaprobe.publishing.provenance.values.SUPPLEMENT_HTML`."""

CSV_HEADER = ("number", "value", "file", "file_md5", "key", "format")


@dataclass(frozen=True)
class Table:
    """A table of the supplement: a heading, a sentence on what it holds, a header and rows of text."""

    heading: str
    note: str
    header: tuple[str, ...]
    rows: list[list[str]]
    anchors: list[str | None] | None = None
    """Per row, the ``id`` it carries (the values' rows: ``prov-N``), or None."""


# ------------------------------------------------------------------------------------------------
# The values and figures the paper shows


def value_rows(shown: Sequence[Shown], md5: Callable[[str], str]) -> list[list[str]]:
    """One row per source the page shows, in the order of its number: number, value as shown, file,
    the file's md5, key, format. A value without a number (not linked) is left out."""
    first: dict[int, Shown] = {}
    for v in shown:
        if v.number is not None:
            first.setdefault(v.number, v)
    return [[str(n), v.text, v.file, md5(v.file), v.key, v.fmt] for n, v in sorted(first.items())]


def figure_rows(out: Outputs, page: str, md5: Callable[[str], str]) -> list[list[str]]:
    """One row per figure of the manifest that the page shows: its label, its image file, the image's
    md5, and the arrays it plots."""
    shown = set(re.findall(r'id="(fig-[\w-]+)"', page))
    rows = []
    for e in out.figures:
        label = figure_label(e.key, e.model)
        if label in shown:
            rows.append([label, "figure", e.png, md5(e.png),
                         data_line(e).removeprefix("Data: ").replace("`", ""), "png"])
    return rows


def provenance_csv(rows: Sequence[Sequence[str]]) -> str:
    """``provenance.csv``: the header, then the rows (the values', then the figures')."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(rows)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------------
# What the paper was made from


def inputs_rows(hashes: Sequence[InputHash]) -> list[list[str]]:
    """The paper stage's dependencies with their md5 (as DVC computes it), files and bytes."""
    return [[h.path, h.md5, "" if h.nfiles is None else str(h.nfiles), "" if h.size is None else str(h.size)]
            for h in hashes]


def dvc_lock_rows(root: Path, prefixes: Sequence[str] = ("results/", "figures/")) -> list[list[str]]:
    """The md5 ``dvc.lock`` records for every output the paper reads, and whether the file on disk still
    has it (``matches``, ``differs``, ``missing``; ``directory`` for a directory)."""
    path = root / "dvc.lock"
    if not path.is_file():
        return [["dvc.lock not found", "", "", ""]]
    lock = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    rows = []
    for stage, entry in sorted((lock.get("stages") or {}).items()):
        for o in entry.get("outs", []) or []:
            p = str(o.get("path", ""))
            if not p.startswith(tuple(prefixes)):
                continue
            md5 = str(o.get("md5", ""))
            target = root / p
            if md5.endswith(".dir") or target.is_dir():
                state = "directory"
            elif target.is_file():
                state = "matches" if file_md5(target) == md5 else "differs"
            else:
                state = "missing"
            rows.append([p, stage, md5, state])
    return rows


PACKAGES: tuple[str, ...] = ("uaprobe", "torch", "transformers", "gguf", "numpy", "scipy", "h5py", "matplotlib",
                             "dvc", "pydantic", "nbclient", "ipykernel", "pypandoc-binary", "typst", "PyYAML")
"""Packages whose versions the supplement lists."""


def package_rows(packages: Sequence[str] = PACKAGES) -> list[list[str]]:
    rows = [["Python", platform.python_version()]]
    for name in packages:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        rows.append([name, version])
    return rows


def _numerics_row(label: str, rec: Any) -> list[str]:
    if not isinstance(rec, Mapping):
        return [label, "not recorded", "", "", "", ""]
    torch = rec.get("torch") or {}
    mkl = re.search(r"Version ([0-9.]+)", str(torch.get("blas", "")))
    cores = sorted({str(b.get("core", "?")) for b in rec.get("openblas") or []})
    simd = (rec.get("numpy") or {}).get("simd") or {}
    threads = rec.get("threads")
    return [label, str(rec.get("isa", "?")),
            f"{torch.get('cpu_capability', '?')}, MKL {mkl.group(1)}" if torch and mkl else
            (str(torch.get("cpu_capability", "?")) if torch else "not used"),
            ", ".join(cores) or "not used",
            " + ".join([*simd.get("baseline", []), *simd.get("dispatch_enabled", [])]) or "not used",
            "1" if isinstance(threads, Mapping) and set(threads.values()) == {"1"} else
            ("any (results do not depend on it)" if isinstance(threads, str) else str(threads))]


def numerics_rows(out: Outputs) -> list[list[str]]:
    """The CPU code paths every stage's numbers were computed on (the ``numerics`` block of the results)."""
    rows = []
    for m in out.models:
        block = out.record(m, Layerwise).numerics or {}
        rows.append(_numerics_row(f"extract {out.display_text(m)}", block.get("extraction")))
        rows.append(_numerics_row(f"analyze {out.display_text(m)}", block.get("analysis")))
    rows.append(_numerics_row("compare", (out.panel().numerics or {}).get("analysis")))
    return rows


def params_text(out: Outputs, sections: Sequence[str] = ("models", "extract", "pooling", "analysis")) -> str:
    """The parameters the outputs were computed with, as YAML."""
    raw = out.doc("params.yaml")
    return yaml.safe_dump({k: raw[k] for k in sections if k in raw}, sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------------------------------
# The page


def supplement_tables(out: Outputs, page: str, shown: Sequence[Shown], hashes: Sequence[InputHash],
                      md5: Callable[[str], str]) -> list[Table]:
    """Every table of ``provenance.html``, values first."""
    values, figures = value_rows(shown, md5), figure_rows(out, page, md5)
    return [
        Table("Where every number comes from",
              "Every value the paper shows, numbered as its links are, in the order the paper first shows it: the "
              "value as shown, the file it was read from (relative to the repository root) with the file's md5 "
              "(the hash under which dvc.lock and the DVC cache record it), and its key path in that file "
              "(/-separated keys, list indices from 0, -1 the last); then every figure, its image file with the "
              "image's md5 and the arrays it plots.",
              CSV_HEADER, [*values, *figures], [ANCHOR.format(r[0]) for r in values] + [None] * len(figures)),
        Table("Inputs of the paper",
              "Every dependency of the paper stage in dvc.yaml, with the md5 DVC computes for it (a directory's "
              f"ends in .dir). Their digest, the md5 of the lines '<md5>  <path>' in this order, is "
              f"{inputs_digest(hashes)}.",
              ("dependency", "md5 (DVC)", "files", "bytes"), inputs_rows(hashes)),
        Table("Outputs read, as dvc.lock records them",
              "Each output the paper reads, the stage that wrote it, the md5 dvc.lock records for it and whether "
              "the file on disk still has it.", ("output", "stage", "md5 in dvc.lock", "file on disk"),
              dvc_lock_rows(out.root)),
        Table("Software", "Python and package versions of the environment the paper was rendered in.",
              ("package", "version"), package_rows()),
        Table("CPU code paths of the numbers",
              "The instruction set the libraries were pinned to, torch's kernels and BLAS, OpenBLAS's kernels, "
              "numpy's SIMD targets and the BLAS threads, from the numerics block of the results files. The "
              "processor's model is written to a machine-local log (logs/<stage>.machine.json) outside the "
              "hashed outputs.",
              ("stage", "pinned ISA", "torch kernels, BLAS", "OpenBLAS kernels", "numpy SIMD", "threads"),
              numerics_rows(out)),
    ]


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    anchors = t.anchors or [None] * len(t.rows)
    body = "\n".join(
        f"<tr{f' id={chr(34)}{a}{chr(34)}' if a else ''}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row, a in zip(t.rows, anchors))
    return (f"<h2>{html.escape(t.heading)}</h2>\n<p>{html.escape(t.note)}</p>\n"
            f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>")


STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
         "table{border-collapse:collapse;font-size:0.85em}td,th{border:1px solid #ccc;padding:2px 6px;"
         "text-align:left;vertical-align:top}td{word-break:break-all}tr:target{background:#ffd}")


def provenance_html(title: str, tables: Sequence[Table], params: str) -> str:
    """``provenance.html``: the tables, then the parameters."""
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{SUPPLEMENT_HTML}: supplementary file of the paper (the paper's numbers link to the rows below; "
             f"{SUPPLEMENT_CSV} holds the first table as CSV).</p>",
             *(_html_table(t) for t in tables),
             "<h2>Parameters</h2>\n<p>params.yaml, as the outputs were computed with it.</p>",
             f"<pre>{html.escape(params)}</pre>"]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(parts) + "\n</body>\n</html>\n")
