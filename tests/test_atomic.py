"""The one atomic-write helper (:mod:`uaprobe.atomic`) and the stage wrapper (:mod:`uaprobe.stage`).

Faults are injected where the operating system reports them (a write, an fsync, a rename, a
temporary file that cannot be created); a real full disk and a real read-only directory need a
tmpfs mount, so those tests run as root only (as in CI) and are skipped otherwise with the reason.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import remount_read_only
from uaprobe import atomic
from uaprobe.atomic import OutputError, check_writable, replace_directory, write_file, write_files
from uaprobe.errors import UAProbeError
from uaprobe.stage import EXIT_BUG, EXIT_CLOSED_PIPE, EXIT_ERROR, foreseeable_message, stage_main


def listing(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (hidden ones included) with its bytes."""
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def fail_on_call(monkeypatch: pytest.MonkeyPatch, target: Any, name: str, number: int, *,
                 only: set[int] | None = None) -> list[int]:
    """Make ``target.name`` raise OSError(number) on the calls numbered in ``only`` (1-based; default every call)."""
    original = getattr(target, name)
    calls = [0]

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if only is None or calls[0] in only:
            raise OSError(number, os.strerror(number))
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, failing)
    return calls


def test_write_file_writes_the_bytes_with_a_plain_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = write_file(tmp_path / "sub" / "a.json", "{\n  \"x\": 1\n}\n")
    assert path.read_bytes() == b'{\n  "x": 1\n}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    write_file(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.json"]


@pytest.mark.parametrize("where", ["fsync", "write", "replace"])
def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 where: str) -> None:
    path = tmp_path / "a.json"
    path.write_text("earlier\n")
    number = {"fsync": errno.ENOSPC, "write": errno.EFBIG, "replace": errno.EACCES}[where]
    if where == "write":
        monkeypatch.setattr(atomic, "open", lambda *a, **k: _FailingFile(open(*a, **k), number), raising=False)
    else:
        fail_on_call(monkeypatch, atomic.os, where, number)
    with pytest.raises(OutputError) as info:
        write_file(path, "new\n")
    message = str(info.value)
    assert message.startswith(f"{path}: ") and os.strerror(number) in message
    assert "earlier output is untouched" in message
    assert listing(tmp_path) == {"a.json": b"earlier\n"}


class _FailingFile:
    """A file whose writes fail like a full disk or a file-size limit (the real file is closed on exit)."""

    def __init__(self, fh: Any, number: int) -> None:
        self.fh, self.number = fh, number

    def __enter__(self) -> "_FailingFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.fh.close()

    def write(self, data: bytes) -> int:
        self.fh.write(data[: len(data) // 2])
        raise OSError(self.number, os.strerror(self.number))


def test_write_files_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third of four files fails to sync: no output changes, no temporary file stays."""
    for name in "abcd":
        (tmp_path / f"{name}.txt").write_text(f"old {name}\n")
    before = listing(tmp_path)
    fail_on_call(monkeypatch, atomic.os, "fsync", errno.ENOSPC, only={3})
    with pytest.raises(OutputError, match=r"c\.txt: writing failed \(No space left on device"):
        write_files({tmp_path / f"{name}.txt": f"new {name}\n" for name in "abcd"})
    assert listing(tmp_path) == before
    monkeypatch.undo()
    assert write_files({tmp_path / f"{name}.txt": f"new {name}\n" for name in "abcd"}) == [
        tmp_path / f"{name}.txt" for name in "abcd"]
    assert listing(tmp_path) == {f"{name}.txt": f"new {name}\n".encode() for name in "abcd"}


def test_a_bug_in_the_writer_passes_through_and_still_cleans_up(tmp_path: Path) -> None:
    path = tmp_path / "figure.png"
    with pytest.raises(ZeroDivisionError):
        with atomic.atomic_path(path) as tmp:
            tmp.write_bytes(b"half")
            1 / 0  # noqa: B018 - the writer's own bug
    assert listing(tmp_path) == {}


def test_check_writable_names_the_output_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_writable(tmp_path / "new" / "dir") == tmp_path / "new" / "dir"
    assert list(tmp_path.iterdir()) == []  # a directory still to be made is not made by the check
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"out\.json: cannot create the output directory .*file/sub \(Not a directory"):
        check_writable(tmp_path / "file" / "sub", output="out.json")
    fail_on_call(monkeypatch, atomic.tempfile, "mkstemp", errno.EROFS)
    with pytest.raises(OutputError, match=r"the output directory .* is not writable \(Read-only file system.*--results"):
        check_writable(tmp_path, fix="point --results elsewhere")


def test_replace_directory_swaps_whole_and_restores_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    target, built = tmp_path / "figures", tmp_path / ".figures-build"
    target.mkdir()
    (target / "old.png").write_bytes(b"old")
    built.mkdir()
    (built / "new.png").write_bytes(b"new")
    fail_on_call(monkeypatch, atomic.os, "replace", errno.EIO, only={2})  # the old one moves aside, the new one fails
    with pytest.raises(OutputError, match="moving the finished directory into place failed"):
        replace_directory(built, target)
    assert listing(target) == {"old.png": b"old"}
    monkeypatch.undo()
    replace_directory(built, target)
    assert listing(tmp_path) == {"figures/new.png": b"new"}


# ---------------------------------------------------------------------------------------------
# Real faults: a full tmpfs and a read-only tmpfs (root only)
# ---------------------------------------------------------------------------------------------

def test_a_real_full_disk_leaves_every_earlier_file(tmpfs) -> None:
    disk = tmpfs("full", "64k")
    (disk / "a.bin").write_bytes(b"a" * 1000)
    (disk / "b.bin").write_bytes(b"b" * 1000)
    before = listing(disk)
    with pytest.raises(OutputError, match=r"b\.bin: writing failed \(No space left on device"):
        write_files({disk / "a.bin": b"A" * 10, disk / "b.bin": b"B" * 200_000})
    assert listing(disk) == before


def test_a_real_read_only_directory_is_found_by_the_check(tmpfs) -> None:
    directory = tmpfs("ro", "64k")
    (directory / "a.json").write_text("x")
    remount_read_only(directory)
    with pytest.raises(OutputError, match=r"is not writable \(Read-only file system"):
        check_writable(directory)
    with pytest.raises(OutputError, match=r"Read-only file system"):
        write_file(directory / "a.json", "y")
    assert listing(directory) == {"a.json": b"x"}


# ---------------------------------------------------------------------------------------------
# The stage wrapper
# ---------------------------------------------------------------------------------------------

def test_foreseeable_failures_are_one_message_and_exit_2(caplog: pytest.LogCaptureFixture,
                                                         capsys: pytest.CaptureFixture) -> None:
    def bad_input(_argv: Any) -> int:
        raise UAProbeError("data/x.h5: dataset 'pooled/mean' is missing; rerun")

    def unreadable(_argv: Any) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", "params.yaml")

    with caplog.at_level(logging.ERROR):
        assert stage_main("analyze", bad_input, ["--model", "m"]) == EXIT_ERROR
        assert stage_main("analyze", unreadable, []) == EXIT_ERROR
    assert [r.getMessage() for r in caplog.records] == [
        "data/x.h5: dataset 'pooled/mean' is missing; rerun",
        foreseeable_message(PermissionError(errno.EACCES, "Permission denied", "params.yaml")),
    ]
    assert caplog.records[1].getMessage().startswith("params.yaml: Permission denied [errno 13]")
    assert "Traceback" not in capsys.readouterr().err


def test_a_bug_names_the_stage_and_its_arguments_then_shows_the_traceback(capsys: pytest.CaptureFixture) -> None:
    def buggy(_argv: Any) -> int:
        raise KeyError("poolings")

    assert stage_main("compare", buggy, ["--params", "my params.yaml"]) == EXIT_BUG
    err = capsys.readouterr().err
    first, rest = err.split("\n", 1)
    assert first == ("compare: unexpected KeyError with arguments --params 'my params.yaml'; this is a bug in "
                     "uaprobe, please report it with the traceback below")
    assert rest.startswith("Traceback (most recent call last):") and "KeyError: 'poolings'" in rest


def test_running_out_of_memory_is_one_message_not_a_bug_report(caplog: pytest.LogCaptureFixture,
                                                                 capsys: pytest.CaptureFixture) -> None:
    def allocates(_argv: Any) -> int:
        raise MemoryError("Unable to allocate 149. GiB for an array with shape (1000000000, 20)")

    with caplog.at_level(logging.ERROR):
        assert stage_main("analyze", allocates, []) == EXIT_ERROR
    assert caplog.records[-1].getMessage().startswith("out of memory (MemoryError)")
    assert "bug" not in capsys.readouterr().err


def test_an_os_error_without_a_file_is_a_bug_not_a_guess(capsys: pytest.CaptureFixture) -> None:
    def fails(_argv: Any) -> int:
        raise OSError(errno.EIO, "Input/output error")

    assert stage_main("figures", fails, []) == EXIT_BUG
    assert "Traceback" in capsys.readouterr().err


def _closed_reader(args: list[str], **kwargs: Any) -> tuple[int, str]:
    """Run ``args`` with standard output a pipe its reader closes at once (a pager quit early):
    (exit code, standard error)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


def test_a_closed_pipe_ends_quietly_as_git_does(tmp_path: Path) -> None:
    """``uaprobe ... | head``: no message, no traceback, exit 141 -- for the wrapper every stage and every
    ``uaprobe`` command ends through, and for a real command that prints more than a pipe holds."""
    script = tmp_path / "talks.py"
    script.write_text("import sys\nfrom uaprobe.stage import stage_main\n"
                      "sys.exit(stage_main('figures', lambda _argv: print('x' * 200_000), []))\n")
    assert _closed_reader([sys.executable, str(script)]) == (EXIT_CLOSED_PIPE, "")

    import h5py

    h5 = tmp_path / "many.h5"
    with h5py.File(h5, "w") as fh:
        for i in range(3000):
            fh.attrs[f"key_{i:04d}"] = "v" * 40
    assert _closed_reader([sys.executable, "-m", "uaprobe.cli", "provenance", str(h5)]) == (EXIT_CLOSED_PIPE, "")


def test_a_broken_pipe_that_is_not_standard_output_is_still_a_bug(capsys: pytest.CaptureFixture) -> None:
    def writes_to_a_closed_pipe(_argv: Any) -> int:
        read, write = os.pipe()
        os.close(read)
        try:
            os.write(write, b"x")
        finally:
            os.close(write)
        return 0

    assert stage_main("extract", writes_to_a_closed_pipe, []) == EXIT_BUG
    assert "unexpected BrokenPipeError" in capsys.readouterr().err


def test_every_stage_ends_through_the_one_wrapper() -> None:
    """Each stage's ``__main__`` is ``run_stage(<its name>, main)``: no stage keeps its own copy."""
    stages = Path(__file__).resolve().parents[1] / "stages"
    for path in sorted(stages.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tail = text[text.rindex('if __name__ == "__main__":'):]
        assert tail.strip().splitlines()[1].strip() == f'run_stage("{path.stem}", main)', path


def test_interpreter_exit_code_and_stderr_of_a_stage_process(tmp_path: Path) -> None:
    """The wrapper as a process: a missing params file ends in one line and exit 2."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "stages" / "compare.py"),
                           "--params", str(tmp_path / "missing.yaml")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == EXIT_ERROR, proc.stderr
    assert "Traceback" not in proc.stderr and "missing.yaml" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
