"""The manuscript's figures and its appendices: where every number comes from, and how to reproduce it.

Figures are markdown images of the figures stage's PNGs, captioned with the results arrays they
plot (:data:`FIGURE_DATA`). The reproducibility appendix names the commit of the sources, the
hashes ``dvc.lock`` records, the software and the CPU code paths; the provenance appendix lists
every value the paper showed (:func:`provenance_table`).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
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
    return "\n\n".join(blocks) + "\n\n"


def figure_refs(out: Outputs, key: str) -> str:
    """Cross-references to every figure of ``key``: ``@fig-key-a and @fig-key-b``."""
    return join_words([f"@{figure_label(key, e.get('model'))}" for e in figure_entries(out, key)])


# ------------------------------------------------------------------------------------------------
# Where every number comes from


def provenance_table(out: Outputs) -> str:
    """Every value the paper showed before this table, by file (with the file's md5), each numbered as
    the values link to it; then every figure with the arrays it plots and its image's md5."""
    rows = appendix_rows(out.ledger, MD5_SHOWN)
    for e in out.figures.get("figures", []):
        label = f"@{figure_label(str(e.get('key')), e.get('model'))}"
        data = figure_data(e).removeprefix("Data: ").replace("`", "").replace("*", "&#42;").replace("_", "\\_")
        rows.append([label, f"{e['png']} (md5 {out.ledger.md5(e['png'])[:MD5_SHOWN]})".replace("_", "\\_"), data])
    return markdown_table(["#", "value", "key"], rows, align="lrl")


# ------------------------------------------------------------------------------------------------
# Reproducibility

PAPER_STAGE = "paper"
"""The ``dvc.yaml`` stage that renders the manuscript."""


def _overlaps(path: str, out: str) -> bool:
    """Whether ``path`` is, holds or lies in the output ``out``."""
    path, out = path.rstrip("/"), out.rstrip("/")
    return path == out or path.startswith(out + "/") or out.startswith(path + "/")


def stage_sources(root: Path) -> dict[str, tuple[str, ...]]:
    """Each ``dvc.yaml`` stage's dependencies that no stage writes (a templated output such as
    ``data/embeddings/${item}.h5`` counts up to its first ``${``); empty where ``dvc.yaml`` is missing
    or unreadable."""
    try:
        doc = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    stages = doc.get("stages") if isinstance(doc, Mapping) else None
    if not isinstance(stages, Mapping):
        return {}
    bodies = {str(name): stage.get("do", stage) for name, stage in stages.items() if isinstance(stage, Mapping)}

    def paths(body: object, key: str) -> list[str]:  # a list entry is a path or {path: options}
        entries = body.get(key) if isinstance(body, Mapping) else None
        if not isinstance(entries, list):
            return []
        return [str(p) for e in entries for p in (e if isinstance(e, Mapping) else [e])]

    written = [p.split("${")[0] for body in bodies.values() for key in ("outs", "metrics", "plots")
               for p in paths(body, key)]
    return {name: tuple(d for d in paths(body, "deps") if not any(_overlaps(d, w) for w in written))
            for name, body in bodies.items()}


def source_paths(root: Path) -> tuple[str, ...]:
    """The paper stage's sources: its dependencies in ``dvc.yaml`` that no stage writes.

    The commit the paper names is the last one that changed one of these, and any change to one of
    them renders the paper again, so a committed paper never names a stale commit. ``dvc.yaml`` itself
    cannot be a DVC dependency and is not among them: a stage whose command changes reruns, and the
    paper with it wherever its outputs change.
    """
    return stage_sources(root).get(PAPER_STAGE, ())


def git_commit(root: Path) -> dict[str, str]:
    """The last commit that changed one of the paper stage's sources (:func:`source_paths`: the code,
    parameters, data and manuscript), and whether the checkout's copies of them differ from it.

    Not ``HEAD``: the commit that records the outputs (``dvc.lock``) comes after the render, so a paper
    naming ``HEAD`` could never be reproduced byte for byte from its own commit.
    """
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    sources = source_paths(root)
    if not sources:
        return {"commit": f"unavailable (dvc.yaml declares no {PAPER_STAGE} stage dependencies)", "state": "unknown"}
    commit = git("log", "-1", "--format=%H", "--", *sources)
    if commit is None:
        return {"commit": "unavailable (not a git checkout)", "state": "unknown"}
    if not commit:
        return {"commit": "unavailable (no commit holds the paper stage's sources)", "state": "unknown"}
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *sources)
    state = "clean" if changed == "" else "modified sources" if changed else "unknown"
    return {"commit": commit, "state": state}


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
