"""The manuscript's figures and its appendices: where every number comes from, and how to reproduce it.

Figures are markdown images of the figures stage's PNGs, captioned with the results arrays they
plot (:data:`FIGURE_DATA`). The reproducibility appendix names the paper's inputs by the hashes DVC
computes for them (no git state: the same inputs render the same paper at any commit), the hashes
``dvc.lock`` records for the outputs it reads, the software and the CPU code paths; the provenance appendix lists
every value the paper showed (:func:`provenance_table`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from uaprobe.publishing.outputs import FIGURES_DIR, FIGURES_DIR_ENV, ManuscriptDataError, Outputs
from uaprobe.publishing.phrases import join_words
from uaprobe.publishing.tables import markdown_table
from uaprobe.publishing.values import appendix_rows, file_md5

# ------------------------------------------------------------------------------------------------
# Figures

FIGURE_DATA: Mapping[str, tuple[str, ...]] = {
    "sink": ("robustness.json: sink/norm_ratio_median, sink/norm_ratio_q10, sink/norm_ratio_q90, "
             "sink/mean_share_median, sink/top_dim_share_median",),
    "layerwise": ("layerwise.json: poolings/*/pearson_r, poolings/mean/fisher_ci_low, poolings/mean/fisher_ci_high, "
                  "poolings/mean/permutation_holm_reject, poolings/*/final, poolings/*/prenorm",
                  "sink_excluded/layerwise.json: poolings/mean/pearson_r"),
    "validation": ("validation.json: variants/mean/table/*/ua, variants/mean/table/*/mean_preference",
                   "data/published/reference-models.json: models"),
    "scaling": ("results/panel.json: poolings/mean/models/*/r, poolings/mean/models/*/depth_pct, "
                "poolings/mean/models/*/peak_positive",),
    "bins": ("bins.json: poolings/mean/schemes/*/comparison, poolings/mean/schemes/*/ci_partition",),
    "anisotropy": ("anisotropy.json: lambda1_ratio, effective_rank, mean_cos_to_mean, eigenvalue_variance, l_star",),
    "spectrum": ("anisotropy.json: spectrum, l_star",),
    "pairs": ("pairs.json: poolings/*/pearson_r, poolings/*/bootstrap_ci_low, poolings/*/bootstrap_ci_high",),
    "loco": ("layerwise.json: poolings/mean/pearson_r, poolings/mean/loco_r",),
    "option_b": ("option_b.json: poolings/mean/metrics/*/pearson_r, "
                 "poolings/mean/metrics/centroid_asymmetry/bootstrap_ci_low, "
                 "poolings/mean/metrics/centroid_asymmetry/bootstrap_ci_high, "
                 "poolings/mean/metrics/centroid_asymmetry/phases",),
    "specification_curve": ("specification_curve.json: specs/*, joint/all",),
}
"""The results arrays each figure plots (per-model files relative to ``results/models/<id>/``)."""


def slug(text: str) -> str:
    """A label-safe form of a model id (letters, digits and single hyphens)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


def figure_entries(out: Outputs, key: str) -> list[Mapping[str, Any]]:
    """The manifest entries of figure ``key``, in panel order (one per model, or one for the panel)."""
    entries = [e for e in out.figures.get("figures", []) if e.get("key") == key]
    if not entries:
        raise ManuscriptDataError(f"figures/manifest.json: no figure {key!r}; run the `figures` stage")
    order = {m: i for i, m in enumerate(out.models)}
    return sorted(entries, key=lambda e: order.get(e.get("model") or "", -1))


def figure_label(key: str, model_id: str | None = None) -> str:
    return f"fig-{slug(key)}" + (f"-{slug(model_id)}" if model_id else "")


def figure_data(entry: Mapping[str, Any]) -> str:
    """The caption's closing provenance: the arrays plotted, their files and the files' md5."""
    model = entry.get("model")
    files = []
    for line in FIGURE_DATA.get(str(entry.get("key")), ()):
        name, keys = line.split(": ", 1)
        file = name if "/" in name and name.startswith(("results/panel", "data/")) else f"results/models/{model}/{name}"
        files.append(f"`{file}`: " + ", ".join(f"`{k}`" for k in keys.split(", ")))
    return f"Data: {'; '.join(files)}." if files else ""


def figure_markdown(out: Outputs, key: str, caption: str, *, paper_dir: str | Path | None = None) -> str:
    """Markdown figures for ``key`` (one per model where per model), each captioned ``caption``
    (``{display}`` is replaced by the model's name) and the arrays it plots."""
    paper_dir = Path.cwd() if paper_dir is None else Path(paper_dir)
    staged = os.environ.get(FIGURES_DIR_ENV)
    blocks = []
    for e in figure_entries(out, key):
        model = e.get("model")
        text = caption.format(display=out.display(model) if model else "the panel")
        png = out.root / e["png"]
        if staged:  # the renderer copied figures/ to where Quarto's Typst may read it
            png = Path(staged) / Path(e["png"]).relative_to(FIGURES_DIR)
        path = os.path.relpath(png, paper_dir.resolve()).replace(os.sep, "/")
        blocks.append(f"![{text} {figure_data(e)}]({path}){{#{figure_label(key, model)} width=\"100%\"}}")
    out.placed_figures.add(key)
    return "\n\n".join(blocks) + "\n\n"


def figure_refs(out: Outputs, key: str) -> str:
    """Cross-references to every figure of ``key``: ``@fig-key-a and @fig-key-b``."""
    return join_words([f"@{figure_label(key, e.get('model'))}" for e in figure_entries(out, key)])


# ------------------------------------------------------------------------------------------------
# Where every number comes from


def provenance_table(out: Outputs) -> str:
    """Every value the paper showed before this table, by file (with the file's md5), each numbered as
    the values link to it; then every figure with the arrays it plots and its image's md5 (a
    cross-reference for the figures the paper placed, the figure's key for the others)."""
    rows = appendix_rows(out.ledger, MD5_SHOWN)
    for e in out.figures.get("figures", []):
        key = str(e.get("key"))
        label = (f"@{figure_label(key, e.get('model'))}" if key in out.placed_figures
                 else f"{key} ({e.get('model') or 'panel'})".replace("_", "\\_"))
        data = figure_data(e).removeprefix("Data: ").replace("`", "").replace("*", "&#42;").replace("_", "\\_")
        rows.append([label, f"{e['png']} (md5 {out.ledger.md5(e['png'])[:MD5_SHOWN]})".replace("_", "\\_"), data])
    return markdown_table(["#", "value", "key"], rows, align="lrl")


# ------------------------------------------------------------------------------------------------
# Reproducibility

PAPER_STAGE = "paper"
"""The ``dvc.yaml`` stage that renders the manuscript."""


def stage_dependencies(root: Path, stage: str = PAPER_STAGE) -> tuple[str, ...]:
    """The dependencies ``dvc.yaml`` declares for ``stage``, as written there; empty where ``dvc.yaml``
    is missing or unreadable or has no such stage."""
    try:
        doc = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ()
    stages = doc.get("stages") if isinstance(doc, Mapping) else None
    body = stages.get(stage) if isinstance(stages, Mapping) else None
    deps = body.get("deps") if isinstance(body, Mapping) else None
    if not isinstance(deps, list):
        return ()
    return tuple(str(p) for d in deps for p in (d if isinstance(d, Mapping) else [d]))


@dataclass(frozen=True)
class InputHash:
    """One dependency of a stage, hashed as DVC hashes it."""

    path: str
    """The path ``dvc.yaml`` names (relative to the project root)."""
    md5: str
    """DVC's md5: of a file's bytes; of a directory's listing (each file's relative path and md5, the
    files ``.dvcignore`` names left out), with ``.dir`` appended; ``missing`` where there is nothing."""
    size: int | None
    """Bytes (a directory's: of its files); None where missing."""
    nfiles: int | None
    """Files of a directory; None for a file."""

    @property
    def line(self) -> str:
        """``<md5>  <path>``: the line of :func:`inputs_digest`."""
        return f"{self.md5}  {self.path}"


def input_hashes(root: Path, stage: str = PAPER_STAGE) -> tuple[InputHash, ...]:
    """Every dependency of ``stage`` in ``dvc.yaml`` with the hash DVC computes for it (dvc-data's
    ``build``, the project's ``.dvcignore`` applied), sorted by path: once the stage has run,
    ``dvc.lock`` lists the same paths, in the same order, with the same md5 under
    ``stages.<stage>.deps``. Computed from the files on disk, since DVC writes the stage's lock entry
    only after its command (this render) has run."""
    from dvc.fs import LocalFileSystem
    from dvc.ignore import DvcIgnoreFilter
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_objects.fs import MemoryFileSystem

    root = Path(root).resolve()
    fs = LocalFileSystem()
    ignore = DvcIgnoreFilter(fs, str(root))
    staging = HashFileDB(MemoryFileSystem(), "/uaprobe-input-hashes", hash_name="md5")  # never written: dry run
    hashes = []
    for dep in sorted(set(stage_dependencies(root, stage))):
        path = root / dep
        if not path.exists():
            hashes.append(InputHash(dep, "missing", None, None))
            continue
        _, meta, obj = build(staging, str(path), fs, "md5", dry_run=True, ignore=ignore)
        hashes.append(InputHash(dep, str(obj.hash_info.value), meta.size, meta.nfiles if meta.isdir else None))
    return tuple(hashes)


def inputs_digest(hashes: Sequence[InputHash]) -> str:
    """The md5 of the lines ``<md5>  <path>`` (two spaces, a newline after each) of ``hashes`` in their
    order (:func:`input_hashes`: by path, as ``dvc.lock`` lists them): one name for all of them."""
    return hashlib.md5("".join(h.line + "\n" for h in hashes).encode("utf-8")).hexdigest()


def inputs_paragraph(hashes: Sequence[InputHash], stage: str = PAPER_STAGE) -> str:
    """What this rendering was made from, by hash only: no commit or working-tree state enters it, so the
    same inputs render the same text at any commit."""
    if not hashes:
        return (f"The inputs of this rendering are unknown: `dvc.yaml` declares no dependencies of a `{stage}` "
                "stage here.")
    missing = [h.path for h in hashes if h.md5 == "missing"]
    lines = [
        f"This paper is a function of its inputs alone: the {len(hashes)} dependencies of the `{stage}` stage "
        "in `dvc.yaml` (the code and manuscript of every stage, the parameters, the data and the outputs of "
        "the stages before it), which @tbl-inputs lists with the md5 DVC computes for each (of a file's "
        "bytes; of a directory's list of files and their md5, ending `.dir`). Their digest, the md5 of "
        f"the table's lines `<md5>  <path>` in its order, is `{inputs_digest(hashes)}`.",
        f"`dvc.lock` records the same hashes under `stages: {stage}: deps` when the stage has run, and "
        f"`dvc status {stage}` reports a changed dependency wherever a checkout's files no longer have "
        "them. No commit and no state of a working tree enters the paper: rendered again from the same "
        "inputs with the same software (@tbl-packages), at any commit, it is the same.",
    ]
    if missing:
        lines.append(f"Missing at the time of rendering: {', '.join(f'`{m}`' for m in missing)}.")
    return "\n".join(lines)


def inputs_table(hashes: Sequence[InputHash]) -> str:
    """The dependencies of :func:`input_hashes` with their md5, files and bytes."""
    rows = [[f"`{h.path}`", f"`{h.md5}`", "" if h.nfiles is None else str(h.nfiles),
             "" if h.size is None else str(h.size)] for h in hashes]
    if not rows:
        rows.append(["no dependencies declared in dvc.yaml", "", "", ""])
    return markdown_table(["dependency", "md5 (DVC)", "files", "bytes"], rows, align="llrr")


MD5_SHOWN = 12
"""Hex digits of each md5 the tables show (``uaprobe verify`` compares the full hashes)."""


def dvc_lock_table(root: Path, prefixes: Sequence[str] = ("results/", "figures/")) -> str:
    """The md5 that ``dvc.lock`` records for every output the manuscript reads, and whether the file on
    disk still has it."""
    path = root / "dvc.lock"
    if not path.is_file():
        return markdown_table(["output", "md5 in dvc.lock", "on disk"], [["dvc.lock not found", "", ""]], align="llc")
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
            rows.append([f"`{p}`", f"`{stage}`", f"`{md5[:MD5_SHOWN]}`", state])
    if not rows:
        rows.append(["no matching outputs in dvc.lock", "", "", ""])
    return markdown_table(["output", "stage", "md5 (start)", "file on disk"], rows, align="lllc")


PACKAGES: tuple[str, ...] = ("uaprobe", "torch", "transformers", "gguf", "numpy", "scipy", "h5py", "matplotlib",
                             "dvc", "pydantic", "nbclient", "ipykernel", "pypandoc-binary", "typst", "PyYAML")
"""Packages whose versions the appendix lists."""


def package_versions_table(packages: Sequence[str] = PACKAGES) -> str:
    rows = [["Python", platform.python_version()]]
    for name in packages:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        rows.append([f"{name} (the Python package; its compiler reports its own version)" if name == "typst" else name,
                     version])
    return markdown_table(["package", "version"], rows, align="ll")


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


def numerics_table(out: Outputs) -> str:
    """The CPU code paths every stage's numbers were computed on (the ``numerics`` block of the results)."""
    rows = []
    for m in out.models:
        block = out.doc(out.model_file(m, "layerwise")).get("numerics") or {}
        rows.append(_numerics_row(f"extract {out.display(m)}", block.get("extraction")))
        rows.append(_numerics_row(f"analyze {out.display(m)}", block.get("analysis")))
    rows.append(_numerics_row("compare", (out.doc("results/panel.json").get("numerics") or {}).get("analysis")))
    return markdown_table(["stage", "pinned ISA", "torch kernels, BLAS", "OpenBLAS kernels", "numpy SIMD",
                           "threads"], rows, align="llllll")


def params_block(out: Outputs, sections: Sequence[str] = ("models", "extract", "pooling", "analysis")) -> str:
    """The parameters the outputs were computed with, as a YAML code block."""
    raw = out.doc("params.yaml")
    subset = {k: raw[k] for k in sections if k in raw}
    return "```yaml\n" + yaml.safe_dump(subset, sort_keys=False, allow_unicode=True).rstrip() + "\n```"
