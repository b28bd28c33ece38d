"""The largest eigenpairs of a symmetric matrix, by the LAPACK call of ``scipy.linalg.eigh``, without the GIL.

``scipy.linalg.eigh(a, subset_by_index=[lo, hi])`` runs LAPACK's ``dsyevr`` (range ``I``, lower
triangle, ``abstol`` 0, the workspace sizes of its own query) through a wrapper that holds the
GIL, so the representation sweep's eigensolutions ran one at a time whatever the worker threads.
:func:`eigh_subset` makes the same call of the same library (scipy's ``cython_lapack`` exports
the routine it links) from compiled code that releases the GIL, with the same arguments and the
same Fortran-ordered copy of the matrix, so it returns the same bytes (tested against scipy) and
several run at once.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import njit, types
from numba.extending import get_cython_function_address
from scipy.linalg import lapack

_SYMBOL = "uaprobe_scipy_dsyevr"
llvm.add_symbol(_SYMBOL, get_cython_function_address("scipy.linalg.cython_lapack", "dsyevr"))
_dsyevr = types.ExternalFunction(_SYMBOL, types.void(*([types.voidptr] * 21)))
"""LAPACK's dsyevr as scipy links it, bound by name (so the compiled caller can be cached)."""

_workspace: dict[int, tuple[int, int]] = {}
"""n -> (lwork, liwork): what scipy.linalg.eigh asks dsyevr for (its workspace query, rounded as scipy rounds it)."""


@njit(nogil=True, cache=True)
def _syevr(chars: np.ndarray, ints: np.ndarray, reals: np.ndarray, a: np.ndarray, w: np.ndarray, z: np.ndarray,
           isuppz: np.ndarray, work: np.ndarray, iwork: np.ndarray) -> None:  # pragma: no cover - compiled
    """dsyevr(jobz, range, uplo = chars; n, lda, il, iu, m, ldz, lwork, liwork, info = ints;
    vl, vu, abstol = reals), every argument by reference as Fortran takes it."""
    _dsyevr(chars[0:1].ctypes, chars[1:2].ctypes, chars[2:3].ctypes, ints[0:1].ctypes, a.ctypes,
            ints[1:2].ctypes, reals[0:1].ctypes, reals[1:2].ctypes, ints[2:3].ctypes, ints[3:4].ctypes,
            reals[2:3].ctypes, ints[4:5].ctypes, w.ctypes, z.ctypes, ints[5:6].ctypes, isuppz.ctypes,
            work.ctypes, ints[6:7].ctypes, iwork.ctypes, ints[7:8].ctypes, ints[8:9].ctypes)


def _workspace_of(n: int) -> tuple[int, int]:
    if n not in _workspace:
        query = lapack.get_lapack_funcs(("syevr_lwork",), (np.zeros(1),))[0]
        _workspace[n] = lapack._compute_lwork(query, n, lower=1)
    return _workspace[n]


def eigh_subset(a: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``scipy.linalg.eigh(a, subset_by_index=[lo, hi])`` of a real symmetric (n, n) matrix: the
    eigenvalues ``lo..hi`` (ascending, 0-based) and their eigenvectors as (n, hi - lo + 1) columns,
    Fortran-ordered as scipy returns them; the GIL is released during the LAPACK call.

    Raises ValueError for a matrix that is not square or not finite, or indices out of range
    (scipy's checks), and numpy's LinAlgError where LAPACK does not converge."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"expected a non-empty square matrix, got shape {a.shape}")
    n = a.shape[0]
    if not 0 <= lo <= hi < n:
        raise ValueError(f"eigenvalue indices {lo}..{hi} outside 0..{n - 1}")
    if not np.isfinite(a).all():
        raise ValueError("array must not contain infs or NaNs")
    lwork, liwork = _workspace_of(n)
    k = hi - lo + 1
    ints = np.array([n, n, lo + 1, hi + 1, 0, n, lwork, liwork, 0], dtype=np.int32)
    w = np.zeros(n)
    z = np.zeros((k, n)).T  # Fortran-ordered (n, k)
    _syevr(np.frombuffer(b"VIL", dtype=np.uint8).copy(), ints, np.array([0.0, 1.0, 0.0]),
           np.array(a, order="F"), w, z, np.zeros(2 * n, dtype=np.int32), np.zeros(lwork),
           np.zeros(liwork, dtype=np.int32))
    if ints[8] != 0:
        raise np.linalg.LinAlgError(f"dsyevr failed (info = {ints[8]}): the eigensolution did not converge")
    m = int(ints[4])
    return w[:m], z[:, :m]


__all__ = ("eigh_subset",)
