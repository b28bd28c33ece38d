"""MKL's vendor check answered by the project's dispatch library, and the proof that MKL asked it.

MKL asks two of its own functions, ``mkl_serv_intel_cpu_true`` and ``mkl_serv_intel_cpu``, whether the
processor is Intel's (see :mod:`uaprobe.repro.numerics`). ``src/uaprobe/repro/_mkl_dispatch.c`` defines both,
answering yes, and counts its answers. The dynamic loader binds MKL's calls to the first library in
the process's global scope that defines them: the program, then the ``LD_PRELOAD`` libraries in
their order, then the libraries loaded with ``RTLD_GLOBAL`` in theirs. So the dispatch library,
loaded before torch, answers MKL -- unless a library the caller preloads defines the same two
functions (a library of their own, or MKL itself, which HPC sites often preload): that one is found
first, and MKL silently takes its vendor's path.

Two checks tell which library answers:

- :func:`binding`: the file of the definition the global lookup finds (``dlsym`` then ``dladdr``),
  available before torch is imported;
- :func:`calls`: the dispatch library's count of its answers. MKL asks at its first product, so a
  count above 0 after a product through torch (:func:`probe`) proves that MKL consulted it.

:func:`put_first` is what a process that will run MKL does when another library binds first: it
executes itself again, once, with the dispatch library first in ``LD_PRELOAD``.
:func:`state` is the binding actually in effect, as the provenance records it; where it is not the
dispatch library, :func:`uaprobe.repro.numerics.check_mkl` refuses the extraction.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("_mkl_dispatch.c")
"""The C source of the dispatch library; built at install as ``uaprobe.repro._mkl_dispatch``."""

SYMBOL = "mkl_serv_intel_cpu_true"
"""The vendor check whose binding is looked up (the other one is defined beside it, in every library
that defines either)."""

REEXECUTED = "UAPROBE_MKL_PRELOADED"
"""Set in the environment of a process :func:`put_first` executed again, so that it does it once."""

INTEL_PATH = "intel path"
"""What :func:`state` says when MKL's vendor check is answered by the dispatch library."""

_loaded: list[ctypes.CDLL] = []
"""The dispatch library as this process loaded it (:func:`load`)."""


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def library() -> Path | None:
    """The built dispatch library of this installation, None where it was not built."""
    built = sorted(SOURCE.parent.glob("_mkl_dispatch*.so"))
    return built[0] if built else None


def load() -> bool:
    """Load the dispatch library into the process's global symbol scope (before torch loads MKL); False
    where it was not built or cannot be loaded."""
    if _loaded:
        return True
    path = library()
    if path is None:
        return False
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    except OSError:
        return False
    if hasattr(lib, "uaprobe_mkl_dispatch_calls"):  # an older build has no count: state() says to rebuild it
        lib.uaprobe_mkl_dispatch_calls.restype = ctypes.c_ulong
        _loaded.append(lib)
    return True


def binding() -> str | None:
    """The file of the library whose ``mkl_serv_intel_cpu_true`` this process's global lookup finds -- the
    one MKL's calls bind to; None where no loaded library defines it."""
    try:
        libc = ctypes.CDLL(None)
        dlsym, dladdr = libc.dlsym, libc.dladdr
    except (OSError, AttributeError):
        return None
    dlsym.restype, dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
    dladdr.restype, dladdr.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    address = dlsym(None, SYMBOL.encode())
    info = _DlInfo()
    if not address or not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def bound_here() -> bool:
    """Whether MKL's vendor check binds to this installation's dispatch library (by :func:`binding`)."""
    found, ours = binding(), library()
    return found is not None and ours is not None and _same_file(found, ours)


def calls() -> int | None:
    """How many times MKL asked the dispatch library in this process; None where it is not loaded."""
    return int(_loaded[0].uaprobe_mkl_dispatch_calls()) if _loaded else None


def probe(torch: Any) -> int | None:
    """A small float32 product through torch (MKL's SGEMM, which asks the vendor check at its first call),
    then :func:`calls`."""
    torch.nn.functional.linear(torch.ones(3, 8), torch.ones(2, 8))
    return calls()


def preload_first(path: Path, environ: MutableMapping[str, str]) -> bool:
    """Put ``path`` first in ``environ``'s ``LD_PRELOAD``, keeping the caller's other entries in their order;
    False (nothing changed) for a path ``LD_PRELOAD`` cannot name (it splits on spaces and colons)."""
    if any(c.isspace() or c == ":" for c in str(path)):
        return False
    rest = [p for p in environ.get("LD_PRELOAD", "").replace(":", " ").split() if not _same_file(p, path)]
    environ["LD_PRELOAD"] = " ".join([str(path), *rest])
    return True


def put_first(environ: MutableMapping[str, str] | None = None) -> None:
    """In a process that will run MKL: if another library answers MKL's vendor check (:func:`binding`),
    execute this process again, once, with the dispatch library first in ``LD_PRELOAD``. Where that was
    done already or cannot be done, it returns: :func:`uaprobe.repro.numerics.check_mkl` refuses the extraction
    then, naming the library that answers."""
    environ = os.environ if environ is None else environ
    path = library()
    if path is None or binding() is None or bound_here() or environ.get(REEXECUTED) == "1":
        return
    if preload_first(path, environ):
        environ[REEXECUTED] = "1"
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], dict(environ))


def state(torch: Any | None = None) -> str:
    """The binding in effect: :data:`INTEL_PATH` where the dispatch library answers MKL's vendor check --
    proven by its count after a product when ``torch`` is given -- else ``vendor path: <why>``."""
    if library() is None:
        return ("vendor path: uaprobe.repro._mkl_dispatch not built (no C compiler at install); install one and rerun "
                "`make setup`")
    if not bound_here():
        found = binding()
        if found is None:
            return "vendor path: the dispatch library was not loaded before torch (call uaprobe.repro.numerics.pin() first)"
        return f"vendor path: MKL's vendor check is answered by {found}, found before uaprobe's dispatch library"
    if torch is not None and load() and not _loaded:
        return "vendor path unproven: uaprobe.repro._mkl_dispatch is an older build without its count; rerun `make setup`"
    if torch is not None and not probe(torch):
        return "vendor path: MKL did not consult uaprobe's dispatch library (its count stayed 0 after a product)"
    return INTEL_PATH


def main() -> int:
    """``python -m uaprobe.repro.mkl_pin``: load the dispatch library as :func:`uaprobe.repro.numerics.pin` does, but
    leave ``LD_PRELOAD`` as the caller set it; print which library answers MKL's vendor check and whether
    MKL consulted the dispatch library (one JSON line)."""
    import json

    loaded = load()
    import torch

    count = probe(torch) if loaded else None
    print(json.dumps({"binding": binding(), "library": str(library()), "calls": count, "state": state(torch)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
