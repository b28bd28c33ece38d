"""Every number of two runs' metrics and results files, compared within a stated tolerance.

Pinned CPU code paths (:mod:`uaprobe.repro.numerics`) make two x86-64 machines with AVX2 give the same
bytes. Where bytes cannot match -- a GPU, another architecture, another build of a library -- the
question is whether the *numbers* reproduced: ``uaprobe verify --against REV`` reads the JSON
metrics and results files and the CSV plot series of this checkout and of a git revision (through
DVC, so the DVC-tracked results come from the cache or the remote) or of another checkout, and
reports per file the largest absolute and relative difference and whether every number is within

    |a - b| <= atol + rtol * max(|a|, |b|)

(defaults :data:`DEFAULT_ATOL`, :data:`DEFAULT_RTOL`). A number present on one side only, a
``null`` facing a number, or a file missing on one side fails. Strings (names, provenance) are not
compared: they say how a number was made, not what it is.

A DVC output that neither the cache nor the remote can give (a fresh clone before ``dvc pull``, a
revision whose objects were never fetched) is not compared: it is listed with the command that fetches
it, and what git holds (metrics/, plots/) is still compared.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from uaprobe.errors import UAProbeError

DEFAULT_ATOL = 1e-4
"""Absolute tolerance: above the last-digit differences of float32 hidden states computed on other
kernels (up to about 1e-5 in the metrics), below the size of a change that moves a reported digit."""
DEFAULT_RTOL = 1e-4
"""Relative tolerance (of the larger magnitude), for the large numbers (norms, NLL sums)."""
ROOTS: tuple[str, ...] = ("metrics", "results", "plots")
"""Top-level directories whose ``.json`` and ``.csv`` files are compared."""
SUFFIXES: tuple[str, ...] = (".json", ".csv")

Number = float | None
"""A leaf: a finite or non-finite float, or None for JSON ``null`` / an empty CSV cell."""


class Unavailable(UAProbeError):
    """A DVC output whose bytes this side cannot read: in neither the cache nor a reachable remote."""

    def __init__(self, path: str, label: str, fetch: str) -> None:
        self.path, self.fetch = path, fetch
        super().__init__(f"{path} at {label}: not in the DVC cache or a reachable remote; fetch it with {fetch}")


class Tree(Protocol):
    """One side of the comparison: the files of a checkout or of a revision."""

    label: str

    def files(self) -> list[str]: ...

    def read_text(self, path: str) -> str: ...


@dataclass
class Checkout:
    """The files of a directory on disk (a checkout, or a workspace)."""

    root: Path
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or str(self.root)

    def unavailable(self, roots: tuple[str, ...] | None = ROOTS) -> list[str]:
        """The DVC outputs dvc.lock records under ``roots`` (None: anywhere) that this checkout lacks (before
        ``dvc pull``)."""
        from uaprobe.repro.lockfile import read_lock

        try:
            stages = read_lock(self.root)
        except UAProbeError:
            return []
        return sorted({out.path for stage in stages.values() for out in stage.outs
                       if (roots is None or out.path.split("/")[0] in roots) and not (self.root / out.path).exists()})

    @property
    def fetch(self) -> str:
        return "`dvc pull`"

    def files(self) -> list[str]:
        out = []
        for top in ROOTS:
            base = self.root / top
            if base.is_dir():
                out += [p.relative_to(self.root).as_posix() for p in base.rglob("*")
                        if p.is_file() and p.suffix in SUFFIXES]
        return sorted(out)

    def read_text(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def read_bytes(self, path: str) -> bytes:
        return (self.root / path).read_bytes()


class Revision:
    """The files of a git revision of a DVC project: git-tracked ones from git, DVC outputs from
    the DVC cache (or the remote)."""

    def __init__(self, repo: Path, rev: str) -> None:
        from dvc.api import DVCFileSystem

        self.label = rev
        self.missing: list[str] = []
        commit = resolve_revision(repo, rev)
        if commit is None:
            raise UAProbeError(f"{repo}: cannot open revision {rev!r} (not a commit, branch, tag or DVC experiment of "
                               "this repository); give one of those, or a checkout directory")
        try:
            self.fs = DVCFileSystem(str(repo), rev=commit)
        except Exception as exc:  # dvc raises its own types for a revision that is not a DVC project
            raise UAProbeError(f"{repo}: cannot open revision {rev!r} as a DVC project ({type(exc).__name__}: "
                               f"{exc}); compare two checkouts instead (`--against DIR`)") from None

    def files(self) -> list[str]:
        out: list[str] = []
        for top in ROOTS:
            if self.fs.exists(f"/{top}"):
                out += self._walk(f"/{top}")
        return sorted(out)

    def _walk(self, directory: str) -> list[str]:
        """The compared files under ``directory``; a DVC directory output that cannot be listed goes to
        :attr:`missing`."""
        try:
            entries = self.fs.ls(directory, detail=True)
        except Exception:  # noqa: BLE001 - dvc raises its own types for a listing in neither cache nor remote
            self.missing.append(directory.lstrip("/"))
            return []
        out = []
        for entry in entries:
            name = "/" + str(entry["name"]).lstrip("/")
            if entry["type"] == "directory":
                out += self._walk(name)
            elif name.endswith(SUFFIXES):
                out.append(name.lstrip("/"))
        return out

    def unavailable(self) -> list[str]:
        return sorted(self.missing)

    @property
    def fetch(self) -> str:
        return (f"`dvc fetch --all-commits` (or `git checkout {self.label} && dvc pull && git checkout -`), or "
                "compare two checkouts (`--against DIR`)")

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def read_bytes(self, path: str) -> bytes:
        try:
            return self.fs.read_bytes(f"/{path}")
        except Exception:  # noqa: BLE001 - a DVC output in neither cache nor remote
            raise Unavailable(path, self.label, self.fetch) from None


def byte_reader(tree: Checkout | Revision, unavailable: dict[str, str]) -> Callable[[str], bytes | None]:
    """``read(path)``: the bytes of ``path`` in ``tree``, or None where it has no such file. A file that
    is a DVC output not in the cache reads as None too, and is recorded in ``unavailable``
    (``"<path> at <tree label>"`` -> the command that fetches it)."""
    def read(path: str) -> bytes | None:
        try:
            if isinstance(tree, Checkout):
                if (tree.root / path).is_file():
                    return tree.read_bytes(path)
                if any(under(path, p) for p in tree.unavailable(roots=None)):
                    raise Unavailable(path, tree.label, tree.fetch)
                return None
            try:
                exists = tree.fs.exists(f"/{path}")
            except Exception:  # noqa: BLE001 - inside a DVC directory whose listing is not in the cache
                raise Unavailable(path, tree.label, tree.fetch) from None
            return tree.read_bytes(path) if exists else None
        except Unavailable as exc:
            unavailable[f"{path} at {tree.label}"] = exc.fetch
            return None
    return read


def resolve_revision(repo: Path, rev: str) -> str | None:
    """The commit of a git revision, or of a DVC experiment by its name (``refs/exps/…/<name>``)."""
    def git(*args: str) -> str | None:
        proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if commit:
        return commit
    refs = (git("for-each-ref", "--format=%(refname)", "refs/exps") or "").splitlines()
    named = [ref for ref in refs if ref.rsplit("/", 1)[-1] == rev]
    return git("rev-parse", "--verify", "--quiet", f"{named[0]}^{{commit}}") if len(named) == 1 else None


def open_tree(spec: str, repo: Path) -> Tree:
    """A checkout directory if ``spec`` is one, else a git revision of ``repo``."""
    path = Path(spec)
    if path.is_dir():
        return Checkout(path)
    return Revision(repo, spec)


def leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Number]]:
    """Every numeric leaf of a JSON document as (slash-separated key path, value); ``null`` is None,
    strings and booleans are skipped."""
    if isinstance(obj, Mapping):
        for key in sorted(obj):
            yield from leaves(obj[key], f"{prefix}/{key}" if prefix else str(key))
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from leaves(item, f"{prefix}/{i}" if prefix else str(i))
    elif obj is None:
        yield prefix, None
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix, float(obj)


def csv_leaves(text: str) -> Iterator[tuple[str, Number]]:
    """Every numeric cell of a CSV file with a header, as (``<row>/<column>``, value); an empty cell
    is None, text cells are skipped."""
    for i, row in enumerate(csv.DictReader(io.StringIO(text))):
        for column, cell in row.items():
            if cell is None or cell == "":
                yield f"{i}/{column}", None
                continue
            try:
                yield f"{i}/{column}", float(cell)
            except ValueError:
                continue


def numbers(path: str, text: str) -> dict[str, Number]:
    """The numbers of one metrics/results/plots file, keyed by their path inside it."""
    if path.endswith(".csv"):
        return dict(csv_leaves(text))
    try:
        return dict(leaves(json.loads(text)))
    except json.JSONDecodeError as exc:
        raise UAProbeError(f"{path}: not valid JSON ({exc}); regenerate it with `dvc repro`") from None


@dataclass
class FileDiff:
    """The comparison of one file: largest differences, where they are, and what fails."""

    path: str
    compared: int = 0
    max_abs: float = 0.0
    max_abs_key: str = ""
    max_rel: float = 0.0
    max_rel_key: str = ""
    max_abs_values: tuple[float, float] | None = None
    """The two values (ours, theirs) at :attr:`max_abs_key`."""
    max_rel_values: tuple[float, float] | None = None
    """The two values (ours, theirs) at :attr:`max_rel_key`."""
    failures: list[str] = field(default_factory=list)
    """Every failing key, with both values (or what is missing)."""
    not_compared: str = ""
    """Why the file could not be compared (a DVC output this side cannot read) and the command that fetches it."""

    @property
    def passed(self) -> bool:
        return not self.failures


def differences(a: float, b: float) -> tuple[float, float]:
    """Absolute and relative (to the larger magnitude) difference; equal non-finite values differ by 0."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0, 0.0
    diff = abs(a - b)
    scale = max(abs(a), abs(b))
    return diff, (diff / scale if scale > 0 else math.inf)


def within(a: float, b: float, *, atol: float, rtol: float) -> bool:
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    return abs(a - b) <= atol + rtol * max(abs(a), abs(b))


def compare_numbers(path: str, ours: Mapping[str, Number], theirs: Mapping[str, Number], *,
                    atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL, labels: tuple[str, str] = ("here", "there")
                    ) -> FileDiff:
    """Compare two files' numbers key by key."""
    out = FileDiff(path)
    for key in sorted(set(ours) | set(theirs)):
        if key not in theirs or key not in ours:
            side = labels[1] if key not in theirs else labels[0]
            out.failures.append(f"{key}: missing at {side}")
            continue
        a, b = ours[key], theirs[key]
        if a is None or b is None:
            if a is not b:
                out.failures.append(f"{key}: {a} at {labels[0]}, {b} at {labels[1]}")
            continue
        out.compared += 1
        abs_diff, rel_diff = differences(a, b)
        if abs_diff > out.max_abs:
            out.max_abs, out.max_abs_key, out.max_abs_values = abs_diff, key, (a, b)
        if rel_diff > out.max_rel:
            out.max_rel, out.max_rel_key, out.max_rel_values = rel_diff, key, (a, b)
        if not within(a, b, atol=atol, rtol=rtol):
            out.failures.append(f"{key}: {a!r} at {labels[0]}, {b!r} at {labels[1]} "
                                f"(abs {abs_diff:.3g}, rel {rel_diff:.3g})")
    return out


def compare_trees(ours: Tree, theirs: Tree, *, atol: float = DEFAULT_ATOL,
                  rtol: float = DEFAULT_RTOL) -> list[FileDiff]:
    """Every metrics/results/plots file of both sides, compared; a file on one side only fails."""
    mine, other = set(ours.files()), set(theirs.files())
    gone = {tree.label: (_unavailable(tree), getattr(tree, "fetch", "`dvc pull`")) for tree in (ours, theirs)}
    if not mine and not other and not any(prefixes for prefixes, _ in gone.values()):
        raise UAProbeError(f"no metrics, results or plots files at {ours.label} or {theirs.label}: run `dvc repro` "
                           "or `dvc pull` first")
    out = []
    listed = mine | other
    empty = {p for prefixes, _ in gone.values() for p in prefixes if not any(under(f, p) for f in listed)}
    for path in sorted(listed | empty):
        lacking = [label for label, (prefixes, _) in gone.items() if any(under(path, p) for p in prefixes)]
        if lacking:
            out.append(FileDiff(path, not_compared=f"not in the DVC cache at {lacking[0]}: {gone[lacking[0]][1]}"))
            continue
        if path not in other or path not in mine:
            missing = theirs.label if path not in other else ours.label
            out.append(FileDiff(path, failures=[f"file missing at {missing}"]))
            continue
        try:
            texts = ours.read_text(path), theirs.read_text(path)
        except Unavailable as exc:
            out.append(FileDiff(path, not_compared=f"not in the DVC cache: {exc.fetch}"))
            continue
        out.append(compare_numbers(path, numbers(path, texts[0]), numbers(path, texts[1]),
                                   atol=atol, rtol=rtol, labels=(ours.label, theirs.label)))
    return out


def _unavailable(tree: Tree) -> list[str]:
    unavailable = getattr(tree, "unavailable", None)
    return list(unavailable()) if unavailable is not None else []


def under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _at(key: str, values: tuple[float, float] | None, labels: tuple[str, str]) -> str:
    if not key:
        return ""
    shown = f" ({key}" if values is None else f" ({key}: {values[0]!r} at {labels[0]}, {values[1]!r} at {labels[1]}"
    return shown + ")"


def largest(d: FileDiff, labels: tuple[str, str]) -> str:
    """``max abs diff … (key: value at one side, value at the other), max rel diff … (…)``."""
    return (f"max abs diff {d.max_abs:.3g}{_at(d.max_abs_key, d.max_abs_values, labels)}, "
            f"max rel diff {d.max_rel:.3g}{_at(d.max_rel_key, d.max_rel_values, labels)}")


def report(diffs: list[FileDiff], *, atol: float, rtol: float, ours: str, theirs: str, max_failures: int = 5) -> str:
    """The per-file table and, under each failing file, its first failing keys."""
    lines = [f"numbers of {ours} against {theirs}: pass if |a - b| <= {atol:g} + {rtol:g} * max(|a|, |b|)"]
    reasons: dict[str, list[str]] = {}
    for d in diffs:
        if d.not_compared:
            reasons.setdefault(d.not_compared, []).append(d.path)
            continue
        status = "pass" if d.passed else "FAIL"
        lines.append(f"{status}  {d.path}: {d.compared} numbers, {largest(d, (ours, theirs))}")
        for failure in d.failures[:max_failures]:
            lines.append(f"      {d.path}: {failure}")
        if len(d.failures) > max_failures:
            lines.append(f"      {d.path}: ... {len(d.failures) - max_failures} more")
    for reason, paths in reasons.items():  # one line per reason: the fetch command once, not once per file
        shown = ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
        lines.append(f"n/a   {len(paths)} file{'s' if len(paths) > 1 else ''} {reason} ({shown})")
    failed = [d for d in diffs if not d.passed]
    skipped = [d for d in diffs if d.not_compared]
    compared = len(diffs) - len(skipped)
    lines.append(f"{compared - len(failed)} of {compared} files within tolerance"
                 + ("" if not failed else f"; {len(failed)} not: {', '.join(d.path for d in failed)}")
                 + ("" if not skipped else f"; {len(skipped)} not compared (DVC outputs not fetched, see `n/a` above)"))
    return "\n".join(lines)


def verify_against(repo: Path, against: str, *, atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL) -> int:
    """``uaprobe verify --against``: print the report; 0 if every file is within tolerance, else 1."""
    if atol < 0 or rtol < 0:
        raise UAProbeError(f"--atol {atol} / --rtol {rtol}: tolerances must be >= 0")
    ours, theirs = Checkout(repo, label=str(repo)), open_tree(against, repo)
    diffs = compare_trees(ours, theirs, atol=atol, rtol=rtol)
    print(report(diffs, atol=atol, rtol=rtol, ours=ours.label, theirs=theirs.label))
    return 0 if all(d.passed for d in diffs) else 1
