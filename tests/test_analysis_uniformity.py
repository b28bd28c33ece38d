"""The resampling kernel (Gram entries and sums of unit vectors, chosen by cost) against the seeds'
direct cosine-matrix version."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seed_reference import uniformity_score
from uaprobe.analysis.category import bins
from uaprobe.analysis.compute import kernels
from uaprobe.analysis.geometry import gram_pieces
from uaprobe.analysis.geometry import uniformity as uniformity_module
from uaprobe.analysis.geometry.uniformity import (COST, Cosines, Groups, group_means, cosine_form_for, unit_rows,
                                        uniformity)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.fixture
def one_thread():
    """The cost model weighs the kernels by their thread count: fix it, so that the choices tested
    do not depend on the machine's cores."""
    import numba
    saved = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(saved)


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


def test_group_means(rng):
    v = rng.standard_normal(10)
    labels = np.array([[0, 0, 1, 1, 1, -1, 2, 2, 2, 2], [0] * 10])
    means, sizes = group_means(v, labels, n_groups=4)
    assert means[0, 0] == pytest.approx(v[:2].mean())
    assert means[0, 1] == pytest.approx(v[2:5].mean())
    assert means[0, 2] == pytest.approx(v[6:].mean())
    assert np.isnan(means[0, 3]) and sizes[0].tolist() == [2, 3, 4, 0]
    assert means[1, 0] == pytest.approx(v.mean())


# ------------------------------------------------------------------------- unit-vector form


@pytest.mark.parametrize("block_members", [1, 5, 1024])
@pytest.mark.parametrize("signed", [True, False])
def test_vector_squares_match_the_direct_sums(rng, signed, block_members):
    # D = 13 fills neither an 8- nor a 16-coordinate block; the diff side pairs view v with view V + v
    n, views, d, k = 23, 3, 13, 4
    u = unit_rows(rng.standard_normal((n, 2 * views, d)) + 0.2)
    u[4, 2] = 0.0
    labels = _awkward_labels(rng, n, k, parts=7)
    groups = Groups.of(labels, k)
    pairs = [(v, views + v) if signed else (views + v, views + v) for v in range(views)]
    got = kernels.vector_squares(np.ascontiguousarray(u), labels, groups.sizes, views=pairs, signed=signed,
                                 block_members=block_members)
    assert got.shape == (views, 7, k)
    for p in range(7):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            for v, (low, high) in enumerate(pairs):
                if members.size < 2:
                    assert got[v, p, grp] == 0.0  # groups without a pair are skipped
                    continue
                s_low, s_high = u[members, low].sum(axis=0), u[members, high].sum(axis=0)
                want = s_low @ s_low - s_high @ s_high if signed else s_low @ s_low
                assert got[v, p, grp] == pytest.approx(want, abs=1e-12)


def test_vector_squares_refuse_views_that_do_not_match_the_side(rng):
    u = np.ascontiguousarray(unit_rows(rng.standard_normal((5, 2, 3))))
    groups = Groups.of(np.zeros((1, 5), dtype=int), 1)
    with pytest.raises(ValueError, match="signed"):
        kernels.vector_squares(u, np.zeros((1, 5), dtype=int), groups.sizes, views=[(0, 0)], signed=True)
    with pytest.raises(ValueError, match="signed"):
        kernels.vector_squares(u, np.zeros((1, 5), dtype=int), groups.sizes, views=[(0, 1)], signed=False)


# ------------------------------------------------------------------------- Gram form


@pytest.mark.parametrize("tile", [1, 4, 7, None])
def test_gram_sums_match_the_direct_sums_over_the_pairs_on_any_tiling(rng, tile):
    # 23 members in tiles of 4 or 7 (a last tile short), 11 views (a second block of eight, padded);
    # None: the default, one tile
    n, views, d, k = 23, 11, 5, 4
    u = unit_rows(rng.standard_normal((n, views, d)) + 0.3)
    grams = [u[:, v] @ u[:, v].T for v in range(views)]
    table = kernels.gram_table(iter([(g, None) for g in grams]), n=n, n_views=views)
    labels = _awkward_labels(rng, n, k, parts=6)
    got = kernels.gram_sums(table, n, labels, n_groups=k, n_views=views, tile=tile)
    assert got.shape == (views, 6, k)
    for p in range(6):
        for grp in range(k):
            members = np.flatnonzero(labels[p] == grp)
            for v in range(views):
                want = sum(grams[v][i, j] for i in members for j in members if i < j)
                assert got[v, p, grp] == pytest.approx(want, abs=1e-12)


def test_the_gram_kernel_is_one_tile_up_to_its_limit_and_tiled_beyond():
    assert kernels.gram_tile(230) == 230
    assert kernels.gram_tile(kernels.GRAM_ONE_TILE) == kernels.GRAM_ONE_TILE
    assert kernels.gram_tile(kernels.GRAM_ONE_TILE + 1) == kernels.GRAM_TILE
    assert kernels.GRAM_TILE ** 2 * kernels.GRAM_LANES * 8 <= 4 << 20  # a tile of one block of views in 4 MiB


def test_groups_are_contiguous_runs_and_sum_like_a_loop(rng):
    labels = _awkward_labels(rng, 17, 4, parts=5)
    groups = Groups.of(labels, 4)
    values = rng.standard_normal((17, 3))
    sums = groups.sums(values)
    for p in range(5):
        for grp in range(4):
            run = groups.order[p, groups.bounds[p, grp]:groups.bounds[p, grp + 1]]
            assert run.tolist() == np.flatnonzero(labels[p] == grp).tolist()  # increasing members
            assert groups.sizes[p, grp] == run.size
            assert sums[p, grp] == pytest.approx(values[run].sum(axis=0), abs=1e-12)
        assert sorted(groups.order[p, groups.bounds[p, 4]:].tolist()) == np.flatnonzero(labels[p] < 0).tolist()


@pytest.mark.parametrize("form", ["gram", "vectors"])
def test_cosines_uniformity_matches_the_seed_on_each_side_and_their_difference(rng, form):
    n, views, d, k = 30, 3, 8, 5
    a = rng.standard_normal((n, views, d)) + 0.5
    b = rng.standard_normal((n, views, d)) - 0.1
    b[7] = 0.0
    cos = Cosines(a, b, form=form)
    assert cos.form == form
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


def test_both_forms_agree_on_nearly_collinear_states(rng):
    # states that share one huge direction (cosines ~ 1 - 1e-7): UA is tiny and must survive
    n, d = 40, 64
    base = np.zeros(d)
    base[0] = 1e4
    a = base + rng.standard_normal((n, 2, d))
    b = base + 1.1 * rng.standard_normal((n, 2, d))
    labels = rng.integers(0, 4, size=(10, n))
    g, _ = Cosines(a, b, form="gram").uniformity(labels, n_groups=4, side="diff")
    v, _ = Cosines(a, b, form="vectors").uniformity(labels, n_groups=4, side="diff")
    assert np.nanmax(np.abs(g)) < 1e-6  # the differences really are tiny
    assert np.allclose(g, v, rtol=1e-6, atol=1e-15, equal_nan=True)


def test_the_cost_model_takes_the_gram_form_for_few_members_and_vectors_for_many():
    # at the study's size the Gram entries of a group are far fewer than its coordinates, at 20x they are not
    assert cosine_form_for(230, 576) == "gram"
    assert cosine_form_for(4600, 576) == "vectors"
    # vectors cost linear, Gram quadratic in the members, at a fixed number of groups
    small = COST.vectors(n=100, dim=64, n_views=1, signed=True, members=1000, runs=10)
    assert COST.vectors(n=200, dim=64, n_views=1, signed=True, members=2000, runs=10) < 2 * small
    assert COST.gram(n=200, dim=64, n_views=8, pairs=4 * 4950, syrks=0) == pytest.approx(
        4 * COST.gram(n=100, dim=64, n_views=8, pairs=4950, syrks=0))


def test_a_call_takes_the_cheaper_form_and_a_held_table_is_reused(rng, one_thread):
    n, views, d = 400, 3, 512
    x = rng.standard_normal((n, views, d))
    cos = Cosines(x, x + 0.1)
    for labels, side, form in ((rng.integers(0, 40, size=(1000, n)), "diff", "gram"),  # many small groups
                               (rng.integers(0, 40, size=(1, n)), "a", "vectors")):  # one partition, a new table
        costs = cos.costs(Groups.of(labels, 40).sizes, side)
        assert min(costs, key=costs.__getitem__) == form
        cos.uniformity(labels, n_groups=40, side=side)
        assert cos.last_form == form
    assert set(cos._tables) == {"diff"}
    held = cos.costs(Groups.of(labels, 40).sizes, "diff")["gram"]
    assert held < COST.gram(n=n, dim=d, n_views=views, pairs=0.0, syrks=2)  # the held table is not charged again


def test_the_gram_tables_stay_under_their_cap(rng, one_thread):
    n, views, d = 40, 3, 200
    x = rng.standard_normal((n, views, d))
    table_bytes = n * (n - 1) // 2 * 8 * 8  # views padded to a block of 8
    cos = Cosines(x, x + 0.1, gram_bytes=2 * table_bytes, piece_bytes=0)  # no pieces: held tables or vectors
    many = rng.integers(0, 4, size=(200, n))
    for side in ("a", "b"):  # the pair of tables fits
        cos.uniformity(many, n_groups=4, side=side)
        assert cos.last_form == "gram"
    assert "gram" not in cos.costs(Groups.of(many, 4).sizes, "diff")  # a third table would pass the cap
    values, _ = cos.uniformity(many, n_groups=4, side="diff")
    assert cos.last_form == "vectors" and set(cos._tables) == {"a", "b"}
    ref, _ = Cosines(x, x + 0.1, form="gram").uniformity(many, n_groups=4, side="diff")
    assert np.allclose(values, ref, atol=1e-12, equal_nan=True)
    assert Cosines(x, x, gram_bytes=0, piece_bytes=0).costs(Groups.of(many, 4).sizes, "a").keys() == {"vectors"}
    # by default the tables may take as many bytes as the unit vectors (memory linear in n): two
    # tables of 40 members (780 pairs x 8 lanes) fit beside 40 x 2 x 200 coordinates, not beside 40 x 2 x 2
    assert 2 * table_bytes <= Cosines(x, x).gram_bytes == 40 * 2 * views * d * 8
    assert "gram" in Cosines(x, x).costs(Groups.of(many, 4).sizes, "a")
    assert "gram" not in Cosines(x[..., :2], x[..., :2], piece_bytes=0).costs(Groups.of(many, 4).sizes, "a")
    # the held tables never pass GRAM_HELD_BYTES, whatever the unit vectors take
    assert uniformity_module.GRAM_HELD_BYTES == 1 << 30 and gram_pieces.GRAM_PIECE_BYTES == 1 << 30


def test_sides_a_and_b_of_one_labelling_take_one_form(rng, one_thread):
    """Where one table fits the cap but not two, U_A and U_B both take the unit vectors: were U_A
    from the Gram entries and U_B from the vectors, a layer where A and B are the same vector would
    get a UA of rounding noise instead of exactly 0 in every category (a constant, r undefined)."""
    n, views, d = 24, 3, 12
    x = rng.standard_normal((n, views, d))
    x[:, 1] = x[0, 1]  # view 1: one vector for every statement
    labels = np.repeat(np.arange(4), (6, 5, 7, 6))[None]
    table_bytes = n * (n - 1) // 2 * 8 * 8
    for cap in (table_bytes, 2 * table_bytes):
        cos = Cosines(x, x.copy(), gram_bytes=cap)
        u_a, _ = cos.uniformity(labels, n_groups=4, side="a")
        form_a = cos.last_form
        u_b, _ = cos.uniformity(labels, n_groups=4, side="b")
        assert form_a == cos.last_form
        ua = u_a[1, 0] - u_b[1, 0]
        assert np.all(ua == 0.0)
    many = rng.integers(0, 4, size=(300, n))
    for cap, form in ((table_bytes, "vectors"), (2 * table_bytes, "gram")):
        cos = Cosines(x, x.copy(), gram_bytes=cap, piece_bytes=0)
        forms = []
        for side in ("a", "b"):
            cos.uniformity(many, n_groups=4, side=side)
            forms.append(cos.last_form)
        assert forms == [form, form]


def test_bins_of_several_k_in_one_call_equal_one_call_per_k(rng):
    n = 60
    a = rng.standard_normal((n, 2, 9))
    b = rng.standard_normal((n, 2, 9))
    pref = rng.standard_normal(n)
    labels = {k: rng.integers(0, k, size=(7, n)) for k in (3, 5, 8)}
    for form in ("gram", "vectors"):
        cos = Cosines(a, b, form=form)
        together = bins.summarize_many(cosines=cos, preference=pref, labels_by_k=labels)
        for k, lab in labels.items():
            alone = bins.summarize_partitions(cosines=cos, preference=pref, labels=lab, k=k)
            for field in ("r_mean", "r_std", "p_mean", "n_valid"):
                assert np.allclose(getattr(together[k], field), getattr(alone, field), atol=1e-13, equal_nan=True)


_THREADS_SCRIPT = """
import hashlib, sys
import numba, numpy as np
from uaprobe.analysis.compute import kernels
from uaprobe.analysis.geometry.uniformity import Cosines, Groups, unit_rows
rng = np.random.default_rng(3)
a = rng.standard_normal((90, 5, 20)); b = rng.standard_normal((90, 5, 20))
labels = rng.integers(-1, 7, size=(300, 90))
units = np.ascontiguousarray(unit_rows(np.concatenate([a, b], axis=1)))
for threads in (1, 2, 3):
    numba.set_num_threads(threads)
    digest = hashlib.sha256()
    for form in ("gram", "vectors"):
        for side in ("a", "b", "diff"):
            values, _ = Cosines(a, b, form=form).uniformity(labels, n_groups=7, side=side)
            digest.update(values.tobytes())
    for block_members in (7, 32):  # several blocks of members
        squares = kernels.vector_squares(units, labels, Groups.of(labels, 7).sizes,
                                         views=[(v, 5 + v) for v in range(5)], signed=True,
                                         block_members=block_members)
        digest.update(squares.tobytes())
    table = Cosines(a, b)._table("diff")
    for tile in (5, 90):  # several tiles of the Gram table, one tile
        digest.update(kernels.gram_sums(table, 90, labels, n_groups=7, n_views=5, tile=tile).tobytes())
    print(threads, digest.hexdigest())
"""


def test_the_kernels_give_the_same_bytes_on_one_two_and_three_threads():
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_NUM_THREADS="3")
    run = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], env=env, capture_output=True, text=True,
                         check=True)
    (t1, h1), (t2, h2), (t3, h3) = (line.split() for line in run.stdout.split("\n") if line)
    assert (t1, t2, t3) == ("1", "2", "3")
    assert h1 == h2 == h3


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
def test_the_two_forms_agree_property(n, d, k, parts, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, 2, d))
    b = rng.standard_normal((n, 2, d))
    labels = rng.integers(-1, k, size=(parts, n))
    for side in ("a", "b", "diff"):
        g, sg = Cosines(a, b, form="gram").uniformity(labels, n_groups=k, side=side)
        v, sv = Cosines(a, b, form="vectors").uniformity(labels, n_groups=k, side=side)
        assert (sg == sv).all()
        assert np.allclose(g, v, atol=1e-12, equal_nan=True)


# ------------------------------------------------------------------- Gram form in pieces


def test_the_pieces_cover_the_row_tiles_in_order_under_their_cap():
    n, tile = 700, 256  # tiles of rows 0-255, 256-511, 512-699
    per_tile = [(gram_pieces.tri_start(min((t + 1) * tile, n), n) - gram_pieces.tri_start(t * tile, n)) * 64
                for t in range(3)]
    assert gram_pieces.piece_rows(n, tile, sum(per_tile)) == [(0, 3)]
    assert gram_pieces.piece_rows(n, tile, per_tile[0]) == [(0, 1), (1, 3)]  # later rows have fewer entries
    assert gram_pieces.piece_rows(n, tile, per_tile[0] + per_tile[1] - 1) == [(0, 1), (1, 3)]
    assert gram_pieces.piece_rows(n, tile, per_tile[0] + per_tile[1]) == [(0, 2), (2, 3)]
    assert gram_pieces.piece_rows(n, tile, per_tile[0] - 1) is None  # the first row tile alone is too large
    assert gram_pieces.tri_start(0, n) == 0 and gram_pieces.tri_start(1, n) == n - 1


@pytest.mark.parametrize("side", ["a", "b", "diff"])
def test_the_gram_form_in_pieces_matches_the_direct_sums(rng, side):
    # 600 members: tiles of 256 (600 > GRAM_ONE_TILE), three row tiles; a piece cap of the first row
    # tile gives two pieces per block of views (the second of two tiles); 11 views: two blocks, the
    # second padded
    n, views, d, k = 600, 11, 6, 5
    a = rng.standard_normal((n, views, d)) + 0.3
    b = a + 0.5 * rng.standard_normal((n, views, d))
    tile = kernels.gram_tile(n)
    assert tile == kernels.GRAM_TILE and -(-n // tile) == 3
    cap = (gram_pieces.tri_start(tile, n) - gram_pieces.tri_start(0, n)) * 64  # the first row tile
    cos = Cosines(a, b, form="gram", gram_bytes=0, piece_bytes=cap)
    assert cos._pieces == [(0, 1), (1, 3)]
    labels = rng.integers(-1, k, size=(4, n))
    got, sizes = cos.uniformity(labels, n_groups=k, side=side)
    assert cos._tables == {}  # nothing held
    ua, ub = unit_rows(a), unit_rows(b)
    for p in range(4):
        for g in range(k):
            members = np.flatnonzero(labels[p] == g)
            assert sizes[p, g] == members.size
            upper = np.triu(np.ones((members.size, members.size), dtype=bool), 1)
            for v in range(views):
                ga = ua[members, v] @ ua[members, v].T
                gb = ub[members, v] @ ub[members, v].T
                direct = {"a": ga, "b": gb, "diff": ga - gb}[side][upper].mean()
                assert got[v, p, g] == pytest.approx(direct, abs=1e-12)
    held, _ = Cosines(a, b, form="gram").uniformity(labels, n_groups=k, side=side)
    assert np.allclose(got, held, rtol=0, atol=1e-13)  # the held table: the same up to rounding


def test_the_pieces_are_offered_where_the_tables_do_not_fit_and_cost_their_products_each_call(rng, one_thread):
    n, views, d = 40, 3, 20
    x = rng.standard_normal((n, views, d))
    sizes = Groups.of(rng.integers(0, 4, size=(50, n)), 4).sizes
    cos = Cosines(x, x + 0.1, gram_bytes=0)
    pieces = cos.costs(sizes, "diff")["gram"]
    assert pieces == pytest.approx(Cosines(x, x + 0.1).costs(sizes, "diff")["gram"])  # the held table's first call
    cos.uniformity(rng.integers(0, 4, size=(50, n)), n_groups=4, side="diff")
    assert cos._tables == {} and cos.costs(sizes, "diff")["gram"] == pieces  # charged again


def test_unit_rows_a_chunk_at_a_time_are_the_same_bytes(rng):
    """:func:`unit_rows_of` writes chunks of rows (the temporaries of one chunk) and equals the unit
    rows of the whole concatenation bit for bit, on a row count that is not a multiple of the chunk."""
    from uaprobe.analysis.geometry.uniformity import UNIT_CHUNK_ROWS, unit_rows, unit_rows_of
    n = 3 * UNIT_CHUNK_ROWS + 5
    a = rng.standard_normal((n, 3, 20)).astype(np.float32)
    b = rng.standard_normal((n, 2, 20)).astype(np.float32)
    b[4, 1] = 0.0  # a zero row: divided by the guard alone
    want = unit_rows(np.concatenate([a, b], axis=1))
    got = unit_rows_of(a, b)
    assert got.dtype == np.float64 and np.array_equal(got, want)
