"""``uaprobe review`` (``make review``): the reviewer's whole check in one command, and ``review.html``.

On a clone with the environment set up (``make review`` sets it up first) it runs, in order, and goes on after a
failure so that the page says everything:

1. ``dvc pull``: every output ``dvc.lock`` records, from the default remote;
2. the fingerprint: does this machine compute the bytes the repository records;
3. ``uaprobe verify --cache --remote <the default remote>``: every byte of the workspace, the cache and the remote
   against ``dvc.lock``;
4. the paper rendered again, by the ``paper`` stage's own command, from the pulled outputs into a temporary
   directory, and its files' bytes compared with the md5 ``dvc.lock`` records for them.

``review.html`` holds the machine, the commit, every output ``dvc.lock`` records with its md5 and what became of it,
what could not be checked and why, and one verdict. Exit 0 only when every check agrees.
"""

from __future__ import annotations

import contextlib
import html
import io
import platform
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uaprobe.repro import verify
from uaprobe.errors import UAProbeError
from uaprobe.repro.lockfile import LockedStage, read_lock
from uaprobe.repro.stores import Unreachable

PAGE = "review.html"


@dataclass
class Check:
    """One step of the review: ``passed`` is None when it could not be run (``summary`` says why)."""

    name: str
    passed: bool | None
    summary: str
    details: list[str] = field(default_factory=list)


@dataclass
class Review:
    machine: dict[str, Any]
    commit: str
    checks: list[Check] = field(default_factory=list)
    outputs: list[tuple[str, str, str, str]] = field(default_factory=list)
    """Every output dvc.lock records: path, md5, where it was checked, what was found."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def verdict(self) -> str:
        if self.passed:
            return "AGREES: every output is the bytes dvc.lock records, and this machine reproduces them"
        failed = [c.name for c in self.checks if c.passed is False]
        unchecked = [c.name for c in self.checks if c.passed is None]
        parts = ([f"failed: {', '.join(failed)}"] if failed else []) + \
            ([f"not checked: {', '.join(unchecked)}"] if unchecked else [])
        return "DOES NOT AGREE: " + "; ".join(parts)


def _run(cmd: list[str], root: Path, timeout: int = 3600) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _tail(text: str, lines: int = 12) -> list[str]:
    return text.splitlines()[-lines:]


def commit(root: Path) -> str:
    """``<sha>`` of HEAD, with the number of files changed since (``git status``), or why there is none."""
    code, sha = _run(["git", "rev-parse", "HEAD"], root)
    if code != 0:
        return f"not a git commit ({sha.splitlines()[-1] if sha else 'no git'})"
    _, status = _run(["git", "status", "--porcelain", "--untracked-files=no"], root)
    changed = [line for line in status.splitlines() if line.strip()]
    return sha + (f" with {len(changed)} file(s) changed since: {', '.join(line[3:] for line in changed)}" if changed else
                  " (no changes)")


def pull(root: Path, dvc: str) -> Check:
    code, out = _run([dvc, "pull"], root)
    if code != 0:
        return Check("pull", False, f"`dvc pull` failed (exit {code})", _tail(out))
    return Check("pull", True, "`dvc pull`: every output dvc.lock records is in the workspace", _tail(out, 3))


def fingerprint_check(fingerprint: Callable[[], int]) -> Check:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = fingerprint()
    except UAProbeError as exc:
        return Check("fingerprint", None, f"could not run: {exc}")
    lines = out.getvalue().strip().splitlines()
    return Check("fingerprint", code == 0, lines[-1] if lines else f"exit {code}", lines)


def verify_check(root: Path, remote: str | None, **kwargs: Any) -> tuple[list[Check], verify.Findings | None]:
    """The workspace and the cache, and the remote: each a check of its own when the remote cannot be reached."""
    checks: list[Check] = []
    try:
        found = verify.check(root, cache=True, remote=remote, **kwargs)
    except Unreachable as exc:
        checks.append(Check("remote", None, str(exc)))
        remote = None
        try:
            found = verify.check(root, cache=True, **kwargs)
        except UAProbeError as inner:
            return checks + [Check("verify", False, str(inner))], None
    except UAProbeError as exc:
        return [Check("verify", False, str(exc))], None
    if remote is None and not checks:
        checks.append(Check("remote", None, "no DVC remote is configured (`dvc remote list`): its objects were not "
                            "checked"))
    summary = found.lines()[-1]
    return [Check("verify", found.passed, summary, found.lines())] + checks, found


def rerender(root: Path, stages: dict[str, LockedStage]) -> Check:
    """The ``paper`` stage's command, its output directory a temporary one; each file's md5 against dvc.lock's."""
    from uaprobe.repro.hashing import workspace_hash

    stage = stages.get("paper")
    if stage is None or not stage.cmd:
        return Check("paper", None, "dvc.lock records no `paper` stage: nothing to render again")
    with tempfile.TemporaryDirectory(prefix="uaprobe-review-") as tmp:
        code, out = _run(["sh", "-c", f"{stage.cmd} --out {shlex.quote(tmp)}"], root)
        if code != 0:
            return Check("paper", False, f"rendering the paper again failed (exit {code}): `{stage.cmd}`", _tail(out))
        rows = []
        for output in stage.outs:
            name = Path(output.path).name
            try:
                actual = workspace_hash(Path(tmp), name)
            except FileNotFoundError:
                actual = "not written"
            rows.append((output.path, output.md5, actual))
    differ = [f"{path}: rendered again {actual}, dvc.lock records {md5}" for path, md5, actual in rows if actual != md5]
    if differ:
        return Check("paper", False, f"{len(differ)} of {len(rows)} paper file(s) rendered again differ from dvc.lock",
                     differ)
    return Check("paper", True, f"the paper rendered again from the pulled outputs: all {len(rows)} files are the "
                 "bytes dvc.lock records", [f"{path}: {md5}" for path, md5, _ in rows])


def output_rows(stages: dict[str, LockedStage], found: verify.Findings | None, uncached: frozenset[str],
                remote: str | None) -> list[tuple[str, str, str, str]]:
    rows = []
    for stage in stages.values():
        for out in stage.outs:
            where = "workspace (`cache: false`: git holds it)" if out.path in uncached else \
                "workspace, cache" + (f", remote {remote!r}" if remote else "")
            if found is None:
                rows.append((out.path, out.md5, where, "not checked"))
                continue
            bad = [p.what for p in found.problems if p.path == out.path or p.path.startswith(out.path + "/")]
            rows.append((out.path, out.md5, where, "; ".join(bad) if bad else "agrees"))
    return rows


def _html(review: Review) -> str:
    def e(text: object) -> str:
        return html.escape(str(text))

    ok = {True: "agrees", False: "FAILED", None: "not checked"}
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>uaprobe review</title>',
             "<style>body{font-family:sans-serif;max-width:72em;margin:2em auto}td,th{text-align:left;padding:"
             ".15em .6em;vertical-align:top}code,pre{font-size:.85em}.FAILED{color:#b00}.agrees{color:#070}"
             "</style></head><body>", "<h1>uaprobe review</h1>",
             f'<p class="{"agrees" if review.passed else "FAILED"}"><strong>{e(review.verdict)}</strong></p>',
             "<h2>Machine and commit</h2><table>"]
    parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in review.machine.items()]
    parts += [f"<tr><th>commit</th><td><code>{e(review.commit)}</code></td></tr></table>", "<h2>Checks</h2><table>"]
    parts += [f'<tr><th>{e(c.name)}</th><td class="{ok[c.passed]}">{ok[c.passed]}</td><td>{e(c.summary)}</td></tr>'
              for c in review.checks]
    parts.append("</table>")
    for c in review.checks:
        if c.details:
            parts.append(f"<h3>{e(c.name)}</h3><pre>{e(chr(10).join(c.details))}</pre>")
    parts.append("<h2>Every output dvc.lock records</h2><table><tr><th>output</th><th>md5 (dvc.lock)</th>"
                 "<th>checked in</th><th>found</th></tr>")
    parts += [f'<tr><td><code>{e(p)}</code></td><td><code>{e(m)}</code></td><td>{e(w)}</td>'
              f'<td class="{"agrees" if f == "agrees" else "FAILED"}">{e(f)}</td></tr>' for p, m, w, f in review.outputs]
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


def run(root: Path, *, remote: str | None, out: Path, fingerprint: Callable[[], int],
        verify_kwargs: dict[str, Any]) -> int:
    """``uaprobe review``: every check, one line each and the verdict; ``out`` written; 0 only if all agree."""
    from uaprobe.atomic import check_writable, write_file
    from uaprobe.repro.numerics import machine_record

    verify.check_repo(root)
    check_writable(out.parent, output=out, fix="pass --out a path where the review page can be written")
    with verify.open_repo(root) as (repo, _notes):
        remote = remote or repo.config["core"].get("remote") or None
        uncached = verify.uncached_outputs(repo, root)
    record = machine_record()
    machine = {"CPU": f"{record.get('cpu_model')} ({record.get('cpu_vendor')}, {record.get('logical_cpus')} logical "
               "CPUs)", "system": platform.platform(), "Python": platform.python_version()}
    review = Review(machine, commit(root))
    review.checks.append(pull(root, str(Path(sys.executable).with_name("dvc"))))
    review.checks.append(fingerprint_check(fingerprint))
    checks, found = verify_check(root, remote, **verify_kwargs)
    review.checks += checks
    stages = read_lock(root)
    review.checks.append(rerender(root, stages))
    checked_remote = remote if not any(c.name == "remote" for c in review.checks) else None
    review.outputs = output_rows(stages, found, uncached, checked_remote)
    write_file(out, _html(review))
    for c in review.checks:
        print(f"{c.name}: {'agrees' if c.passed else 'FAILED' if c.passed is False else 'not checked'}: {c.summary}")
    print(review.verdict)
    print(f"wrote {out}")
    return 0 if review.passed else 1


__all__ = ["Check", "PAGE", "Review", "run"]
