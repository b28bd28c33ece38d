"""numpy's summation order, compiled (:mod:`uaprobe.analysis.pairwise`), and the unit rows made with
it: the same bytes as numpy, not merely close values."""

from __future__ import annotations

import numpy as np
import pytest

from uaprobe.analysis import pairwise
from uaprobe.analysis.pairwise import pairwise_dot, scratch
from uaprobe.analysis.uniformity import NORM_EPS, unit_rows

RUN_LENGTHS = [1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 136, 255, 256, 257, 576, 640, 1023, 2049]
"""Every kind of run numpy's pairwise summation treats differently: below 8, up to 128 with a
remainder, and split in halves rounded to multiples of 8, once and several times."""


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(11)


def numpy_unit_rows(x: np.ndarray) -> np.ndarray:
    """The seeds' expression, the reference."""
    x = np.asarray(x, dtype=np.float64)
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + NORM_EPS)


def test_pairwise_dot_is_numpys_sum_of_the_products(rng):
    """From the start of an array and inside it, with and without a second factor."""
    for n in list(range(1, 300)) + [576, 640, 1023, 2049, 5000]:
        a = rng.standard_normal(n) * rng.uniform(0.01, 100.0)
        b = rng.standard_normal(n)
        ones = np.ones(n + 1)
        assert 0.0 + pairwise_dot(a, ones, 0, n, *scratch()) == np.add.reduce(a), n
        assert 0.0 + pairwise_dot(np.concatenate([[7.0], a]), ones, 1, n, *scratch()) == np.add.reduce(a), n
        assert 0.0 + pairwise_dot(a, b, 0, n, *scratch()) == np.add.reduce(a * b), n


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", RUN_LENGTHS[1:])
def test_unit_rows_are_numpys_bytes_in_every_layout_it_compiles(rng, dtype, d):
    """C-contiguous rows of any rank, strided (N, D) slices of a layer-major array (how the sweep reads
    a layer), every other row, and states offset from the origin (norms far from 1)."""
    states = (rng.standard_normal((23, 3, d)) * rng.uniform(0.1, 50.0) + rng.standard_normal(d) * 4.0).astype(dtype)
    for x in (states, states[:, 1], states[::2, 2], states[5:9], states.reshape(23 * 3, d)):
        assert pairwise_compiled(x)
        got = unit_rows(x)
        assert got.dtype == np.float64 and got.shape == x.shape
        assert np.array_equal(got, numpy_unit_rows(x)), (x.shape, x.strides)


def pairwise_compiled(x: np.ndarray) -> bool:
    return pairwise.rows_in_order(np.asarray(x))


def test_unit_rows_other_layouts_and_inputs_take_numpy(rng):
    """Column-major rows (numpy may sum them along the other axis), rows of one entry, integers, an
    empty array and zero rows: numpy's own path, numpy's values."""
    f_order = np.asfortranarray(rng.standard_normal((40, 130)))
    cases = [f_order, f_order.T, rng.standard_normal((6, 1)), np.arange(12).reshape(3, 4), np.zeros((0, 5)),
             np.zeros((3, 9))]
    for x in cases:
        got, want = unit_rows(x), numpy_unit_rows(x)
        assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
    assert not pairwise_compiled(f_order) and not pairwise_compiled(cases[2]) and not pairwise_compiled(cases[3])


def test_unit_rows_into_holds_each_row_of_any_strides(rng):
    """The kernel itself on a strided float32 view, against numpy row by row."""
    x = rng.standard_normal((9, 2, 300)).astype(np.float32)[:, 1]
    out = np.empty(x.shape)
    pairwise.unit_rows_into(x, NORM_EPS, out)
    for i in range(x.shape[0]):
        row = x[i].astype(np.float64)
        assert np.array_equal(out[i], row / (np.linalg.norm(row, axis=-1) + NORM_EPS))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_directions_are_numpys_bytes_zero_and_non_finite_rows_left_zero(rng, dtype):
    """The kNN's unguarded unit rows against ``np.divide(x, norm, where=norm > 0)``: rows of every run
    length, a zero row and a row with a NaN (its norm is not positive: zeros, as numpy leaves them)."""
    for d in RUN_LENGTHS[1:]:
        x = (rng.standard_normal((12, 2, d)) * 7.0 + 1.0).astype(dtype)[:, 1]
        x[3] = 0.0
        x[5, 0] = np.nan
        x64 = x.astype(np.float64)
        norm = np.linalg.norm(x64, axis=1, keepdims=True)
        want = np.divide(x64, norm, out=np.zeros_like(x64), where=norm > 0)
        got = np.empty(x.shape)
        pairwise.directions_into(x, got)
        assert np.array_equal(got, want), d
        assert (got[3] == 0).all() and (got[5] == 0).all()
