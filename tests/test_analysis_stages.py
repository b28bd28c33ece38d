"""The analyze and compare stages end to end on small synthetic extraction files."""

from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import h5py
import numpy as np
import pytest
import yaml

from synthetic_h5 import category_preferences, pair_offsets, write_synthetic_h5
from uaprobe.errors import ConfigError
from uaprobe.schema.specs import SpecificationCurve

ROOT = Path(__file__).resolve().parents[1]
PAIRS = (6, 5, 7, 6)


def load_stage(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


analyze_stage = load_stage("analyze")
compare_stage = load_stage("compare")


def write_params(path: Path, *, models: list[str], k: tuple[int, ...] = (3, 4), ci_k: int = 4) -> Path:
    doc = {
        "models": models,
        "catalog": {m: {"display": f"Model {m}", "source": "local", "location": f"/nowhere/{m}",
                        "params_millions": 10.0 * (i + 1)} for i, m in enumerate(models)},
        "analysis": {"seed": 7, "bootstrap_resamples": 300, "permutations": 300, "ci_level": 0.9,
                     "bins": {"k": list(k), "partitions": 12, "ci_k": ci_k}},
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def strict_json(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")

    def refuse(token: str) -> None:
        raise AssertionError(f"{path}: non-strict JSON token {token}")

    obj = json.loads(text, parse_constant=refuse)
    assert text == json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    return obj


def run_analyze(tmp: Path, model: str, params: Path, h5: Path, out: str = "out") -> Path:
    base = tmp / out
    rc = analyze_stage.main(["--model", model, "--params", str(params), "--embeddings", str(h5),
                             "--results", str(base / "results/models"), "--metrics", str(base / "metrics/models"),
                             "--plots", str(base / "plots")])
    assert rc == 0
    return base


@pytest.fixture(scope="module")
def panel(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("panel")
    params = write_params(tmp / "params.yaml", models=["rand", "plant"])
    slopes = np.array([0.05, 0.08, 0.04, -0.03, -0.06, -0.09, -0.05, -0.07, -0.1])  # sign change 2 -> 3
    h5 = {
        "rand": write_synthetic_h5(tmp / "rand.h5", pairs_per_category=PAIRS, n_layers=6, hidden=16, seed=1),
        "plant": write_synthetic_h5(tmp / "plant.h5", pairs_per_category=PAIRS, n_layers=8, hidden=16, seed=2,
                                    kind="planted", slopes=slopes, bell_layer=3, pooling_drop="first"),
    }
    for m, path in h5.items():
        base = run_analyze(tmp, m, params, path)
    rc = compare_stage.main(["--params", str(params), "--results", str(base / "results/models"),
                             "--out-results", str(base / "results/panel.json"),
                             "--out-metrics", str(base / "metrics/panel.json"),
                             "--out-plots", str(base / "plots/panel")])
    assert rc == 0
    return {"tmp": tmp, "base": base, "params": params, "h5": h5, "slopes": slopes}


def test_analyze_writes_every_documented_file(panel):
    base = panel["base"]
    for m in ("rand", "plant"):
        res = base / "results/models" / m
        names = sorted(p.relative_to(res).as_posix() for p in res.rglob("*.json"))
        per_policy = ["bins.json", "layerwise.json", "option_b.json", "pairs.json", "preference.json",
                      "validation.json"]
        assert names == sorted(["anisotropy.json", "robustness.json", "pair_models.json", "dimensions.json",
                                "specification_curve.json", *per_policy,
                                *(f"sink_excluded/{n}" for n in per_policy)])
        for p in res.rglob("*.json"):
            obj = strict_json(p)
            assert obj["model"] == m and "nan_reasons" in obj and obj["settings"]["seed"] == 7
            assert obj["representation"] == {"kind": "raw", "abtt_k": obj["settings"]["abtt_k"]}
        assert strict_json(res / "sink_excluded/layerwise.json")["policy"] == "sink_excluded"
        assert strict_json(res / "layerwise.json")["policy"] == strict_json(res / "layerwise.json")["extraction"]["pooling_drop"]
        metrics = strict_json(base / "metrics/models" / f"{m}.json")
        assert set(metrics) == {"layerwise", "validation", "bins", "pairs", "anisotropy", "preference", "robustness",
                                "inference", "option_b", "phases", "pair_models", "specification_curve"}
        kinds = sorted(p.parent.name for p in (base / "plots").glob(f"*/{m}.csv") if p.parent.name != "panel")
        assert kinds == ["anisotropy", "bins", "layerwise", "option_b", "pair_models", "pairs", "representation",
                         "sink"]


def _tree(base: Path) -> dict[str, bytes]:
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def test_the_panel_in_one_run_is_the_same_bytes_at_any_number_of_workers(panel, tmp_path):
    """Every model of `models` analysed in one run, on 1 and 2 processes: each model's files the bytes of its own
    run (the panel fixture's, one model per run)."""
    (tmp_path / "data/embeddings").mkdir(parents=True)
    for m, h5 in panel["h5"].items():
        (tmp_path / "data/embeddings" / f"{m}.h5").symlink_to(h5)
    runs = {}
    for workers in (1, 2):  # each run a fresh process, as DVC starts the stage: one that can fork its workers
        base = tmp_path / f"w{workers}"
        proc = subprocess.run([sys.executable, str(ROOT / "stages/analyze.py"), "--params", str(panel["params"]),
                               "--workers", str(workers), "--results", str(base / "results/models"),
                               "--metrics", str(base / "metrics/models"), "--plots", str(base / "plots")],
                              cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert ("2 models, on 2 processes" if workers == 2 else "2 models, one after another") in proc.stderr
        runs[workers] = _tree(base)
    assert runs[1] == runs[2]
    alone = {k: v for k, v in _tree(panel["base"]).items() if not k.startswith(("results/panel", "metrics/panel",
                                                                                 "plots/panel"))}
    assert sorted(runs[1]) == sorted(alone) and len(alone) > 40
    # the files' bytes, but for the extraction's path, which each run of the fixture named by --embeddings
    differ = [k for k in alone if runs[1][k] != alone[k]]
    assert all(runs[1][k].replace(b"data/embeddings/", b"").replace(str(panel["tmp"]).encode() + b"/", b"")
               == alone[k].replace(str(panel["tmp"]).encode() + b"/", b"") for k in differ), differ[:3]


def test_one_models_files_name_one_model(panel):
    with pytest.raises(SystemExit):
        analyze_stage.parse_args(["--embeddings", "x.h5"])
    with pytest.raises(SystemExit):
        analyze_stage.parse_args(["--model", "a", "--model", "b", "--control", "c.h5"])
    with pytest.raises(SystemExit):
        analyze_stage.parse_args(["--control", "c.h5", "--controls", "--model", "a"])
    assert analyze_stage.parse_args(["--model", "a", "--model", "b"]).model == ["a", "b"]


def test_plot_csvs_have_one_row_per_layer(panel):
    base = panel["base"]
    for m, n_layers in (("rand", 6), ("plant", 8)):
        for p in (base / "plots").glob(f"*/{m}.csv"):
            text = p.read_text(encoding="utf-8")
            assert text.endswith("\n") and "nan" not in text.lower()
            rows = list(csv.reader(text.splitlines()))
            assert rows[0][:2] == ["layer", "depth_pct"]
            assert [int(r[0]) for r in rows[1:]] == list(range(n_layers + 1))
            assert float(rows[-1][1]) == 100.0


def test_metrics_are_headline_scalars(panel):
    def leaves(obj):
        if isinstance(obj, dict):
            for v in obj.values():
                yield from leaves(v)
        else:
            yield obj
    for path in (panel["base"] / "metrics").rglob("*.json"):
        obj = strict_json(path)
        if "robustness" in obj:  # the one label among the metrics: which category, found from the data
            assert obj["robustness"]["loco"].pop("most_influential") in strict_json(
                panel["base"] / "results/models" / path.stem / "layerwise.json")["categories"]
        assert all(v is None or isinstance(v, (int, float, bool)) for v in leaves(obj)), path


def test_planted_model_gives_the_planted_answer(panel):
    base = panel["base"]
    lw = strict_json(base / "results/models/plant/layerwise.json")
    slopes = panel["slopes"]
    pref = category_preferences(len(PAIRS))
    assert lw["mean_preference"] == pytest.approx(pref.tolist(), abs=1e-12)
    for pooling in ("mean", "last", "first"):
        e = lw["poolings"][pooling]
        assert e["pearson_r"] == pytest.approx(np.sign(slopes).tolist(), abs=1e-9)
        assert np.array(e["ua"]) == pytest.approx(slopes[:, None] * pref[None, :], abs=2e-6)
        assert [(s["layer_before"], s["layer_after"]) for s in e["sign_changes"]] == [(2, 3)]
        assert e["peak_positive"]["layer"] in (0, 1, 2) and e["peak_negative"]["layer"] >= 3  # r = +-1 up to rounding
        assert e["final"]["r"] == pytest.approx(-1.0, abs=1e-9)
        # exact permutation test over 4 categories: only the identity (and its exact mirror) reach |r| = 1
        assert lw["permutation_mode"] == "exact"
    val = strict_json(base / "results/models/plant/validation.json")
    g = val["variants"]["mean"]["global"]
    assert g["r"] == pytest.approx(-1.0, abs=1e-9) and g["label"] == "INVERTED"
    assert g["mean_ua"] == pytest.approx(float(np.mean(slopes[-1] * pref)), abs=2e-6)
    rows = val["variants"]["mean"]["table"]
    expected_pct = [100 * np.mean(pref[c] + pair_offsets(n) > 0) for c, n in enumerate(PAIRS)]
    assert [r["pct_prefer_a"] for r in rows] == pytest.approx(expected_pct)
    an = strict_json(base / "results/models/plant/anisotropy.json")
    assert an["token_selection"] == "all" and an["l_star"] == 3
    assert an["correlation_sign_changes"]["last_inversion_layer"] == 3
    assert an["correlation_sign_changes"]["distance_to_last_inversion"] == 0
    rand_an = strict_json(base / "results/models/rand/anisotropy.json")
    assert rand_an["token_selection"] == "content" and rand_an["n_tokens"] == 4 * 5


def test_compare_stage(panel):
    base = panel["base"]
    res = strict_json(base / "results/panel.json")
    assert res["models"] == ["rand", "plant"]
    plant = res["poolings"]["mean"]["models"]["plant"]
    assert plant["n_layers"] == 8 and plant["params_millions"] == 20.0
    assert plant["peak_positive"]["layer"] in (0, 1, 2) and plant["peak_positive"]["r"] == pytest.approx(1.0)
    assert plant["peak_positive"]["depth_pct"] == 12.5 * plant["peak_positive"]["layer"]
    assert [s["layer_after"] for s in plant["sign_changes"]] == [3]
    assert res["seed_layers_view"]["mean"]["models"]["plant"]["layers"] == [0, 4, 8]
    depths = [res["poolings"]["mean"]["models"][m]["peak_positive"]["depth_pct"] for m in ("rand", "plant")]
    s = res["poolings"]["mean"]["summary"]
    assert s["peak_positive_depth_mean"] == pytest.approx(np.mean(depths))
    assert s["peak_positive_depth_std"] == pytest.approx(np.std(depths))
    assert s["stable"] is bool(np.std(depths) < 10.0)
    metrics = strict_json(base / "metrics/panel.json")
    assert metrics["final_r"]["plant"] == pytest.approx(-1.0)
    rows = list(csv.reader((base / "plots/panel/plant.csv").read_text().splitlines()))
    assert rows[0] == ["layer", "depth_pct", "r_mean", "r_last", "r_first", "r_mean_sink_excluded"] and len(rows) == 10
    # the planted file holds the same geometry under both policies
    assert metrics["sink_excluded_final_r"]["plant"] == pytest.approx(-1.0)
    assert res["sink_excluded"]["mean"]["models"]["plant"]["sign_changes"] == plant["sign_changes"]


def test_outputs_are_identical_across_reruns(panel):
    tmp = panel["tmp"]
    again = run_analyze(tmp, "rand", panel["params"], panel["h5"]["rand"], out="again")
    first = panel["base"]
    for rel in ("results/models/rand", "metrics/models", "plots/layerwise", "plots/bins", "plots/pairs",
                "plots/anisotropy"):
        for p in sorted((again / rel).glob("*")):
            if p.is_file() and (rel.startswith("results") or p.name == "rand.json" or p.name == "rand.csv"):
                assert p.read_bytes() == (first / rel / p.name).read_bytes(), p


def test_constant_preference_gives_nulls_with_reasons_not_a_crash(tmp_path):
    h5 = write_synthetic_h5(tmp_path / "flat.h5", pairs_per_category=PAIRS, n_layers=3, hidden=12, seed=3)
    with h5py.File(h5, "r+") as fh:
        fh["nll/mean"][...] = 2.0
    params = write_params(tmp_path / "params.yaml", models=["flat"])
    base = run_analyze(tmp_path, "flat", params, h5)
    lw = strict_json(base / "results/models/flat/layerwise.json")
    assert all(v is None for v in lw["poolings"]["mean"]["pearson_r"])
    assert lw["nan_reasons"]["poolings/mean/pearson_r/0"] == "preference is constant"
    val = strict_json(base / "results/models/flat/validation.json")
    assert val["variants"]["mean"]["global"]["r"] is None and val["variants"]["mean"]["global"]["label"] is None
    assert "variants/mean/global/r" in val["nan_reasons"]
    bins_ = strict_json(base / "results/models/flat/bins.json")
    assert bins_["poolings"]["mean"]["schemes"]["balanced"]["by_k"]["3"]["r_mean"][0] is None
    assert "poolings/mean/schemes/balanced/by_k/3/r_mean/0" in bins_["nan_reasons"]


def test_too_many_bins_for_the_data_is_a_config_error(tmp_path):
    h5 = write_synthetic_h5(tmp_path / "m.h5", pairs_per_category=PAIRS, n_layers=2, hidden=8, seed=0)
    params = write_params(tmp_path / "params.yaml", models=["m"], k=(3, 20), ci_k=4)
    with pytest.raises(ConfigError, match=r"analysis\.bins\.k"):
        run_analyze(tmp_path, "m", params, h5)


def _max_float_gap(a, b, path="") -> float:
    """Largest |a - b| over the floats of two JSON-like trees; everything else must be equal."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        return max((_max_float_gap(a[k], b[k], f"{path}/{k}") for k in a), default=0.0)
    if isinstance(a, list):
        assert len(a) == len(b), path
        return max((_max_float_gap(x, y, f"{path}/{i}") for i, (x, y) in enumerate(zip(a, b))), default=0.0)
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b)
    assert a == b, path
    return 0.0


def test_gram_and_unit_vector_forms_give_the_same_results(panel):
    from uaprobe.analysis.run.pipeline import analyze_model
    from uaprobe.config import load_params
    from uaprobe.extraction.store import read_embeddings

    # The random file: on the planted one the category intervals have rounding-sized widths, so the
    # relative width reduction of the bins is a ratio of rounding errors in either form.
    params = load_params(panel["params"]).analysis
    emb = read_embeddings(panel["h5"]["rand"])
    got = {form: json.loads(json.dumps(analyze_model(emb, params=params, model_id="rand", form=form).results))
           for form in ("gram", "vectors")}
    assert _max_float_gap(got["gram"], got["vectors"]) < 1e-9


def test_progress_steps_are_counted_in_advance(panel):
    from uaprobe.analysis.run.pipeline import analysis_steps, analyze_model
    from uaprobe.config import load_params
    from uaprobe.extraction.store import read_embeddings

    params = load_params(panel["params"]).analysis
    calls = []
    analyze_model(read_embeddings(panel["h5"]["rand"]), params=params, model_id="rand",
                  on_step=lambda: calls.append(1))
    assert len(calls) == analysis_steps(params) == 2 * (3 + 3 * 2 * (len(params.bins.k) + 1)) + 1  # two policies, the sweep


@pytest.mark.parametrize("kind", ["zscore", "abtt"])
def test_a_representation_is_applied_before_the_layerwise_analysis(panel, kind, monkeypatch):
    """The layer-wise r under a representation is the specification curve's line of that representation
    (computed apart, from the raw states), and every file names the representation. Each policy's
    pooled and pre-norm states are transformed once, for every analysis that reads them."""

    from uaprobe.analysis.category import speccurve
    from uaprobe.analysis.run import pipeline
    from uaprobe.analysis.run.pipeline import analyze_model
    from uaprobe.config import load_params
    from uaprobe.extraction.store import POLICIES, read_embeddings

    calls = []
    transform_all = pipeline.transform_all
    monkeypatch.setattr(pipeline, "transform_all", lambda *a, **kw: calls.append(1) or transform_all(*a, **kw))
    params = load_params(panel["params"]).analysis.model_copy(update={"representation": kind, "abtt_k": 2})
    emb = read_embeddings(panel["h5"]["rand"])
    out = analyze_model(emb, params=params, model_id="rand")
    assert len(calls) == 2 * len(POLICIES)
    assert all(body["representation"] == {"kind": kind, "abtt_k": 2} for body in out.results.values())
    sc = SpecificationCurve.model_validate(out.results["specification_curve"]).specs
    for stem, policy in (("layerwise", out.results["layerwise"]["policy"]), ("sink_excluded/layerwise", "sink_excluded")):
        want = speccurve.layer_r(sc, pooling="mean", policy=policy, representation=kind, nll=params.preference,
                                 n_layers=emb.n_layers)
        got = out.results[stem]["poolings"]["mean"]["pearson_r"]
        np.testing.assert_allclose(np.array(got, dtype=float), np.array(want, dtype=float), atol=1e-9)
    raw = speccurve.layer_r(sc, pooling="mean", policy="sink_excluded", representation="raw", nll=params.preference,
                            n_layers=emb.n_layers)
    assert not np.allclose(np.array(raw, dtype=float), np.array(
        out.results["sink_excluded/layerwise"]["poolings"]["mean"]["pearson_r"], dtype=float), atol=1e-6)
