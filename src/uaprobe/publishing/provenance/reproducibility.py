"""The manuscript's reproducibility appendix.

It names the paper's inputs by the hashes DVC computes for them and their digest (no git state: the same inputs render the same paper at any
commit). The long tables (every input's hash, the hashes ``dvc.lock`` records, the software, the
CPU code paths, and where every number comes from) are supplementary files next to the paper
(:mod:`uaprobe.publishing.provenance.supplement`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from uaprobe.publishing.provenance.values import SUPPLEMENT_HTML

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
