"""The manuscript's figures and its reproducibility appendix.

Figures are markdown images of the figures stage's PNGs, captioned with the results arrays they
plot (:data:`FIGURE_DATA`). The reproducibility appendix names the paper's inputs by the hashes DVC
computes for them and their digest (no git state: the same inputs render the same paper at any
commit). The long tables (every input's hash, the hashes ``dvc.lock`` records, the software, the
CPU code paths, and where every number comes from) are supplementary files next to the paper
(:mod:`uaprobe.publishing.supplement`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from uaprobe.publishing.outputs import FIGURES_DIR, FIGURES_DIR_ENV, ManuscriptDataError, Outputs
from uaprobe.publishing.phrases import join_words
from uaprobe.publishing.values import SUPPLEMENT_HTML

# ------------------------------------------------------------------------------------------------
# Figures

FIGURE_DATA: Mapping[str, tuple[str, ...]] = {
    "sink": ("robustness.json: sink/norm_ratio_median, sink/norm_ratio_q10, sink/norm_ratio_q90, "
             "sink/mean_share_median, sink/top_dim_share_median",),
    "layerwise": ("layerwise.json: poolings/*/pearson_r, poolings/*/loco_r, poolings/mean/permutation_holm_reject, "
                  "poolings/mean/sign_changes, poolings/*/prenorm/pearson_r, poolings/*/prenorm/loco_r",
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
    return "\n\n".join(blocks) + "\n\n"


def figure_refs(out: Outputs, key: str) -> str:
    """Cross-references to every figure of ``key``: ``@fig-key-a and @fig-key-b``."""
    return join_words([f"@{figure_label(key, e.get('model'))}" for e in figure_entries(out, key)])


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
        f"the stages before it), which the supplementary file `{SUPPLEMENT_HTML}` lists with the md5 DVC "
        "computes for each (of a file's bytes; of a directory's list of files and their md5, ending `.dir`). "
        f"Their digest, the md5 of the lines `<md5>  <path>` in that order, is `{inputs_digest(hashes)}`.",
        f"`dvc.lock` records the same hashes under `stages: {stage}: deps` when the stage has run, and "
        f"`dvc status {stage}` reports a changed dependency wherever a checkout's files no longer have "
        "them. No commit and no state of a working tree enters the paper: rendered again from the same "
        "inputs with the same software (listed in the same file), at any commit, it is the same.",
    ]
    if missing:
        lines.append(f"Missing at the time of rendering: {', '.join(f'`{m}`' for m in missing)}.")
    return "\n".join(lines)
