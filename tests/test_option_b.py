"""The original study's pair-level metrics (Option B) and phase means, against direct loop
computations, a hand computation and the published Pythia-6.9B numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from scipy.spatial.distance import cdist

from uaprobe.analysis.geometry import knn
from uaprobe.analysis.inference import phases, stats
from uaprobe.analysis.pairs import option_b
from uaprobe.config import AnalysisParams, BinsParams
from uaprobe.schema.document import document
from uaprobe.schema.missing import take_reasons
from uaprobe.errors import UAProbeError

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published" / "pythia-6-9b.json"



def as_file(record):
    """A record as the JSON object its file holds: its missing values null, their reasons in ``nan_reasons``."""
    doc = document(record)
    doc["nan_reasons"] = take_reasons(doc)
    return doc

def small_params(**kw) -> AnalysisParams:
    return AnalysisParams(**{**dict(bootstrap_resamples=300, permutations=300,
                                    bins=BinsParams(k=(3, 5), partitions=5, ci_k=4)), **kw})


def states(n: int = 14, views: int = 3, dim: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shift = rng.normal(size=(1, views, dim))  # a common direction, as hidden states have
    return rng.normal(size=(n, views, dim)) + shift, rng.normal(size=(n, views, dim)) + 0.5 * shift


# ---------------------------------------------------------------------- direct loop references


def cos_loop(x, y, eps: float = 1e-10) -> float:
    dot = sum(float(p) * float(q) for p, q in zip(x, y))
    nx = math.sqrt(sum(float(p) ** 2 for p in x))
    ny = math.sqrt(sum(float(q) ** 2 for q in y))
    return dot / (nx * ny + eps)


def mean_loop(rows) -> list[float]:
    return [sum(float(r[d]) for r in rows) / len(rows) for d in range(len(rows[0]))]


def dist_loop(x, y) -> float:
    return math.sqrt(sum((float(p) - float(q)) ** 2 for p, q in zip(x, y)))


def density_loop(rows, k: int) -> list[float]:
    out = []
    for i, x in enumerate(rows):
        # scikit-learn's cosine distance: no guard in the normalisation, clipped to [0, 2], 0 to itself
        d = sorted(0.0 if i == j else min(2.0, max(0.0, 1.0 - cos_loop(x, y, eps=0.0))) for j, y in enumerate(rows))
        out.append(1.0 / (sum(d[:k]) / k + 1e-10))
    return out


def z_loop(v: list[float]) -> list[float]:
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / len(v))
    return [(x - m) / (sd + 1e-10) for x in v]


def metrics_loop(a: np.ndarray, b: np.ndarray, v: int, k: int) -> dict[str, list[float]]:
    n = a.shape[0]
    A = [a[i, v] for i in range(n)]
    B = [b[i, v] for i in range(n)]
    ca, cb = mean_loop(A), mean_loop(B)
    mid = [(p + q) / 2 for p, q in zip(ca, cb)]
    out = {
        "centroid_asymmetry": [cos_loop(A[i], ca) - cos_loop(B[i], cb) for i in range(n)],
        "cross_centroid": [cos_loop(A[i], cb) - cos_loop(B[i], ca) for i in range(n)],
        "within_pair_sim": [cos_loop(A[i], B[i]) for i in range(n)],
        "margin_asymmetry": [dist_loop(A[i], mid) - dist_loop(B[i], mid) for i in range(n)],
    }
    kk = min(k, n - 1)
    za, zb = z_loop(density_loop(A, kk)), z_loop(density_loop(B, kk))
    out["knn_density_asymmetry"] = [p - q for p, q in zip(za, zb)]
    loo = {"centroid_asymmetry_loo": [], "cross_centroid_loo": [], "margin_asymmetry_loo": []}
    for i in range(n):
        ca_i = mean_loop([A[j] for j in range(n) if j != i])
        cb_i = mean_loop([B[j] for j in range(n) if j != i])
        mid_i = [(p + q) / 2 for p, q in zip(ca_i, cb_i)]
        loo["centroid_asymmetry_loo"].append(cos_loop(A[i], ca_i) - cos_loop(B[i], cb_i))
        loo["cross_centroid_loo"].append(cos_loop(A[i], cb_i) - cos_loop(B[i], ca_i))
        loo["margin_asymmetry_loo"].append(dist_loop(A[i], mid_i) - dist_loop(B[i], mid_i))
    out.update(loo)
    return out


@pytest.mark.parametrize("k", [10, 4])
def test_every_metric_matches_a_direct_loop(k):
    a, b = states()
    got = option_b.pair_metrics(a, b, k=k)
    assert set(got) == set(option_b.ALL_METRICS)
    for v in range(a.shape[1]):
        ref = metrics_loop(a, b, v, k)
        for name in option_b.ALL_METRICS:
            assert got[name].shape == (a.shape[1], a.shape[0])
            np.testing.assert_allclose(got[name][v], ref[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_knn_density_matches_scipy_cosine_distances():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(25, 7)) + 2.0
    d = cdist(x, x, "cosine")
    np.fill_diagonal(d, 0.0)
    k = 10
    expected = 1.0 / (np.sort(d, axis=1)[:, :k].mean(axis=1) + 1e-10)
    np.testing.assert_allclose(option_b.knn_density(x, k=k), expected, rtol=1e-10)
    # the point itself is one of its k neighbours: with k = 1 every density is 1 / 1e-10
    np.testing.assert_allclose(option_b.knn_density(x, k=1), 1e10)
    # blocks of rows give the same numbers
    monkey = pytest.MonkeyPatch()
    monkey.setattr(knn, "KNN_BLOCK_ROWS", 4)
    np.testing.assert_allclose(option_b.knn_density(x, k=k), expected, rtol=1e-10)
    monkey.undo()


@pytest.mark.parametrize("block", [64, 1024])
def test_knn_density_in_symmetric_blocks_matches_the_full_distance_matrix(block):
    # several blocks above the diagonal, a ragged last block, duplicated rows (ties at distance 0)
    # and a zero row (distance 1 to everything)
    rng = np.random.default_rng(11)
    x = rng.normal(size=(301, 40)) + 0.3
    x[5] = x[17]
    x[200] = x[17]
    x[42] = 0.0
    u = np.divide(x, np.linalg.norm(x, axis=1, keepdims=True), out=np.zeros_like(x),
                  where=np.linalg.norm(x, axis=1, keepdims=True) > 0)
    d = np.clip(1.0 - u @ u.T, 0.0, 2.0)
    np.fill_diagonal(d, 0.0)
    for k in (1, 2, 10, 301):
        expected = 1.0 / (np.sort(d, axis=1)[:, :k].mean(axis=1) + 1e-10)
        monkey = pytest.MonkeyPatch()
        monkey.setattr(knn, "KNN_BLOCK_ROWS", block)
        got = option_b.knn_density(x, k=k)
        monkey.undo()
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_k_is_capped_at_n_minus_1_and_global_centroids_are_not_per_category():
    a, b = states(n=5)
    got = option_b.pair_metrics(a, b)  # k = 10 > n - 1 = 4
    ref = metrics_loop(a, b, 0, 4)
    np.testing.assert_allclose(got["knn_density_asymmetry"][0], ref["knn_density_asymmetry"], rtol=1e-10)
    # moving one pair far away changes every other pair's centroid metric (global centroids)
    a2 = a.copy()
    a2[0] += 50.0
    moved = option_b.pair_metrics(a2, b)["centroid_asymmetry"]
    assert not np.allclose(moved[:, 1:], got["centroid_asymmetry"][:, 1:])


def test_leave_one_out_differs_from_the_plain_metric_by_the_own_contribution():
    a, b = states(n=200, dim=3, seed=5)
    got = option_b.pair_metrics(a, b)
    # with many pairs leaving one out barely moves the centroid
    np.testing.assert_allclose(got["centroid_asymmetry_loo"], got["centroid_asymmetry"], atol=0.05)
    assert not np.allclose(got["centroid_asymmetry_loo"], got["centroid_asymmetry"], atol=1e-9)


def test_shapes_and_input_errors():
    a, b = states()
    with pytest.raises(ValueError, match="n_pairs, n_views, D"):
        option_b.pair_metrics(a, b[:, :2])
    with pytest.raises(Exception, match="at least 2 pairs"):
        option_b.pair_metrics(a[:1], b[:1])


# -------------------------------------------------------------------------- partial correlation


def test_partial_r_is_the_r_of_residuals_on_the_length_difference_with_n_minus_3_df():
    rng = np.random.default_rng(1)
    n, views = 40, 2
    a, b = states(n=n, views=views, seed=4)
    z = rng.integers(-4, 5, size=n).astype(float)
    metric = option_b.pair_metrics(a, b)["within_pair_sim"][1]
    y = -0.5 * z + 3.0 * metric + rng.normal(size=n)
    body = as_file(option_b.option_b_results(a, b, y, z, params=small_params(), rng=np.random.default_rng(0)))
    design = np.column_stack([np.ones(n), z])
    rx = metric - design @ np.linalg.lstsq(design, metric, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    r_ref = float(np.corrcoef(rx, ry)[0, 1])
    t = r_ref * math.sqrt((n - 3) / (1 - r_ref ** 2))
    e = body["metrics"]["within_pair_sim"]
    assert e["partial_r"][1] == pytest.approx(r_ref, abs=1e-12)
    assert e["partial_p"][1] == pytest.approx(2 * sps.t.sf(abs(t), n - 3), rel=1e-9)


# ------------------------------------------------------------------------- the results object


def test_results_recover_a_planted_metric_and_match_scipy():
    rng = np.random.default_rng(7)
    n, views, dim = 60, 5, 4
    a = rng.normal(size=(n, views, dim)) + 3.0
    b = rng.normal(size=(n, views, dim)) + 3.0
    margin = option_b.pair_metrics(a, b)["margin_asymmetry"]
    pref = np.zeros(n)
    pref[:] = margin[views - 1] + 0.05 * rng.normal(size=n)  # planted at the last layer only
    zdiff = rng.integers(-3, 4, size=n)
    body = as_file(option_b.option_b_results(a, b, pref, zdiff, params=small_params(), rng=np.random.default_rng(0)))
    e = body["metrics"]["margin_asymmetry"]
    for v in range(views):
        r_ref, p_ref = sps.pearsonr(margin[v], pref)
        assert e["pearson_r"][v] == pytest.approx(r_ref, abs=1e-12)
        assert e["pearson_p"][v] == pytest.approx(p_ref, rel=1e-6, abs=1e-300)
    assert e["pearson_r"][-1] > 0.99
    assert e["bootstrap_ci_low"][-1] > 0.98
    assert e["permutation_p"][-1] == pytest.approx(1 / 301)
    assert e["permutation_holm_reject"][-1] is True
    assert sum(e["holm_reject"]) >= 1
    assert body["n_pairs"] == n and body["k_neighbours"] == 10
    assert body["nan_reasons"] == {}
    # deterministic
    again = as_file(option_b.option_b_results(a, b, pref, zdiff, params=small_params(), rng=np.random.default_rng(0)))
    assert json.dumps(again, sort_keys=True) == json.dumps(body, sort_keys=True)


def test_results_record_reasons_for_a_constant_metric():
    a, b = states(n=8, views=4)
    b = a.copy()  # A == B: centroid asymmetry and margin are 0 for every pair
    pref = np.arange(8.0)
    body = as_file(option_b.option_b_results(a, b, pref, np.zeros(8), params=small_params(), rng=np.random.default_rng(0)))
    assert body["metrics"]["centroid_asymmetry"]["pearson_r"] == [None] * 4
    assert "constant" in body["nan_reasons"]["metrics/centroid_asymmetry/pearson_r/0"]
    assert body["metrics"]["centroid_asymmetry"]["phases"]["sign_change"] is None
    assert "late_inversion" not in body["metrics"]["centroid_asymmetry"]["phases"]  # no verdict on such intervals


# ------------------------------------------------------------------------------------- phases


def test_partition_is_the_papers_for_32_layers_and_thirds_of_the_seed_view_otherwise():
    assert phases.partition(32) == {"early": (0, 4, 8), "mid": (12, 16, 20), "late": (24, 28, 32)}
    assert phases.partition(30) == {"early": (0, 4, 8), "mid": (12, 16, 20), "late": (24, 28, 30)}
    assert phases.partition(18) == {"early": (0, 4), "mid": (8, 12), "late": (16, 18)}
    assert phases.partition(6) == {"early": (0,), "mid": (4,), "late": (6,)}
    assert phases.partition(3) == {"early": (0, 1), "mid": (2,), "late": (3,)}  # the seed view [0, 3] is too short
    assert phases.partition(1) == {"early": (), "mid": (), "late": ()}


def test_phase_means_and_intervals_by_hand():
    r = np.array([0.5, 0.1, 0.3, 0.2, -0.1, -0.4])
    part = {"early": (0, 2), "mid": (3,), "late": (4, 5)}
    assert phases.phase_means(r, part) == pytest.approx({"early": 0.4, "mid": 0.2, "late": -0.25})
    assert phases.phase_mean(np.stack([r, 2 * r], axis=1), part["late"]).tolist() == pytest.approx([-0.25, -0.5])
    assert np.isnan(phases.phase_mean(r, ())) and phases.phase_mean(np.ones((6, 3)), ()).shape == (3,)
    # three bootstrap draws per layer; the phase draw is the mean over the phase's layers
    boot = np.array([[0.4, 0.6, 0.5], [0, 0, 0], [0.2, 0.4, np.nan], [0.1, 0.2, 0.3],
                     [-0.2, -0.1, 0.0], [-0.5, -0.3, -0.4]])
    perm = np.array([[0.1, -0.6], [0, 0], [0.1, -0.3], [0.3, 0.1], [0.1, 0.0], [-0.05, 0.0]])
    out = document(phases.phase_results(r=r, boot_r=boot, perm_r=perm, mode="exact", partition=part, level=0.5))
    # early draws: (0.4+0.2)/2 = 0.3, (0.6+0.4)/2 = 0.5, NaN -> dropped; 25th/75th percentile of [0.3, 0.5]
    assert out["early"]["mean_r"] == pytest.approx(0.4)
    assert out["early"]["bootstrap_valid"] == 2
    assert out["early"]["bootstrap_ci_low"] == pytest.approx(0.35)
    assert out["early"]["bootstrap_ci_high"] == pytest.approx(0.45)
    # early permutation means: 0.1, -0.45; |.| >= 0.4 once in 2 (exact mode)
    assert out["early"]["permutation_p"] == pytest.approx(0.5)
    # late draws: -0.35, -0.2, -0.2 -> [25%, 75%] = [-0.275, -0.2]
    assert out["late"]["bootstrap_ci_high"] == pytest.approx(-0.2)
    assert out["late"]["bootstrap_ci_low"] == pytest.approx(-0.275)
    assert out["sign_change"] is True
    assert out["mid"]["layers"] == [3]


def test_published_phase_means_from_the_published_layer_values():
    """The follow-up paper's Pythia-6.9B early and mid means are the means of the published
    centroid_asymmetry r over its partition; its late mean is not (see data/README.md)."""
    pub = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    ob = pub["option_b"]
    assert ob["layers"] == list(phases.partition(32)["early"] + phases.partition(32)["mid"]
                                + phases.partition(32)["late"])
    r = np.full(33, np.nan)
    r[ob["layers"]] = ob["metrics"]["centroid_asymmetry"]["r"]
    means = phases.phase_means(r, phases.partition(32))
    row = next(m for m in pub["phases"]["models"] if m["model"] == "Pythia-6.9B")
    assert round(means["early"], 2) == row["early"] == 0.44
    assert round(means["mid"], 2) == row["mid"] == 0.36
    assert round(means["late"], 2) == 0.0 != row["late"]


def test_published_category_level_r_from_the_published_table():
    pub = json.loads(PUBLISHED.read_text(encoding="utf-8"))["category_level"]
    table = {k: v for k, v in pub["final_table"].items() if k != "note"}
    ua = np.array([v[0] for v in table.values()])
    pref = np.array([v[1] for v in table.values()])
    r = stats.pearson(ua, pref).r
    assert round(float(r), 2) == pub["r"][-1] == -0.87


# ------------------------------------------------------------------------------ in the pipeline


def test_analyze_model_writes_option_b_phases_and_plots(tmp_path):
    from synthetic_h5 import write_synthetic_h5
    from uaprobe.analysis.run.documents import finish
    from uaprobe.analysis.run.pipeline import analyze_control, analyze_model
    from uaprobe.schema.text import json_text
    from uaprobe.extraction.store import read_embeddings

    emb = read_embeddings(write_synthetic_h5(tmp_path / "s.h5", n_layers=8))
    params = small_params()
    out = analyze_model(emb, params=params, model_id="s", control=emb)
    body = out.results["option_b"]
    assert body["model"] == "s" and body["n_layers"] == 8 and set(body["poolings"]) == {"mean", "last", "first"}
    e = body["poolings"]["mean"]["metrics"]["centroid_asymmetry"]
    # the pipeline's r is the r of the metric computed from the file's states and preferences
    a = emb.pooled["mean"][0::2]
    b = emb.pooled["mean"][1::2]
    pref = emb.nll_mean[1::2] - emb.nll_mean[0::2]
    ref = option_b.pair_metrics(a, b)["centroid_asymmetry"]
    for layer in range(9):
        assert e["pearson_r"][layer] == pytest.approx(sps.pearsonr(ref[layer], pref)[0], abs=1e-12)
    assert body["poolings"]["mean"]["phase_layers"] == {"early": [0], "mid": [4], "late": [8]}
    m = out.metrics
    assert m["option_b"]["mean"]["centroid_asymmetry"]["final_r"] == e["pearson_r"][-1]
    assert m["phases"]["mean"]["early_mean_r"] == e["phases"]["early"]["mean_r"]
    assert out.plots["option_b"]["centroid_asymmetry_mean"] == e["pearson_r"]
    json_text(body)  # strict JSON: every missing number has a reason
    ctrl = analyze_control(emb, params=params, model_id="s")
    cats = ctrl.results.categories
    assert sum(c.n_pairs for c in cats.values()) == len(emb.text) // 2
    first = next(iter(cats))
    n1 = cats[first].n_pairs
    ref1 = option_b.pair_metrics(a[:n1], b[:n1])["within_pair_sim"][-1]
    got1 = cats[first].poolings["mean"].metrics["within_pair_sim"].pearson_r[-1]
    assert got1 == pytest.approx(sps.pearsonr(ref1, pref[:n1])[0], abs=1e-12)
    assert set(ctrl.metrics) == set(cats)
    assert ctrl.metrics[first]["within_pair_sim"].final_r == got1
    # in the model's analysis, the control is its own results file and metrics key
    assert out.results["neutral_control"] == finish(ctrl.results)
    assert out.metrics["neutral_control"][first]["within_pair_sim"]["final_r"] == got1
    json_text(finish(ctrl.results))


def test_manuscript_tables_quote_the_published_file_and_this_panels_results(synthetic_tree):
    from uaprobe.publishing.prose.tables import original as mo
    from uaprobe.publishing.provenance.outputs import load_outputs
    from uaprobe.schema.pairs import OptionB

    out = load_outputs(synthetic_tree)
    pub = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    assert len(mo.option_b_table(out).splitlines()) == 2 + 5 * len(out.models)
    assert len(mo.control_table(out).splitlines()) == 2 + 3 * len(out.models)
    def phases(m, stem):
        return out.record(m, OptionB, stem=stem).poolings["mean"].metrics["centroid_asymmetry"].phases

    differs = [m for m in out.models if phases(m, "sink_excluded/option_b") != phases(m, "option_b")]
    assert differs == ["tiny-a"]  # tiny-b's position 0 is a BOS that both poolings drop
    phase_rows = mo.phase_table(out).splitlines()
    assert len(phase_rows) == 2 + len(out.models) + len(differs) + len(pub["phases"]["models"])
    assert sum("position 0 excluded" in row for row in phase_rows) == len(differs)


def test_the_option_b_figure_draws_every_metric_and_the_phases(synthetic_tree):
    from uaprobe.publishing.figures import figures_original
    from uaprobe.schema import read_results

    doc = read_results(synthetic_tree, "results/models/tiny-a/option_b.json")
    fig = figures_original.option_b_figure(doc)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    r = doc.poolings["mean"].metrics["margin_asymmetry"].pearson_r
    np.testing.assert_allclose(lines["margin asymmetry"].get_ydata(), [np.nan if v is None else v for v in r])
    top = next(child for child in ax.get_children() if child.get_gid() == figures_original.PHASE_AXIS_GID)
    assert [label.get_text() for label in top.get_xticklabels()] == ["early", "mid", "late"]


def test_pair_metrics_give_the_same_bytes_on_any_number_of_workers():
    # views run as independent units on a thread pool; each result is placed by its view
    a, b = states(n=60, views=7, dim=9, seed=5)
    a[3] = a[11]  # ties in the kNN distances
    one = option_b.pair_metrics(a, b, workers=1)
    for workers in (2, 3):
        got = option_b.pair_metrics(a, b, workers=workers)
        for name in option_b.ALL_METRICS:
            assert got[name].tobytes() == one[name].tobytes(), (workers, name)
    for v in range(a.shape[1]):
        ref = metrics_loop(a, b, v, 10)
        np.testing.assert_allclose(one["knn_density_asymmetry"][v], ref["knn_density_asymmetry"], rtol=1e-10)


def test_pair_metrics_of_rows_are_the_bytes_of_the_copied_rows():
    """Each view's rows taken when its unit runs give the bytes of the metrics of ``x[row_a]`` and
    ``x[row_b]`` (rows in any order); too few pairs or mismatched rows are refused."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((40, 3, 12)) + 2.0).astype(np.float32)
    order = rng.permutation(40)
    row_a, row_b = order[:20], order[20:]
    got = option_b.pair_metrics_of_rows(x, row_a, row_b)
    want = option_b.pair_metrics(x[row_a], x[row_b])
    for name in option_b.ALL_METRICS:
        assert got[name].tobytes() == want[name].tobytes(), name
    with pytest.raises(UAProbeError, match="at least 2 pairs"):
        option_b.pair_metrics_of_rows(x, row_a[:1], row_b[:1])
    with pytest.raises(ValueError, match="two \\(n,\\) arrays"):
        option_b.pair_metrics_of_rows(x, row_a, row_b[:5])


def test_option_b_poolings_share_one_draw_and_equal_a_fresh_generator_per_pooling():
    a, b = states(n=16, views=3, seed=5)
    rng = np.random.default_rng(9)
    pooled = {"mean": np.concatenate([a, b]), "last": np.concatenate([b, a]) * 2.0}
    rows_a, rows_b = np.arange(16), np.arange(16, 32)
    pref, n_content = rng.normal(size=16), rng.integers(1, 9, size=32)
    params = small_params()
    shared = option_b.option_b_poolings(pooled=pooled, row_a=rows_a, row_b=rows_b, preference=pref,
                                       n_content=n_content, params=params)
    for p, x in pooled.items():
        fresh = as_file(option_b.option_b_results(x[rows_a], x[rows_b], pref, n_content[rows_b] - n_content[rows_a],
                                                  params=params, rng=stats.rng_for(seed=params.seed, name="option_b")))
        assert json.dumps(as_file(shared.poolings[p]), sort_keys=True) == json.dumps(fresh, sort_keys=True)
        # the metric values it computed, returned for the pair-level models
        metrics = option_b.pair_metrics(x[rows_a], x[rows_b])
        assert set(shared.values[p]) == set(option_b.ALL_METRICS)
        for name in option_b.ALL_METRICS:
            assert shared.values[p][name].tobytes() == metrics[name].tobytes(), (p, name)
    with pytest.raises(ValueError):
        option_b.option_b_results(a, b, pref, np.zeros(16), params=params)
    # the caller's draws (drawn once for both policies) give the same results; draws of other pairs do not fit
    given = option_b.option_b_poolings(pooled=pooled, row_a=rows_a, row_b=rows_b, preference=pref,
                                       n_content=n_content, params=params,
                                       draws=option_b.option_b_draws(n_pairs=16, params=params))
    assert json.dumps({p: as_file(r) for p, r in given.poolings.items()}, sort_keys=True) == json.dumps(
        {p: as_file(r) for p, r in shared.poolings.items()}, sort_keys=True)
    with pytest.raises(ValueError, match="draws for 15 pairs given for 16 pairs"):
        option_b.option_b_poolings(pooled=pooled, row_a=rows_a, row_b=rows_b, preference=pref, n_content=n_content,
                                   params=params,
                                   draws=option_b.option_b_draws(n_pairs=15, params=params))


def test_the_k_nearest_do_not_depend_on_the_order_they_are_offered_in():
    """The two-pass offer (flag against the limits, then take) keeps the same k smallest distances as
    offering every distance of the full matrix in turn, so the densities are the same bytes;
    several blocks, ties at distance 0 and a zero row included."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(150, 12))
    x[9] = x[3]
    x[77] = 0.0
    u = np.divide(x, np.linalg.norm(x, axis=1, keepdims=True), out=np.zeros_like(x),
                  where=np.linalg.norm(x, axis=1, keepdims=True) > 0)
    for k in (1, 4, 10):
        nearest = np.full((150, k), np.inf)
        for i in range(150):  # every distance of every row offered in turn, the plain way
            for j in range(150):
                d = 0.0 if i == j else min(max(1.0 - float(u[i] @ u[j]), 0.0), 2.0)
                top = int(np.argmax(nearest[i]))
                if d < nearest[i, top]:
                    nearest[i, top] = d
        blocks = 32
        got_nearest = np.full((150, k), np.inf)
        farthest, limit = np.zeros(150, dtype=np.int64), np.full(150, np.inf)
        for r in range(0, 150, blocks):
            for c in range(r, 150, blocks):
                dots = np.array([[float(u[i] @ u[j]) for j in range(c, min(150, c + blocks))]
                                 for i in range(r, min(150, r + blocks))])
                knn._offer_block(dots, r, c, got_nearest, farthest, limit)
        assert np.array_equal(np.sort(got_nearest, axis=1), np.sort(nearest, axis=1))
        assert np.array_equal(limit, got_nearest.max(axis=1))
