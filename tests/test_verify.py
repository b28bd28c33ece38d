"""`uaprobe verify` re-reads every byte: a flipped byte that DVC's size/mtime state lets through, a damaged
cache object that `dvc checkout` copies, a damaged remote object that `dvc pull` copies -- each named with the
file and the command that repairs it, and the repair shown to work. Also a damaged or held dvc.lock.

The project is a small DVC project of its own (one file output, one directory output, a `cache: false` metrics
file, a local-directory remote), built once; each test works on a copy. Each repair is checked by running the
commands verify prints, under copy, symlink and hardlink caches.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline_project import BIN, env, http_server

STAGE = """stages:
  make:
    cmd: python make.py
    deps: [make.py]
    outs: [f.bin, d]
    metrics: [{m.json: {cache: false}}]
"""
# f.bin is larger than fsspec's HTTP block (5 MiB): read in ranges unless streamed
MAKE = """import os, random
rng = random.Random(0)
os.makedirs("d/sub", exist_ok=True)
open("f.bin", "wb").write(rng.randbytes(6_000_000))
open("d/a.json", "w").write('{"x": 1}')
open("d/sub/b.txt", "w").write("hello")
open("m.json", "w").write('{"r": 0.5}')
"""


def sh(*cmd: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), cwd=cwd, env=env(), capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def dvc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh(str(BIN / "dvc"), *args, cwd=cwd, check=check)


def verify(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return sh(sys.executable, "-m", "uaprobe.cli", "verify", *args, cwd=cwd, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("verify")
    root = base / "project"
    root.mkdir()
    (root / "dvc.yaml").write_text(STAGE)
    (root / "make.py").write_text(MAKE)
    sh("git", "init", "-q", "-b", "main", cwd=root)
    dvc("init", "-q", cwd=root)
    dvc("remote", "add", "-d", "store", "../remote", cwd=root)
    dvc("repro", "-q", cwd=root)
    dvc("push", "-q", cwd=root)
    sh("git", "add", "-A", cwd=root)
    sh("git", "commit", "-q", "-m", "outputs", cwd=root)
    return base


@pytest.fixture()
def project(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built, tmp_path / "w", symlinks=True)
    root = tmp_path / "w" / "project"
    assert "up to date" in dvc("status", cwd=root).stdout  # DVC's state learns the copies' inodes and mtimes
    return root


def recorded(root: Path, path: str) -> str:
    outs = yaml.safe_load((root / "dvc.lock").read_text())["stages"]["make"]["outs"]
    return next(o["md5"] for o in outs if o["path"] == path)


def flip_keeping_mtime(path: Path, at: int = 5) -> None:
    """One byte changed, size and modification time as before: what DVC's state cannot see."""
    st = path.stat()
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def cache_object(root: Path, md5: str) -> Path:
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def test_a_clean_project_passes(project: Path) -> None:
    ok = verify("--cache", "--remote", "store", cwd=project)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "every byte re-read" in ok.stdout and ok.stderr == ""  # no progress bar off a terminal


def test_a_flipped_byte_with_its_mtime_kept_is_named_and_repaired(project: Path) -> None:
    """(A file of a directory output: the read-only and link-cache tests.)"""
    flip_keeping_mtime(project / "f.bin", at=1)
    assert "up to date" in dvc("status", cwd=project).stdout  # DVC trusts size and mtime
    bad = verify(cwd=project)
    assert bad.returncode == 1, bad.stdout
    assert repairs(bad.stdout, "f.bin") == [["dvc checkout --relink --force f.bin"]], bad.stdout
    dvc("checkout", "--relink", "--force", "f.bin", cwd=project)
    ok = verify(cwd=project)
    assert ok.returncode == 0, ok.stdout


def repairs(stdout: str, path: str) -> list[list[str]]:
    """The ways the repair printed under ``path`` offers, each as its commands in order (a removal of damaged
    objects it opens with belongs to every way)."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{path}: "))
    ways = [[c for c in re.findall(r"`([^`]+)`", way) if c.split()[0] in ("dvc", "git", "rm") and c != "git diff dvc.lock"]
            for way in lines[at + 1].strip().removeprefix("repair: ").split("; or ")]
    removal = [c for c in ways[0] if c.startswith("rm ")]
    return [removal + [c for c in way if not c.startswith("rm ")] for way in ways]


def edit_in_place(path: Path) -> None:
    """What a script or `h5py.File(..., "r+")` does: write into the existing file (through a link, into the cache)."""
    with open(path, "r+b") as fh:
        fh.seek(3)
        fh.write(b"edited")


def damage_cache(root: Path, path: str) -> None:
    obj = cache_object(root, recorded(root, path))
    obj.chmod(0o644)
    flip_keeping_mtime(obj)


# under a link cache a damaged cache object is a damaged workspace file: an edit in place covers both
@pytest.mark.parametrize("cache_type, damage, target", [("copy", "edit", "f.bin"), ("copy", "cache", "f.bin"),
                                                        ("copy", "missing", "f.bin"),
                                                        ("symlink", "edit", "d/sub/b.txt"),
                                                        ("symlink", "cache-missing", "f.bin"),
                                                        ("hardlink", "edit", "f.bin")])
def test_every_printed_repair_restores_the_bytes(project: Path, cache_type: str, damage: str, target: str) -> None:
    """Each way the repair offers, run as printed, gives back the recorded bytes in the workspace and the cache.
    With a link cache an edit in place damages the cache copy too, and verify says so."""
    if cache_type != "copy":
        dvc("config", "cache.type", cache_type, cwd=project)
        dvc("checkout", "--relink", cwd=project)
    good = (project / target).read_bytes()
    named = target.split("/")[0] if damage == "edit" else target
    for way in range(2):
        if damage == "edit":
            edit_in_place(project / target)
        elif damage == "missing":
            (project / target).unlink()
        elif damage == "cache-missing":
            cache_object(project, recorded(project, target)).unlink()
        else:
            damage_cache(project, target)
        if damage == "cache" and cache_type == "copy":
            (project / target).unlink()
            assert dvc("checkout", cwd=project).returncode == 0  # DVC copies its cache unchecked
        bad = verify("--cache", cwd=project)
        assert bad.returncode == 1, bad.stdout
        ways = repairs(bad.stdout, named)
        linked = cache_type != "copy"
        if damage == "edit":
            assert ("editing it in place changed the cache copy too" in bad.stdout) == linked, bad.stdout
            assert len(ways) == (2 if linked else 1), bad.stdout
        if way >= len(ways):
            break
        for command in ways[way]:
            sh("sh", "-c", command, cwd=project)
        ok = verify("--cache", cwd=project)
        assert ok.returncode == 0, f"{ways[way]}:\n{ok.stdout}"
        assert (project / target).read_bytes() == good


def test_a_pulled_clone_checks_cache_false_outputs_in_the_workspace_only(project: Path) -> None:
    """m.json (`cache: false`) lives in git: DVC neither pushes nor pulls it. A clone that pulled passes
    `--cache --remote`; an edit of m.json is named, with git's repair, which works."""
    clone = project.parent / "clone"
    sh("git", "clone", "-q", str(project), str(clone), cwd=project.parent)
    dvc("pull", cwd=clone)
    ok = verify("--cache", "--remote", "store", cwd=clone)
    assert ok.returncode == 0, ok.stdout
    (clone / "m.json").write_text('{"r": 0.6}')
    bad = verify("--cache", "--remote", "store", cwd=clone)
    assert bad.returncode == 1 and bad.stdout.count("m.json: ") == 1, bad.stdout
    assert "`cache: false` output" in bad.stdout and repairs(bad.stdout, "m.json")[0] == ["git checkout m.json"]
    sh("git", "checkout", "m.json", cwd=clone)
    assert verify("--cache", "--remote", "store", cwd=clone).returncode == 0


def test_an_http_remote_without_range_requests_is_streamed(project: Path) -> None:
    import hashlib

    remote = project.parent / "remote"
    with http_server(remote) as url:
        dvc("remote", "add", "--local", "web", url, cwd=project)
        ok = verify("--remote", "web", cwd=project)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        oid = hashlib.md5(b'{"x": 1}').hexdigest()
        (remote / "files" / "md5" / oid[:2] / oid[2:]).write_bytes(b'{"x": 2}')
        bad = verify("--remote", "web", cwd=project)
        assert bad.returncode == 1 and f"d/a.json: object on remote 'web' {url}/files/md5/{oid[:2]}/{oid[2:]}: damaged" \
            in bad.stdout, bad.stdout
    gone = verify("--remote", "web", cwd=project)
    assert gone.returncode == 2 and gone.stdout == "", gone.stdout
    assert gone.stderr.count("\n") == 1 and f"--remote web: {url} cannot be reached" in gone.stderr, gone.stderr


def test_every_command_finds_the_root_from_a_subdirectory(project: Path, tmp_path: Path) -> None:
    below = project / "d" / "sub"
    from_root = verify(cwd=project)
    assert from_root.returncode == 0 and verify(cwd=below).stdout == from_root.stdout
    root_against = verify("--against", "HEAD", cwd=project)
    below_against = verify("--against", "HEAD", cwd=below)
    assert (below_against.returncode, below_against.stdout) == (root_against.returncode, root_against.stdout)
    diff = sh(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", cwd=below, check=False)
    assert diff.returncode == 2 and "paper/_output/paper.html at working tree: no rendered paper" in diff.stderr
    doc = sh(sys.executable, "-m", "uaprobe.cli", "schema-doc", "--check", cwd=below, check=False)
    assert f"{project / 'docs' / 'results.md'}: cannot be read" in doc.stderr, doc.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    bad = verify(cwd=outside)
    assert bad.returncode == 2 and "not a DVC repository (no .dvc directory in it or above it)" in bad.stderr
    assert "--repo" in bad.stderr


def _merge_conflict(root: Path, file: str, old: str, ours: str, theirs: str) -> None:
    """Two branches change ``old`` in ``file`` to ``ours`` and ``theirs``; `git merge` stops in a conflict."""
    text = (root / file).read_text()
    assert old in text
    sh("git", "checkout", "-q", "-b", "theirs", cwd=root)
    (root / file).write_text(text.replace(old, theirs))
    sh("git", "commit", "-q", "-am", "theirs", cwd=root)
    sh("git", "checkout", "-q", "main", cwd=root)
    (root / file).write_text(text.replace(old, ours))
    sh("git", "commit", "-q", "-am", "ours", cwd=root)
    assert sh("git", "merge", "-q", "theirs", cwd=root, check=False).returncode != 0


@pytest.mark.parametrize("file", ["dvc.lock", "params.yaml", "m.json"])
def test_a_merge_conflict_is_named_with_the_way_out(project: Path, file: str) -> None:
    if file == "m.json":  # a `cache: false` output, in git: a finding (exit 1), not a stop
        _merge_conflict(project, file, "0.5", "0.6", "0.7")
        bad = verify(cwd=project)
        assert bad.returncode == 1 and "m.json: an unresolved git merge (conflict markers from line 1" in bad.stdout
        assert "`git checkout --ours m.json`" in bad.stdout and "`git add m.json`" in bad.stdout, bad.stdout
        return
    if file == "params.yaml":
        (project / "params.yaml").write_text("make:\n  seed: 1\n")
        sh("git", "add", "params.yaml", cwd=project)
        sh("git", "commit", "-q", "-m", "params", cwd=project)
        _merge_conflict(project, file, "seed: 1", "seed: 2", "seed: 3")
    else:
        _merge_conflict(project, file, "size: 6000000", "size: 6000001", "size: 6000002")
    bad = verify(cwd=project)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert f"{file}: an unresolved git merge (conflict markers from line" in bad.stderr
    assert f"`git checkout --ours {file}`" in bad.stderr and "`--theirs`" in bad.stderr
    assert "`dvc repro`" in bad.stderr and f"`git add {file}" in bad.stderr and "damaged" not in bad.stderr
    sh("git", "checkout", "--ours", file, cwd=project)  # the way out, as printed
    assert verify(cwd=project).returncode in (0, 1)  # ... and verify reads the checkout again


def test_a_read_only_checkout_is_verified_without_dvc_lock(project: Path, tmpfs) -> None:  # noqa: ANN001
    """An unpacked archive on a read-only volume: no .dvc/tmp, nothing writable. Every byte is still re-read."""
    from conftest import remount_read_only

    volume = tmpfs("volume", "64m")
    shutil.copytree(project.parent, volume / "w", symlinks=True,
                    ignore=lambda d, names: ["tmp"] if d.endswith(".dvc") else [])
    root = volume / "w" / "project"
    flip_keeping_mtime(root / "d" / "a.json")
    remount_read_only(volume)
    bad = verify("--cache", "--remote", "store", cwd=root)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert bad.stdout.startswith("note: this checkout is read-only") and "other bytes: d/a.json" in bad.stdout
    diff = sh(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD", cwd=root, check=False)
    assert diff.returncode == 2 and "point --out at a writable path" in diff.stderr, diff.stderr


def test_a_damaged_remote_object_is_named_and_verify_true_stops_the_pull(project: Path) -> None:
    import hashlib

    oid = hashlib.md5(b'{"x": 1}').hexdigest()
    remote_obj = project.parent / "remote" / "files" / "md5" / oid[:2] / oid[2:]
    remote_obj.chmod(0o644)
    remote_obj.write_bytes(b'{"x": 2}')  # one digit
    bad = verify("--remote", "store", cwd=project)
    assert bad.returncode == 1
    assert f"d/a.json: object on remote 'store' {remote_obj}: damaged" in bad.stdout, bad.stdout
    assert "`dvc push -r store d`" in bad.stdout
    # the reviewer's path: a clone pulls the damaged copy; `dvc pull` says nothing, verify does
    clone = project.parent / "clone"
    sh("git", "clone", "-q", str(project), str(clone), cwd=project.parent)
    assert dvc("pull", cwd=clone).returncode == 0
    assert "up to date" in dvc("status", cwd=clone).stdout
    pulled = verify(cwd=clone)
    assert pulled.returncode == 1 and "other bytes: d/a.json" in pulled.stdout, pulled.stdout
    # with `verify = true` on the remote (as this project's .dvc/config sets it) the pull itself fails
    fresh = project.parent / "fresh"
    sh("git", "clone", "-q", str(project), str(fresh), cwd=project.parent)
    dvc("remote", "modify", "--local", "store", "verify", "true", cwd=fresh)
    assert dvc("pull", cwd=fresh, check=False).returncode != 0
    # the repair: delete the damaged object and the directory's listing, push the good bytes again
    listing_obj = project.parent / "remote" / "files" / "md5" / recorded(project, "d")[:2] / recorded(project, "d")[2:]
    assert f"delete '{remote_obj}' '{listing_obj}' from the remote" in bad.stdout, bad.stdout
    remote_obj.unlink(missing_ok=True)
    listing_obj.unlink()
    dvc("push", "-r", "store", "d", cwd=project)
    assert verify("--remote", "store", cwd=project).returncode == 0


def test_a_wrong_md5_in_dvc_lock_says_what_checkout_would_do(project: Path) -> None:
    lock = project / "dvc.lock"
    lock.write_text(lock.read_text().replace(recorded(project, "f.bin"), "deadbeef" * 4))
    bad = verify(cwd=project)
    assert bad.returncode == 1
    assert "f.bin:" in bad.stdout and "`dvc checkout` would delete this file" in bad.stdout, bad.stdout
    assert repairs(bad.stdout, "f.bin")[0] == ["git checkout dvc.lock"], bad.stdout
    sh("git", "checkout", "dvc.lock", cwd=project)
    assert verify(cwd=project).returncode == 0


@pytest.mark.parametrize("cut", ["mid-line", "at-a-line"])
def test_a_truncated_dvc_lock_is_named_as_damaged(project: Path, cut: str) -> None:
    lock = project / "dvc.lock"
    data = lock.read_bytes()
    half = len(data) // 2
    lock.write_bytes(data[:half] if cut == "mid-line" else data[:data.rindex(b"\n", 0, half) + 1])
    bad = verify(cwd=project)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "dvc.lock: damaged" in bad.stderr and "`git checkout dvc.lock`" in bad.stderr
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1


def test_a_held_lock_says_wait(project: Path) -> None:
    from dvc.repo import Repo

    with Repo(str(project)) as repo, repo.lock:
        held = verify(cwd=project)
    assert held.returncode == 2
    assert "another DVC process holds this repository's lock" in held.stderr and "Wait for it" in held.stderr
    assert "check dvc.yaml" not in held.stderr


def test_an_unknown_remote_is_one_message(project: Path) -> None:
    bad = verify("--remote", "nowhere", cwd=project)
    assert bad.returncode == 2 and "--remote nowhere" in bad.stderr and "dvc remote list" in bad.stderr


def test_results_computed_with_other_settings_than_dvc_lock_records(synthetic_project: Path) -> None:
    """The race DVC cannot see: the results record the seed they were computed with, dvc.lock another one."""
    from uaprobe.analysis.run.documents import settings
    from uaprobe.config import analysis_from_mapping
    from uaprobe.repro.lockfile import read_lock
    from uaprobe.repro.verify import settings_mismatches

    root = synthetic_project
    analysis = yaml.safe_load((root / "params.yaml").read_text())["analysis"]
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    model = sorted(p.name for p in (root / "results/models").iterdir())[0]
    stage = lock["stages"]["analyze"]
    stage["outs"] = [{"path": f"results/models/{model}", "hash": "md5", "md5": "0" * 32 + ".dir"}]
    stage["params"] = {"params.yaml": {"analysis": analysis}}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    expected = lambda recorded: settings(analysis_from_mapping(recorded))  # noqa: E731 - as the command passes it
    assert settings_mismatches(root, read_lock(root), expected) == []
    stage["params"]["params.yaml"]["analysis"] = {**analysis, "seed": analysis["seed"] + 4201}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    problems = settings_mismatches(root, read_lock(root), expected)
    assert problems and all(p.path.startswith(f"results/models/{model}/") for p in problems)
    assert f"analysis.seed={analysis['seed']}" in problems[0].what
    assert f"analysis.seed={analysis['seed'] + 4201}" in problems[0].what
    assert problems[0].repair.startswith("rerun it: `dvc repro -f -s analyze`")


def test_the_extraction_refuses_to_recompute_what_a_failed_pull_left_out(project: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`dvc repro --pull` with the remote unreachable would run the stage: it stops with the remote and the fix,
    unless the parameters or inputs changed (a real recomputation) or UAPROBE_RECOMPUTE=1 asks for one."""
    from uaprobe.errors import UAProbeError
    from uaprobe.repro.lockfile import RECOMPUTE, check_recompute

    monkeypatch.delenv(RECOMPUTE, raising=False)
    (project / "params.yaml").write_text("make: {seed: 1}\n")
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    lock["stages"]["make"]["params"] = {"params.yaml": {"make": {"seed": 1}}}
    (project / "dvc.lock").write_text(yaml.safe_dump(lock))
    check_recompute(project, "make", pulling=True)  # everything is in the cache: nothing to refuse
    shutil.rmtree(project / ".dvc" / "cache")
    with pytest.raises(UAProbeError) as refused:
        check_recompute(project, "make", pulling=True)
    message = str(refused.value)
    assert "'store'" in message and "`dvc pull`" in message and "`dvc repro make` (without --pull)" in message
    check_recompute(project, "make", pulling=False)  # a plain `dvc repro`: the author recomputes
    monkeypatch.setenv(RECOMPUTE, "1")
    check_recompute(project, "make", pulling=True)
    monkeypatch.delenv(RECOMPUTE)
    (project / "params.yaml").write_text("make: {seed: 2}\n")  # a changed parameter: a real recomputation
    check_recompute(project, "make", pulling=True)
    (project / "params.yaml").write_text("make: {seed: 1}\n")
    (project / "make.py").write_text(MAKE + "\n# changed\n")  # a changed input: the same
    check_recompute(project, "make", pulling=True)


def test_a_pulling_invocation_is_read_from_the_parent_processes(tmp_path: Path) -> None:
    """`dvc repro --pull` two processes up (dvc, then the stage's shell) is found; a plain repro is not."""
    import subprocess
    import sys

    probe = ("import sys; sys.path[:0] = [sys.argv[1]]; from uaprobe.repro.lockfile import pulling_invocation; "
             "print(pulling_invocation())")
    src = str(Path(__file__).resolve().parents[1] / "src")
    for args, expected in ((["repro", "--pull"], "True"), (["repro"], "False"), (["exp", "run", "--pull"], "True")):
        # a parent whose argv holds the words, running a shell, running the probe (as dvc runs stages/run.sh)
        script = f"import subprocess, sys; subprocess.run(['sh', '-c', 'exec \"$0\" -c \"$1\" \"$2\"', sys.executable, {probe!r}, {src!r}])"
        out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, (args, out.stdout, out.stderr)


FRESH_STAGE = """stages:
  numbers:
    cmd: python make_numbers.py
    deps: [make_numbers.py]
    params: [scale]
    outs: [results/models, paper/_output/paper.html]
    metrics: [{metrics/m.json: {cache: false}}]
"""
FRESH_MAKE = """import json, os, yaml
scale = yaml.safe_load(open("params.yaml"))["scale"]
os.makedirs("results/models/m", exist_ok=True); os.makedirs("metrics", exist_ok=True)
os.makedirs("paper/_output", exist_ok=True)
json.dump({"r": 0.5 * scale}, open("results/models/m/layerwise.json", "w"))
json.dump({"r": 0.25 * scale}, open("metrics/m.json", "w"))
open("paper/_output/paper.html", "w").write("<html>paper</html>")
"""


def test_against_and_paper_diff_on_a_fresh_clone_without_cache(tmp_path: Path) -> None:
    """What git holds is compared; the DVC outputs the empty cache cannot give are named with the fetch command,
    not an error (issue: both stopped with an error)."""
    author = tmp_path / "author"
    author.mkdir()
    (author / "dvc.yaml").write_text(FRESH_STAGE)
    (author / "make_numbers.py").write_text(FRESH_MAKE)
    (author / "params.yaml").write_text("scale: 1\n")
    sh("git", "init", "-q", "-b", "main", cwd=author)
    dvc("init", "-q", cwd=author)
    dvc("repro", "-q", cwd=author)
    sh("git", "add", "-A", cwd=author)
    sh("git", "commit", "-q", "-m", "scale 1", cwd=author)
    (author / "params.yaml").write_text("scale: 2\n")
    dvc("repro", "-q", cwd=author)
    sh("git", "add", "-A", cwd=author)
    sh("git", "commit", "-q", "-m", "scale 2", cwd=author)
    clone = tmp_path / "clone"
    sh("git", "clone", "-q", str(author), str(clone), cwd=tmp_path)  # no cache, no remote
    against = sh(sys.executable, "-m", "uaprobe.cli", "verify", "--against", "HEAD~1", cwd=clone, check=False)
    assert against.returncode == 1, against.stdout + against.stderr  # metrics/m.json differs: compared from git
    assert "FAIL  metrics/m.json" in against.stdout and "Traceback" not in against.stderr
    assert "not in the DVC cache" in against.stdout and "results/models" in against.stdout, against.stdout
    assert "`dvc pull`" in against.stdout, against.stdout
    same = sh(sys.executable, "-m", "uaprobe.cli", "verify", "--against", "HEAD", cwd=clone, check=False)
    assert same.returncode == 0 and "1 of 1 files within tolerance" in same.stdout, same.stdout
    assert "not compared" in same.stdout
    diff = sh(sys.executable, "-m", "uaprobe.cli", "paper-diff", "HEAD~1", cwd=clone, check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "not compared: paper/_output/paper.html at working tree" in diff.stdout and "`dvc pull`" in diff.stdout


def test_verify_true_on_the_remote_does_not_check_a_directory_listing(project: Path) -> None:
    """What docs/reproducibility.md says: another commit's listing in place of a directory's is pulled without a
    word under `verify = true`; verify names the directory, and `--remote` the listing."""
    remote = project.parent / "remote"
    before = recorded(project, "d")
    sh("git", "tag", "before", cwd=project)
    (project / "make.py").write_text(MAKE.replace('{"x": 1}', '{"x": 3}'))
    dvc("repro", "-q", cwd=project)
    dvc("push", "-q", cwd=project)
    sh("git", "commit", "-q", "-am", "other listing", cwd=project)
    after = recorded(project, "d")
    shutil.copyfile(remote / "files" / "md5" / after[:2] / after[2:], remote / "files" / "md5" / before[:2] / before[2:])
    clone = project.parent / "clone"
    sh("git", "clone", "-q", "--branch", "before", str(project), str(clone), cwd=project.parent)
    dvc("remote", "modify", "--local", "store", "verify", "true", cwd=clone)
    assert dvc("pull", cwd=clone).returncode == 0  # DVC re-hashes the files it downloads, not the listing
    assert (clone / "d" / "a.json").read_text() == '{"x": 3}'
    bad = verify("--remote", "store", cwd=clone)
    assert bad.returncode == 1 and f"d: its bytes hash to {after}" in bad.stdout, bad.stdout
    assert f"d: object on remote 'store' {remote / 'files' / 'md5' / before[:2] / before[2:]}: damaged listing" \
        in bad.stdout, bad.stdout


def test_conflict_markers_are_a_merge_not_damage(tmp_path: Path) -> None:
    from uaprobe.config import load_params
    from uaprobe.conflicts import MergeConflict, marker_line
    from uaprobe.repro.lockfile import parse_lock
    from uaprobe.repro.paperdiff import parse

    merged = b"a: 1\n<<<<<<< HEAD\nb: 2\n=======\nb: 3\n>>>>>>> theirs\n"
    assert marker_line(merged) == 2
    assert marker_line(b"Title\n=======\n") is None  # an underline, no conflict
    assert marker_line(b"<<<<<<< HEAD\nstill being written\n") is None  # no end marker: not git's
    (tmp_path / "params.yaml").write_bytes(merged)
    with pytest.raises(MergeConflict, match=r"params.yaml: an unresolved git merge \(conflict markers from line 2\)"):
        load_params(tmp_path / "params.yaml")
    with pytest.raises(MergeConflict, match=r"`git checkout --ours dvc.lock` \(or `--theirs`\), then `dvc repro`"):
        parse_lock(tmp_path, merged)
    with pytest.raises(MergeConflict, match=r"^params.yaml at HEAD: an unresolved git merge.*`git add params.yaml"):
        parse(merged, "params.yaml", "HEAD")
