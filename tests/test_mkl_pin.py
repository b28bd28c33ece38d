"""MKL's vendor check: which library answers it in the process (``dladdr``), the proof that MKL asked the
dispatch library (its count after a product), a caller's preloaded library that answers first (the stage
executes itself again, or refuses), what the provenance and ``uaprobe fingerprint`` say, and setup.py's
refusal to go on without the library where it is needed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from uaprobe.repro import fingerprint as fp
from uaprobe.repro import mkl_pin, numerics

REPO = Path(__file__).resolve().parents[1]
HERE_PINNABLE, WHY_NOT = numerics.pinnable(flags=numerics.cpu_flags())
needs_avx2 = pytest.mark.skipif(not HERE_PINNABLE, reason=f"the AVX2 pins need an x86-64 CPU with AVX2: {WHY_NOT}")

HOSTILE = """int mkl_serv_intel_cpu_true(void) { return 0; }
int mkl_serv_intel_cpu(void) { return 0; }
"""
"""A library a caller might preload: MKL's two vendor checks, answering "not Intel"."""

PROBE = """
import json, os, sys
from uaprobe.repro import mkl_pin, numerics
numerics.pin()
import torch
record = numerics.record()
try:
    numerics.check_mkl(torch)
    refused = ""
except Exception as exc:
    refused = str(exc)
print(json.dumps({"binding": mkl_pin.binding(), "calls": mkl_pin.calls(), "record": record["mkl_dispatch"],
                  "preload": os.environ.get("LD_PRELOAD", ""), "refused": refused}))
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("hostile")
    (directory / "hostile.c").write_text(HOSTILE)
    library = directory / "libhostile.so"
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler is part of the setup on this machine (setup.py builds the dispatch library)"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(directory / "hostile.c")], check=True)
    return library


def _probe(**env: str) -> dict:
    full = numerics.unpinned_environ()
    full.update(env)
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_avx2
def test_the_dispatch_library_answers_mkl_and_counts_its_answers() -> None:
    """Pinned, the global lookup finds the dispatch library (dladdr), and MKL asked it during a product."""
    library = mkl_pin.library()
    assert library is not None, "uaprobe.repro._mkl_dispatch was not built: run `make setup` with a C compiler"
    import ctypes

    lib = ctypes.CDLL(str(library))
    assert lib.mkl_serv_intel_cpu_true() == 1 and lib.mkl_serv_intel_cpu() == 1
    got = _probe()
    assert os.path.samefile(got["binding"], library) and got["calls"] > 0
    assert got["record"] == "intel path" and got["refused"] == ""
    assert got["preload"].split()[0] == str(library)


@needs_avx2
def test_a_preloaded_library_that_answers_first_is_put_behind_the_dispatch_library(hostile: Path) -> None:
    """The caller preloads a library defining MKL's vendor checks (MKL itself, on many HPC sites): the pinned
    process executes itself again with the dispatch library first, keeping the caller's library after it;
    MKL then asks the dispatch library, and the provenance says so."""
    library = mkl_pin.library()
    got = _probe(LD_PRELOAD=str(hostile))
    assert os.path.samefile(got["binding"], library) and got["calls"] > 0 and got["record"] == "intel path"
    assert got["preload"].split() == [str(library), str(hostile)] and got["refused"] == ""


@needs_avx2
def test_where_it_still_answers_first_the_provenance_says_so_and_the_extraction_refuses(hostile: Path) -> None:
    """Where executing again cannot put it first (here: it was done already), the binding in effect is
    recorded -- not "intel path" because the dispatch library is mapped -- and the extraction refuses."""
    got = _probe(LD_PRELOAD=str(hostile), **{mkl_pin.REEXECUTED: "1"})
    assert os.path.samefile(got["binding"], hostile) and got["calls"] == 0
    assert got["record"] == "vendor path"
    assert f"answered by {hostile}" in got["refused"] and "nothing is run" in got["refused"]
    assert "env -u LD_PRELOAD" in got["refused"]


@needs_avx2
def test_the_fingerprint_checks_the_callers_own_preload_order(hostile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``uaprobe fingerprint`` runs its parts with the dispatch library first, as the stages run; one more
    check keeps the caller's order and says whether MKL consulted the dispatch library there."""
    library = mkl_pin.library()
    monkeypatch.setenv("LD_PRELOAD", f"{library} {hostile}")  # as the command's own pin() leaves it
    found = fp.caller_binding()
    assert found is not None and os.path.samefile(found["binding"], hostile) and found["calls"] == 0
    line = fp.binding_line(found)
    assert f"LD_PRELOAD ({hostile})" in line and f"answered by {hostile}" in line
    assert "MKL did not consult uaprobe's dispatch library there (0 call(s))" in line
    monkeypatch.setenv("LD_PRELOAD", str(library))
    found = fp.caller_binding()
    assert found is not None and found["state"] == "intel path" and found["calls"] > 0
    assert fp.binding_line(found).startswith("MKL's vendor check under this environment (no LD_PRELOAD of its own): "
                                             "answered by uaprobe's dispatch library; MKL consulted it")


def test_only_the_extraction_record_names_mkl() -> None:
    """The analyses never load torch nor MKL: their record does not name the dispatch library."""
    assert "mkl_dispatch" not in numerics.record(analysis=True)
    assert "mkl_dispatch" in numerics.record(analysis=False)


def test_preload_first_keeps_the_callers_order_behind_it(tmp_path: Path) -> None:
    ours = tmp_path / "_mkl_dispatch.so"
    ours.write_bytes(b"")
    env = {"LD_PRELOAD": f"/x/liba.so:{ours} /x/libb.so"}
    assert mkl_pin.preload_first(ours, env) and env["LD_PRELOAD"] == f"{ours} /x/liba.so /x/libb.so"
    spaced = tmp_path / "a dir" / "_mkl_dispatch.so"
    assert not mkl_pin.preload_first(spaced, env) and env["LD_PRELOAD"] == f"{ours} /x/liba.so /x/libb.so"


@needs_avx2
def test_setup_stops_with_the_fix_where_the_library_cannot_be_built(tmp_path: Path) -> None:
    """A machine that needs the library and has no working C compiler: the install stops, naming the library,
    why and how to get a compiler -- not a silent skip; with one, the library is built with its count."""
    for name in ("setup.py", "pyproject.toml", "README.md", "src/uaprobe/__init__.py", "src/uaprobe/errors.py",
                 "src/uaprobe/repro/__init__.py", "src/uaprobe/repro/numerics.py", "src/uaprobe/repro/mkl_pin.py",
                 "src/uaprobe/repro/_mkl_dispatch.c"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, tmp_path / name)
    command = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    broken = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "CC": "/bin/false"})
    assert broken.returncode != 0 and not list((tmp_path / "src" / "uaprobe" / "repro").glob("*.so"))
    assert "the MKL dispatch library (src/uaprobe/repro/_mkl_dispatch.c) could not be built" in broken.stderr
    assert "Install a C compiler" in broken.stderr and "rerun `make setup`" in broken.stderr
    built = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (so,) = (tmp_path / "src" / "uaprobe" / "repro").glob("_mkl_dispatch*.so")
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    assert {"mkl_serv_intel_cpu_true", "mkl_serv_intel_cpu", "uaprobe_mkl_dispatch_calls"} <= {
        line.split()[-1] for line in symbols.splitlines() if line.strip()}


@needs_avx2
def test_a_preloaded_library_does_not_change_the_extractions_bytes(hostile: Path) -> None:
    """The workload of the extraction (test_numerics.WORKLOAD: products, elementwise kernels, vector math),
    pinned, computes the same bytes and records the same numerics with a hostile library preloaded."""
    from test_numerics import _workload

    assert _workload("pinned", 2, LD_PRELOAD=str(hostile)) == _workload("pinned", 2)
