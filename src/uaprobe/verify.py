"""``uaprobe verify``: every byte of every output, cache object and remote object against ``dvc.lock``.

DVC trusts a file whose size and modification time it has seen before, and trusts its cache and
remote objects; a flipped byte passes ``dvc status``, ``dvc checkout`` and ``dvc pull``. This module
re-hashes instead (DVC's own md5 and directory-tree hashing from ``dvc_data``, never its state
database) and names, per damaged file, the command that repairs it:

* the workspace (always): each output of each stage ``dvc.lock`` records;
* ``--cache``: each object of the local cache those outputs name (a directory's ``.dir`` listing and
  every file in it);
* ``--remote NAME``: the same objects on a DVC remote (through DVC's own file systems).

It also compares the ``settings`` every results file records with the parameters ``dvc.lock`` records
for the stage that wrote it (:func:`settings_mismatches`).
"""

from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uaprobe.config import differing
from uaprobe.errors import UAProbeError
from uaprobe.lockfile import LockedStage, Output

Progress = Callable[[int], None]
"""Called with a number of bytes just hashed."""


@dataclass(frozen=True)
class Problem:
    """One file whose bytes are not the recorded ones, and the command that repairs it."""

    path: str
    what: str
    repair: str

    def lines(self) -> list[str]:
        return [f"{self.path}: {self.what}", f"    repair: {self.repair}"]


def check_repo(repo: Path) -> Path:
    """``repo`` is a directory holding a DVC project (``.dvc/`` and ``dvc.yaml``)."""
    if not repo.exists():
        raise UAProbeError(f"{repo}: not found; pass --repo the root of a uaprobe checkout")
    if not repo.is_dir():
        raise UAProbeError(f"{repo}: not a directory; pass --repo the root of a uaprobe checkout")
    if not (repo / ".dvc").is_dir():
        raise UAProbeError(f"{repo}: not a DVC repository (no .dvc directory); pass --repo the root of a uaprobe "
                           "checkout (the directory holding dvc.yaml)")
    if not (repo / "dvc.yaml").is_file():
        raise UAProbeError(f"{repo}: no dvc.yaml; pass --repo the root of a uaprobe checkout")
    return repo


# --- hashing -------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _ignore(root: str) -> Any:
    from dvc.ignore import DvcIgnoreFilter
    from dvc_objects.fs.local import LocalFileSystem

    return DvcIgnoreFilter(LocalFileSystem(), root)


def _callback(progress: Progress | None) -> Any:
    if progress is None:
        return None
    from fsspec.callbacks import Callback

    class Bytes(Callback):  # type: ignore[misc]
        def set_size(self, size: int | None) -> None:
            pass

        def relative_update(self, inc: int = 1) -> None:
            progress(inc)

    return Bytes()


def workspace_hash(root: Path, path: str, *, progress: Progress | None = None) -> str:
    """The md5 DVC records for ``root/path`` (``<md5>.dir`` for a directory), computed from every byte;
    FileNotFoundError if it is absent."""
    return hash_with_entries(root, path, progress=progress)[0]


def hash_with_entries(root: Path, path: str, *, progress: Progress | None = None
                      ) -> tuple[str, dict[str, str] | None]:
    """:func:`workspace_hash`, and for a directory the md5 of each of its files (by relative path)."""
    from dvc_data.hashfile.build import build
    from dvc_data.hashfile.db import HashFileDB
    from dvc_data.hashfile.hash import file_md5
    from dvc_objects.fs import localfs
    from dvc_objects.fs.memory import MemoryFileSystem

    root = Path(os.path.abspath(root))
    full = root / path
    if full.is_dir():
        staging = HashFileDB(MemoryFileSystem(), "/uaprobe-verify")  # no state: nothing is taken on trust
        _, _, obj = build(staging, os.fspath(full), localfs, "md5", dry_run=True, ignore=_ignore(os.fspath(root)))
        return str(obj.hash_info.value), {"/".join(key): str(hi.value) for key, _, hi in obj}
    if not full.exists():
        raise FileNotFoundError(path)
    return file_md5(os.fspath(full), localfs, callback=_callback(progress), name="md5",
                    size=full.stat().st_size if progress else None), None


def _recorded_entries(odb: Any, out: Output) -> dict[str, str] | None:
    """The files of a directory output as its cache listing records them (None if unreadable)."""
    try:
        return {entry["relpath"]: entry["md5"] for entry in json.loads(odb.fs.read_bytes(odb.oid_to_path(out.md5)))}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _which_files(out: Output, actual: dict[str, str] | None, recorded: dict[str, str] | None) -> str:
    if actual is None or recorded is None:
        return ""
    changed = [f"{out.path}/{k}" for k in sorted(actual.keys() & recorded.keys()) if actual[k] != recorded[k]]
    extra = [f"{out.path}/{k}" for k in sorted(actual.keys() - recorded.keys())]
    gone = [f"{out.path}/{k}" for k in sorted(recorded.keys() - actual.keys())]
    parts = [f"{label}: {', '.join(files)}" for label, files in (("other bytes", changed), ("not recorded", extra),
                                                                 ("missing", gone)) if files]
    return f" [{'; '.join(parts)}]" if parts else ""


def _stream_md5(fs: Any, path: str, progress: Progress | None = None) -> str:
    from dvc_data.hashfile.hash import fobj_md5

    with fs.open(path, "rb") as fobj:
        if progress is not None:
            from tqdm.utils import CallbackIOWrapper

            fobj = CallbackIOWrapper(progress, fobj)
        return fobj_md5(fobj)


@dataclass(frozen=True)
class StoreObject:
    """One object of a cache or remote that an output needs: where it is, what its bytes must hash to."""

    output: Output
    shown: str
    """The workspace file it holds (``<dir>/<file>`` for a file of a directory output)."""
    oid: str
    location: str


def _objects(odb: Any, out: Output, problems: list[Problem], fix: Callable[[Output, str, str, str], Problem]
             ) -> Iterator[StoreObject]:
    """The objects ``out`` needs in ``odb``: the file's, or the directory's listing (checked here) and then
    each of its files'. A missing or damaged listing is added to ``problems``."""
    top = StoreObject(out, out.path, out.md5, odb.oid_to_path(out.md5))
    if not out.is_dir:
        yield top
        return
    try:
        data = odb.fs.read_bytes(top.location)
    except FileNotFoundError:
        problems.append(fix(out, out.path, top.location, "missing (the directory's listing)"))
        return
    from dvc_data.hashfile.hash import fobj_md5

    actual = fobj_md5(io.BytesIO(data))
    if actual != out.md5.removesuffix(".dir"):
        problems.append(fix(out, out.path, top.location, f"damaged listing (its bytes hash to {actual})"))
        return
    for entry in json.loads(data):
        yield StoreObject(out, f"{out.path}/{entry['relpath']}", entry["md5"], odb.oid_to_path(entry["md5"]))


def check_store(odb: Any, outs: Iterable[Output], fix: Callable[[Output, str, str, str], Problem], *,
                progress: Progress | None = None, jobs: int = 4) -> list[Problem]:
    """Every object ``outs`` need in ``odb`` (a cache or a remote), re-hashed."""
    problems: list[Problem] = []
    objects = [obj for out in outs for obj in _objects(odb, out, problems, fix)]

    def one(obj: StoreObject) -> Problem | None:
        try:
            actual = _stream_md5(odb.fs, obj.location, progress)
        except FileNotFoundError:
            return fix(obj.output, obj.shown, obj.location, "missing")
        if actual != obj.oid:
            return fix(obj.output, obj.shown, obj.location, f"damaged (its bytes hash to {actual}, not {obj.oid})")
        return None

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        problems += [p for p in pool.map(one, objects) if p is not None]
    return problems


# --- the three checks ----------------------------------------------------------------------------------


def _has_remote(repo: Any) -> bool:
    return bool(repo.config["core"].get("remote"))


def workspace_problems(root: Path, outs: list[Output], cache: Any, *, has_remote: bool,
                       progress: Progress | None = None, jobs: int = 4) -> list[Problem]:
    """Each output in the workspace re-hashed; for a damaged one, its cache object decides the repair."""
    def one(out: Output) -> tuple[Output, str | None, dict[str, str] | None]:
        try:
            actual, entries = hash_with_entries(root, out.path, progress=progress)
        except FileNotFoundError:
            return out, None, None
        if out.is_dir and progress is not None:
            progress(out.size or 0)
        return out, actual, entries

    problems = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, outs))
    for out, actual, entries in results:
        if actual == out.md5:
            continue
        files = _which_files(out, entries, _recorded_entries(cache, out)) if out.is_dir else ""
        cache_bad = check_store(cache, [out], lambda _o, shown, _l, what: Problem(shown, what, ""), jobs=1)
        fetch = (f"`dvc fetch {out.path}` (from the remote)" if has_remote else "a `dvc fetch` (no remote is configured)")
        if actual is None:
            what = f"missing (dvc.lock records md5 {out.md5})"
            repair = (f"`dvc checkout {out.path}`" if not cache_bad else
                      f"`dvc pull {out.path}`, or recompute it: `dvc repro -f -s {out.stage}`")
        elif cache_bad and not any("damaged" in p.what for p in cache_bad):
            what = (f"its bytes hash to {actual}, but dvc.lock records {out.md5}, which the cache does not hold: "
                    f"`dvc checkout` would delete this file")
            repair = (f"if dvc.lock is what changed (`git diff {'dvc.lock'}`), restore it: `git checkout dvc.lock`; "
                      f"else get the recorded bytes with {fetch} then `dvc checkout --relink {out.path}`, or "
                      f"recompute them: `dvc repro -f -s {out.stage}`")
        else:
            what = (f"its bytes hash to {actual}, but dvc.lock records {out.md5}{files} (`dvc status` does not "
                    "re-read them)")
            repair = (f"`dvc checkout --relink {out.path}` (the cache holds the recorded bytes)" if not cache_bad else
                      f"the cache copy is damaged too: `uaprobe verify --cache` names it; remove it, then {fetch} "
                      f"and `dvc checkout --relink {out.path}`, or recompute: `dvc repro -f -s {out.stage}`")
        problems.append(Problem(out.path, what, repair))
    return problems


def _with_listing(odb: Any, out: Output, shown: str, location: str) -> str:
    """The objects to delete: the damaged one, and for a file of a directory output also the directory's listing
    (DVC fetches and pushes nothing of a directory whose listing is already there)."""
    if shown == out.path:
        return f"'{location}'"
    return f"'{location}' '{odb.oid_to_path(out.md5)}'"


def cache_fix(has_remote: bool, odb: Any) -> Callable[[Output, str, str, str], Problem]:
    def fix(out: Output, shown: str, location: str, what: str) -> Problem:
        fetch = f"`dvc fetch {out.path}`" if has_remote else "`dvc fetch` (after adding a remote)"
        gone = "" if what.startswith("missing") else f"remove it (`rm -f {_with_listing(odb, out, shown, location)}`), then "
        return Problem(shown, f"cache object {location}: {what}",
                       f"{gone}{fetch} and `dvc checkout --relink {out.path}`, or recompute: "
                       f"`dvc repro -f -s {out.stage}`")
    return fix


def remote_fix(name: str, odb: Any) -> Callable[[Output, str, str, str], Problem]:
    def fix(out: Output, shown: str, location: str, what: str) -> Problem:
        gone = f"delete {_with_listing(odb, out, shown, location)} from the remote, then "
        if what.startswith("missing") and shown == out.path:
            gone = ""
        return Problem(shown, f"object on remote {name!r} {location}: {what}",
                       f"{gone}from a checkout whose cache passes `uaprobe verify --cache`: `dvc push -r {name} "
                       f"{out.path}`")
    return fix


Settings = Callable[[Mapping[str, Any]], Any]
"""The ``settings`` a results file records for the ``analysis`` parameters as dvc.lock records them."""


def settings_mismatches(root: Path, stages: Mapping[str, LockedStage], settings: Settings) -> list[Problem]:
    """Results files whose recorded ``settings`` differ from the ``analysis`` parameters dvc.lock records for
    the stage that wrote them."""
    problems = []
    for stage in stages.values():
        recorded = stage.params.get("params.yaml", {}).get("analysis")
        if not isinstance(recorded, Mapping):
            continue
        try:
            expected = settings(recorded)
        except UAProbeError:
            continue  # an older lock's parameters: DVC's own status reports the stage as changed
        for out in stage.outs:
            base = root / out.path
            files = sorted(base.rglob("*.json")) if base.is_dir() else [base] if base.suffix == ".json" else []
            for path in files:
                try:
                    doc = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue  # the hash check reports it
                if isinstance(doc, dict) and "settings" in doc and doc["settings"] != expected:
                    keys = differing(doc["settings"], expected)
                    problems.append(Problem(
                        path.relative_to(root).as_posix(),
                        f"computed with {', '.join(f'analysis.{k}={v!r}' for k, v, _ in keys)}, but dvc.lock records "
                        f"{', '.join(f'analysis.{k}={w!r}' for k, _, w in keys)} for stage {stage.name}",
                        f"rerun it: `dvc repro -f -s {stage.name}` (then the stages after it: `dvc repro`)"))
    return problems


# --- the command ---------------------------------------------------------------------------------------


def _bar(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="verify", file=sys.stderr,
                disable=None, leave=False)  # disable=None: only on a terminal


def byte_problems(root: Path, repo: Any, stages: Mapping[str, LockedStage], *, cache: bool = False,
                  remote: str | None = None, jobs: int | None = None) -> list[Problem]:
    """Workspace, and optionally cache and remote, objects of every recorded output, re-hashed."""
    outs = [out for stage in stages.values() for out in stage.outs]
    jobs = jobs or min(4, os.cpu_count() or 1)
    odb = functools.partial(_cache_odb, repo)
    has_remote = _has_remote(repo)
    problems: list[Problem] = []
    with _bar(sum(out.size or 0 for out in outs) * (1 + cache + bool(remote))) as bar:
        for name in sorted({out.hash_name for out in outs}):
            mine = [out for out in outs if out.hash_name == name]
            problems += workspace_problems(root, mine, odb(name), has_remote=has_remote, progress=bar.update, jobs=jobs)
            if cache:
                problems += check_store(odb(name), mine, cache_fix(has_remote, odb(name)), progress=bar.update,
                                        jobs=jobs)
            if remote:
                remote_odb = _remote_odb(repo, remote, name)
                problems += check_store(remote_odb, mine, remote_fix(remote, remote_odb), progress=bar.update,
                                        jobs=jobs)
    return problems


def _cache_odb(repo: Any, hash_name: str) -> Any:
    return repo.cache.local if hash_name == "md5" else repo.cache.legacy


def _remote_odb(repo: Any, name: str, hash_name: str) -> Any:
    from dvc.exceptions import DvcException

    try:
        odb = repo.cloud.get_remote_odb(name, "uaprobe verify --remote", hash_name=hash_name)
        if odb.fs.protocol in ("local", "file") and not odb.fs.exists(odb.path):
            raise UAProbeError(f"--remote {name}: its directory {odb.path} does not exist: create it and fill it "
                               f"with `dvc push -r {name}`, or point the remote elsewhere (`dvc remote modify --local "
                               f"{name} url DIR`)")
        odb.fs.exists(odb.path)
    except DvcException as exc:
        raise UAProbeError(f"--remote {name}: {str(exc).strip().splitlines()[0]}; name one of `dvc remote list`") \
            from None
    except OSError as exc:
        raise UAProbeError(f"--remote {name}: cannot be reached ({exc}); check its URL (`dvc remote list`) and the "
                           "network") from None
    return odb


LOCK_HELD = ("another DVC process holds this repository's lock{pid}: a `dvc repro`, `dvc pull`, `dvc push` or "
             "`dvc exp run` is running here. Wait for it to finish, then run `uaprobe verify` again")


def _lock_holder(root: Path) -> str:
    try:
        pid = (root / ".dvc" / "tmp" / "lock").read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    fields = pid.split("|")  # flufl.lock's claim: <lock file>|<host>|<pid>|<random>
    pid = fields[2] if len(fields) > 2 else pid
    return f" (process {pid})" if pid.isdigit() else ""


def run(root: Path, *, cache: bool = False, remote: str | None = None,
        extra: Callable[[Path], list[str]] = lambda _root: [], settings: Settings | None = None) -> int:
    """``uaprobe verify``: DVC's status, then every byte; print every problem with its repair. 0 if none, else 1."""
    from dvc.exceptions import DvcException
    from dvc.lock import LockError
    from dvc.repo import Repo

    from uaprobe.lockfile import read_lock

    check_repo(root)
    stages = read_lock(root)  # a damaged dvc.lock stops here, named as such
    try:
        with Repo(os.fspath(root)) as repo:
            # every byte first: DVC's status deletes a cache object it finds damaged, before we could name it
            problems = byte_problems(root, repo, stages, cache=cache, remote=remote)
            status = repo.status()
    except LockError:
        raise UAProbeError(f"{root}: " + LOCK_HELD.format(pid=_lock_holder(root))) from None
    except DvcException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UAProbeError(f"{root}: DVC cannot read the pipeline ({first}); check dvc.yaml (`dvc status` there "
                           "says more), or restore both files from git: `git checkout dvc.yaml dvc.lock`") from None
    if settings is not None:
        problems += settings_mismatches(root, stages, settings)
    others = extra(root)
    for stage, changes in sorted(status.items()):
        print(f"{stage}: {json.dumps(changes, sort_keys=True)}")
    for problem in problems:
        print("\n".join(problem.lines()))
    for line in others:
        print(line)
    checked = "the workspace" + (", the cache" if cache else "") + (f", remote {remote!r}" if remote else "")
    if status or problems or others:
        parts = []
        if problems:
            parts.append(f"{len(problems)} file(s) with other bytes or settings in {checked}: the repair is under each")
        if others:
            parts.append(f"{len(others)} extraction problem(s) listed above")
        if status:
            parts.append(f"stage(s) {', '.join(sorted(status))} changed since dvc.lock was written (listed above): "
                         "`dvc repro` (author) or `git checkout` the changed sources and `dvc pull` (reviewer)")
        print("outputs do NOT match dvc.lock: " + "; ".join(parts))
        return 1
    print(f"every output matches dvc.lock, every byte re-read ({checked}); every extraction file matches the "
          "dataset and prompts it records")
    return 0


__all__ = ["Problem", "byte_problems", "run", "check_repo", "check_store", "settings_mismatches", "workspace_hash",
           "workspace_problems"]
