"""Builds the one compiled part of uaprobe, the MKL dispatch library (``src/uaprobe/repro/_mkl_dispatch.c``;
see :mod:`uaprobe.repro.mkl_pin`).

Everything else is in pyproject.toml. Where the numeric pins apply (an x86-64 processor with AVX2 and
the rest of :data:`uaprobe.repro.numerics.REQUIRED_FLAGS`), the library is part of them: without a working C
compiler the install stops, saying so and how to get one, instead of going on without it. Elsewhere
nothing would load it and it is not built.
"""

import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
from uaprobe.repro import numerics  # noqa: E402  (standard library only at import)

sys.path.pop(0)

NEEDED, WHY_NOT = numerics.pinnable(flags=numerics.cpu_flags())

FIX = ("uaprobe: the MKL dispatch library (src/uaprobe/repro/_mkl_dispatch.c) could not be built ({reason}). This "
       "processor needs it: without it MKL takes its vendor's own kernels and the extraction writes other bytes "
       "than dvc.lock records. Install a C compiler (Debian/Ubuntu: `apt-get install gcc`; Fedora: `dnf install "
       "gcc`; conda: `conda install -c conda-forge c-compiler`) and rerun `make setup`.")


class BuildDispatch(build_ext):
    """build_ext whose failure, where the library is needed, is one message with the fix."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001 - CompileError, LinkError, a missing compiler: one message for all
            if ext.optional:
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SystemExit(FIX.format(reason=first)) from None


EXTENSIONS = [Extension("uaprobe.repro._mkl_dispatch", sources=["src/uaprobe/repro/_mkl_dispatch.c"])] if NEEDED else []

if not NEEDED:
    print(f"uaprobe: the MKL dispatch library is not built: the numeric pins do not apply here ({WHY_NOT})")

setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": BuildDispatch})
