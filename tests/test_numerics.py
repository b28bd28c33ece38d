"""Pinned CPU code paths: which variables, that the libraries honour them, that the bytes then
ignore the caller's environment and the thread count, and what the provenance records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uaprobe.repro import mkl_pin, numerics

REPO = Path(__file__).resolve().parents[1]
HERE_PINNABLE, WHY_NOT = numerics.pinnable(flags=numerics.cpu_flags())
needs_avx2 = pytest.mark.skipif(not HERE_PINNABLE, reason=f"the AVX2 pins need an x86-64 CPU with AVX2: {WHY_NOT}")

CPUINFO = textwrap.dedent("""\
    processor\t: 0
    vendor_id\t: AuthenticAMD
    model name\t: AMD EPYC 7B13 64-Core Processor
    flags\t\t: fpu sse2 avx fma avx2 bmi2
    """)


def test_cpu_flags_and_model_come_from_the_first_processor() -> None:
    assert numerics.cpu_flags(CPUINFO) == frozenset({"fpu", "sse2", "avx", "fma", "avx2", "bmi2"})
    assert numerics.cpu_model(CPUINFO) == "AMD EPYC 7B13 64-Core Processor"
    assert numerics.cpu_flags("processor : 0\n") is None


HASWELL = frozenset(numerics.REQUIRED_FLAGS)
ZEN3 = HASWELL | {"sse2", "sse4_2"}  # AVX2 and FMA, no AVX-512 (a hypervisor may hide it too)
SAPPHIRE_RAPIDS = ZEN3 | {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd"}


def test_the_foreign_settings_ask_only_for_kernels_the_cpu_has(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    """The hostile caller of the pin test is chosen from the CPU's flags: a CPU without AVX-512 (or with
    only part of it) is never asked for VML's AVX-512 family, which would kill it with SIGILL. The flags
    are read through the same function as on a real machine, from a fake /proc/cpuinfo."""
    real_read = Path.read_text
    for flags, avx512, family in ((ZEN3, False, "0"), (SAPPHIRE_RAPIDS, True, "5"),
                                  (ZEN3 | {"avx512f"}, False, "0")):
        fake = CPUINFO.replace("fpu sse2 avx fma avx2 bmi2", " ".join(sorted(flags)))
        monkeypatch.setattr(Path, "read_text", lambda self, *a, _f=fake, **k:
                            _f if str(self) == "/proc/cpuinfo" else real_read(self, *a, **k))
        here = numerics.cpu_flags()
        assert here == flags and numerics.has_avx512(here) is avx512
        assert numerics.foreign_settings(here)["MKL_VML_DEBUG_CPU_TYPE"] == family
        assert numerics.machine_record()["avx512"] is avx512
        assert numerics.pins_for("x86_64", here) == dict(numerics.ISA_PINS)  # the pins themselves are AVX2
    settings = numerics.foreign_settings(ZEN3)
    assert set(settings) <= set(numerics.ISA_PINS) and all(settings[k] != numerics.ISA_PINS[k] for k in settings)
    assert numerics.has_avx512(None) is None


def test_pins_apply_only_where_the_avx2_kernels_run() -> None:
    avx2 = HASWELL
    assert numerics.pins_for("x86_64", avx2) == dict(numerics.ISA_PINS)
    assert numerics.pins_for("AMD64", None) == dict(numerics.ISA_PINS)  # flags unknown: x86-64 is enough
    assert numerics.pins_for("x86_64", frozenset({"avx", "sse4_2"})) == {}
    assert numerics.pins_for("aarch64", avx2) == {}
    assert "lacks avx2, fma" in numerics.pinnable("x86_64", frozenset({"avx"}))[1]
    assert "lacks movbe" in numerics.pinnable("x86_64", HASWELL - {"movbe"})[1], "numba's haswell target needs it"


def test_pin_overrides_the_callers_environment_and_pins_analysis_threads() -> None:
    env = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
           "OMP_NUM_THREADS": "8", "HOME": "/x"}
    set_ = numerics.pin(analysis=True, environ=env, modules={}, flags=HASWELL)
    assert env["MKL_CBWR"] == "AVX2,STRICT", "the caller's MKL_CBWR changes the bytes: overridden"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert all(env[v] == "1" for v in numerics.THREAD_VARIABLES) and env["HOME"] == "/x"
    library = mkl_pin.library()
    preload = {"LD_PRELOAD": str(library)} if library else {}
    assert set_ == {**numerics.ISA_PINS, **{v: "1" for v in numerics.THREAD_VARIABLES}, **preload}
    # child processes load the MKL dispatch library at their start; a caller's own preloads are kept
    env = {"LD_PRELOAD": "/x/libother.so"}
    numerics.pin(environ=env, modules={}, flags=HASWELL)
    assert env["LD_PRELOAD"].split() == ([str(library)] if library else []) + ["/x/libother.so"]
    assert numerics.unpinned_environ({**env, "HOME": "/x"}) == {"LD_PRELOAD": "/x/libother.so", "HOME": "/x"}
    # the extraction holds torch to its own count, whatever the caller's or the machine's
    env = {"OMP_NUM_THREADS": "8"}
    numerics.pin(environ=env, modules={}, flags=HASWELL)
    assert all(env[v] == str(numerics.EXTRACTION_THREADS) for v in numerics.THREAD_VARIABLES)


def test_pin_after_a_numeric_import_raises_or_changes_nothing() -> None:
    env: dict[str, str] = {}
    with pytest.raises(numerics.PinnedTooLate, match="numpy imported before"):
        numerics.pin(environ=env, modules={"numpy": object()})
    assert numerics.pin(strict=False, environ=env, modules={"torch": object()}) == {} and env == {}


def test_record_reports_pins_and_holds_nothing_machine_specific() -> None:
    pinned = {**numerics.ISA_PINS, "OMP_NUM_THREADS": "1"}
    rec = numerics.record(analysis=True, environ=pinned)
    assert rec["isa"] == "AVX2" and rec["pins"] == dict(sorted(numerics.ISA_PINS.items()))
    assert rec["threads"]["OMP_NUM_THREADS"] == "1" and rec["threads"]["MKL_NUM_THREADS"] == "unset"
    partial = numerics.record(environ={"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "default"})
    assert partial["isa"] == "unpinned" and partial["pins"] == {"OPENBLAS_CORETYPE": "Haswell"}
    assert partial["threads"] == {v: "unset" for v in numerics.THREAD_VARIABLES}  # what the extraction ran on
    text = numerics.record_json(environ=pinned)
    assert json.loads(text)["pins"] == rec["pins"]
    machine = numerics.machine_record()
    assert machine["cpu_model"] not in text and str(machine["platform"]) not in text


def test_machine_log_is_written_beside_the_outputs_not_into_them(tmp_path: Path) -> None:
    path = numerics.write_machine_log("extract@smollm2-135m", tmp_path)
    assert path == tmp_path / "logs" / "extract@smollm2-135m.machine.json"
    doc = json.loads(path.read_text())
    assert doc["machine"]["cpu_model"] == numerics.cpu_model() and "numerics" in doc
    assert numerics.machine_log_path("a/b c", tmp_path).name == "a_b_c.machine.json"
    assert "logs/" in (REPO / ".gitignore").read_text()


def test_results_provenance_parses_the_extraction_attribute() -> None:
    rec = {"isa": "AVX2"}
    assert numerics.results_provenance(b'{"isa": "AVX2"}', analysis=rec) == {"extraction": rec, "analysis": rec}
    assert numerics.results_provenance(None, analysis=rec)["extraction"] == "not recorded"
    assert numerics.results_provenance("not json", analysis=rec)["extraction"] == "not recorded"


# A forward-pass-like workload through the extraction's own pooling and NLL code, big enough that
# ATen and MKL split it across threads: a GEMM (MKL), log-softmax, layer norm and GELU (ATen's
# vectorised kernels), exp, tanh and log (MKL's vector math) and the masked mean pooling and
# per-sequence NLL (ATen reductions).
WORKLOAD = textwrap.dedent("""\
    import hashlib, json, os, sys
    from uaprobe.repro import numerics
    if sys.argv[1] == "pinned":
        numerics.pin()
    import numpy as np, scipy.linalg, torch
    from uaprobe.extraction.pooling import content_positions, pool, sequence_nll
    assert torch.get_num_threads() == int(sys.argv[2])
    g = np.random.default_rng(0)
    B, T, D, V = 48, 24, 512, 4096
    x = torch.from_numpy(g.standard_normal((B, T, D), dtype=np.float32))
    w = torch.from_numpy(g.standard_normal((V, D), dtype=np.float32) / 20)
    mask = torch.ones(B, T, dtype=torch.long)
    for b in range(B):
        mask[b, T - b % 7:] = 0
    h = torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (D,)))
    vml = torch.stack([torch.exp(h / 8), torch.tanh(h), torch.log(h.abs() + 0.1)])  # MKL's vector math
    logits = torch.nn.functional.linear(h, w)
    ids = torch.from_numpy(g.integers(0, V, (B, T)))
    where = content_positions(mask, torch.zeros_like(mask), "special")
    pooled = pool([h, x], where)
    nll = sequence_nll(logits, ids, mask)
    a = g.standard_normal((300, 300))
    digest = hashlib.sha256()
    for t in [*pooled.values(), *nll, torch.log_softmax(logits, -1), vml]:
        digest.update(t.numpy().tobytes())
    digest.update((a @ a.T).tobytes())
    digest.update(scipy.linalg.eigh(a @ a.T, eigvals_only=True).tobytes())
    digest.update(np.exp(a).sum(axis=0).tobytes())
    print(json.dumps({"digest": digest.hexdigest(), "record": numerics.record()}))
    """)


def _workload(mode: str, threads: int, **env: str) -> dict:
    full = numerics.unpinned_environ()
    full.update(env)
    full.update({v: str(threads) for v in numerics.THREAD_VARIABLES})  # the caller asks for `threads`
    if mode == "pinned":  # the pin holds the extraction's own count
        threads = numerics.EXTRACTION_THREADS
    proc = subprocess.run([sys.executable, "-c", WORKLOAD, mode, str(threads)], capture_output=True, text=True,
                          env=full, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_avx2
def test_pinned_bytes_ignore_the_callers_cpu_settings_and_thread_count() -> None:
    hostile = numerics.foreign_settings(numerics.cpu_flags() or frozenset())  # only kernels this CPU runs
    base = _workload("pinned", 1)
    assert _workload("pinned", 3) == base
    assert _workload("pinned", 2, **hostile) == base
    rec = base["record"]
    assert rec["isa"] == "AVX2" and rec["torch"]["cpu_capability"] == "AVX2" and rec["mkl_dispatch"] == "intel path"
    assert {b["core"] for b in rec["openblas"]} == {"Haswell"}
    assert rec["numpy"]["simd"]["dispatch_enabled"] == ["X86_V3"]
    # the same settings without the pins change the bytes: the pins are what holds them
    unpinned = _workload("unpinned", 2, **hostile)
    assert unpinned["digest"] != base["digest"] and unpinned["record"]["isa"] == "unpinned"
    assert unpinned["record"]["torch"]["cpu_capability"] == "DEFAULT"
    assert unpinned["record"]["mkl_dispatch"] == "vendor path"


@needs_avx2
def test_the_test_process_runs_under_the_stages_pins() -> None:
    """conftest.py pins before any numeric import, as the analysis stages do: the environment holds
    the pins, numpy dispatches to no AVX-512 target, and the record says AVX2 with one BLAS thread."""
    import numpy as np

    assert {k: os.environ.get(k) for k in numerics.ISA_PINS} == dict(numerics.ISA_PINS)
    assert all(os.environ.get(v) == str(numerics.ANALYSIS_THREADS) for v in numerics.THREAD_VARIABLES)
    assert mkl_pin.state() == mkl_pin.INTEL_PATH
    core = np._core._multiarray_umath
    enabled = [t for t in core.__cpu_dispatch__ if core.__cpu_features__.get(t)]
    assert not set(enabled) & set(numerics.ISA_PINS["NPY_DISABLE_CPU_FEATURES"].split()), enabled
    rec = numerics.record(analysis=True)
    assert rec["isa"] == numerics.ISA and set(rec["threads"].values()) == {str(numerics.ANALYSIS_THREADS)}
    assert {b["core"] for b in rec.get("openblas", [])} <= {"Haswell"}


def test_every_stage_pins_before_any_numeric_import() -> None:
    for stage in sorted((REPO / "stages").glob("*.py")):
        lines = stage.read_text(encoding="utf-8").splitlines()
        pin_at = next(i for i, line in enumerate(lines) if "numerics.pin(" in line)
        numeric = [i for i, line in enumerate(lines)
                   if line.startswith(("import ", "from ")) and "numerics" not in line and "__future__" not in line
                   and line.split()[1].split(".")[0] not in ("argparse", "logging", "os", "signal", "sys", "time",
                                                               "json", "shutil", "tempfile", "collections",
                                                               "dataclasses", "pathlib", "typing")]
        assert numeric and pin_at < min(numeric), f"{stage.name}: numerics.pin() must come before {lines[min(numeric)]}"


def test_the_papers_numerics_table_reads_the_results_provenance() -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from uaprobe.publishing.provenance import supplement
    from outputs_double import InMemory
    from uaprobe.publishing.provenance.values import Ledger

    pinned = {"isa": "AVX2", "pins": dict(numerics.ISA_PINS), "threads": "not pinned: ...",
              "torch": {"cpu_capability": "AVX2", "blas": "Intel(R) oneAPI Math Kernel Library Version 2024.2-Product"},
              "openblas": [{"library": "numpy", "core": "Haswell"}, {"library": "scipy", "core": "Haswell"}],
              "numpy": {"simd": {"baseline": ["X86_V2"], "dispatch_enabled": ["X86_V3"]}}}
    analysis = {"isa": "AVX2", "threads": {v: "1" for v in numerics.THREAD_VARIABLES},
                "openblas": [{"library": "numpy", "core": "Haswell"}]}
    params = SimpleNamespace(model=lambda m: SimpleNamespace(display="Model M"))
    out = InMemory(root=Path("."), params=params, models=("m",), ledger=Ledger(Path(".")),  # type: ignore[arg-type]
                  files={"results/models/m/layerwise.json": {"numerics": {"extraction": pinned, "analysis": analysis}},
                         "results/panel.json": {}})
    rows = supplement.numerics_rows(out)
    assert rows[0] == ["extract Model M", "AVX2", "AVX2, MKL 2024.2", "Haswell", "X86_V2 + X86_V3",
                       "any (results do not depend on it)"]
    assert rows[1] == ["analyze Model M", "AVX2", "not used", "Haswell", "not used", "1"]
    assert rows[2][:2] == ["compare", "not recorded"]


def test_a_dispatch_library_path_with_spaces_is_not_preloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """LD_PRELOAD splits on spaces and colons: such a path would be two missing libraries (and a loader
    warning in every child), so it is left out and each child's own pin() loads the library."""
    monkeypatch.setattr(mkl_pin, "library", lambda: Path("/a checkout/_mkl_dispatch.so"))
    env = {"LD_PRELOAD": "/x/libother.so"}
    numerics.pin(environ=env, modules={}, flags=HASWELL)
    assert env["LD_PRELOAD"] == "/x/libother.so" and env["MKL_CBWR"] == "AVX2,STRICT"
