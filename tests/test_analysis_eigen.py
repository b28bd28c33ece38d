"""The GIL-free eigensolution against scipy.linalg.eigh itself: the same bytes, the same layout."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg

from uaprobe.analysis.eigen import eigh_subset


@pytest.mark.parametrize("n,d,k", [(7, 12, 3), (40, 9, 5), (120, 300, 10), (64, 64, 64), (1, 3, 1)])
def test_eigh_subset_is_scipys_eigh_bit_for_bit(n, d, k):
    rng = np.random.default_rng(n + d)
    x = rng.standard_normal((n, d))
    x -= x.mean(axis=0)
    g = x @ x.T
    want_w, want_v = linalg.eigh(g, subset_by_index=[n - k, n - 1])
    got_w, got_v = eigh_subset(g, n - k, n - 1)
    assert np.array_equal(got_w, want_w) and np.array_equal(got_v, want_v)
    assert got_v.strides == want_v.strides  # Fortran-ordered, as the products that follow read it


def test_eigh_subset_of_a_middle_range_and_repeated_eigenvalues():
    g = np.diag([3.0, 1.0, 3.0, 2.0, 2.0, 5.0])
    g[0, 1] = g[1, 0] = 0.5
    want = linalg.eigh(g, subset_by_index=[1, 4])
    got = eigh_subset(g, 1, 4)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("a,lo,hi,match", [
    (np.ones((2, 3)), 0, 0, "square"),
    (np.full((2, 2), np.nan), 0, 1, "infs or NaNs"),
    (np.eye(3), 2, 3, "outside"),
    (np.eye(3), 2, 1, "outside"),
])
def test_eigh_subset_refuses_what_scipy_refuses(a, lo, hi, match):
    with pytest.raises(ValueError, match=match):
        eigh_subset(a, lo, hi)
