"""The robustness quantities against direct, readable computations and constructed known answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as sps

from synthetic_h5 import hand_tokens, write_synthetic_h5
from tiny_models import load_tiny
from uaprobe.extraction import extract
from uaprobe.analysis.category import bins
from uaprobe.analysis.geometry import anisotropy
from uaprobe.analysis.inference import controls, stats
from uaprobe.analysis.run.pipeline import analyze_model
from uaprobe.analysis.geometry.uniformity import Cosines
from uaprobe.config import AnalysisParams, BinsParams, RobustnessParams
from uaprobe.extraction.sink import sink_statistics
from uaprobe.extraction.store import read_embeddings
from uaprobe.extraction.tokens import encode, statement_tokens

# --------------------------------------------------------------------------------------------
# partial correlation


def test_partial_r_with_one_covariate_is_the_textbook_formula() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal(50)
    x = 0.8 * z + rng.standard_normal(50)
    y = -0.5 * z + 0.3 * x + rng.standard_normal(50)
    rxy, rxz, ryz = (sps.pearsonr(a, b)[0] for a, b in ((x, y), (x, z), (y, z)))
    expected = (rxy - rxz * ryz) / np.sqrt((1 - rxz ** 2) * (1 - ryz ** 2))
    got = controls.partial_r(x, y, z[:, None])
    assert got.r == pytest.approx(expected, abs=1e-12)
    # p: the t-test with n - 3 degrees of freedom
    t = expected * np.sqrt(47 / (1 - expected ** 2))
    assert got.p == pytest.approx(2 * sps.t.sf(abs(t), 47), rel=1e-9)


def test_partial_r_with_category_fixed_effects_equals_an_explicit_regression() -> None:
    rng = np.random.default_rng(1)
    cat = np.repeat(np.arange(4), 12)
    d = rng.integers(-3, 6, size=cat.size).astype(float)
    x = cat * 0.7 + 0.2 * d + rng.standard_normal(cat.size)
    y = -cat * 0.4 + 0.5 * d + 0.3 * x + rng.standard_normal(cat.size)
    design = np.column_stack([np.ones(cat.size), d] + [(cat == c).astype(float) for c in (1, 2, 3)])
    ex = x - design @ np.linalg.solve(design.T @ design, design.T @ x)
    ey = y - design @ np.linalg.solve(design.T @ design, design.T @ y)
    expected = float(ex @ ey / np.sqrt((ex @ ex) * (ey @ ey)))
    got = controls.partial_r(x, y, np.column_stack([d, controls.category_indicators(cat, 4)[:, 1:]]))
    assert got.r == pytest.approx(expected, abs=1e-12) and got.k == 4


def test_partial_r_is_undefined_when_the_covariate_explains_a_variable() -> None:
    z = np.arange(10.0)
    got = controls.partial_r(2 * z + 1, np.sin(z), z[:, None])
    assert np.isnan(got.r) and "explained exactly" in got.reason


# --------------------------------------------------------------------------------------------
# the attention sink


def test_sink_statistics_on_a_planted_massive_token() -> None:
    rng = np.random.default_rng(2)
    b, t, d = 3, 6, 8
    layers = []
    for massive in (1.0, 500.0):  # layer 0: an ordinary first token; layer 1: a massive one in dim 5
        h = rng.standard_normal((b, t, d))
        h[:, 0] *= 0.1
        h[:, 0, 5] = massive
        layers.append(torch.tensor(h, dtype=torch.float32))
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]])
    got = sink_statistics(layers, mask)
    for layer, h in enumerate(layers):
        x = h.numpy().astype(np.float64)
        for i in range(b):
            n = int(mask[i].sum())
            norms = [np.linalg.norm(x[i, j]) for j in range(n)]
            m = x[i, :n].mean(axis=0)
            assert got["norm"][i, layer] == pytest.approx(norms[0], rel=1e-12)
            assert got["norm_ratio"][i, layer] == pytest.approx(norms[0] / np.median(norms[1:]), rel=1e-12)
            assert got["mean_share"][i, layer] == pytest.approx(x[i, 0] @ m / (n * m @ m), rel=1e-9)
            top = int(np.argmax(np.abs(x[i, 0])))
            assert got["top_dim"][i, layer] == top
            assert got["top_dim_share"][i, layer] == pytest.approx(x[i, 0, top] ** 2 / norms[0] ** 2, rel=1e-12)
    assert (got["top_dim"][:, 1] == 5).all() and (got["norm_ratio"][:, 1] > 100).all()
    assert (got["mean_share"][:, 1] > 0.9).all()


@pytest.fixture(scope="module")
def neox(tiny_neox: Path):
    return load_tiny(tiny_neox)


@pytest.fixture(scope="module")
def neox_bos(tiny_neox_bos: Path):
    return load_tiny(tiny_neox_bos)


TEXTS = ["Value 3.14159", "Water is composed of hydrogen and oxygen atoms", "Night owls thrive"]


def test_sink_excluded_pooling_drops_position_0_without_bos(neox) -> None:
    model, tokenizer = neox
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    for i, text in enumerate(TEXTS):
        enc = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = torch.stack(model(**enc, output_hidden_states=True).hidden_states)[:, 0].numpy()
        np.testing.assert_allclose(batch.pooled_sink_excluded["mean"][i], hidden[:, 1:].mean(axis=1), atol=1e-5)
        np.testing.assert_allclose(batch.pooled_sink_excluded["first"][i], hidden[:, 1], atol=1e-5)
        np.testing.assert_allclose(batch.pooled_sink_excluded["last"][i], hidden[:, -1], atol=1e-5)
        np.testing.assert_allclose(batch.pooled["mean"][i], hidden.mean(axis=1), atol=1e-5)  # no BOS: position 0 in
        assert batch.n_content_sink_excluded[i] == hidden.shape[1] - 1


def test_sink_excluded_equals_special_when_the_tokenizer_adds_a_bos(neox_bos) -> None:
    model, tokenizer = neox_bos
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    for p in ("mean", "first", "last"):
        np.testing.assert_array_equal(batch.pooled_sink_excluded[p], batch.pooled[p])
        np.testing.assert_array_equal(batch.prenorm_sink_excluded[p], batch.prenorm[p])


def test_statement_tokens_are_the_tokenizer_ids(neox_bos) -> None:
    _model, tokenizer = neox_bos
    ids, offsets, special = statement_tokens(tokenizer, TEXTS)
    for i, text in enumerate(TEXTS):
        enc = tokenizer(text, return_special_tokens_mask=True)
        assert ids[offsets[i]:offsets[i + 1]].tolist() == enc["input_ids"]
        assert special[offsets[i]:offsets[i + 1]].tolist() == [bool(m) for m in enc["special_tokens_mask"]]


# --------------------------------------------------------------------------------------------
# the lexical baseline


def test_lexical_embeddings_on_a_hand_built_tokenizer() -> None:
    texts = ["the cat sat", "sat the cat", "a dog ran", "the dog"]
    ids, offsets, special = hand_tokens(texts)
    e = controls.lexical_embeddings(ids, offsets, ~special, dim=16, seed=3)
    vocab = sorted({w for t in texts for w in t.split()})
    table = np.random.default_rng(3).standard_normal((len(vocab) + 1, 16))  # ids 0 (BOS) .. len(vocab)
    for i, t in enumerate(texts):
        direct = np.mean([table[vocab.index(w) + 1] for w in t.split()], axis=0)
        np.testing.assert_allclose(e[i], direct, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e[0], e[1], atol=1e-15)  # the same words in another order: the same vector


def test_lexical_embeddings_do_not_depend_on_the_order_of_the_statements() -> None:
    texts = ["alpha beta", "gamma delta beta", "epsilon"]
    ids, offsets, special = hand_tokens(texts)
    e = controls.lexical_embeddings(ids, offsets, ~special, dim=4, seed=0)
    rev = texts[::-1]
    ids_r, offsets_r, special_r = hand_tokens(rev)
    e_r = controls.lexical_embeddings(ids_r, offsets_r, ~special_r, dim=4, seed=0)
    np.testing.assert_allclose(e_r[::-1], e, atol=1e-15)


def test_lexical_embeddings_sum_each_statement_in_token_order_as_add_at_does() -> None:
    # the bytes of the baseline: each statement's kept vectors added in token order from zero, the
    # order of np.add.at (a pairwise or reordered sum would differ in the last bits); statements with
    # no kept token (or no token) get zeros
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 25))
        lengths = rng.integers(0, 9, n)
        offsets = np.r_[0, np.cumsum(lengths)]
        ids = rng.integers(0, 40, offsets[-1])
        keep = rng.random(offsets[-1]) < 0.7
        got = controls.lexical_embeddings(ids, offsets, keep, dim=6, seed=2)
        vocab, inverse = np.unique(ids, return_inverse=True)
        table = np.random.default_rng(2).standard_normal((vocab.size, 6))
        owner = np.repeat(np.arange(n), lengths)
        sums = np.zeros((n, 6))
        for token in np.flatnonzero(keep):
            sums[owner[token]] = sums[owner[token]] + table[inverse[token]]
        counts = np.bincount(owner[keep], minlength=n)
        assert np.array_equal(got, sums / np.maximum(counts, 1)[:, None])


# --------------------------------------------------------------------------------------------
# the size-matched null and the most influential category


def test_size_matched_labels_keep_the_sizes() -> None:
    labels = controls.size_matched_labels(np.random.default_rng(0), sizes=np.array([3, 5, 2]), partitions=50)
    assert labels.shape == (50, 10)
    for row in labels:
        assert np.bincount(row, minlength=3).tolist() == [3, 5, 2]
    assert len({tuple(r) for r in labels}) > 40  # random


def test_null_p_counts_as_extreme_draws() -> None:
    null = np.array([[0.1, -0.5, 0.9, np.nan, -0.95], [0.0, 0.0, 0.0, 0.0, 0.0]])
    got = stats.tail_p(np.array([0.9, 0.5]), null, mode="random")
    assert got[0] == pytest.approx((1 + 2) / (1 + 4))
    assert got[1] == pytest.approx(1 / 6)


def test_most_influential_is_found_from_the_data() -> None:
    assert controls.most_influential(0.9, np.array([0.8, -0.3, 0.95])) == 1
    assert controls.most_influential(float("nan"), np.array([0.8, 0.3])) is None


# --------------------------------------------------------------------------------------------
# bins: the distribution over partitions


def test_bins_share_positive_and_share_excluding_zero_match_a_loop() -> None:
    rng = np.random.default_rng(4)
    n, d = 40, 12
    a = rng.standard_normal((n, 2, d)) + 1.0
    b = rng.standard_normal((n, 2, d)) + 1.0
    pref = rng.standard_normal(n)
    labels = bins.partitions(rng, scheme="balanced", n=n, k=8, count=30)
    got = bins.summarize_partitions(cosines=Cosines(a, b), preference=pref, labels=labels, k=8, level=0.9)
    z = sps.norm.ppf(0.95)
    for v in range(2):
        rs = []
        for lab in labels:
            ua = []
            for g in range(8):
                rows = np.flatnonzero(lab == g)
                def u(x):
                    x = x / (np.linalg.norm(x, axis=-1, keepdims=True) + 1e-10)
                    c = x @ x.T
                    return c[np.triu_indices(len(rows), 1)].mean()
                ua.append(u(a[rows, v]) - u(b[rows, v]))
            gp = [pref[lab == g].mean() for g in range(8)]
            rs.append(sps.pearsonr(ua, gp)[0])
        rs = np.array(rs)
        assert got.share_positive[v] == pytest.approx((rs > 0).mean())
        lo, hi = np.tanh(np.arctanh(rs) - z / np.sqrt(5)), np.tanh(np.arctanh(rs) + z / np.sqrt(5))
        assert got.share_excludes_zero[v] == pytest.approx(((lo > 0) | (hi < 0)).mean())


# --------------------------------------------------------------------------------------------
# anisotropy: ties, the weighted ratio, the bootstrap


def test_l_star_ties() -> None:
    assert anisotropy.l_star_ties(np.array([0.5, 0.9995, 1.0, 0.98, np.nan]), tolerance=0.001) == [1, 2]
    assert anisotropy.l_star_ties(np.array([0.5, 0.9, 1.0]), tolerance=0.0) == [2]


def test_weighted_lambda1_ratio_equals_the_profile_of_the_repeated_tokens() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 9, 20)) * np.array([3.0, 1.0] + [0.5] * 18)
    gram = x @ np.swapaxes(x, -1, -2)
    ones = anisotropy.lambda1_ratio_weighted(gram, np.ones(9))
    np.testing.assert_allclose(ones, anisotropy.anisotropy_profile(x, spectrum_top=1).lambda1_ratio, rtol=1e-7)
    w = np.array([2, 0, 1, 1, 3, 1, 0, 1, 1])
    repeated = np.repeat(x, w, axis=1)
    np.testing.assert_allclose(anisotropy.lambda1_ratio_weighted(gram, w),
                               anisotropy.anisotropy_profile(repeated, spectrum_top=1).lambda1_ratio, rtol=1e-7)


def test_weighted_centring_is_the_numpy_expressions_bytes() -> None:
    """The compiled centring and scaling of the weighted Gram matrices against the expression it
    replaces, on Gram matrices of states offset from the origin and the weights of a resample."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 37, 50)) + rng.standard_normal(50) * 3.0
    g = x @ np.swapaxes(x, -1, -2)
    w = rng.integers(1, 4, 37).astype(float)
    s = w.sum()
    gw = g @ w
    wgw = gw @ w
    root = np.sqrt(w)
    want = (g - gw[:, :, None] / s - gw[:, None, :] / s + (wgw / (s * s))[:, None, None]) \
        * root[None, :, None] * root[None, None, :]
    assert np.array_equal(anisotropy._weighted_centred(g, gw / s, wgw / (s * s), root), want)


def test_position0_marks_the_first_token_of_each_prompt() -> None:
    assert anisotropy.position0(np.array([0, 0, 0, 1, 1, 2])).tolist() == [True, False, False, True, False, True]


# --------------------------------------------------------------------------------------------
# the whole robustness view on a planted file


def test_robustness_on_a_planted_file(tmp_path: Path) -> None:
    h5 = write_synthetic_h5(tmp_path / "p.h5", kind="planted", pairs_per_category=(6, 5, 7, 6, 5),
                            n_layers=4, hidden=12, slopes=[0.08, 0.04, -0.02, -0.06, 0.05])
    params = AnalysisParams(seed=1, bootstrap_resamples=200, permutations=200,
                            bins=BinsParams(k=(3,), partitions=5, ci_k=3),
                            robustness=RobustnessParams(lexical_seeds=3, null_partitions=50, anisotropy_bootstrap=20))
    emb = read_embeddings(h5)
    out = analyze_model(emb, params=params, model_id="p")
    rob = out.results["robustness"]
    # planted: r = sign(slope) at every layer, under both policies (the file plants the same geometry)
    assert rob["policies"]["default"]["r"] == pytest.approx([1, 1, -1, -1, 1])
    assert rob["policies"]["sink_excluded"]["final_r"] == pytest.approx(1.0)
    assert rob["policies"]["default"]["n_sign_changes"] == 2
    # with 5 categories the exact permutation test has 120 orders; the planted preferences are evenly
    # spaced, so the identity and the reversed order both reach |r| = 1: p = 2/120 at every layer, and
    # Holm over 5 layers (5 x 2/120 > 0.05) keeps none, however perfect the planted r
    assert out.results["layerwise"]["permutation_mode"] == "exact"
    assert out.results["layerwise"]["permutation_count"] == 120
    assert out.results["layerwise"]["poolings"]["mean"]["permutation_p"] == pytest.approx([2 / 120] * 5)
    assert rob["inference"]["n_layers_permutation_holm"] == 0
    # the most influential category is one of the file's, and r without it is recorded
    assert rob["loco"]["most_influential"] in out.results["layerwise"]["categories"]
    assert rob["lexical_baseline"]["final_r"]["min"] <= rob["lexical_baseline"]["final_r"]["mean"] \
        <= rob["lexical_baseline"]["final_r"]["max"]
    assert len(rob["lexical_baseline"]["final_r"]["values"]) == 3
    # the sink summary: medians of the file's sink/* per layer
    np.testing.assert_allclose(rob["sink"]["norm_ratio_median"], np.median(emb.sink["norm_ratio"], axis=0))
    assert rob["sink"]["max_norm_ratio"] == pytest.approx(np.median(emb.sink["norm_ratio"], axis=0).max())
    m = out.metrics
    assert m["robustness"]["sink_excluded"]["final_r"] == pytest.approx(1.0)
    assert m["inference"]["n_layers_permutation_holm"] == 0


def test_partial_r_rows_equals_partial_r_row_by_row() -> None:
    rng = np.random.default_rng(6)
    z = rng.standard_normal(30)
    y = z + rng.standard_normal(30)
    x = rng.standard_normal((4, 30)) + z
    x[2, 5] = np.nan
    x[3] = 2 * z + 1  # explained exactly
    rows = controls.partial_r_rows(x, y, z[:, None])
    for row, got in zip(x, rows):
        one = controls.partial_r(row, y, z[:, None])
        assert (got.r == one.r or (np.isnan(got.r) and np.isnan(one.r))) and got.reason == one.reason
    assert rows[2].reason == "non-finite input" and "explained exactly" in rows[3].reason
