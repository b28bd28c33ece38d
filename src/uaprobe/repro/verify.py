"""``uaprobe verify``: every byte of every output, cache object and remote object against ``dvc.lock``.

DVC trusts a file whose size and modification time it has seen before, and trusts its cache and
remote objects; a flipped byte passes ``dvc status``, ``dvc checkout`` and ``dvc pull``. This module
re-hashes instead (:mod:`uaprobe.repro.hashing`, never DVC's state database) and names, per damaged file, the
commands that repair it:

* the workspace (always): each output of each stage ``dvc.lock`` records;
* ``--cache``: each object of the local cache those outputs name (a directory's ``.dir`` listing and
  every file in it);
* ``--remote NAME``: the same objects on a DVC remote (:mod:`uaprobe.repro.stores`).

An output declared ``cache: false`` (the metrics and plots files) lives in git, not in the cache or a remote:
it is checked in the workspace only. A repair is one or more ways, separated by ``; or``, each a sequence of
commands in backticks; a removal of damaged objects it opens with applies to every way (DVC keeps an
object it already has, whatever its bytes).

It also compares the ``settings`` every results file records with the parameters ``dvc.lock`` records
for the stage that wrote it (:func:`settings_mismatches`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uaprobe import conflicts
from uaprobe.config import differing
from uaprobe.errors import UAProbeError
from uaprobe.repro.hashing import Progress, hash_with_entries
from uaprobe.repro.lockfile import LockedStage, Output
from uaprobe.repro.stores import check_store, recorded_entries, remote_odb, remote_url, store_errors, unreachable


@dataclass(frozen=True)
class Problem:
    """One file whose bytes are not the recorded ones, and the commands that repair it."""

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


def find_repo(start: Path | None = None, *, required: bool = True) -> Path:
    """The root of the DVC project ``start`` (default: the working directory) is in: the nearest directory at or
    above it holding ``.dvc/``, as git and DVC find theirs. Not ``required``: ``start`` itself where there is
    none (a plain directory of outputs)."""
    here = Path.cwd() if start is None else start
    if not here.is_dir():
        return here  # the command's check names what it is instead
    for candidate in (here, *here.resolve().parents):
        if (candidate / ".dvc").is_dir():
            return here if candidate.resolve() == here.resolve() else candidate
    if not required:
        return here
    raise UAProbeError(f"{here}: not a DVC repository (no .dvc directory in it or above it); run it inside a "
                       "uaprobe checkout, or pass --repo its root")


# --- repairs -------------------------------------------------------------------------------------------

LINKED = ("it is a link into the cache (cache.type symlink or hardlink), so editing it in place changed the cache "
          "copy too: replace an output (write a new file, then rename it over the old one), never edit it in place")


def _quoted(paths: list[str]) -> str:
    return " ".join(f"'{p}'" for p in paths)


def _fetch(has_remote: bool, out: Output) -> str:
    return f"`dvc fetch {out.path}`" if has_remote else "a `dvc fetch` (no remote is configured)"


def _from_store(out: Output, has_remote: bool, damaged: list[str]) -> str:
    """Get ``out``'s recorded bytes from the remote, or recompute them, after removing the ``damaged`` objects of
    the cache (DVC keeps an object it has, whatever its bytes)."""
    first = f"remove the damaged cache object(s) first (`rm -f {_quoted(damaged)}`); then " if damaged else ""
    return (f"{first}get the recorded bytes: {_fetch(has_remote, out)} and `dvc checkout --relink --force {out.path}`; "
            f"or recompute them: `dvc repro -f -s {out.stage}`")


def _linked(root: Path, files: list[str]) -> bool:
    """Whether any of ``files`` is a link into the cache (a symlink, or a file with more than one name)."""
    for rel in files:
        path = root / rel
        with contextlib.suppress(OSError):
            if path.is_symlink() or path.stat().st_nlink > 1:
                return True
    return False


def _with_listing(odb: Any, out: Output, shown: str, location: str) -> list[str]:
    """The objects to delete: the damaged one, and for a file of a directory output also the directory's listing
    (DVC fetches and pushes nothing of a directory whose listing is already there)."""
    return [location] if shown == out.path else [location, odb.oid_to_path(out.md5)]


def _which_files(out: Output, actual: dict[str, str] | None, recorded: dict[str, str] | None) -> tuple[str, list[str]]:
    """The files of a directory output that differ from its listing, as a bracketed note and as paths."""
    if actual is None or recorded is None:
        return "", []
    changed = [f"{out.path}/{k}" for k in sorted(actual.keys() & recorded.keys()) if actual[k] != recorded[k]]
    extra = [f"{out.path}/{k}" for k in sorted(actual.keys() - recorded.keys())]
    gone = [f"{out.path}/{k}" for k in sorted(recorded.keys() - actual.keys())]
    parts = [f"{label}: {', '.join(files)}" for label, files in (("other bytes", changed), ("not recorded", extra),
                                                                 ("missing", gone)) if files]
    return (f" [{'; '.join(parts)}]" if parts else ""), changed


def _uncached_problem(root: Path, out: Output, actual: str | None) -> Problem:
    with contextlib.suppress(OSError):
        if not out.is_dir and (line := conflicts.marker_line((root / out.path).read_bytes())) is not None:
            return Problem(out.path, f"an unresolved git merge (conflict markers from line {line}; a `cache: false` "
                           "output: git holds it)", f"take one side: `git checkout --ours {out.path}` (or "
                           f"`--theirs`), then `dvc repro` (it rewrites it from the merged sources) and "
                           f"`git add {out.path}`")
    what = (f"missing (dvc.lock records md5 {out.md5})" if actual is None else
            f"its bytes hash to {actual}, but dvc.lock records {out.md5}")
    return Problem(out.path, f"{what} (a `cache: false` output: git holds it, not the DVC cache or a remote)",
                   f"`git checkout {out.path}`; or recompute it: `dvc repro -f -s {out.stage}`")


def workspace_problems(root: Path, outs: list[Output], cache: Any, *, has_remote: bool,
                       uncached: frozenset[str] = frozenset(), progress: Progress | None = None,
                       jobs: int = 4) -> list[Problem]:
    """Each output in the workspace re-hashed; for a damaged one, its cache object decides the repair (an output
    in ``uncached``, declared ``cache: false``, is git's to restore)."""
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
        if out.path in uncached:
            problems.append(_uncached_problem(root, out, actual))
            continue
        files, changed = _which_files(out, entries, recorded_entries(cache, out)) if out.is_dir else ("", [out.path])
        bad = check_store(cache, [out], lambda o, shown, location, what: (shown, location, what), jobs=1)
        damaged = [loc for p in bad if "damaged" in p[2] for loc in _with_listing(cache, out, p[0], p[1])]
        if actual is None:
            what = f"missing (dvc.lock records md5 {out.md5})"
            repair = f"`dvc checkout {out.path}`" if not bad else _from_store(out, has_remote, damaged)
        elif bad and not damaged:
            what = (f"its bytes hash to {actual}, but dvc.lock records {out.md5}, which the cache does not hold: "
                    f"`dvc checkout` would delete this file")
            repair = ("if dvc.lock is what changed (`git diff dvc.lock`), restore it: `git checkout dvc.lock`; or if "
                      f"the file is what changed, {_from_store(out, has_remote, [])}")
        else:
            what = (f"its bytes hash to {actual}, but dvc.lock records {out.md5}{files} (`dvc status` does not "
                    "re-read them)")
            if damaged:
                what += "; its cache copy is damaged too" + (f": {LINKED}" if _linked(root, changed) else "")
                repair = _from_store(out, has_remote, damaged)
            else:
                repair = f"`dvc checkout --relink --force {out.path}` (the cache holds the recorded bytes)"
        problems.append(Problem(out.path, what, repair))
    return problems


def cache_fix(has_remote: bool, odb: Any) -> Callable[[Output, str, str, str], Problem]:
    def fix(out: Output, shown: str, location: str, what: str) -> Problem:
        damaged = [] if what.startswith("missing") else _with_listing(odb, out, shown, location)
        return Problem(shown, f"cache object {location}: {what}", _from_store(out, has_remote, damaged))
    return fix


def remote_fix(name: str, odb: Any) -> Callable[[Output, str, str, str], Problem]:
    def fix(out: Output, shown: str, location: str, what: str) -> Problem:
        gone = f"delete {_quoted(_with_listing(odb, out, shown, location))} from the remote, then "
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


# --- the checks ----------------------------------------------------------------------------------------


def _bar(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="verify", file=sys.stderr,
                disable=None, leave=False)  # disable=None: only on a terminal


def uncached_outputs(repo: Any, root: Path) -> frozenset[str]:
    """The outputs dvc.yaml declares ``cache: false`` (paths relative to ``root``)."""
    return frozenset(Path(os.path.relpath(out.fs_path, root)).as_posix()
                     for stage in repo.index.stages for out in stage.outs if not out.use_cache)


def byte_problems(root: Path, repo: Any, stages: Mapping[str, LockedStage], *, cache: bool = False,
                  remote: str | None = None, jobs: int | None = None) -> list[Problem]:
    """Workspace, and optionally cache and remote, objects of every recorded output, re-hashed (the cache and
    the remote only for the outputs they hold: not those declared ``cache: false``)."""
    outs = [out for stage in stages.values() for out in stage.outs]
    uncached = uncached_outputs(repo, root)
    jobs = jobs or min(4, os.cpu_count() or 1)
    odb = functools.partial(_cache_odb, repo)
    has_remote = bool(repo.config["core"].get("remote"))
    stored = sum(out.size or 0 for out in outs if out.path not in uncached)
    problems: list[Problem] = []
    with _bar(sum(out.size or 0 for out in outs) + stored * (cache + bool(remote))) as bar:
        for name in sorted({out.hash_name for out in outs}):
            mine = [out for out in outs if out.hash_name == name]
            problems += workspace_problems(root, mine, odb(name), has_remote=has_remote, uncached=uncached,
                                           progress=bar.update, jobs=jobs)
            held = [out for out in mine if out.path not in uncached]
            if cache:
                problems += check_store(odb(name), held, cache_fix(has_remote, odb(name)), progress=bar.update,
                                        jobs=jobs)
            if remote:
                store = remote_odb(repo, remote, name)
                try:
                    problems += check_store(store, held, remote_fix(remote, store), progress=bar.update, jobs=jobs)
                except store_errors() as exc:
                    raise unreachable(remote, remote_url(repo, remote), exc) from None
    return problems


def _cache_odb(repo: Any, hash_name: str) -> Any:
    return repo.cache.local if hash_name == "md5" else repo.cache.legacy


LOCK_HELD = ("another DVC process holds this repository's lock{pid}: a `dvc repro`, `dvc pull`, `dvc push` or "
             "`dvc exp run` is running here. Wait for it to finish, then run `uaprobe verify` again")
READ_ONLY = ("note: this checkout is read-only (DVC keeps its lock in .dvc/tmp, which cannot be written here): "
             "checked without that lock, so a `dvc repro` writing to these files from elsewhere meanwhile would go "
             "unseen")


def _lock_holder(root: Path) -> str:
    try:
        pid = (root / ".dvc" / "tmp" / "lock").read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    fields = pid.split("|")  # flufl.lock's claim: <lock file>|<host>|<pid>|<random>
    pid = fields[2] if len(fields) > 2 else pid
    return f" (process {pid})" if pid.isdigit() else ""


def writable(root: Path) -> bool:
    """Whether DVC can take its lock here (create or write ``.dvc/tmp``)."""
    tmp = root / ".dvc" / "tmp"
    return os.access(tmp if tmp.is_dir() else root / ".dvc", os.W_OK)


@contextlib.contextmanager
def open_repo(root: Path) -> Iterator[tuple[Any, list[str]]]:
    """DVC's view of ``root``, and the notes to print about how it was opened. A read-only checkout gets its
    lock and temporary files in a private directory: there is nothing to lock against in it."""
    from dvc.repo import Repo

    if writable(root):
        with Repo(os.fspath(root)) as repo:
            yield repo, []
        return
    with tempfile.TemporaryDirectory(prefix="uaprobe-verify-") as private:
        class ReadOnly(Repo):  # type: ignore[misc]
            @functools.cached_property
            def tmp_dir(self) -> str:
                return private

            def _ignore(self) -> None:
                pass  # DVC's .gitignore entries for its own directories: nothing can be written here

        with ReadOnly(os.fspath(root)) as repo:
            yield repo, [READ_ONLY]


@dataclass
class Findings:
    """What ``uaprobe verify`` found: DVC's changed stages, the damaged files, other problems, notes."""

    checked: str
    status: Mapping[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (self.status or self.problems or self.others)

    def lines(self) -> list[str]:
        out = list(self.notes)
        out += [f"{stage}: {json.dumps(changes, sort_keys=True)}" for stage, changes in sorted(self.status.items())]
        out += [line for problem in self.problems for line in problem.lines()]
        out += self.others
        if self.passed:
            return out + [f"every output matches dvc.lock, every byte re-read ({self.checked}); every extraction file "
                          "matches the dataset and prompts it records"]
        parts = []
        if self.problems:
            parts.append(f"{len(self.problems)} file(s) with other bytes or settings in {self.checked}: the repair is "
                         "under each")
        if self.others:
            parts.append(f"{len(self.others)} extraction problem(s) listed above")
        if self.status:
            parts.append(f"stage(s) {', '.join(sorted(self.status))} changed since dvc.lock was written (listed "
                         "above): `dvc repro` (author) or `git checkout` the changed sources and `dvc pull` (reviewer)")
        return out + ["outputs do NOT match dvc.lock: " + "; ".join(parts)]


def check(root: Path, *, cache: bool = False, remote: str | None = None,
          extra: Callable[[Path], list[str]] = lambda _root: [], settings: Settings | None = None) -> Findings:
    """DVC's status, then every byte; the settings of every results file; ``extra``'s problems."""
    from dvc.exceptions import DvcException
    from dvc.lock import LockError

    from uaprobe.repro.lockfile import read_lock

    check_repo(root)
    for name in ("dvc.yaml", "params.yaml"):
        conflicts.check(root / name)
    stages = read_lock(root)  # a damaged dvc.lock, or one in a merge, stops here, named as such
    checked = "the workspace" + (", the cache" if cache else "") + (f", remote {remote!r}" if remote else "")
    try:
        with open_repo(root) as (repo, notes):
            # every byte first: DVC's status deletes a cache object it finds damaged, before we could name it
            found = Findings(checked, problems=byte_problems(root, repo, stages, cache=cache, remote=remote),
                             notes=notes)
            found.status = repo.status()
    except LockError:
        raise UAProbeError(f"{root}: " + LOCK_HELD.format(pid=_lock_holder(root))) from None
    except DvcException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UAProbeError(f"{root}: DVC cannot read the pipeline ({first}); check dvc.yaml (`dvc status` there "
                           "says more), or restore both files from git: `git checkout dvc.yaml dvc.lock`") from None
    if settings is not None:
        found.problems += settings_mismatches(root, stages, settings)
    found.others = extra(root)
    return found


def run(root: Path, *, cache: bool = False, remote: str | None = None,
        extra: Callable[[Path], list[str]] = lambda _root: [], settings: Settings | None = None) -> int:
    """``uaprobe verify``: print what :func:`check` found, every problem with its repair. 0 if none, else 1."""
    found = check(root, cache=cache, remote=remote, extra=extra, settings=settings)
    print("\n".join(found.lines()))
    return 0 if found.passed else 1


__all__ = ["Findings", "Problem", "byte_problems", "check", "check_repo", "find_repo", "open_repo", "run",
           "settings_mismatches", "uncached_outputs", "workspace_problems", "writable"]
