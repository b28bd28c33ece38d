"""Faults during extraction: kills, interruptions, full or read-only disks, errors mid-run.

The contract: ``<out>`` holds the previous complete file, the new complete file, or nothing -- never
a half-written one. After an interruption (Ctrl-C, SIGTERM, SIGKILL) the partial file
``<out>.partial`` is kept and the next run resumes it from its last complete batch, ending with the
same bytes as an uninterrupted run. After an error (disk full, read-only output, NaN, bad input) the
partial file is removed: the fix changes the inputs or frees the disk, so it is not worth resuming.

Kills are deterministic: a small driver runs the stage's ``main()`` in a subprocess with one function
wrapped to SIGKILL its own process at a chosen point (while the partial file is created, half-way
through writing a batch, between batches, just before the finished file is moved into place). One
more run is killed from outside once the partial file shows progress, as a user or scheduler would.

Read-only and full disks are real when a tmpfs can be mounted (root with CAP_SYS_ADMIN, as in CI
containers): a read-only remount and a 256 KiB tmpfs. Running as root, ``chmod`` does not stop
writes, so without a mount the read-only case falls back to ``chmod`` only for non-root users; the
in-process variants (an ``OSError`` with errno 28 or 30 raised where HDF5 writes) always run.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from extract_stage import (STAGE, digest, files_in, one_torch_thread, real_dataset, run_stage, stage, stage_args,
                           subprocess_env, write_project)
from uaprobe import atomic
from uaprobe.extraction import extract, model_run, store
from uaprobe.config import load_params
from uaprobe.errors import NumericalError, UAProbeError
from uaprobe.extraction.store import partial_path, read_embeddings

KILL_AFTER = 5  # batches written before the deterministic kills


_single_thread = pytest.fixture(scope="module", autouse=True)(one_torch_thread)

# ---------------------------------------------------------------------------------------------
# Projects shared by the module: a 48-statement run in batches of 2, a "previous" file, references
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_neox: Path) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("faults")
    project = write_project(root / "project", tiny_neox, dataset=real_dataset(8, 3), batch_size=2)
    reference = run_stage(project, root / "reference" / "tiny.h5")
    older = write_project(root / "older", tiny_neox, dataset=real_dataset(7, 3), batch_size=2)
    previous = run_stage(older, root / "previous" / "tiny.h5")
    assert digest(previous) != digest(reference)
    return {"root": root, "project": project, "reference": reference, "previous": previous, "batches": 24}


def _place_previous(runs: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(runs["previous"], out)


def _assert_previous_or_nothing(out: Path, previous: Path | None) -> None:
    """The output path holds exactly the previous complete file, or nothing."""
    if previous is None:
        assert not out.exists()
    else:
        assert digest(out) == digest(previous), "the previous complete file was changed"
    leftovers = [n for n in files_in(out.parent) if n not in (out.name, partial_path(out).name)]
    assert leftovers == [], leftovers


# ---------------------------------------------------------------------------------------------
# SIGKILL at chosen points, in subprocesses running concurrently
# ---------------------------------------------------------------------------------------------

DRIVER = textwrap.dedent('''
    """Run the extract stage's main() once per kill point, each in a forked child that kills itself there.

    The parent only imports (no forward pass, no HDF5 file), so every child starts from a clean state
    and skips the slow imports; each child is a process of its own, with its own open files, and dies
    by a real SIGKILL (or SIGTERM). Usage: driver.py N STAGE_PATH RESULTS_DIR POINT=OUT ... -- STAGE_ARGS
    (STAGE_ARGS without --out).
    """
    import importlib.util, json, os, signal, sys
    import h5py
    import transformers.models.gpt_neox.modeling_gpt_neox  # noqa: F401 - warm the import for the children
    from uaprobe.extraction import model_run, store

    n, stage_path, results = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    split = sys.argv.index("--")
    jobs = [arg.split("=", 1) for arg in sys.argv[4:split]]
    args = sys.argv[split + 1:]
    spec = importlib.util.spec_from_file_location("stage_extract", stage_path)
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)

    def die(sig=signal.SIGKILL):
        os.kill(os.getpid(), sig)

    def counting(owner, name, when):
        """Wrap owner.name; call when(call_number) before each call."""
        original = getattr(owner, name)
        calls = [0]
        def wrapped(*a, **k):
            calls[0] += 1
            when(calls[0])
            return original(*a, **k)
        setattr(owner, name, wrapped)

    def arm(point):
        if point == "loading-model":
            model_run.load_model = lambda *a, **k: die()
        elif point == "creating-partial":
            counting(store, "_allocated", lambda c: c == n and die())
        elif point == "between-batches":
            counting(store.ExtractionWriter, "write", lambda c: c == n + 1 and die())
        elif point == "mid-batch":
            def half_write(c):
                if c == n + 1:  # the third array write of this batch never happens, nor its progress flags
                    counting(h5py.Dataset, "__setitem__", lambda k: k == 3 and die())
            counting(store.ExtractionWriter, "write", half_write)
        elif point in ("before-replace", "after-replace"):
            original = os.replace
            def replace(src, dst, *a, **k):
                if not str(src).endswith(".h5.partial"):
                    return original(src, dst, *a, **k)
                if point == "after-replace":
                    original(src, dst, *a, **k)
                die()
            os.replace = replace
        elif point == "sigterm-between-batches":
            counting(store.ExtractionWriter, "write", lambda c: c == n + 1 and die(signal.SIGTERM))
        else:
            raise SystemExit(f"unknown point {point}")

    status = {}
    for point, out in jobs:
        log = os.path.join(results, point + ".log")
        pid = os.fork()
        if pid == 0:
            with open(log, "w") as fh:
                os.dup2(fh.fileno(), 2)
            arm(point)
            os._exit(stage.main([*args, "--out", out]))
        _pid, code = os.waitpid(pid, 0)
        status[point] = -os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)
    print(json.dumps(status))
''')

KILL_POINTS = ["loading-model", "creating-partial", "mid-batch", "between-batches", "before-replace", "after-replace"]
RESUMES = {"mid-batch": KILL_AFTER, "between-batches": KILL_AFTER, "before-replace": 24,
           "sigterm-between-batches": KILL_AFTER}


@pytest.fixture(scope="module")
def killed(runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every kill point run once (one forked child each), with the state of its output right after."""
    root = runs["root"] / "killed"
    root.mkdir()
    driver = root / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    jobs = {}
    for point in [*KILL_POINTS, "sigterm-between-batches"]:
        jobs[point] = root / point / "tiny.h5"
        _place_previous(runs, jobs[point])
    args = stage_args(runs["project"], runs["root"] / "unused.h5")[:-2]  # without --out
    proc = subprocess.run([sys.executable, str(driver), str(KILL_AFTER), str(STAGE), str(root),
                           *[f"{point}={out}" for point, out in jobs.items()], "--", *args],
                          cwd=runs["project"], env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    results = {}
    for point, out in jobs.items():
        partial = partial_path(out)
        results[point] = {"out": out, "returncode": codes[point],
                          "stderr": (root / f"{point}.log").read_text(encoding="utf-8"),
                          # the state right after the kill (the rerun tests change it)
                          "out_digest": digest(out) if out.exists() else None, "files": files_in(out.parent),
                          "partial_done": _rows_done(partial) if partial.exists() else None}
    return results


@pytest.mark.parametrize("point", KILL_POINTS)
def test_sigkill_leaves_the_previous_file_untouched(killed: dict, runs: dict, point: str) -> None:
    result = killed[point]
    out = result["out"]
    assert result["returncode"] == -signal.SIGKILL, result["stderr"][-3000:]
    if point == "after-replace":  # the new file is complete once moved in
        assert result["out_digest"] == digest(runs["reference"]) and result["files"] == [out.name]
        return
    assert result["out_digest"] == digest(runs["previous"]), "the previous complete file was changed"
    assert set(result["files"]) <= {out.name, partial_path(out).name}, result["files"]
    if point == "loading-model":
        assert result["files"] == [out.name]
    if point in ("mid-batch", "between-batches"):
        assert result["partial_done"] == 2 * KILL_AFTER  # the killed batch's rows are not marked done


@pytest.mark.parametrize("point", [*KILL_POINTS, "sigterm-between-batches"])
def test_rerun_after_a_kill_resumes_and_gives_the_uninterrupted_bytes(killed: dict, runs: dict, point: str,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    out = killed[point]["out"]
    had_partial = partial_path(out).exists()
    with caplog.at_level(logging.INFO):
        run_stage(runs["project"], out)
    assert digest(out) == digest(runs["reference"])
    assert files_in(out.parent) == [out.name]
    if point in RESUMES:
        assert f"{RESUMES[point]} of {runs['batches']} batches already written" in caplog.text
    else:
        assert "resuming" not in caplog.text
    if point == "creating-partial":
        assert had_partial and "starting over" in caplog.text


def test_sigterm_keeps_a_clean_partial_file_and_says_how_to_resume(killed: dict, runs: dict) -> None:
    result = killed["sigterm-between-batches"]
    out = result["out"]
    assert result["returncode"] == 128 + signal.SIGTERM, result["stderr"][-3000:]
    assert f"interrupted: {2 * KILL_AFTER} of 48 statements are saved in {partial_path(out)}; rerun the same " \
           "command to resume" in result["stderr"]
    assert "stopped by SIGTERM" in result["stderr"] and "Traceback" not in result["stderr"]
    assert result["out_digest"] == digest(runs["previous"])
    assert result["partial_done"] == 2 * KILL_AFTER  # closed cleanly: readable


def test_sigkill_from_outside_mid_run_then_resume(runs: dict, tiny_neox: Path) -> None:
    """A user's `kill -9` at an arbitrary moment once progress is visible: no output, then a resumed run.

    Every run is the stage's own process (``__main__`` pins the numeric libraries, and the pins are
    part of the file's provenance, so a partial file is resumed only by a run with the same ones)."""
    project = write_project(runs["root"] / "external", tiny_neox, dataset=real_dataset(20, 3), batch_size=1)
    reference = runs["root"] / "external-reference" / "tiny.h5"
    subprocess.run([sys.executable, str(STAGE), *stage_args(project, reference)], cwd=project, env=subprocess_env(),
                   capture_output=True, check=True, timeout=600)
    out = runs["root"] / "external-out" / "tiny.h5"
    partial = partial_path(out)
    proc = subprocess.Popen([sys.executable, str(STAGE), *stage_args(project, out)], cwd=project,
                            env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, done = time.monotonic() + 300, 0
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            done = _rows_done(partial)
            if done >= 3:
                proc.kill()
                break
            time.sleep(0.002)
    finally:
        if proc.poll() is None and done < 3:
            proc.kill()
        _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before it could be killed: {stderr[-2000:]}"
    _assert_previous_or_nothing(out, None)
    assert partial.exists()
    rerun = subprocess.run([sys.executable, str(STAGE), *stage_args(project, out)], cwd=project, env=subprocess_env(),
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming" in rerun.stderr and "batches already written" in rerun.stderr, rerun.stderr[-3000:]
    assert digest(out) == digest(reference)
    assert files_in(out.parent) == [out.name]


def _rows_done(partial: Path) -> int:
    """Rows the partial file of a running extraction marks done (0 while it is not readable yet)."""
    if not partial.exists():
        return 0
    try:
        with h5py.File(partial, "r", locking=False) as fh:
            return int(fh["progress/done"][()].sum())
    except Exception:  # noqa: BLE001 - the writer may be mid-flush; try again
        return 0


# ---------------------------------------------------------------------------------------------
# Interruptions and errors in-process
# ---------------------------------------------------------------------------------------------

def _fail_at_write(monkeypatch: pytest.MonkeyPatch, batch: int, exc: BaseException) -> None:
    original = store.ExtractionWriter.write
    calls = [0]

    def write(self: store.ExtractionWriter, rows: np.ndarray, result: Any) -> None:
        calls[0] += 1
        if calls[0] == batch:
            raise exc
        original(self, rows, result)

    monkeypatch.setattr(store.ExtractionWriter, "write", write)


def test_ctrl_c_keeps_the_partial_file_and_the_rerun_resumes(runs: dict, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "tiny.h5"
    _place_previous(runs, out)
    _fail_at_write(monkeypatch, 4, KeyboardInterrupt())
    with caplog.at_level(logging.WARNING), pytest.raises(KeyboardInterrupt):
        run_stage(runs["project"], out)
    assert "interrupted: 6 of 48 statements are saved" in caplog.text
    _assert_previous_or_nothing(out, runs["previous"])
    with h5py.File(partial_path(out), "r") as fh:  # closed cleanly: readable, 3 batches done
        assert int(fh["progress/done"][()].sum()) == 6
    monkeypatch.undo()
    with caplog.at_level(logging.INFO):
        run_stage(runs["project"], out)
    assert "3 of 24 batches already written" in caplog.text
    assert digest(out) == digest(runs["reference"])


@pytest.mark.parametrize("error", [
    NumericalError("model 'tiny': hidden states contain NaN or inf from layer 2 on"),
    RuntimeError("an unexpected bug"),
], ids=["numerical-error", "unexpected-exception"])
def test_an_error_mid_run_removes_the_partial_file(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   error: Exception) -> None:
    out = tmp_path / "tiny.h5"
    _place_previous(runs, out)
    _fail_at_write(monkeypatch, 3, error)
    with pytest.raises(type(error)):
        run_stage(runs["project"], out)
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


def test_stage_main_exits_2_on_an_error_mid_run(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "tiny.h5"
    _fail_at_write(monkeypatch, 2, NumericalError("model 'tiny': log-likelihoods contain NaN or inf"))
    with caplog.at_level(logging.ERROR):
        assert stage().main(stage_args(runs["project"], out)) == 2
    assert "model 'tiny': log-likelihoods contain NaN or inf" in caplog.text
    assert files_in(tmp_path) == []


def test_out_of_memory_names_both_limits_and_the_one_to_lower(runs: dict, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    import torch

    original, calls = extract.forward_batch, [0]

    def forward_batch(*args: Any, **kwargs: Any) -> extract.BatchResult:
        calls[0] += 1
        if calls[0] == 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(*args, **kwargs)

    monkeypatch.setattr(extract, "forward_batch", forward_batch)
    out = tmp_path / "tiny.h5"
    with caplog.at_level(logging.ERROR):
        assert stage().main(stage_args(runs["project"], out)) == 2
    budget = load_params(runs["project"] / "params.yaml").extract.max_batch_tokens
    assert f"out of memory with extract.max_batch_tokens={budget} and extract.batch_size=2" in caplog.text
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in caplog.text
    assert "lower extract.max_batch_tokens in params.yaml" in caplog.text
    assert files_in(tmp_path) == []


def test_nan_weights_fail_before_the_output_file_exists(runs: dict, tmp_path: Path, tiny_neox: Path) -> None:
    """A model whose weights hold NaN is caught on the anisotropy prompts, before any file is written."""
    import torch
    from transformers import AutoModelForCausalLM

    broken = tmp_path / "broken-model"
    shutil.copytree(tiny_neox, broken)
    model = AutoModelForCausalLM.from_pretrained(broken)
    with torch.no_grad():
        model.gpt_neox.layers[1].mlp.dense_4h_to_h.weight.fill_(float("nan"))
    model.save_pretrained(broken)
    project = write_project(tmp_path / "p", broken, dataset=real_dataset(3, 3))
    out = tmp_path / "emb" / "tiny.h5"
    _place_previous(runs, out)
    with pytest.raises(NumericalError, match=r"model 'tiny': token states of the anisotropy prompts contain NaN or "
                                             r"inf from layer 2 on"):
        run_stage(project, out)
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


def test_partial_file_of_other_inputs_is_not_resumed(runs: dict, tmp_path: Path, tiny_neox: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "tiny.h5"
    older = runs["root"] / "older"
    _fail_at_write(monkeypatch, 3, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_stage(older, out)  # interrupted with the 7-pair dataset ...
    monkeypatch.undo()
    with caplog.at_level(logging.INFO):
        run_stage(runs["project"], out)  # ... rerun with the 8-pair dataset
    assert "not resuming" in caplog.text and "dataset_sha256" in caplog.text
    assert digest(out) == digest(runs["reference"])


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated"])
def test_damaged_partial_file_is_started_over(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture, damage: str) -> None:
    out = tmp_path / "tiny.h5"
    partial = partial_path(out)
    if damage == "truncated":
        _fail_at_write(monkeypatch, 6, KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            run_stage(runs["project"], out)
        monkeypatch.undo()
        partial.write_bytes(partial.read_bytes()[:5000])
    else:
        partial.write_bytes(b"" if damage == "empty" else np.random.default_rng(1).bytes(50_000))
    with caplog.at_level(logging.INFO):
        run_stage(runs["project"], out)
    assert "starting over" in caplog.text
    assert digest(out) == digest(runs["reference"])
    assert files_in(tmp_path) == [out.name]


def test_no_resume_flag_starts_over(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "tiny.h5"
    _fail_at_write(monkeypatch, 4, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_stage(runs["project"], out)
    monkeypatch.undo()
    with caplog.at_level(logging.INFO):
        assert stage().main(stage_args(runs["project"], out, "--no-resume")) == 0
    assert "resuming" not in caplog.text
    assert digest(out) == digest(runs["reference"])


# ---------------------------------------------------------------------------------------------
# Full disk and read-only output
# ---------------------------------------------------------------------------------------------

def _hdf5_os_error(number: int) -> OSError:
    """An OSError worded the way HDF5 reports a failed write."""
    return OSError(f"Can't synchronously write data (file write failed: time = Thu Jan  1 00:00:00 1970, "
                   f"filename = 'tiny.h5.partial', file descriptor = 7, errno = {number}, error message = "
                   f"'{os.strerror(number)}', buf = 0x1, total write size = 4096, bytes this sub-write = 4096, "
                   "bytes actually written = 18446744073709551615, offset = 0)")


def test_disk_full_mid_batch_is_a_clear_error_and_leaves_no_partial(runs: dict, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "tiny.h5"
    _place_previous(runs, out)
    original = h5py.Dataset.__setitem__
    writes = [0]

    def setitem(ds: h5py.Dataset, key: Any, value: Any) -> None:
        if ds.name.startswith("/pooled"):
            writes[0] += 1
            if writes[0] == 10:
                raise _hdf5_os_error(errno.ENOSPC)
        original(ds, key, value)

    monkeypatch.setattr(h5py.Dataset, "__setitem__", setitem)
    with pytest.raises(UAProbeError) as info:
        run_stage(runs["project"], out)
    message = str(info.value)
    assert message.startswith(f"{out}: writing a batch failed (No space left on device [errno 28])")
    assert "free space on the disk" in message and "No partial file was left behind" in message
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


@pytest.mark.parametrize("number", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_output_that_cannot_be_created_is_a_clear_error(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        number: int) -> None:
    """The directory turns read-only (or full) after the up-front check: HDF5 cannot create the file."""
    out = tmp_path / "tiny.h5"
    _place_previous(runs, out)
    real_file = h5py.File

    def file(name: Any, mode: str = "r", *a: Any, **k: Any) -> h5py.File:
        if mode == "w" and str(name).endswith(".partial"):
            raise OSError(number, f"Unable to synchronously create file (unable to open file: name = '{name}', "
                                  f"errno = {number}, error message = '{os.strerror(number)}')")
        return real_file(name, mode, *a, **k)

    monkeypatch.setattr(store.h5py, "File", file)
    with pytest.raises(UAProbeError, match=rf"creating the output file failed \({os.strerror(number)}"):
        run_stage(runs["project"], out)
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


def test_moving_the_finished_file_into_place_fails(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                   ) -> None:
    out = tmp_path / "tiny.h5"
    _place_previous(runs, out)

    def replace(*_a: Any, **_k: Any) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(UAProbeError, match="moving the finished file into place failed \\(Permission denied"):
        run_stage(runs["project"], out)
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


def test_output_path_is_a_directory_or_under_a_file(runs: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    def loaded(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the model was loaded before the output error was found")

    monkeypatch.setattr(model_run, "load_model", loaded)
    (tmp_path / "tiny.h5").mkdir()
    with pytest.raises(UAProbeError, match="tiny.h5: is a directory; remove it or point --out at a file path"):
        run_stage(runs["project"], tmp_path / "tiny.h5")
    (tmp_path / "plain-file").write_text("not a directory")
    with pytest.raises(UAProbeError, match=r"cannot create the output directory .*plain-file/sub \(Not a directory"):
        run_stage(runs["project"], tmp_path / "plain-file" / "sub" / "tiny.h5")


def test_real_full_disk_is_a_clear_error_before_any_batch(runs: dict, tmp_path: Path, tiny_neox: Path, tmpfs,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A 256 KiB tmpfs holding the previous file: the new file's storage is allocated at creation, so the
    disk fills there, before a single statement is computed."""
    disk = tmpfs("small-disk", "256k")
    out = disk / "tiny.h5"
    _place_previous(runs, out)
    project = write_project(tmp_path / "big", tiny_neox, dataset=real_dataset(40, 6), batch_size=8)
    computed = []
    monkeypatch.setattr(extract, "forward_batch", lambda *a, **k: computed.append(1) or pytest.fail("computed"))
    with pytest.raises(UAProbeError) as info:
        run_stage(project, out)
    assert str(info.value).startswith(f"{out}: creating the output file failed (No space left on device")
    assert computed == []
    _assert_previous_or_nothing(out, runs["previous"])
    assert not partial_path(out).exists()


def test_real_read_only_directory_is_refused_before_the_model_loads(runs: dict, tmp_path: Path, tmpfs,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        directory = tmpfs("read-only", "1m")
        _place_previous(runs, directory / "tiny.h5")
        remount = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only ({remount.stderr.strip()})")
        reason = "Read-only file system"
    else:
        directory = tmp_path / "read-only"
        directory.mkdir()
        _place_previous(runs, directory / "tiny.h5")
        directory.chmod(0o555)
        reason = "Permission denied"
    out = directory / "tiny.h5"

    def loaded(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the model was loaded before the output error was found")

    monkeypatch.setattr(model_run, "load_model", loaded)
    try:
        with pytest.raises(UAProbeError, match=rf"the output directory .* is not writable \({reason}"):
            run_stage(runs["project"], out)
        _assert_previous_or_nothing(out, runs["previous"])
    finally:
        if os.geteuid() != 0:
            directory.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# Reading: a damaged or foreign file at the output path is a clear error
# ---------------------------------------------------------------------------------------------

def test_reading_damaged_or_foreign_files(runs: dict, tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(runs["reference"].read_bytes()[:4000])
    with pytest.raises(UAProbeError, match="not a readable HDF5 file"):
        read_embeddings(truncated)
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as fh:
        fh.attrs["complete"] = True
        fh["something"] = [1, 2, 3]
    with pytest.raises(UAProbeError, match="attribute 'n_layers' .* is missing; delete it and rerun the extract stage"):
        read_embeddings(foreign)
    unfinished = tmp_path / "unfinished.h5"
    shutil.copyfile(runs["reference"], unfinished)
    with h5py.File(unfinished, "r+") as fh:
        fh.attrs["complete"] = False
    with pytest.raises(UAProbeError, match="incomplete extraction file"):
        read_embeddings(unfinished)


# ---------------------------------------------------------------------------------------------
# A file another process holds open: named as such, intact, never "delete it"
# ---------------------------------------------------------------------------------------------

class held_open:  # noqa: N801 - used as a context manager, like open()
    """Another process (a notebook) holding ``path`` open with ``h5py.File(path, mode)`` until the block ends."""

    def __init__(self, path: Path, mode: str = "r+") -> None:
        self.path, self.mode = path, mode

    def __enter__(self) -> None:
        code = (f"import h5py, sys, time\nfh = h5py.File({str(self.path)!r}, {self.mode!r})\n"
                "print('open', flush=True)\nsys.stdin.read()\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "open"

    def __exit__(self, *_exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _says_locked_and_intact(message: str, path: Path) -> None:
    assert f"{path}: locked by another process that has it open" in message, message
    assert "the file is intact" in message and "Resource temporarily unavailable [errno 11]" in message
    assert "delete" not in message and "rerun the extract stage" not in message, message


def test_an_extraction_held_open_by_another_process_is_named_intact(runs: dict, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """A notebook's ``h5py.File(..., 'r+')`` on the extraction: the analyze stage's reader, ``uaprobe
    provenance`` and ``uaprobe verify`` say the file is locked and intact and how to go on; it stays as it was."""
    from uaprobe import cli
    from uaprobe.stage import foreseeable_message

    h5 = tmp_path / "data" / "embeddings" / "m.h5"
    h5.parent.mkdir(parents=True)
    shutil.copyfile(runs["reference"], h5)
    with held_open(h5):
        with pytest.raises(UAProbeError) as caught:
            read_embeddings(h5)
        _says_locked_and_intact(str(caught.value), h5)
        assert "close it there" in str(caught.value) and "HDF5_USE_FILE_LOCKING=FALSE" in str(caught.value)
        with pytest.raises(UAProbeError) as caught:
            cli.provenance(h5)
        _says_locked_and_intact(str(caught.value), h5)
        (problem,) = cli.extraction_mismatches(tmp_path)
        _says_locked_and_intact(problem, h5)
        try:
            h5py.File(h5, "r")
        except OSError as exc:
            exc.filename = str(h5)  # the wrapper's net for any other reader of a locked file
            _says_locked_and_intact(foreseeable_message(exc) or "", h5)
    assert digest(h5) == digest(runs["reference"])
    # with the lock switched off, as the message says, a reader beside a process that only reads goes on
    env = {**os.environ, "HDF5_USE_FILE_LOCKING": "FALSE"}
    with held_open(h5):
        done = subprocess.run([sys.executable, "-m", "uaprobe.cli", "provenance", str(h5)], env=env,
                              capture_output=True, text=True)
    assert done.returncode == 0 and "complete: True" in done.stdout, done.stderr


def test_an_extraction_the_system_refuses_to_read_is_not_called_damaged(runs: dict, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Permission denied (or an I/O error of the disk) says nothing against the file: no "delete it"."""
    h5 = tmp_path / "m.h5"
    shutil.copyfile(runs["reference"], h5)

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, f"Unable to synchronously open file (unable to open file: name = '{h5}', "
                                            "errno = 13, error message = 'Permission denied', flags = 0, o_flags = 0)")

    monkeypatch.setattr(store.h5py, "File", refused)
    with pytest.raises(UAProbeError) as caught:
        read_embeddings(h5)
    message = str(caught.value)
    assert message.startswith(f"{h5}: cannot be read (Permission denied [errno 13])"), message
    assert "check its permissions" in message and "do not delete it" in message
    assert "delete it and rerun" not in message


@pytest.mark.parametrize("resume", [True, False])
def test_a_partial_file_another_run_writes_is_neither_resumed_nor_removed(runs: dict, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           caplog: pytest.LogCaptureFixture,
                                                                           resume: bool) -> None:
    out = tmp_path / "tiny.h5"
    _fail_at_write(monkeypatch, 4, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_stage(runs["project"], out)
    monkeypatch.undo()
    partial = partial_path(out)
    before = digest(partial)
    with held_open(partial), caplog.at_level(logging.ERROR):
        assert stage().main(stage_args(runs["project"], out, *([] if resume else ["--no-resume"]))) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    _says_locked_and_intact(message, partial)
    assert "let that run finish or stop it" in message
    assert digest(partial) == before and not out.exists()
