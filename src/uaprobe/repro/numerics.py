"""Pinned CPU code paths: the same bytes from the same inputs on every x86-64 machine with AVX2,
Intel or AMD, at any thread count.

The numeric libraries choose their CPU kernels at run time from what the processor offers: torch's
ATen kernels (elementwise ops, reductions, softmax, norms), oneDNN, MKL (torch's BLAS: every
``Linear``), OpenBLAS (numpy's and scipy's BLAS and LAPACK), numpy's own SIMD loops and numba. The
same program then rounds differently on another machine, and every output hash changes. :func:`pin`
sets, *before* numpy, scipy or torch are imported, what each library reads at start-up, so that all of
them take one code path whatever the machine. It is the one place that knows these settings: every
stage, the test suite and the ``uaprobe`` command call it first; ``uaprobe fingerprint`` checks them.

========================== ======================= ==================================================
setting                    library                 effect
========================== ======================= ==================================================
ATEN_CPU_CAPABILITY=avx2   torch (ATen)            ``torch.backends.cpu.get_cpu_capability()`` is AVX2
ONEDNN_MAX_CPU_ISA=AVX2    oneDNN (torch mkldnn)   JIT kernels at most AVX2 (``DNNL_`` is the old name)
MKL_ENABLE_INSTRUCTIONS    MKL (torch's BLAS)      dispatch ceiling AVX2 (every ``Linear`` is an SGEMM)
MKL dispatch library       MKL                     MKL's Intel code path on every vendor (below)
MKL_CBWR=AVX2,STRICT       MKL                     conditional numerical reproducibility, strict:
                                                   the same bytes at any thread count
MKL_VML_DEBUG_CPU_TYPE=3   MKL's vector math (VML) its AVX2 kernels: ``torch.exp``, ``log``, ``sqrt``,
                                                   ``tanh``, ``erf``, ``sin``, ``cos`` (below)
OPENBLAS_CORETYPE=Haswell  OpenBLAS (numpy, scipy) Haswell kernels (AVX2 + FMA) in DYNAMIC_ARCH builds
NPY_DISABLE_CPU_FEATURES   numpy                   no AVX-512 dispatch targets (numpy 2.4's names)
NUMBA_CPU_NAME=haswell     numba (analysis kernels) LLVM compiles the resampling kernels for Haswell
                                                   (AVX2 + FMA), not the host
========================== ======================= ==================================================

**MKL and the CPU vendor.** MKL asks two of its own functions (``mkl_serv_intel_cpu_true``,
``mkl_serv_intel_cpu``) whether the processor is Intel's. On an AMD processor it then takes other
SGEMM kernels for row counts below about 56 and honours no ``MKL_CBWR`` branch but ``COMPATIBLE``;
on an Intel one its kernels for a given shape also change with the thread count. Measured with
torch 2.13 (MKL 2024.2), float32 ``Linear`` products at both default models' widths, row counts 1 to
832, and attention-sized batched products (620 operations), on 1, 2 and 3 threads, on a 2-core AMD
EPYC (Zen 3), with MKL made to take its Intel path by the dispatch library below (it reproduced the
48 product hashes that a 2-core Intel Xeon with AVX-512 computed under every setting of the table,
and the Intel Xeon's whole SmolLM2 extraction file, byte for byte):

==================================== ===================================================
setting                              operations with more than one result (of 620)
==================================== ===================================================
AVX2 pins alone (vendor's own path)  476 to 522 AMD vs Intel path; AMD alone: 1 vs 2 threads
                                     differ at 5 to 11 rows
``MKL_CBWR=AVX2``                    AMD ignores it; Intel path: 94 differ across threads
``MKL_CBWR=AVX2,STRICT``             AMD ignores it (the whole extraction file differs)
``MKL_CBWR=COMPATIBLE``              245 (AMD vs Intel path and across threads)
Intel path + ``MKL_CBWR=AVX2,STRICT`` 0
==================================== ===================================================

The last row is the pin: ``src/uaprobe/repro/_mkl_dispatch.c``, a library of the two C functions answering
"Intel" (built at install time as ``uaprobe.repro._mkl_dispatch``; without a C compiler ``make setup``
stops on a machine that needs it), is loaded with ``RTLD_GLOBAL`` before torch and put first in
``LD_PRELOAD`` for every child process, so MKL's own calls resolve to it on every machine (on an
Intel processor it changes nothing), and ``MKL_CBWR=AVX2,STRICT`` holds the thread count out of the
bytes. :mod:`uaprobe.repro.mkl_pin` checks that it is the library MKL actually asks (a library the caller
preloads that defines the same functions is found first: :func:`pin` then executes the process again
with the dispatch library first) and proves it by the library's count of MKL's questions after a
product; :func:`record` writes the binding in effect. Its cost is measured by ``bench/extract.py``
(``numerics: portable pins ... vs today's pins ...``).

**MKL's vector math.** torch computes ``exp``, ``log``, ``sqrt``, ``tanh``, ``erf``, ``sin``,
``cos`` and a few more on float tensors with MKL's vector math library (VML), which picks its
kernels with a CPU check of its own: neither ``MKL_CBWR`` nor the dispatch library holds it, and one
machine (by elimination an AMD EPYC with AVX-512, Zen 4) computed other bytes for ``torch.exp`` than
the Intel Xeon and the Zen 3 under the other pins. ``MKL_VML_DEBUG_CPU_TYPE`` names VML's kernel
family outright, bypassing that check (MKL 2024.2 reads it in ``mkl_vml_serv_cpu_detect``); 3 is the
AVX2 family, the one VML chooses by itself on an Intel processor held to AVX2 (on the Xeon, with the
other pins: the same bytes for every function above, while 0 to 2 give the SSE families' and 5 the
AVX-512 family's). The extraction's forward pass calls none of these functions on its tensors (GELU,
SiLU, softmax and the norms are ATen's own kernels); the pin keeps the bytes of any code that does.

The pins override the calling environment (a shell with ``MKL_CBWR=COMPATIBLE`` or
``ATEN_CPU_CAPABILITY=default`` must not change the bytes). On a processor without AVX2 or FMA, or
one that is not x86-64, nothing is pinned (the AVX2 kernels would not run): its outputs differ in the
last digits, the provenance says so, and ``uaprobe verify --against`` compares them with a tolerance.

Thread counts: the analyses pin the BLAS to one thread (:data:`ANALYSIS_THREADS`); their compiled
kernels sum every output element on one thread in a fixed order (the bytes are the same on 1, 2 and 3
numba threads, tested). The extraction runs torch on a pinned :data:`EXTRACTION_THREADS` threads,
whatever the machine's cores: MKL's strict mode makes its products independent of the thread count,
but ATen's vectorised elementwise kernels are not. They split a tensor among the threads, and where
a thread's share is not a whole number of AVX2 vectors its last elements take the scalar code, which
rounds differently: Gemma's GELU over a batch of 64 x 7 x 2048 differs in the last bit at the
boundaries of three threads' shares, not of two, and so did 18 of 460 statements of the extraction.

:func:`record` is what determines the numbers (pins, ISA in use, pinned thread counts, library
versions): it goes into the HDF5 attributes, the results files and the paper, which are hashed by
DVC, so it holds nothing that differs between two pinned machines. :func:`machine_record` holds what
does (the CPU model and vendor, its core count, the threads actually used): it goes only into a
machine-local log that neither git nor DVC tracks (:func:`machine_log_path`).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from uaprobe.repro import mkl_pin

ISA = "AVX2"
"""The instruction set every pinned library is held to."""

ISA_PINS: Mapping[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "MKL_CBWR": "AVX2,STRICT",
    "MKL_VML_DEBUG_CPU_TYPE": "3",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "NUMBA_CPU_NAME": "haswell",
}
"""Environment that holds every CPU-dispatching library to its AVX2 kernels (see the module doc)."""

THREAD_VARIABLES: tuple[str, ...] = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The thread-count variables of OpenBLAS, OpenMP (torch, MKL) and MKL."""

EXTRACTION_THREADS = 2
"""torch's threads in the extraction (OpenMP and MKL), on every machine: its elementwise kernels' results
depend on how a tensor is split among threads (see the module doc)."""

ANALYSIS_THREADS = 1
"""BLAS threads of the analysis stages: many small BLAS/LAPACK calls, which extra threads do not
speed up (under CPU contention OpenBLAS's spinning threads slow some LAPACK calls down many times
over), and one thread fixes the order of every summation a BLAS call makes."""

NUMERIC_MODULES: tuple[str, ...] = ("numpy", "scipy", "torch")
"""Libraries that read the pins when they are first imported."""

REQUIRED_FLAGS: tuple[str, ...] = ("avx2", "fma", "avx", "f16c", "bmi1", "bmi2", "movbe", "abm", "popcnt")
"""CPU flags (``/proc/cpuinfo`` spelling) the pinned kernels need: AVX2 and FMA for ATen's, MKL's,
OpenBLAS's and numpy's AVX2 kernels, and the rest of Haswell's instruction set, which LLVM may emit
for ``NUMBA_CPU_NAME=haswell`` (``abm`` is LZCNT). A hypervisor can hide any of them."""

AVX512_FLAGS: tuple[str, ...] = ("avx512f", "avx512dq", "avx512bw", "avx512vl")
"""CPU flags of the AVX-512 subsets the libraries' AVX-512 kernels (MKL's, numpy's) need together."""

FOREIGN_VML_FAMILY = {True: "5", False: "0"}
"""A value of ``MKL_VML_DEBUG_CPU_TYPE`` other than the pinned one that this CPU can execute, by whether
it has AVX-512: 5 is VML's AVX-512 family, 0 its baseline SSE family (0 to 2 gave the same bytes and 3
other ones on an Intel Xeon; 4 crashed there). The variable names a kernel family outright, without
VML's own check of the CPU: a family the CPU lacks dies of SIGILL."""

MACHINE_LOG_DIR = Path("logs")
"""Where stages write their machine-local record (ignored by git, never a DVC output)."""


class PinnedTooLate(RuntimeError):
    """A numeric library was imported before :func:`pin`: its CPU code path is not pinned."""


def _cpuinfo_value(keys: tuple[str, ...], cpuinfo: str | None) -> str | None:
    """The first value of one of ``keys`` in ``/proc/cpuinfo`` (or the text given); None where absent."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keys:
            return value.strip()
    return None


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str] | None:
    """The flags of the first processor in ``/proc/cpuinfo`` (or of the text given); None where unknown."""
    flags = _cpuinfo_value(("flags", "Features"), cpuinfo)
    return None if flags is None else frozenset(flags.split())


def cpu_model(cpuinfo: str | None = None) -> str:
    """The processor's model string (machine-local: never written to a hashed output)."""
    return _cpuinfo_value(("model name",), cpuinfo) or platform.processor() or platform.machine() or "unknown"


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The processor's vendor string (``GenuineIntel``, ``AuthenticAMD``; machine-local)."""
    return _cpuinfo_value(("vendor_id",), cpuinfo) or "unknown"


def pinnable(machine: str | None = None, flags: frozenset[str] | None = None) -> tuple[bool, str]:
    """Whether the AVX2 pins can apply here, and why not if they cannot."""
    machine = (machine if machine is not None else platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return False, f"not an x86-64 processor ({machine})"
    missing = [f for f in REQUIRED_FLAGS if flags is not None and f not in flags]
    if missing:
        return False, f"the processor lacks {', '.join(missing)}"
    return True, ""


def has_avx512(flags: frozenset[str] | None) -> bool | None:
    """Whether the CPU offers every subset in :data:`AVX512_FLAGS`; None where its flags are unknown."""
    return None if flags is None else all(f in flags for f in AVX512_FLAGS)


def foreign_settings(flags: frozenset[str]) -> dict[str, str]:
    """Settings a caller's environment may hold that move each pinned library to other kernels, every
    one of them executable on a CPU with these flags (``pin`` must override them all). Only the VML
    family depends on the CPU: the others lower a ceiling or name an older instruction set."""
    return {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Sandybridge",
            "NPY_DISABLE_CPU_FEATURES": "X86_V3", "ONEDNN_MAX_CPU_ISA": "SSE41",
            "MKL_VML_DEBUG_CPU_TYPE": FOREIGN_VML_FAMILY[bool(has_avx512(flags))]}


def pins_for(machine: str | None = None, flags: frozenset[str] | None = None) -> dict[str, str]:
    """The ISA pins that apply on this machine: all of :data:`ISA_PINS`, or none (see :func:`pinnable`)."""
    ok, _ = pinnable(machine, flags)
    return dict(ISA_PINS) if ok else {}


def pin(*, analysis: bool = False, strict: bool = True, environ: MutableMapping[str, str] | None = None,
        modules: Mapping[str, Any] | None = None, flags: frozenset[str] | None = None) -> dict[str, str]:
    """Pin every numeric library's CPU code path and thread count: torch's to :data:`EXTRACTION_THREADS`,
    or with ``analysis`` the BLAS to :data:`ANALYSIS_THREADS`.

    Call it before numpy, scipy or torch is imported: if one already is, the pin would silently not
    apply to it, so with ``strict`` it raises :class:`PinnedTooLate` and without it changes nothing
    (a caller inside a process that has its own numerics, e.g. the ``uaprobe`` command called from
    Python). With ``strict``, where a library the caller preloads answers MKL's vendor check before the
    dispatch library, the process is executed again with it first (:func:`uaprobe.repro.mkl_pin.put_first`).
    ``flags`` defaults to this machine's CPU flags. Returns the variables it set.
    """
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    early = [m for m in NUMERIC_MODULES if m in modules]
    if early and not strict:
        return {}
    if early:
        raise PinnedTooLate(f"{', '.join(early)} imported before uaprobe.repro.numerics.pin(): call pin() first, "
                            "before any numeric import")
    wanted = pins_for(flags=cpu_flags() if flags is None else flags)
    library = mkl_pin.library() if wanted else None
    wanted.update({var: str(ANALYSIS_THREADS if analysis else EXTRACTION_THREADS) for var in THREAD_VARIABLES})
    if library is not None:
        # every child process: by the dynamic loader at its start, before the caller's own preloads (LD_PRELOAD
        # has no quoting: a path with a space or colon is left to the children's own pin())
        preload = {"LD_PRELOAD": environ.get("LD_PRELOAD", "")}
        if mkl_pin.preload_first(library, preload):
            wanted["LD_PRELOAD"] = preload["LD_PRELOAD"]
    environ.update(wanted)
    if library is not None and environ is os.environ and modules is sys.modules:
        mkl_pin.load()  # this process: now, before torch
        if strict:
            mkl_pin.put_first(environ)  # another library answers MKL first: run again with this one first
    return wanted


def unpinned_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``environ`` (default: this process's) without any pin :func:`pin` sets, the thread counts
    and the MKL dispatch library's ``LD_PRELOAD`` entry included: for a child process that is to choose
    its own code paths."""
    environ = os.environ if environ is None else environ
    out = {k: v for k, v in environ.items()
           if k not in ISA_PINS and k not in THREAD_VARIABLES and k != mkl_pin.REEXECUTED}
    preload = [p for p in out.pop("LD_PRELOAD", "").replace(":", " ").split() if "_mkl_dispatch" not in Path(p).name]
    if preload:
        out["LD_PRELOAD"] = " ".join(preload)
    return out


def _openblas_cores() -> list[dict[str, str]]:
    """Version and kernel set of every OpenBLAS that numpy and scipy ship (their wheels vendor one each)."""
    found = []
    for mod_name, libs_dir in (("numpy", "numpy.libs"), ("scipy", "scipy.libs")):
        mod = sys.modules.get(mod_name)
        if mod is None or not getattr(mod, "__file__", None):
            continue
        directory = Path(mod.__file__).resolve().parent.parent / libs_dir
        for lib_path in sorted(directory.glob("*openblas*.so*")):
            try:
                lib = ctypes.CDLL(str(lib_path))
            except OSError:
                continue
            entry = {"library": mod_name}
            for key, names in (("core", ("get_corename64_", "get_corename")),
                               ("config", ("get_config64_", "get_config"))):
                for prefix in ("scipy_openblas_", "openblas_"):
                    fn = next((getattr(lib, prefix + n) for n in names if hasattr(lib, prefix + n)), None)
                    if fn is not None:
                        fn.restype = ctypes.c_char_p
                        entry[key] = (fn() or b"").decode().strip()
                        break
            found.append(entry)
    return found


def _numpy_simd() -> dict[str, list[str]]:
    np_core = sys.modules.get("numpy._core._multiarray_umath")
    if np_core is None:
        return {}
    features = getattr(np_core, "__cpu_features__", {})
    return {"baseline": list(getattr(np_core, "__cpu_baseline__", [])),
            "dispatch_enabled": [t for t in getattr(np_core, "__cpu_dispatch__", []) if features.get(t)]}


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def record(*, analysis: bool = False, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What determines this process's numbers: the pins, the ISA and kernels in use, pinned thread
    counts (``analysis``: the BLAS threads of :func:`pin`), library versions. The same on every
    x86-64 machine with AVX2, so it may go into hashed outputs."""
    environ = os.environ if environ is None else environ
    pins = {k: environ[k] for k in sorted(ISA_PINS) if environ.get(k) == ISA_PINS[k]}
    threads = {k: environ.get(k, "unset") for k in THREAD_VARIABLES}
    out: dict[str, Any] = {
        "isa": ISA if len(pins) == len(ISA_PINS) else "unpinned",
        "pins": pins,
        "threads": threads,
        "machine": platform.machine().lower(),
    }
    # A fixed set of libraries, each loaded here if it is not yet: what is recorded must not depend on
    # what else the process happened to import before (an extraction run from the test suite, or one
    # whose model code pulled scipy in, would otherwise record different bytes).
    import numpy  # noqa: F401
    import scipy.linalg  # noqa: F401  (loads scipy's own OpenBLAS)

    out["numpy"] = {"version": _version("numpy"), "simd": _numpy_simd()}
    out["scipy"] = {"version": _version("scipy")}
    blas = _openblas_cores()
    if blas:
        out["openblas"] = blas
    if analysis:  # the analyses' resampling kernels (the extraction compiles nothing)
        out["numba"] = {"version": _version("numba"), "cpu_name": environ.get("NUMBA_CPU_NAME", "host")}
    if not analysis:  # the extraction's forward pass (the analyses never load torch, nor MKL)
        import torch

        # which library answers MKL's vendor check, proven by a product (the reason is machine-local)
        out["mkl_dispatch"] = mkl_pin.state(torch).split(":")[0] if _torch_blas(torch) != "not MKL" else "no MKL"
        out["torch"] = {"version": str(torch.__version__),
                        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
                        "blas": _torch_blas(torch)}
    return out


def check_mkl(torch: Any) -> None:
    """Refuse to go on where the pins apply, torch's BLAS is MKL and MKL's vendor check is not answered
    by the dispatch library (:func:`uaprobe.repro.mkl_pin.state`): the extraction would write other bytes."""
    from uaprobe.errors import UAProbeError

    if not pins_for(flags=cpu_flags()) or _torch_blas(torch) == "not MKL":
        return
    state = mkl_pin.state(torch)
    if state != mkl_pin.INTEL_PATH:
        preloaded = os.environ.get("LD_PRELOAD", "")
        hint = (f" A library in LD_PRELOAD ({preloaded}) that defines MKL's vendor check (MKL itself, or another) is "
                "found first: run without it (`env -u LD_PRELOAD dvc repro`)." if "uaprobe's" in state else "")
        raise UAProbeError(f"MKL is not held to its Intel code path ({state}): the extraction would write other "
                           f"bytes than dvc.lock records, so nothing is run.{hint} `uaprobe fingerprint` shows the "
                           "binding in effect")


def _torch_blas(torch: Any) -> str:
    for line in torch.__config__.show().splitlines():
        if "Math Kernel Library" in line:
            return line.strip(" -")
    return "not MKL"


def record_json(*, analysis: bool = False, environ: Mapping[str, str] | None = None) -> str:
    """:func:`record` as one canonical JSON line (an HDF5 attribute)."""
    return json.dumps(record(analysis=analysis, environ=environ), sort_keys=True, separators=(",", ":"))


def machine_record() -> dict[str, Any]:
    """What differs between machines and must not enter a hashed output: the CPU model, its
    logical CPUs, whether it could be pinned, the threads actually used."""
    flags = cpu_flags()
    ok, why = pinnable(flags=flags)
    out: dict[str, Any] = {
        "cpu_model": cpu_model(),
        "cpu_vendor": cpu_vendor(),
        "logical_cpus": os.cpu_count(),
        "avx512": has_avx512(flags),
        "pinned": ok,
        "not_pinned_because": why,
        "platform": platform.platform(),
    }
    numba = sys.modules.get("numba")
    if numba is not None:
        out["numba_threads"] = numba.get_num_threads()
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch_threads"] = torch.get_num_threads()
        out["mkl_dispatch"] = mkl_pin.state(torch)
        if torch.cuda.is_available():
            out["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return out


def machine_log_path(stage: str, root: Path = Path(".")) -> Path:
    """``<root>/logs/<stage>.machine.json``: the stage's machine-local record (``stage`` as DVC names
    it; the stages pass the directory of their params file, the project root)."""
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in stage)
    return root / MACHINE_LOG_DIR / f"{safe}.machine.json"


def write_machine_log(stage: str, root: Path = Path("."), *, analysis: bool = False) -> Path:
    """Write :func:`machine_record` and :func:`record` of this process to :func:`machine_log_path`."""
    path = machine_log_path(stage, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"stage": stage, "machine": machine_record(), "numerics": record(analysis=analysis)}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def stage_name(default: str) -> str:
    """The DVC stage being run (``$DVC_STAGE``, e.g. ``extract@smollm2-135m``), else ``default``."""
    return os.environ.get("DVC_STAGE") or default


def log_machine(stage: str, root: Path = Path("."), *, analysis: bool = False) -> str:
    """Write the machine-local record and return a one-line summary of it for the stage's log."""
    path = write_machine_log(stage, root, analysis=analysis)
    m = machine_record()
    threads = f", torch threads {m['torch_threads']}" if "torch_threads" in m else ""
    state = f"pinned to {ISA}" if m["pinned"] else f"not pinned ({m['not_pinned_because']})"
    return f"{m['cpu_model']}, {m['logical_cpus']} logical CPUs{threads}; {state}; recorded in {path}"


def results_provenance(extraction: Any, *, analysis: Mapping[str, Any]) -> dict[str, Any]:
    """The ``numerics`` block of a results file: the extraction's record (the HDF5 attribute
    ``numerics``, JSON) and the analysis process's own :func:`record`."""
    if isinstance(extraction, bytes):
        extraction = extraction.decode("utf-8")
    try:
        parsed = json.loads(extraction) if isinstance(extraction, str) else None
    except json.JSONDecodeError:
        parsed = None
    return {"extraction": parsed if isinstance(parsed, dict) else "not recorded", "analysis": dict(analysis)}
