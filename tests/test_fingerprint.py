"""`uaprobe fingerprint`: every recorded digest, compared per operation and thread count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from uaprobe.repro import fingerprint as fp
from uaprobe.repro import numerics

needs_avx2 = pytest.mark.skipif(not numerics.pinnable(flags=numerics.cpu_flags())[0],
                                reason="the committed digests are those of the AVX2 pins, which this CPU cannot run")


def test_digest_names_dtype_shape_and_bytes() -> None:
    import numpy as np

    a = np.arange(6, dtype=np.float32)
    assert fp.digest(a) != fp.digest(a.reshape(2, 3)) != fp.digest(a.astype(np.float64))
    assert fp.digest(a) == fp.digest(a.copy())
    b = a.copy()
    b.view(np.uint32)[3] ^= 1  # one bit of one value
    assert fp.digest(a) != fp.digest(b)


def test_compare_reports_each_operation_and_thread_count() -> None:
    expected = {"extraction": {"op": {"1": "x", "2": "x"}, "gone": {"1": "z"}}, "analysis": {"k": {"1": "y"}}}
    measured = {"extraction": {"digests": {"op": {"1": "x", "2": "w"}, "extra": {"1": "q"}}},
                "analysis": {"error": "the analysis probe failed (exit 1): boom"}}
    rows = fp.compare(expected, measured)
    assert ("extraction", "op", "1", "equal") in rows and ("extraction", "op", "2", "differs") in rows
    assert ("extraction", "gone", "1", "missing") in rows and ("extraction", "extra", "1", "new") in rows
    assert ("analysis", "(all)", "-", "the analysis probe failed (exit 1): boom") in rows
    text = fp.report(rows, measured, [{"cpu": "X"}])
    assert "differ from fingerprint.json" in text and "op" in text and "differs" in text


def test_the_committed_digests_do_not_depend_on_the_thread_count() -> None:
    doc = fp.load_digests()
    assert set(doc["digests"]) == set(fp.PARTS) and doc["checked_on"]
    for part, ops in doc["digests"].items():
        assert len(ops) >= 5, part
        for op, by_threads in ops.items():
            assert set(by_threads) == {str(t) for t in fp.THREADS[part]}, op
            assert len(set(by_threads.values())) == 1, f"{part} {op}: {by_threads}"


@needs_avx2
def test_fingerprint_passes_on_this_machine(tmp_path: Path) -> None:
    """The whole command, as .ci/run runs it first: exit 0, every row equal, in one table."""
    out = subprocess.run([sys.executable, "-m", "uaprobe.cli", "fingerprint"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "MKL intel path" in out.stdout and " differs" not in out.stdout
    digests = fp.load_digests()["digests"]
    assert out.stdout.count(": equal") == sum(len(fp.THREADS[part]) * len(ops) for part, ops in digests.items())


@needs_avx2
def test_a_changed_digest_fails_with_the_operation_named(tmp_path: Path) -> None:
    doc = fp.load_digests()
    doc["digests"]["analysis"]["float64 product 460x576x460"]["2"] = "0" * 32
    path = tmp_path / "fingerprint.json"
    path.write_text(json.dumps(doc))
    measured = {"analysis": fp.run_part("analysis"), "extraction": {"digests": doc["digests"]["extraction"]}}
    rows = fp.compare(doc["digests"], measured)
    assert [r for r in rows if r[3] != "equal"] == [("analysis", "float64 product 460x576x460", "2", "differs")]


def test_damaged_digests_file_is_one_clear_error(tmp_path: Path) -> None:
    from uaprobe.errors import UAProbeError

    path = tmp_path / "fingerprint.json"
    path.write_text("{not json")
    with pytest.raises(UAProbeError, match="git checkout"):
        fp.load_digests(path)
