"""Builds the one compiled part of uaprobe, the MKL dispatch library of :mod:`uaprobe.numerics`.

Everything else is in pyproject.toml. Without a C compiler the install goes on without it, and
``uaprobe fingerprint`` reports that MKL's code path is not pinned.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("uaprobe._mkl_dispatch", sources=["src/uaprobe/_mkl_dispatch.c"], optional=True)])
