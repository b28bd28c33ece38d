"""Uniformity through Gram matrices against the seeds' direct cosine-matrix version."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seed_reference import uniformity_score
from uaprobe.analysis.uniformity import FlatGram, gram, group_means, group_uniformity, uniformity


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_uniformity_gram_trick_matches_the_seed(rng):
    for n in (2, 3, 10, 31):
        x = (rng.standard_normal((n, 40)) + 0.7).astype(np.float32)
        assert uniformity(x) == pytest.approx(uniformity_score(x.astype(np.float64)), abs=1e-12)
        assert uniformity(x) == pytest.approx(uniformity_score(x), abs=1e-6)  # the seed ran in float32


def test_uniformity_is_vectorised_over_leading_axes(rng):
    x = rng.standard_normal((5, 3, 8, 16))
    got = uniformity(x)
    assert got.shape == (5, 3)
    assert got[4, 2] == pytest.approx(uniformity_score(x[4, 2]), abs=1e-12)


def test_uniformity_of_fewer_than_two_is_nan():
    assert np.isnan(uniformity(np.ones((1, 4))))


def test_uniformity_keeps_the_seeds_epsilon_for_zero_rows():
    x = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    assert uniformity(x) == pytest.approx(uniformity_score(x), abs=1e-12)


def test_planted_uniformity_is_exact():
    # sqrt(c) e0 + sqrt(1-c) e_i: every pairwise cosine is c
    c, n = 0.37, 6
    x = np.zeros((n, n + 1))
    x[:, 0] = np.sqrt(c)
    x[np.arange(n), 1 + np.arange(n)] = np.sqrt(1 - c)
    assert uniformity(3.0 * x) == pytest.approx(c, abs=1e-9)  # up to the seeds' 1e-10 in the norm


def test_group_uniformity_matches_direct_per_group(rng):
    layers, n, d, k = 3, 25, 12, 4
    x = rng.standard_normal((layers, n, d)) + 0.3
    g = gram(x)
    labels = rng.integers(-1, k, size=(6, n))
    labels[0, :] = 0  # one group with everything
    labels[1, :] = -1
    labels[1, :3] = 2  # a group of 3, others empty
    labels[2, :] = np.arange(n) % k
    labels[2, 0] = 3
    labels[2, 1:] = np.where(labels[2, 1:] == 3, 0, labels[2, 1:])  # group 3 has a single member
    values, sizes = group_uniformity(g, labels, n_groups=k)
    assert values.shape == (layers, 6, k)
    for p in range(6):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            assert sizes[p, grp] == members.size
            for layer in range(layers):
                if members.size < 2:
                    assert np.isnan(values[layer, p, grp])
                else:
                    assert values[layer, p, grp] == pytest.approx(uniformity_score(x[layer, members]), abs=1e-12)


def test_group_uniformity_of_a_gram_difference_is_the_difference(rng):
    a = rng.standard_normal((2, 15, 6))
    b = rng.standard_normal((2, 15, 6))
    labels = rng.integers(0, 3, size=(4, 15))
    ua, _ = group_uniformity(gram(a), labels, n_groups=3)
    ub, _ = group_uniformity(gram(b), labels, n_groups=3)
    diff, _ = group_uniformity(FlatGram(gram(a) - gram(b)), labels, n_groups=3)
    assert np.allclose(diff, ua - ub, atol=1e-13, equal_nan=True)


def test_group_means(rng):
    v = rng.standard_normal(10)
    labels = np.array([[0, 0, 1, 1, 1, -1, 2, 2, 2, 2], [0] * 10])
    means, sizes = group_means(v, labels, n_groups=4)
    assert means[0, 0] == pytest.approx(v[:2].mean())
    assert means[0, 1] == pytest.approx(v[2:5].mean())
    assert means[0, 2] == pytest.approx(v[6:].mean())
    assert np.isnan(means[0, 3]) and sizes[0].tolist() == [2, 3, 4, 0]
    assert means[1, 0] == pytest.approx(v.mean())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 14), d=st.integers(1, 6), k=st.integers(1, 5), parts=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_group_uniformity_property(n, d, k, parts, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, n, d))
    labels = rng.integers(-1, k, size=(parts, n))
    values, sizes = group_uniformity(gram(x), labels, n_groups=k)
    for p in range(parts):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            assert sizes[p, grp] == members.size
            for layer in range(2):
                expected = uniformity_score(x[layer, members]) if members.size >= 2 else np.nan
                assert values[layer, p, grp] == pytest.approx(expected, abs=1e-12, nan_ok=True)
