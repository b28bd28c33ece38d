"""``uaprobe review`` (``make review``): the reviewer's whole check in one command, ``review.html`` and
``review.json``.

On a clone with the environment set up (``make review`` sets it up first) it runs, in order, and goes on after a
failure so that the page says everything:

1. ``dvc pull``: every output ``dvc.lock`` records, from the default remote;
2. the fingerprint: does this machine compute the bytes the repository records;
3. ``uaprobe verify --cache --remote <the default remote>``: every byte of the workspace, the cache and the remote
   against ``dvc.lock``;
4. the recomputation (:mod:`uaprobe.repro.recompute`): every stage but the extractions run again by its own
   command from the pulled extractions in a scratch copy, and the extractions from the models where they can be
   had (not with ``--no-extract``); every file each writes compared with ``dvc.lock``'s md5, and a file that differs
   named in numbers (:mod:`uaprobe.repro.recorded`).

``review.html`` holds the machine, the commit, every output ``dvc.lock`` records with its md5 and what became of it
(recomputed, same bytes / recomputed, differs: how / pulled and verified, not recomputed: why), and one verdict;
``review.json`` the same as a certificate (:mod:`uaprobe.repro.review_page`). Exit 0 only when every check agrees
and every recomputed output is the recorded bytes.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from uaprobe.errors import UAProbeError
from uaprobe.repro import recompute, recorded, review_page, verify
from uaprobe.repro.lockfile import LockedStage, read_lock
from uaprobe.repro.numdiff import DEFAULT_ATOL, DEFAULT_RTOL
from uaprobe.repro.review_record import Check, Review
from uaprobe.repro.stores import Unreachable

PAGE = "review.html"
CERTIFICATE = "review.json"


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


def _say(line: str) -> None:
    """One line of progress, on the terminal (or log) at once."""
    print(line, flush=True)


@contextlib.contextmanager
def scratch_dir(keep: bool) -> Iterator[Path]:
    """A new temporary directory, removed afterwards unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix="uaprobe-review-"))
    try:
        yield path
    finally:
        if keep:
            print(f"recompute: the scratch copy is kept at {path} (--keep)")
        else:
            shutil.rmtree(path, ignore_errors=True)


def recompute_check(root: Path, locked: dict[str, LockedStage], *, extract: bool, keep: bool, jobs: int,
                    skip: tuple[str, ...] = (), progress: Callable[[str], None] = _say) -> tuple[Check, list[recompute.StageRun],
                                                                      list[recorded.OutputRow]]:
    """Every stage again in a scratch copy; each output it writes against dvc.lock. ``skip``: files of the checkout
    not to copy (the review's own page and certificate)."""
    stages = recompute.pipeline(root)
    extractions = [s for s in stages if s.is_extraction]
    outputs = [o for s in stages for o in s.outs]
    plans = {s.name: recompute.extraction_plan(root, s) if extract else recompute.Plan(
        False, f"--no-extract: skipped on purpose (`uaprobe review` without it, or `dvc repro -f -s {s.name}`, "
               "recomputes it)") for s in extractions}
    rows: list[recorded.OutputRow] = []
    with scratch_dir(keep) as tmp, verify.open_repo(root) as (repo, _notes):
        cache = repo.cache.local
        read = recorded.recorded_reader(root, cache)
        files = recompute.source_files(root, [*outputs, *skip])
        pipeline = recompute.scratch_copy(root, tmp / "pipeline", files, [o for s in extractions for o in s.outs])
        jobs_ = [recompute.Job(s, pipeline, recompute.stage_env(pipeline)) for s in stages if not s.is_extraction]
        if any(p.recompute for p in plans.values()):
            extract_dir = recompute.scratch_copy(root, tmp / "extract", files)
            for s in extractions:
                if plans[s.name].recompute:  # on the CPU unless it was recorded on a GPU
                    cpu = {} if plans[s.name].gpu else {"CUDA_VISIBLE_DEVICES": ""}
                    jobs_.append(recompute.Job(s, extract_dir, recompute.stage_env(extract_dir, cpu)))
        progress(f"recompute: {len(jobs_)} stage(s) in {tmp}, {jobs} at a time")
        runs = recompute.run_jobs(jobs_, tmp / "logs", workers=jobs, progress=progress)
        for s in stages:
            lock = locked.get(s.name)
            for out in lock.outs if lock else ():
                run = runs.get(s.name)
                if run is None:
                    rows.append(recorded.OutputRow(out.path, out.md5, s.name, recorded.PULLED, plans[s.name].why))
                elif run.code != 0:
                    why = run.skipped or f"`{s.cmd}` exit {run.code}: " + " / ".join(run.tail[-3:])
                    rows.append(recorded.OutputRow(out.path, out.md5, s.name, recorded.FAILED, why))
                else:
                    tol = (DEFAULT_ATOL, DEFAULT_RTOL) if s.is_extraction and plans[s.name].gpu else (0.0, 0.0)
                    rows.append(recorded.compare_output(run.scratch, out, cache, read, atol=tol[0], rtol=tol[1]))
    unlocked = [s.name for s in stages if s.name not in locked]
    ran = [r for r in runs.values() if r.code is not None]
    failed = [r for r in runs.values() if r.code != 0]
    bad = [r for r in rows if not r.passed]
    details = [f"{r.stage.name}: " + (r.skipped or f"exit {r.code} in {r.seconds:.1f} s") for r in runs.values()]
    details += [f"{name}: not recomputed: {plan.why}" for name, plan in plans.items() if not plan.recompute]
    details += [f"{name}: dvc.lock records no outputs for it (`dvc repro` it, then commit dvc.lock)" for name in unlocked]
    for r in failed:
        details += [f"--- {r.stage.name} ---", *r.tail]
    for row in bad:
        details.append(f"{row.path}: {row.describe()}")
        for f in row.files:
            if f.difference is not None:
                details += [f"    {f.path}: {f.difference.summary}"] + [f"        {d}" for d in f.difference.details]
    if failed or bad or unlocked:
        summary = (f"{len(failed)} of {len(runs)} stage(s) did not complete; " if failed else "") + \
            (f"{len(bad)} of {len(rows)} output(s) differ from dvc.lock" if bad else "") + \
            (f"; stage(s) not in dvc.lock: {', '.join(unlocked)}" if unlocked else "")
        return Check("recompute", False, summary.strip("; "), details), ran, rows
    pulled = sum(r.status == recorded.PULLED for r in rows)
    return Check("recompute", True, f"{len(ran)} stage(s) recomputed: all {len(rows) - pulled} of their outputs "
                 "are the bytes dvc.lock records" + (f"; {pulled} pulled and verified, not recomputed" if pulled
                                                      else ""), details), ran, rows


def run(root: Path, *, remote: str | None, out: Path, fingerprint: Callable[[], int],
        verify_kwargs: dict[str, Any], extract: bool = True, keep: bool = False, jobs: int | None = None) -> int:
    """``uaprobe review``: every check, one line each and the verdict; ``out`` and the certificate beside it
    written; 0 only if all agree."""
    from uaprobe.atomic import check_writable, write_files
    from uaprobe.repro.numerics import machine_record

    verify.check_repo(root)
    if jobs is not None and jobs < 1:
        raise UAProbeError(f"--jobs {jobs}: give at least 1 (stages run at once when they do not depend on each other)")
    check_writable(out.parent, output=out, fix="pass --out a path where the review page can be written")
    started = datetime.now(UTC).isoformat(timespec="seconds")
    with verify.open_repo(root) as (repo, _notes):
        remote = remote or repo.config["core"].get("remote") or None
    record = machine_record()
    machine = {"CPU": f"{record.get('cpu_model')} ({record.get('cpu_vendor')}, {record.get('logical_cpus')} logical "
               "CPUs)", "system": platform.platform(), "Python": platform.python_version()}
    review = Review(machine, commit(root), started=started)

    def timed(step: Callable[[], Any]) -> Any:
        begun = time.perf_counter()
        result = step()
        checks = result[0] if isinstance(result, tuple) else result
        for check in checks if isinstance(checks, list) else [checks]:
            check.seconds = time.perf_counter() - begun
            print(f"{check.name}: {'agrees' if check.passed else 'FAILED' if check.passed is False else 'not checked'}"
                  f": {check.summary} ({check.seconds:.1f} s)", flush=True)
        return result

    review.checks.append(timed(lambda: pull(root, str(Path(sys.executable).with_name("dvc")))))
    review.checks.append(timed(lambda: fingerprint_check(fingerprint)))
    checks, _found = timed(lambda: verify_check(root, remote, **verify_kwargs))
    review.checks += checks
    locked = read_lock(root)
    certificate = out.with_suffix(".json")
    mine = tuple(os.path.relpath(p.resolve(), root.resolve()) for p in (out, certificate))
    check, review.stages, review.outputs = timed(lambda: recompute_check(
        root, locked, extract=extract, keep=keep, jobs=jobs or 1, skip=mine))
    review.checks.append(check)
    for row in review.outputs:
        if row.status != recorded.SAME:
            print(f"  {row.path}: {row.describe()}")
    write_files({out: review_page.html_page(review), certificate: review_page.certificate(review, root)})
    print(review.verdict)
    print(f"wrote {out} and {certificate}")
    return 0 if review.passed else 1


__all__ = ["CERTIFICATE", "Check", "PAGE", "Review", "recompute_check", "run"]
