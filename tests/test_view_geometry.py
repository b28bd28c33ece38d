"""The compiled pair-level geometry (:mod:`uaprobe.analysis.geometry.view_geometry`) against the numpy
expressions of its definitions."""

from __future__ import annotations

import numpy as np
import pytest

from uaprobe.analysis.pairs import option_b
from uaprobe.analysis.geometry.view_geometry import GEOMETRY_METRICS, view_geometry


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(11)


def numpy_geometry(xa: np.ndarray, xb: np.ndarray) -> dict[str, np.ndarray]:
    """The seven metrics as numpy expressions, as the notebook writes them (the reference)."""
    xa, xb = xa.astype(float), xb.astype(float)
    n = xa.shape[0]
    cos = option_b.cosine
    ca, cb = xa.mean(axis=0), xb.mean(axis=0)
    mid = (ca + cb) / 2.0
    ca_loo = (xa.sum(axis=0) - xa) / (n - 1)
    cb_loo = (xb.sum(axis=0) - xb) / (n - 1)
    mid_loo = (ca_loo + cb_loo) / 2.0
    return {
        "centroid_asymmetry": cos(xa, ca) - cos(xb, cb),
        "cross_centroid": cos(xa, cb) - cos(xb, ca),
        "within_pair_sim": cos(xa, xb),
        "margin_asymmetry": np.linalg.norm(xa - mid, axis=1) - np.linalg.norm(xb - mid, axis=1),
        "centroid_asymmetry_loo": cos(xa, ca_loo) - cos(xb, cb_loo),
        "cross_centroid_loo": cos(xa, cb_loo) - cos(xb, ca_loo),
        "margin_asymmetry_loo": np.linalg.norm(xa - mid_loo, axis=1) - np.linalg.norm(xb - mid_loo, axis=1),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,d", [(2, 1), (3, 7), (50, 130), (40, 576), (9, 9)])
def test_view_geometry_matches_the_numpy_expressions(rng, dtype, n, d):
    """On strided views of (n, V, D) states, as the views of one pooling are read, offset from the
    origin as hidden states are (norms far from 1)."""
    a = (rng.standard_normal((n, 3, d)) * 2.0 + rng.standard_normal(d) * 5.0).astype(dtype)
    b = (rng.standard_normal((n, 3, d)) * 2.0 + rng.standard_normal(d) * 5.0).astype(dtype)
    for v in range(3):
        got = view_geometry(a[:, v], b[:, v], option_b.EPS)
        want = numpy_geometry(a[:, v], b[:, v])
        for row, name in enumerate(GEOMETRY_METRICS):
            np.testing.assert_allclose(got[row], want[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_view_geometry_with_zero_and_repeated_rows(rng):
    """A zero state (its cosines 0 through the guard) and pairs whose two statements are one state."""
    a = rng.standard_normal((20, 16))
    b = rng.standard_normal((20, 16))
    a[3] = 0.0
    b[5] = a[5]
    got = view_geometry(a, b, option_b.EPS)
    want = numpy_geometry(a, b)
    for row, name in enumerate(GEOMETRY_METRICS):
        np.testing.assert_allclose(got[row], want[name], rtol=1e-9, atol=1e-12, err_msg=name)



def test_the_cosine_of_a_state_with_itself_does_not_depend_on_the_order_of_its_sums(rng):
    """A pair whose two statements have one state (two first tokens that are one token): its
    within-pair similarity is ``|a|^2 / (|a|^2 + eps)`` whatever order the squares are added in, so
    such pairs are not ranked by rounding (the dimensions permuted give the same bytes)."""
    a = rng.standard_normal((6, 40)) * 10.0
    b = rng.standard_normal((6, 40))
    b[:3] = a[:3]
    perm = rng.permutation(40)
    got = view_geometry(a, b, option_b.EPS)[GEOMETRY_METRICS.index("within_pair_sim")]
    permuted = view_geometry(a[:, perm], b[:, perm], option_b.EPS)[GEOMETRY_METRICS.index("within_pair_sim")]
    assert np.array_equal(got[:3], permuted[:3])
    sq = (a[:3] ** 2).sum(axis=1)
    np.testing.assert_allclose(got[:3], sq / (sq + option_b.EPS), rtol=1e-15)
