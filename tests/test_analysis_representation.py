"""The representation axis and the per-dimension breakdown, each against a direct, readable computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from uaprobe.analysis.geometry import dimensions, representation as reps
from uaprobe.config import analysis_from_mapping
from uaprobe.errors import ConfigError
from uaprobe.names import REPRESENTATIONS


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _states(rng, n=12, layers=3, d=5, constant_dim=None):
    x = rng.standard_normal((n, layers, d)) + 3.0 * rng.standard_normal(d)  # a shared offset, like the models'
    if constant_dim is not None:
        x[:, :, constant_dim] = 2.5
    return x.astype(np.float32)


def _mean_cosine(x):
    """The mean over pairs i < j of the cosine (the seeds' rows: divided by norm + 1e-10), one pair at a time."""
    x = np.asarray(x, dtype=np.float64)
    vals = []
    for i, j in itertools.combinations(range(len(x)), 2):
        vals.append(float(x[i] @ x[j] / ((np.linalg.norm(x[i]) + 1e-10) * (np.linalg.norm(x[j]) + 1e-10))))
    return float(np.mean(vals))


def test_raw_is_the_same_array():
    x = np.ones((3, 2, 4), dtype=np.float32)
    assert reps.transform(x, "raw") is x
    pooled = {"mean": x}
    assert reps.transform_all(pooled, "raw") is pooled


def test_zscore_matches_a_direct_standardization_and_drops_constant_dimensions(rng):
    x = _states(rng, constant_dim=2)
    got = reps.transform(x, "zscore")
    assert got.dtype == np.float64 and got.shape == x.shape
    for layer in range(x.shape[1]):
        kept = [d for d in range(x.shape[2]) if d != 2]
        for d in kept:
            col = x[:, layer, d].astype(np.float64)
            want = (col - col.mean()) / np.sqrt(((col - col.mean()) ** 2).mean())
            np.testing.assert_allclose(got[:, layer, d], want, atol=1e-12)
        assert np.all(got[:, layer, 2] == 0.0)
        # cosines equal those of the states with the constant dimension removed
        dropped = np.stack([(x[:, layer, d] - x[:, layer, d].astype(np.float64).mean()) /
                            x[:, layer, d].astype(np.float64).std() for d in kept], axis=1)
        assert _mean_cosine(got[:, layer]) == pytest.approx(_mean_cosine(dropped), abs=1e-12)


@pytest.mark.parametrize("n,d", [(12, 5), (6, 9)])  # both the covariance (N > D) and the Gram (N <= D) route
def test_abtt_matches_the_projection_from_a_full_svd(rng, n, d):
    x = _states(rng, n=n, d=d)
    k = 2
    got = reps.transform(x, "abtt", k=k)
    for layer in range(x.shape[1]):
        xc = x[:, layer].astype(np.float64) - x[:, layer].astype(np.float64).mean(axis=0)
        _, _, vt = np.linalg.svd(xc, full_matrices=False)
        vk = vt[:k].T
        want = xc - xc @ vk @ vk.T
        np.testing.assert_allclose(got[:, layer], want, atol=1e-10)
        np.testing.assert_allclose(got[:, layer] @ vk, 0.0, atol=1e-10)  # nothing left on the top directions
        np.testing.assert_allclose(got[:, layer].mean(axis=0), 0.0, atol=1e-12)


def test_abtt_with_shares_agrees_with_the_separate_functions(rng):
    x = _states(rng, n=15, d=12)[:, 1]
    out, shares = reps.abtt_and_shares(x, k=3, tops=(1, 5, 10))
    np.testing.assert_allclose(out, reps.transform(x, "abtt", k=3), atol=1e-10)
    np.testing.assert_allclose(shares, reps.variance_shares(x, (1, 5, 10)), atol=1e-12)


def test_variance_shares_match_the_covariance_eigenvalues(rng):
    x = _states(rng, n=20, d=12)[:, 0].astype(np.float64)
    eig = np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False, ddof=0)))[::-1]
    want = [eig[:t].sum() / eig.sum() for t in (1, 5, 10)]
    np.testing.assert_allclose(reps.variance_shares(x, (1, 5, 10)), want, atol=1e-12)
    assert np.isnan(reps.variance_shares(np.ones((4, 3)), (1,))).all()


def test_an_unknown_representation_is_refused():
    with pytest.raises(ValueError, match="zscore"):
        reps.transform(np.ones((2, 1, 2)), "pca")  # type: ignore[arg-type]


@pytest.mark.parametrize("key,value,match", [("representation", "pca", "raw.*zscore.*abtt"),
                                              ("abtt_k", 0, ">= 1")])
def test_config_names_the_key_and_the_allowed_values(key, value, match):
    with pytest.raises(ConfigError, match=rf"analysis\.{key}.*{match}"):
        analysis_from_mapping({key: value})
    assert analysis_from_mapping({}).representation == "raw"


def test_dimension_contributions_sum_to_the_mean_pairwise_cosine(rng):
    x = _states(rng, n=9, layers=1, d=6)[:, 0].astype(np.float64)
    c = dimensions.dimension_contributions(x)
    assert c.sum() == pytest.approx(_mean_cosine(x), abs=1e-12)
    # each c_d directly: the mean over ordered pairs i != j of u_id u_jd
    u = x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-10)
    for d in range(6):
        direct = np.mean([u[i, d] * u[j, d] for i in range(9) for j in range(9) if i != j])
        assert c[d] == pytest.approx(direct, abs=1e-12)


def test_top_shares_sum_the_largest_contributions():
    c = np.array([0.1, 0.5, -0.2, 0.3, 0.05, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.1])
    got = dimensions.top_shares(c, (1, 5, 10))
    s = sorted(c, reverse=True)
    np.testing.assert_allclose(got, [s[0] / c.sum(), sum(s[:5]) / c.sum(), sum(s[:10]) / c.sum()])
    one_direction = np.zeros((30, 8))
    one_direction[:, 3] = 1.0 + np.arange(30)  # every statement on one coordinate axis: cosine 1, all of it there
    assert dimensions.top_shares(dimensions.dimension_contributions(one_direction))[0] == pytest.approx(1.0)


def test_sweep_matches_direct_cosines_per_representation(rng):
    n_pairs, cat = 8, np.array([0, 0, 0, 1, 1, 1, 1, 0])
    x = _states(rng, n=2 * n_pairs, layers=2, d=6)
    row_a, row_b = np.arange(n_pairs), np.arange(n_pairs, 2 * n_pairs)
    sw = dimensions.sweep({"default": {"mean": x}}, row_a=row_a, row_b=row_b, category_of_pair=cat,
                          n_categories=2, k=2)
    for kind in REPRESENTATIONS:
        states = reps.transform(x, kind, k=2)
        for layer in range(2):
            assert sw.mean_cosine["default"]["mean"][kind][layer] == pytest.approx(
                _mean_cosine(states[:, layer]), abs=1e-10)
            for c in range(2):
                assert sw.u_a["default"]["mean"][kind][layer, c] == pytest.approx(
                    _mean_cosine(states[row_a[cat == c], layer]), abs=1e-10)
                assert sw.u_b["default"]["mean"][kind][layer, c] == pytest.approx(
                    _mean_cosine(states[row_b[cat == c], layer]), abs=1e-10)
    for layer in range(2):
        np.testing.assert_allclose(sw.variance_share["default"]["mean"][layer],
                                   reps.variance_shares(x[:, layer], dimensions.TOPS), atol=1e-12)


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("d", [1, 2, 48])
@pytest.mark.parametrize("block", [1, 7, 128])
def test_group_contributions_are_each_groups_own(rng, monkeypatch, ordered, d, block):
    """The one-pass column sums over every group, made a block of rows at a time (groups in ascending
    row order: blocks that split groups and a last short block) or over the whole array (any order),
    equal each group's contributions computed from its own rows (a category of one pair included)."""
    x = rng.standard_normal((61, d)).astype(np.float32)  # float32 states, as the raw representation reads them
    order = np.arange(61) if ordered else rng.permutation(61)
    row_a, row_b = order[0:60:2], order[1:60:2]
    cat = np.sort(rng.integers(0, 3, 30)) if ordered else rng.integers(0, 3, 30)
    cat[cat == 3] = 2
    cat[-1 if ordered else 0] = 3  # category 3: one pair, so one statement per side
    groups = dimensions._Groups.of(n_rows=61, row_a=row_a, row_b=row_b, category_of_pair=cat, n_categories=4)
    assert groups.ascending == ordered
    monkeypatch.setattr(dimensions, "UNIT_BLOCK_ROWS", block)
    want = [dimensions.dimension_contributions(x)] + [dimensions.dimension_contributions(x[side[cat == c]])
                                                      for side in (row_a, row_b) for c in range(4)]
    got = dimensions.group_contributions_of(x, groups)
    for g, w in enumerate(want):
        np.testing.assert_allclose(got[g], w, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dimensions.group_contributions_of(x.astype(np.float64), groups), got,
                               rtol=1e-12, atol=1e-15)
