"""The content-keyed store of products (uaprobe.memo) and the forked workers (uaprobe.forking)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from uaprobe import forking, memo
from uaprobe.analysis.run import limits


def test_a_stored_product_comes_back_whole_and_a_missing_one_is_none(tmp_path) -> None:
    store = memo.Memo(tmp_path / "s")
    k = memo.key("input one", b"\x00bytes")
    assert store.get(k) is None
    store.put(k, {"png": b"\x89PNG...", "svg": b"<svg/>"})
    assert store.get(k) == {"png": b"\x89PNG...", "svg": b"<svg/>"}
    store.put(k, {"png": b"other"})  # a key holds one product: the first stays
    assert store.get(k)["png"] == b"\x89PNG..."


def test_keys_tell_their_parts_apart() -> None:
    assert memo.key("ab", "c") != memo.key("a", "bc")  # each part's length is in the key
    assert memo.key("a") == memo.key(b"a") and memo.key("a") != memo.key("b")
    assert len(memo.code_digest()) == 64 and memo.key("a").startswith(memo.key("a")[:8])


def test_prune_keeps_the_entries_used_last_and_removes_partial_ones(tmp_path) -> None:
    store = memo.Memo(tmp_path / "s")
    keys = [memo.key(str(i)) for i in range(5)]
    for i, k in enumerate(keys):
        store.put(k, {"f": str(i).encode()})
        os.utime(tmp_path / "s" / k, (time.time() - 100 + i, time.time() - 100 + i))
    assert store.get(keys[0]) is not None  # used now: the newest
    (tmp_path / "s" / ".partial-x").mkdir()
    store.prune(keep=2)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted([keys[0], keys[4]])


def test_the_store_is_off_on_request_and_where_it_cannot_be_written(tmp_path) -> None:
    off = memo.Memo.at(tmp_path, "figures", environ={memo.ENV: "OFF"})
    off.put("k", {"f": b"x"})
    assert off.get("k") is None and not (tmp_path / memo.FOLDER).exists()
    assert memo.Memo.at(tmp_path, "figures", environ={}).folder == tmp_path / memo.FOLDER / "figures"
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    memo.Memo(blocked / "s").put("k", {"f": b"x"})  # nothing raised, nothing stored
    assert memo.Memo(blocked / "s").get("k") is None


def _square(i: int) -> int:
    if i == 3:
        raise ValueError("job 3 fails")
    return i * i


def test_forked_jobs_come_back_in_their_order_and_a_failure_is_raised() -> None:
    assert forking.forked_map(lambda i: (i, os.getpid()), 4, workers=1)[2][0] == 2
    out = forking.forked_map(lambda i: i * i, 6, workers=2, first=[5, 4])
    assert out == [i * i for i in range(6)]
    with pytest.raises(ValueError, match="job 3 fails"):
        forking.forked_map(_square, 5, workers=2)
    with pytest.raises(ValueError, match="at least 1"):
        forking.forked_map(_square, 2, workers=0)


DIES = """
import os
from uaprobe import forking
from uaprobe.errors import UAProbeError
assert forking.can_fork()
try:
    forking.forked_map(lambda i: os._exit(9) if i == 1 else i, 3, workers=2, what="analyses")
except UAProbeError as exc:
    print(exc)
"""


def test_a_worker_that_dies_is_named_with_the_fix() -> None:
    # in a fresh process, which can fork (one where numba's threads ran runs the jobs itself, and would die)
    proc = subprocess.run([sys.executable, "-c", DIES], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "worker process running the analyses died" in proc.stdout and "--workers 1" in proc.stdout


def test_without_fork_the_jobs_run_in_the_callers_process(monkeypatch) -> None:
    assert not forking.forks(1, workers=4) and not forking.forks(3, workers=1)
    monkeypatch.setattr(forking, "can_fork", lambda: False)
    assert not forking.forks(3, workers=2)
    assert forking.forked_map(lambda i: os.getpid(), 3, workers=2) == [os.getpid()] * 3


def test_as_many_analyses_at_once_as_the_memory_holds() -> None:
    gib = 2**30
    assert limits.at_once([3 * gib, 2 * gib, gib], available=6 * gib, workers=8) == 3
    assert limits.at_once([3 * gib, 2 * gib, gib], available=5 * gib, workers=8) == 2  # the largest two: 5
    assert limits.at_once([3 * gib, 3 * gib], available=4 * gib, workers=2) == 1
    assert limits.at_once([gib] * 4, available=None, workers=2) == 2
    assert limits.at_once([gib], available=10 * gib, workers=4) == 1
