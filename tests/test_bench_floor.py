"""bench/floor.py: the operation counts of the analyze computation's floor against direct counts."""

from __future__ import annotations

import dataclasses
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import floor  # noqa: E402  (bench/floor.py)

from uaprobe.analysis import bins  # noqa: E402

RATES = floor.Rates(gemm=2e10, add=1e10, draw=1e8, gather=1e9, gather_null=1e9)


def direct_pairs(labels: np.ndarray) -> int:
    """Pairs i < j in the same group, by enumeration."""
    return sum(1 for i, j in itertools.combinations(range(labels.size), 2) if labels[i] == labels[j])


def tiny(**changes) -> floor.Shape:
    base = dict(n_pairs=12, dim=5, n_layers=2, category_sizes=(5, 4, 3), tokens_per_statement=3.0, aniso_tokens=4,
                vocabulary=9, bins_k=(2, 3), bins_partitions=4, ci_k=3, null_partitions=6, resamples=7,
                permutations=8, lexical_seeds=2, aniso_resamples=3)
    base.update(changes)
    return floor.Shape(**base)


def test_pairs_within_and_balanced_sizes_match_the_partitions_of_the_bins_module():
    rng = np.random.default_rng(0)
    for n, k in ((12, 3), (13, 4), (7, 7)):
        labels = bins.partitions(rng, scheme="balanced", n=n, k=k, count=3)
        for row in labels:
            assert sorted(np.bincount(row, minlength=k).tolist()) == sorted(floor.balanced_sizes(n, k))
            assert floor.pairs_within(floor.balanced_sizes(n, k)) == direct_pairs(row)


def test_randint_pairs_is_the_mean_over_every_labelling():
    for n, k in ((4, 2), (5, 3)):
        counts = [direct_pairs(np.array(lab)) for lab in itertools.product(range(k), repeat=n)]
        assert floor.randint_pairs(n, k) == pytest.approx(np.mean(counts), rel=1e-12)


def test_gram_macs_counts_the_upper_triangle_and_diagonal():
    n, d = 6, 4
    direct = sum(d for i in range(n) for j in range(i, n))
    assert floor.gram_macs(n, d) == direct


def test_group_sum_adds_vector_form_counts_every_coordinate_of_both_sides():
    n, d, g = 10, 3, 4
    _, vec = floor.group_sum_adds(0, n, d, g)
    direct = 2 * n * d + 2 * g * d  # members' coordinates added, then each group's two squared norms
    assert vec == direct


def test_bootstrap_ops_counts_the_products():
    ops = floor.bootstrap_ops(n=5, rows=3, resamples=7, permutations=11)
    direct_gemm = 7 * 5 * 3 * 3 + 2 * 7 * 5 + 3 * 5 * 11
    assert ops.gemm == direct_gemm
    assert ops.add == pytest.approx(3 * 7 * np.log2(7) + 3 * 11)


def test_components_gram_matrices_are_counted_once_for_every_layer_view():
    s = tiny()
    ops = floor.components(s, RATES)
    per_view = sum(s.dim for i in range(s.n_pairs) for j in range(i, s.n_pairs))
    # the layers' matrices (the kNN needs them) and the pair-level models' lexical seeds' (one view per
    # seed and policy), plus the prenorm view's only where they are cheaper
    layers = (s.policies * s.poolings * s.layers + s.policies * s.lexical_seeds) * 2 * per_view
    gram = ops["Gram matrices (shared)"].gemm
    assert gram in (layers, layers + s.policies * s.poolings * 2 * per_view,
                    layers + s.policies * 2 * per_view, layers + (s.policies * s.poolings - s.policies) * 2 * per_view)
    assert not any(o.gemm for name, o in ops.items() if name in ("random bins", "size-matched null"))


def test_bins_take_the_cheaper_form_per_view():
    # wide views: the Gram sums win (the Gram matrices are paid by the kNN anyway)
    s = tiny(dim=10_000)
    ops = floor.components(s, RATES)
    n = s.n_pairs
    gram_form = sum(s.bins_partitions * (floor.randint_pairs(n, k) + floor.pairs_within(floor.balanced_sizes(n, k)))
                    for k in s.bins_k) + 2 * s.schemes * floor.pairs_within(floor.balanced_sizes(n, s.ci_k))
    runs = s.policies * s.poolings
    # layer views in the Gram form; the prenorm view too (the GEMM of 10^4 coordinates is cheaper than its
    # sums): the pairs gathered from the table, its n (n - 1) / 2 subtractions added
    assert ops["random bins"].gather == pytest.approx(runs * s.views * gram_form)
    assert ops["random bins"].add == pytest.approx(runs * s.views * n * (n - 1) / 2)
    # narrow views and many points: the unit vectors win
    s = tiny(dim=1, n_pairs=40, category_sizes=(20, 20))
    ops = floor.components(s, RATES)
    vec = sum(2 * s.bins_partitions * (2 * s.n_pairs * s.dim + 2 * k * s.dim) for k in s.bins_k) \
        + 2 * s.schemes * s.n_pairs * s.dim
    assert ops["random bins"].add == pytest.approx(runs * s.views * vec)
    assert ops["random bins"].gather == 0


def test_the_forms_are_chosen_by_seconds_not_by_counts():
    forms = dict(bins_gram=1e6, bins_vec=5e6, null_gram=0.0, null_vec=0.0, table=0.0, gram=floor.Ops(), null=False)
    # fewer operations in the Gram form, but gathered at a hundredth of the add rate: the unit vectors win
    _, bins_ops, _ = floor.cheapest_forms(**forms, rates=floor.Rates(gemm=2e10, add=1e10, draw=1e8, gather=1e8, gather_null=1e8))
    assert bins_ops == floor.Ops(add=5e6)
    _, bins_ops, _ = floor.cheapest_forms(**forms, rates=floor.Rates(gemm=2e10, add=1e10, draw=1e8, gather=1e10, gather_null=1e10))
    assert bins_ops == floor.Ops(gather=1e6)
    # the table goes to the null where only the null gathers; the prenorm view's products with it
    gram = floor.Ops(gemm=1.0)
    g, b, z = floor.cheapest_forms(bins_gram=1e9, bins_vec=1e3, null_gram=10.0, null_vec=1e9, table=7.0, gram=gram,
                                   null=True, rates=RATES)
    assert (g, b, z) == (gram, floor.Ops(add=1e3), floor.Ops(gather_null=10.0, add=7.0))


def test_the_null_runs_on_the_mean_pooling_of_each_policy_only():
    s = tiny(dim=10_000)
    ops = floor.components(s, RATES)
    per_view = s.null_partitions * floor.pairs_within(s.category_sizes)
    assert ops["size-matched null"].gather_null == pytest.approx(s.policies * s.views * per_view)
    assert ops["size-matched null"].add == 0  # the table is the bins'
    assert floor.components(tiny(dim=10_000, policies=1), RATES)["size-matched null"].gather_null == pytest.approx(
        s.views * per_view)


def test_knn_offers_every_distance_to_its_row():
    s = tiny()
    ops = floor.components(s, RATES)
    n = s.n_pairs
    offers = sum(1 for i in range(n) for j in range(n))  # each distance (i, j) offered to row i
    views = s.policies * s.poolings * s.layers + s.policies * s.lexical_seeds  # + the pair-level lexical seeds
    assert ops["Option B kNN, metrics"].add == pytest.approx(views * 2 * (offers + 6 * n * s.dim))


def test_draws_are_counted_once_whatever_the_policies():
    one, two = floor.components(tiny(policies=1), RATES), floor.components(tiny(policies=2), RATES)
    assert one["random draws (shared)"] == two["random draws (shared)"]
    assert two["random bins"].add == pytest.approx(2 * one["random bins"].add)


def test_floor_grows_quadratically_in_the_pairs_at_large_n():
    shape = dict(dim=576, n_layers=30, tokens_per_statement=10.0, aniso_tokens=200, vocabulary=2000)
    rates = dataclasses.replace(RATES, gather=1e8, gather_null=1e8)  # the unit vectors at both sizes: no prenorm Gram matrices
    small = floor.components(floor.Shape(n_pairs=2300, category_sizes=(400,) * 5 + (300,), **shape), rates)
    large = floor.components(floor.Shape(n_pairs=4600, category_sizes=(800,) * 5 + (600,), **shape), rates)
    g_small, g_large = small["Gram matrices (shared)"].gemm, large["Gram matrices (shared)"].gemm
    assert 3.9 < g_large / g_small < 4.1


def test_shape_defaults_are_the_analysis_settings_of_params_yaml():
    from uaprobe.config import load_params

    analysis = load_params(floor.PARAMS).analysis
    sizes = dict(n_pairs=12, dim=5, n_layers=2, category_sizes=(5, 4, 3), tokens_per_statement=3.0, aniso_tokens=4,
                 vocabulary=9)
    s = floor.Shape(**sizes)
    assert s == floor.Shape.of(**sizes, params=analysis)
    assert (s.bins_k, s.bins_partitions, s.ci_k) == (analysis.bins.k, analysis.bins.partitions, analysis.bins.ci_k)
    assert (s.resamples, s.permutations) == (analysis.bootstrap_resamples, analysis.permutations)
    r = analysis.robustness
    assert (s.null_partitions, s.lexical_seeds, s.aniso_resamples) == (r.null_partitions, r.lexical_seeds,
                                                                       r.anisotropy_bootstrap)
    assert floor.Shape(**sizes, permutations=7).permutations == 7
    from uaprobe.analysis import dimensions, option_b, representation

    assert s.abtt_k == analysis.abtt_k
    assert (s.representations, s.top_pcs, s.pair_model_metrics) == (len(representation.KINDS), max(dimensions.TOPS),
                                                                     len(option_b.METRICS))


def test_ops_arithmetic_and_seconds():
    a = floor.Ops(gemm=2e10, add=1e10, draw=1e8, gather=1e9)
    assert (a + a).seconds(RATES) == pytest.approx(8.0)
    assert (2 * a) == (a + a)
    assert floor.seconds({"x": a}, RATES) == {"x": pytest.approx(4.0)}
    assert floor.KINDS == tuple(f.name for f in dataclasses.fields(floor.Ops)) == tuple(
        f.name for f in dataclasses.fields(floor.Rates))


def test_component_clock_attributes_nested_time_exclusively(monkeypatch):
    import timing  # bench/timing.py

    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def wait(seconds: float) -> None:
        now[0] += seconds

    clock = timing.ComponentClock()
    inner = clock._wrap(lambda: wait(2.0), "inner")
    outer = clock._wrap(lambda: (wait(1.0), inner(), wait(4.0)), "outer")
    skipped = clock._wrap(lambda: wait(8.0), lambda: None)
    outer()
    skipped()
    assert clock.seconds == {"outer": 5.0, "inner": 2.0}


def test_component_clock_times_the_thread_beside_the_main_one_on_its_own(monkeypatch):
    """A component on the analysis's second thread is timed there, on its own stack (it overlaps the
    main thread's), and listed as beside; a worker thread's calls are not timed."""
    import threading

    import timing  # bench/timing.py
    from uaprobe.analysis.pipeline import BESIDE_THREAD

    clock = timing.ComponentClock()
    beside = clock._wrap(lambda: time.sleep(0.05), "beside")
    worker = clock._wrap(lambda: time.sleep(0.05), "worker")
    main = clock._wrap(lambda: None, "main")
    threads = [threading.Thread(target=beside, name=f"{BESIDE_THREAD}_0"), threading.Thread(target=worker)]
    for t in threads:
        t.start()
    main()
    for t in threads:
        t.join()
    assert set(clock.seconds) == {"beside", "main"} and clock.beside == {"beside"}
    assert clock.seconds["beside"] >= 0.04
    assert clock.main_seconds() == clock.seconds["main"] < clock.seconds["beside"]


def test_component_clock_times_every_component_of_an_analysis(tmp_path):
    import timing  # bench/timing.py

    from synthetic_h5 import write_synthetic_h5
    from uaprobe.analysis import option_b
    from uaprobe.analysis.pipeline import analyze_model
    from uaprobe.config import AnalysisParams, BinsParams, RobustnessParams
    from uaprobe.extraction.store import read_embeddings

    emb = read_embeddings(write_synthetic_h5(tmp_path / "s.h5", n_layers=2))
    params = AnalysisParams(bootstrap_resamples=50, permutations=50, bins=BinsParams(k=(3,), partitions=3, ci_k=3),
                            robustness=RobustnessParams(lexical_seeds=1, null_partitions=5, anisotropy_bootstrap=3))
    pair_metrics = option_b.pair_metrics
    clock = timing.ComponentClock()
    with clock.patched():
        analyze_model(emb, params=params, model_id="s")
    assert option_b.pair_metrics is pair_metrics  # restored
    assert set(clock.seconds) == {"categories, pair scores", "random bins", "size-matched null", "lexical baseline",
                                  "bootstrap, permutation tests", "Option B kNN, metrics", "anisotropy",
                                  "pair-level models", "representation sweep", "specification curve"}
    floor_names = set(floor.components(tiny(), RATES))
    assert set(clock.seconds) <= floor_names  # every timed component has a floor
    # the sweep, the anisotropy and Option B run beside the rest (Option B's tests are partly beside)
    assert clock.beside == {"representation sweep", "anisotropy", "Option B kNN, metrics",
                            "bootstrap, permutation tests"}
    assert 0.0 < clock.main_seconds() < sum(clock.seconds.values())


def test_component_clock_fails_loudly_where_a_target_is_gone_or_never_called(monkeypatch):
    import timing  # bench/timing.py

    from uaprobe.analysis import option_b

    pair_metrics = option_b.pair_metrics
    with pytest.raises(RuntimeError, match=r"option_b\.pair_metrics, .* never called .*update ComponentClock"):
        with timing.ComponentClock().patched():
            pass  # nothing runs: every target is missed
    assert option_b.pair_metrics is pair_metrics  # restored before the error
    monkeypatch.delattr(option_b, "pair_metrics")
    with pytest.raises(RuntimeError, match=r"option_b\.pair_metrics is not a function"):
        with timing.ComponentClock().patched():
            pass


def test_tridiagonal_macs_sum_the_householder_steps():
    for m in (1, 2, 5, 40):
        assert floor.tridiagonal_macs(m) == sum(2 * r * r for r in range(1, m))
    assert floor.tridiagonal_macs(600) == pytest.approx(2 / 3 * 600 ** 3, rel=0.01)


def synthetic(tmp_path, *, hidden: int):
    from synthetic_h5 import write_synthetic_h5
    from uaprobe.extraction.store import read_embeddings

    return read_embeddings(write_synthetic_h5(tmp_path / f"s{hidden}.h5", n_layers=2, hidden=hidden))


@pytest.mark.parametrize("hidden", [16, 64])  # N = 48 statements: more rows than coordinates, then fewer
def test_sweep_counts_the_eigensolutions_and_projections_the_library_runs(tmp_path, monkeypatch, hidden):
    from uaprobe.analysis import dimensions, representation
    from uaprobe.analysis.pipeline import table_from_embeddings
    from uaprobe.extraction.store import POLICIES

    emb = synthetic(tmp_path, hidden=hidden)
    table = table_from_embeddings(emb)
    eigh = representation.eigh_subset
    solved = []  # (m, eigenpairs) of every eigensolution

    def spy(g, lo, hi):
        solved.append((g.shape[0], hi - lo + 1))
        return eigh(g, lo, hi)

    monkeypatch.setattr(representation, "eigh_subset", spy)
    k = 3
    dimensions.sweep({p: emb.policy(p)[0] for p in POLICIES}, row_a=table.row_a, row_b=table.row_b,
                     category_of_pair=table.category_of_pair, n_categories=len(table.categories), k=k)
    n_statements, d = len(emb.text), hidden
    big = max(n_statements, d)
    direct = sum(sum(big for i in range(m) for j in range(i, m))  # the symmetric half of the centred Gram matrix
                 + sum(2 * r * r for r in range(1, m)) + m * m * top + 2 * n_statements * d * k for m, top in solved)
    s = floor.Shape(n_pairs=table.n_pairs, dim=d, n_layers=emb.n_layers, category_sizes=tuple(table.pairs_per_category),
                    tokens_per_statement=3.0, aniso_tokens=4, abtt_k=k)
    # one eigensolution per policy, pooling and layer, of the smaller side, the top max(k, TOPS) pairs
    assert len(solved) == s.policies * s.poolings * s.layers
    assert {m for m, _ in solved} == {min(n_statements, d)}
    assert floor.components(s, RATES)["representation sweep"].gemm == pytest.approx(direct, rel=1e-12)


def test_pair_level_counts_the_permuted_products_the_library_runs(tmp_path, monkeypatch):
    from uaprobe.analysis import pairmodels
    from uaprobe.analysis.nan_reasons import NanReasons
    from uaprobe.analysis.pipeline import table_from_embeddings
    from uaprobe.config import AnalysisParams, RobustnessParams
    from uaprobe.extraction.store import POLICIES

    emb = synthetic(tmp_path, hidden=16)
    table = table_from_embeddings(emb)
    params = AnalysisParams(permutations=7, robustness=RobustnessParams(lexical_seeds=2))
    products = []  # multiply-adds of every call: the residuals (2 R n columns), the permuted projections

    permuted_r = pairmodels.PermutedProjections.permuted_r

    def spy(self, x):
        rows, n = np.atleast_2d(x).shape
        products.append(2 * rows * n * self.q.shape[1] + rows * n * self.w_perm.shape[1])
        return permuted_r(self, x)

    monkeypatch.setattr(pairmodels.PermutedProjections, "permuted_r", spy)
    pairmodels.from_embeddings(emb, states={p: emb.policy(p)[0] for p in POLICIES}, table=table,
                               preference=table.preference("mean"), params=params, default_name="special",
                               rec=NanReasons())
    out = table.pairs_per_category[list(table.categories).index(params.primary.left_out)]
    s = floor.Shape(n_pairs=table.n_pairs, dim=16, n_layers=emb.n_layers, category_sizes=tuple(table.pairs_per_category),
                    tokens_per_statement=3.0, aniso_tokens=4, permutations=7, lexical_seeds=2, left_out_pairs=out)
    rows = s.pair_model_metrics * (s.poolings * s.layers + s.lexical_seeds)
    one = floor.permutation_r_ops(n=s.n_pairs, rows=rows, permutations=7, columns=1 + s.pair_covariates)
    # the incremental models, one test per policy, pooling and metric, counted at the length covariates'
    # columns: at most what the library runs (each lexical seed not constant over the pairs adds one)
    tests = s.policies * s.poolings * s.pair_model_metrics
    every_layer = floor.permutation_r_ops(n=s.n_pairs, rows=s.layers, permutations=7, columns=3)
    without = floor.permutation_r_ops(n=s.n_pairs - out, rows=1, permutations=7, columns=3)
    counted = s.policies * one.gemm + tests * (every_layer.gemm + without.gemm)
    assert counted <= sum(products)
    assert floor.components(s, RATES)["pair-level models"].gemm == pytest.approx(counted, rel=1e-12)


def test_curve_counts_every_relabelling_once_and_the_own_orders_among_them():
    from uaprobe.analysis import speccurve

    specs, nll, c = 5, 2, 4
    orders = speccurve.all_orders(c)
    direct = 0
    for left_out in [None, *range(c)]:
        kept = [i for i in range(c) if i != left_out]
        direct += specs * nll * len(orders) * len(kept)  # one product of the kept categories per relabelling
        # the specification's own test: every order of its kept categories' preferences, i.e. the
        # relabellings that map the kept categories onto themselves
        own = {tuple(kept[i] for i in o) for o in speccurve.all_orders(len(kept))}
        fixing = {tuple(o[i] for i in kept) for o in orders if left_out is None or o[left_out] == left_out}
        assert own == fixing
    assert floor.curve_ops(specs=specs, nll=nll, categories=c).gemm == direct
    s = tiny()
    assert floor.components(s, RATES)["specification curve"] == floor.curve_ops(
        specs=s.poolings * s.policies * s.representations * s.layers, nll=s.nll_kinds, categories=3)


def test_gather_sums_the_entries_of_the_pairs_inside_the_groups(monkeypatch):
    import timing  # bench/timing.py

    monkeypatch.setattr(timing, "GATHER_PARTITIONS", 3)
    for n, groups, pairs, shares in ((40, 3, 2000, None), (600, 4, 10**9, None), (600, 4, 1, None),
                                     (40, 3, 2000, (0.6, 0.3, 0.1)), (600, 4, 10**9, (0.1, 0.2, 0.3, 0.4))):
        table, m, tile, tiles, order, starts, entries = timing.gather_work(n, groups=groups, pairs=pairs, seed=1,
                                                                           shares=shares)
        assert m == n and tile == (n if n <= 512 else 256)
        x = np.arange(table.size, dtype=np.float64)  # entry (pair t, lane w) holds 8 t + w
        labels = np.empty(order.shape, dtype=np.int64)  # each member's group, back from the sorted runs
        width = starts.shape[1] - 1
        for p in range(order.shape[0]):
            for run in range(width):
                labels[p, order[p, starts[p, run]:starts[p, run + 1]]] = run % groups
        last = int(tiles[:, 1].max())
        direct_entries, direct_sum = 0, 0.0
        for p in range(labels.shape[0]):
            for i in range(min(tile, n)):
                for j in range(i + 1, min(n, (last + 1) * tile)):
                    if labels[p, i] == labels[p, j]:
                        t = i * n - i * (i + 1) // 2 + j - i - 1
                        direct_entries += 8
                        direct_sum += 64 * t + 28
        assert entries == direct_entries > 0
        assert timing._gather(x, m, tile, tiles, order, starts, groups) == direct_sum


def test_gather_partitions_follow_the_shares_of_their_groups():
    import timing  # bench/timing.py

    _, _, tile, _, order, starts, _ = timing.gather_work(512, groups=3, pairs=10**6, seed=2, shares=(0.6, 0.3, 0.1))
    sizes = np.diff(starts, axis=1).reshape(order.shape[0], -1, 3).sum(axis=(0, 1)) / order.size
    np.testing.assert_allclose(sizes, (0.6, 0.3, 0.1), atol=0.01)
    with pytest.raises(ValueError, match="summing to 1"):
        timing.gather_work(40, groups=2, shares=(0.5, 0.4))


def test_gather_table_is_capped():
    import timing  # bench/timing.py

    n = timing.gather_members(10**6, 256, cap=1 << 24)
    assert timing._tri_start(256, n) * 64 <= 1 << 24 < timing._tri_start(256, n + n // 32) * 64
    assert timing.gather_members(230, 230) == 230


def test_anisotropy_bootstrap_counts_the_tokens_of_the_prompts_a_resample_draws():
    """Every resample of P = 3 prompts of 4 tokens each enumerated: the floor's tokens per resample are
    the mean number the library keeps (the prompts drawn at least once), and its cube at most the mean
    cube, so the count stays below the work; with P unknown every token is counted."""
    draws = list(itertools.product(range(3), repeat=3))
    kept = [4 * len(set(d)) for d in draws]
    s = tiny(aniso_tokens=12, aniso_prompts=3)
    assert s.aniso_drawn_tokens == pytest.approx(np.mean(kept))
    assert s.aniso_drawn_tokens ** 3 <= np.mean(np.array(kept, dtype=float) ** 3)
    assert tiny(aniso_tokens=12).aniso_drawn_tokens == 12
    more = floor.components(tiny(aniso_tokens=12), RATES)["anisotropy"].gemm
    assert floor.components(s, RATES)["anisotropy"].gemm < more
