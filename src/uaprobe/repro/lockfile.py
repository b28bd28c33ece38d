"""What ``dvc.lock`` records, read strictly: a damaged lock file is named as such, not as changed stages.

DVC writes ``dvc.lock`` whole (YAML, ending in a newline). A file that does not parse, ends mid-line,
lacks the keys DVC always writes, or is a truncated copy of the committed one is *damaged*: the fix is
``git checkout dvc.lock``, not a recomputation. One holding git's conflict markers is an unresolved merge
(:mod:`uaprobe.conflicts`), named as such. :func:`read_lock` returns the recorded stages, or
raises :class:`LockDamaged` with that message.

:func:`changed_params` and :func:`changed_deps` compare one recorded stage with the files now in the
checkout, re-hashing every dependency (DVC's own hashing, no size/mtime shortcut).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from uaprobe.config import param_at
from uaprobe.conflicts import check_bytes
from uaprobe.errors import UAProbeError

LOCK = "dvc.lock"
PARAMS = "params.yaml"


class LockDamaged(UAProbeError):
    """``dvc.lock`` cannot be what DVC wrote."""


@dataclass(frozen=True)
class Output:
    """One output of a stage as ``dvc.lock`` records it."""

    path: str
    md5: str
    stage: str
    hash_name: str = "md5"
    size: int | None = None

    @property
    def is_dir(self) -> bool:
        return self.md5.endswith(".dir")


@dataclass(frozen=True)
class LockedStage:
    name: str
    deps: tuple[Mapping[str, Any], ...] = ()
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    outs: tuple[Output, ...] = ()
    cmd: str = ""
    """The command the stage ran (several joined with `` && ``)."""


def damaged(root: Path, why: str) -> LockDamaged:
    return LockDamaged(f"{root / LOCK}: damaged ({why}); it is not what DVC wrote: restore it from git with "
                       f"`git checkout {LOCK}` (or `git checkout <rev> -- {LOCK}`), then run the command again")


def _committed(root: Path) -> bytes | None:
    proc = subprocess.run(["git", "show", f"HEAD:./{LOCK}"], cwd=root, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def _entries(root: Path, stage: str, body: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    entries = body.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("path"), str)
                                                for e in entries):
        raise damaged(root, f"stage {stage}: `{key}` is not a list of entries with a path")
    return entries


def parse_lock(root: Path, data: bytes) -> dict[str, LockedStage]:
    """The stages recorded in ``data`` (the bytes of ``root/dvc.lock``); :class:`LockDamaged` if it is damaged,
    :class:`~uaprobe.conflicts.MergeConflict` if it holds an unresolved merge."""
    check_bytes(data, root / LOCK)
    if not data.strip():
        raise damaged(root, "empty")
    if not data.endswith(b"\n"):
        raise damaged(root, "it ends in the middle of a line: truncated")
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise damaged(root, f"not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("stages"), dict) or "schema" not in doc:
        raise damaged(root, "no `schema` and `stages` at the top level")
    committed = _committed(root)
    if committed is not None and len(committed) > len(data) and committed.startswith(data):
        raise damaged(root, f"truncated: its {len(data)} bytes are the start of the committed {len(committed)}")
    stages = {}
    for name, body in doc["stages"].items():
        if not isinstance(body, dict) or not isinstance(body.get("cmd"), (str, list)):
            raise damaged(root, f"stage {name}: no `cmd`")
        outs = []
        for entry in _entries(root, name, body, "outs"):
            md5 = entry.get("md5")
            if not isinstance(md5, str):
                raise damaged(root, f"stage {name}: output {entry['path']} has no md5")
            outs.append(Output(entry["path"], md5, name, str(entry.get("hash", "md5-dos2unix")), entry.get("size")))
        params = body.get("params", {})
        if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
            raise damaged(root, f"stage {name}: `params` is not a mapping of files to values")
        cmd = body["cmd"] if isinstance(body["cmd"], str) else " && ".join(map(str, body["cmd"]))
        stages[name] = LockedStage(name, tuple(_entries(root, name, body, "deps")), params, tuple(outs), cmd)
    return stages


def read_lock(root: Path) -> dict[str, LockedStage]:
    """The stages ``root/dvc.lock`` records ({} when there is none yet)."""
    try:
        data = (root / LOCK).read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UAProbeError(f"{root / LOCK}: cannot be read ({exc.strerror or exc}); make it readable") from None
    return parse_lock(root, data)


def changed_params(root: Path, stage: LockedStage) -> list[str]:
    """The recorded parameters of ``stage`` whose value in the checkout's params files differs."""
    out = []
    for file, recorded in stage.params.items():
        try:
            current = yaml.safe_load((root / file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return [f"{file}: unreadable"]
        for key, value in recorded.items():
            try:
                now = param_at(current, key)
            except KeyError:
                out.append(f"{file}: {key} is gone")
                continue
            if now != value:
                out.append(f"{file}: {key}")
    return out


def changed_deps(root: Path, stage: LockedStage) -> list[str]:
    """The recorded dependencies of ``stage`` whose bytes in the checkout differ (every one re-hashed)."""
    from uaprobe.repro.hashing import workspace_hash

    out = []
    for dep in stage.deps:
        recorded = dep.get("md5")
        try:
            actual = workspace_hash(root, dep["path"])
        except OSError:
            actual = None
        if actual != recorded:
            out.append(dep["path"])
    return out


RECOMPUTE = "UAPROBE_RECOMPUTE"
"""Set to 1 to recompute outputs that dvc.lock records and the cache lacks (see :func:`check_recompute`)."""


def _cache_dir(root: Path) -> tuple[Path, str | None, str]:
    """The local cache directory, and the default remote's name and URL (None when there is none)."""
    from dvc.config import Config

    conf = Config(dvc_dir=os.fspath(root / ".dvc"))
    cache = conf["cache"].get("dir")
    name = conf["core"].get("remote")
    url = str(conf["remote"].get(name, {}).get("url", "")) if name else ""
    return (Path(cache) if cache else root / ".dvc" / "cache"), name, url


def pulling_invocation(pid: int | None = None, *, levels: int = 6) -> bool:
    """Whether this process was started by a ``dvc repro --pull`` (or ``dvc exp run --pull``): the
    command line of a parent process, read from ``/proc`` (False where there is none)."""
    pid = os.getppid() if pid is None else pid
    for _ in range(levels):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        words = {a.decode("utf-8", "replace") for a in argv}
        if "--pull" in words and ({"repro", "run"} & words):
            return True
        parent = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "0")
        pid = int(parent)
        if pid <= 1:
            return False
    return False


def check_recompute(root: Path, stage_name: str, *, pulling: bool | None = None) -> None:
    """Refuse to recompute outputs that only a failed pull left out.

    ``dvc repro --pull`` runs a stage whose recorded outputs it could not pull (the remote is
    unreachable, or lacks them); for the extraction that means minutes to hours of recomputation the
    reviewer did not ask for. When the stage runs under such a command (``pulling``; None: read from
    the parent processes, :func:`pulling_invocation`), ``dvc.lock`` records it with exactly the
    parameters and dependencies in the checkout, a remote is configured and the local cache lacks a
    recorded output, the stage stops with the remote and the fix. A plain ``dvc repro`` (the
    author's) recomputes; so does ``UAPROBE_RECOMPUTE=1``.
    """
    if os.environ.get(RECOMPUTE) == "1" or not (root / ".dvc").is_dir() or not (root / LOCK).is_file():
        return
    if not (pulling_invocation() if pulling is None else pulling):
        return
    stage = read_lock(root).get(stage_name)
    if stage is None or not stage.outs:
        return
    cache, remote, url = _cache_dir(root)
    missing = [out for out in stage.outs if out.hash_name == "md5"
               and not (cache / "files" / "md5" / out.md5[:2] / out.md5[2:]).exists()]
    if not missing or not remote or changed_params(root, stage) or changed_deps(root, stage):
        return
    raise UAProbeError(
        f"{missing[0].path}: dvc.lock records it (md5 {missing[0].md5}) as stage {stage_name}'s output from exactly "
        f"the parameters and inputs here, but the cache ({cache}) lacks it: `dvc pull` did not get it from the remote "
        f"{remote!r} ({url}). Check that the remote is reachable (`dvc remote list`, `dvc fetch {stage_name}`) and "
        f"run `dvc pull` (or `dvc repro --pull`) again. To recompute it instead: `dvc repro {stage_name}` "
        f"(without --pull) or `{RECOMPUTE}=1 dvc repro --pull`")


__all__ = ["LOCK", "RECOMPUTE", "check_recompute", "pulling_invocation", "LockDamaged", "LockedStage", "Output", "changed_deps", "changed_params", "damaged",
           "parse_lock", "read_lock"]
