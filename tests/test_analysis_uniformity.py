"""Uniformity through Gram matrices and through sums of unit vectors against the seeds' direct
cosine-matrix version."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seed_reference import uniformity_score
from uaprobe.analysis.uniformity import (Cosines, FlatGram, gram, group_means, group_pair_sums, group_uniformity,
                                        representation_for, unit_rows, uniformity)


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


def _awkward_labels(rng, n, k, parts):
    """Random labels (with -1) in rows 3.., and rows 0-2 with one whole group, a group of 3, a singleton."""
    labels = rng.integers(-1, k, size=(parts, n))
    labels[0, :] = 0  # one group with everything
    labels[1, :] = -1
    labels[1, :3] = 2  # a group of 3, the others empty
    labels[2, :] = np.arange(n) % k
    labels[2, 0] = k - 1
    labels[2, 1:] = np.where(labels[2, 1:] == k - 1, 0, labels[2, 1:])  # group k-1 has a single member
    return labels


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


# ------------------------------------------------------------------------- unit-vector form


@pytest.mark.parametrize("block_bytes", [1, 4096, 1 << 26])
def test_group_pair_sums_match_the_direct_upper_triangle(rng, block_bytes):
    n, views, d, k = 23, 5, 9, 4
    x = rng.standard_normal((n, views, d)) + 0.2
    x[4, 2] = 0.0  # a zero row contributes nothing
    u = unit_rows(x)
    labels = _awkward_labels(rng, n, k, parts=7)
    got = group_pair_sums(u, labels, n_groups=k, block_bytes=block_bytes)
    assert got.shape == (views, 7, k)
    for p in range(7):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            for v in range(views):
                block = u[members, v] @ u[members, v].T
                expected = block[np.triu_indices(members.size, k=1)].sum()
                assert got[v, p, grp] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("representation", ["gram", "vectors"])
def test_cosines_uniformity_matches_the_seed_on_each_side_and_their_difference(rng, representation):
    n, views, d, k = 30, 3, 8, 5
    a = rng.standard_normal((n, views, d)) + 0.5
    b = rng.standard_normal((n, views, d)) - 0.1
    b[7] = 0.0
    cos = Cosines(a, b, representation=representation)
    assert cos.representation == representation
    labels = _awkward_labels(rng, n, k, parts=6)
    u_a, sizes = cos.uniformity(labels, n_groups=k, side="a")
    u_b, sizes_b = cos.uniformity(labels, n_groups=k, side="b")
    diff, sizes_d = cos.uniformity(labels, n_groups=k, side="diff")
    assert (sizes == sizes_b).all() and (sizes == sizes_d).all()
    for p in range(6):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            assert sizes[p, grp] == members.size
            for v in range(views):
                if members.size < 2:
                    assert np.isnan(u_a[v, p, grp]) and np.isnan(diff[v, p, grp])
                    continue
                ea, eb = uniformity_score(a[members, v]), uniformity_score(b[members, v])
                assert u_a[v, p, grp] == pytest.approx(ea, abs=1e-12)
                assert u_b[v, p, grp] == pytest.approx(eb, abs=1e-12)
                assert diff[v, p, grp] == pytest.approx(ea - eb, abs=1e-12)


def test_both_representations_agree_on_nearly_collinear_states(rng):
    # states that share one huge direction (cosines ~ 1 - 1e-7): UA is tiny and must survive
    n, d = 40, 64
    base = np.zeros(d)
    base[0] = 1e4
    a = base + rng.standard_normal((n, 2, d))
    b = base + 1.1 * rng.standard_normal((n, 2, d))
    labels = rng.integers(0, 4, size=(10, n))
    g, _ = Cosines(a, b, representation="gram").uniformity(labels, n_groups=4, side="diff")
    v, _ = Cosines(a, b, representation="vectors").uniformity(labels, n_groups=4, side="diff")
    assert np.nanmax(np.abs(g)) < 1e-6  # the differences really are tiny
    assert np.allclose(g, v, rtol=1e-6, atol=1e-15, equal_nan=True)


def test_the_default_representation_is_the_smaller_one():
    assert representation_for(100, 576) == "gram"
    assert representation_for(576, 576) == "gram"
    assert representation_for(577, 576) == "vectors"
    x = np.ones((5, 2, 3))
    assert Cosines(x, x).representation == "vectors"
    assert Cosines(x[:3], x[:3]).representation == "gram"


def test_cosines_refuse_bad_labels_and_shapes(rng):
    x = rng.standard_normal((6, 2, 3))
    cos = Cosines(x, x)
    with pytest.raises(ValueError, match="shape"):
        cos.uniformity(np.zeros((1, 5), dtype=int), n_groups=2, side="a")
    with pytest.raises(ValueError, match="-1..n_groups-1"):
        cos.uniformity(np.full((1, 6), 2), n_groups=2, side="a")
    with pytest.raises(ValueError, match="side"):
        cos.uniformity(np.zeros((1, 6), dtype=int), n_groups=2, side="both")
    with pytest.raises(ValueError, match=r"\(n, V, D\)"):
        Cosines(x, x[:5])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 14), d=st.integers(1, 6), k=st.integers(1, 5), parts=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_the_two_representations_agree_property(n, d, k, parts, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, 2, d))
    b = rng.standard_normal((n, 2, d))
    labels = rng.integers(-1, k, size=(parts, n))
    for side in ("a", "b", "diff"):
        g, sg = Cosines(a, b, representation="gram").uniformity(labels, n_groups=k, side=side)
        v, sv = Cosines(a, b, representation="vectors").uniformity(labels, n_groups=k, side=side)
        assert (sg == sv).all()
        assert np.allclose(g, v, atol=1e-12, equal_nan=True)
