"""The typed results schema (:mod:`uaprobe.schema`): every file of a real analysis run on synthetic
extraction files validates and reads back equal; each kind of fault gives one line naming the file,
the key and the stage that rewrites the file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import h5py
import pytest

from synthetic_h5 import SYNTHETIC_MODELS, synthetic_params, write_synthetic_h5
from uaprobe import cli
from uaprobe.analysis.panel.compare import compare_panel
from uaprobe.analysis.run.pipeline import analyze_model
from uaprobe.schema.text import json_text
from uaprobe.config import params_from_mapping
from uaprobe.publishing.provenance.values import ValueSourceError, lookup
from uaprobe.schema import (MODELS, KeyPathError, Record, ResultsFileError, check_key, kind_of, read_results,
                            results_text, validate)
from uaprobe.schema import reference
from uaprobe.schema.base import walk
from uaprobe.schema.categories import Layerwise
from uaprobe.extraction.store import read_embeddings


@pytest.fixture(scope="module")
def tree(synthetic_tree: Path) -> Path:
    return synthetic_tree


def results_files(root: Path) -> list[str]:
    files = sorted((root / "results").rglob("*.json")) + sorted((root / "metrics").rglob("*.json"))
    return [p.relative_to(root).as_posix() for p in files]


def test_every_file_of_a_synthetic_run_validates_and_reads_back_equal(tree: Path) -> None:
    kinds = set()
    for relative in results_files(tree):
        doc = read_results(tree, relative)
        kind = kind_of(relative)
        kinds.add(kind)
        assert isinstance(doc, MODELS[kind])
        assert doc.model_dump(mode="json", by_alias=True, exclude_unset=True) == json.loads(
            (tree / relative).read_text(encoding="utf-8")), relative
    assert kinds == set(MODELS) - {"manifest"}
    assert len([r for r in results_files(tree) if "/sink_excluded/" in r]) == 2 * 6


def load(tree: Path, relative: str = "results/models/tiny-a/layerwise.json") -> dict[str, Any]:
    return json.loads((tree / relative).read_text(encoding="utf-8"))


def refused(doc: Any, kind: str = "layerwise", shown: str = "results/models/tiny-a/layerwise.json") -> str:
    with pytest.raises(ResultsFileError) as info:
        validate(doc, kind, shown=shown)
    message = str(info.value)
    assert message.startswith(f"{shown}: ") and "\n" not in message
    assert message.endswith("rerun the analyze stage (`dvc repro`)") or kind != "layerwise"
    return message


def first_number(doc: dict[str, Any], pooling: str = "mean") -> int:
    return next(i for i, v in enumerate(doc["poolings"][pooling]["pearson_r"]) if v is not None)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d.__setitem__("n_layers", "2"), "key 'n_layers' holds a string, expected an int"),
    (lambda d: d.__setitem__("n_layers", True), "key 'n_layers' holds a bool, expected an int"),
    (lambda d: d.__setitem__("poolings", []), "key 'poolings' holds a list, expected an object"),
    (lambda d: d["poolings"]["last"]["pearson_r"].__setitem__(1, "0.5"),
     "key 'poolings/last/pearson_r/1' holds a string, expected a number"),
    (lambda d: d["poolings"]["last"]["bootstrap_valid"].__setitem__(0, None),
     "key 'poolings/last/bootstrap_valid/0' holds null, expected an int"),
    (lambda d: d["poolings"]["first"].pop("bootstrap_ci_high"), "key 'poolings/first/bootstrap_ci_high' is missing"),
    (lambda d: d.pop("categories"), "key 'categories' is missing"),
    (lambda d: d.__setitem__("extra", 1), "key 'extra' is not in the schema of this file"),
    (lambda d: d["poolings"]["mean"]["pearson_r"].pop(),
     "key 'poolings/mean/pearson_r' has 6 entries, expected one per layer (7)"),
])
def test_a_wrong_type_a_missing_key_or_a_wrong_length_is_one_line(tree: Path, change: Any, expected: str) -> None:
    doc = load(tree)
    change(doc)
    assert expected in refused(doc)


def test_a_null_needs_a_reason_and_a_reason_needs_a_null(tree: Path) -> None:
    doc = load(tree)
    i = first_number(doc)
    doc["poolings"]["mean"]["pearson_r"][i] = None
    assert (f"key 'poolings/mean/pearson_r/{i}' is null (a missing value) without a reason in nan_reasons"
            in refused(doc))
    doc["nan_reasons"][f"poolings/mean/pearson_r/{i}"] = "planted"
    assert isinstance(validate(doc, "layerwise", shown="x"), Layerwise)

    doc = load(tree)
    doc["nan_reasons"][f"poolings/mean/pearson_r/{i}"] = "planted"
    assert f"nan_reasons names 'poolings/mean/pearson_r/{i}', which is not a missing value" in refused(doc)


def test_a_null_by_meaning_needs_no_reason() -> None:
    manifest = {"stage": "figures", "formats": ["png"], "figures": [
        {"key": "scaling", "model": None, "stage": "figures", "sources": ["results/panel.json"],
         "files": {"png": "figures/panel/scaling.png"}, "png": "figures/panel/scaling.png"}]}
    assert validate(manifest, "manifest", shown="figures/manifest.json").figures[0].model is None
    manifest["figures"][0]["model"] = 3
    assert "key 'figures/0/model' holds an int, expected a string" in refused(
        manifest, "manifest", shown="figures/manifest.json")


@pytest.mark.parametrize("kind, key", [
    ("layerwise", "poolings/*/pearson_r"), ("layerwise", "poolings/mean/sign_changes/0/layer_before"),
    ("layerwise", "poolings/mean/pearson_r/-1"), ("specification_curve", "specs/*"),
    ("specification_curve", "specs/representation"), ("panel", "poolings/mean/models/*/r"),
    ("validation", "variants/mean/global/r"), ("manifest", "figures/*/png")])
def test_check_key_accepts_every_key_the_schema_declares(tree: Path, kind: str, key: str) -> None:
    check_key(kind, key)
    if "*" not in key:  # and the key is where a file of the kind holds it
        file = {"panel": "results/panel.json", "manifest": None}.get(kind, f"results/models/tiny-a/{kind}.json")
        if file is not None:
            lookup(read_results(tree, file), key, file=file)


@pytest.mark.parametrize("kind, key, at", [
    ("layerwise", "poolings/mean/pearson", "poolings/mean/pearson"),
    ("layerwise", "poolings/mean/pearson_r/x", "poolings/mean/pearson_r/x"),
    ("layerwise", "pooling/mean", "pooling"), ("specification_curve", "specs/*/r", "specs/*/r"),
    ("validation", "variants/mean/global_/r", "variants/mean/global_")])
def test_check_key_names_the_first_key_the_schema_lacks(kind: str, key: str, at: str) -> None:
    with pytest.raises(KeyPathError) as caught:
        check_key(kind, key)
    assert caught.value.at == at


def test_the_top_level_and_an_unknown_kind(tree: Path, tmp_path: Path) -> None:
    assert "expected a JSON object at the top level, got a list" in refused([1, 2])
    assert "no results schema for a file named like this" in refused({}, "notes", shown="results/notes.json")
    # a JSON file outside the schema (published reference values) is read as the object it holds
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ref.json").write_text('{"a": [1, null]}')
    assert read_results(tmp_path, "data/ref.json") == {"a": [1, None]}
    (tmp_path / "data" / "ref.json").write_text("[1]")
    with pytest.raises(ResultsFileError, match=r"^data/ref\.json: expected a JSON object at the top level, got a list"):
        read_results(tmp_path, "data/ref.json")


def test_the_markers_follow_the_field_types(tree: Path) -> None:
    doc = validate(load(tree), "layerwise", shown="x")
    nodes = {tuple(n.path): n for n in walk(doc, type(doc))}
    assert nodes[("poolings", "mean", "pearson_r", 0)].reasoned
    assert nodes[("poolings", "mean", "pearson_r")].by_layer
    assert not nodes[("poolings", "mean", "bootstrap_valid", 0)].reasoned
    assert not nodes[("categories",)].by_layer
    assert nodes[("poolings", "mean", "loco_r", 0, 1)].reasoned
    # the fast form visits the items of scalar lists only where they are null
    raw = load(tree)
    raw["poolings"]["last"]["pearson_r"][1] = None
    raw["nan_reasons"]["poolings/last/pearson_r/1"] = "planted"
    doc = validate(raw, "layerwise", shown="x")
    fast = {tuple(n.path): n for n in walk(doc, type(doc), scalars=False)}
    assert fast[("poolings", "last", "pearson_r", 1)].reasoned and fast[("poolings", "last", "pearson_r")].by_layer
    assert ("poolings", "last", "pearson_r", 0) not in fast and ("poolings", "mean", "loco_r", 0) in fast


def test_read_results_names_the_file_and_returns_the_typed_model(tree: Path, tmp_path: Path) -> None:
    doc = read_results(tree, "results/models/tiny-b/validation.json")
    assert doc.variants["mean"].global_.r == load(tree, "results/models/tiny-b/validation.json")[
        "variants"]["mean"]["global"]["r"]
    with pytest.raises(ResultsFileError, match=r"^results/models/m/bins\.json: not found; rerun the analyze stage"):
        read_results(tmp_path, "results/models/m/bins.json")
    with pytest.raises(ResultsFileError, match=r"^results/panel\.json: not found; rerun the compare stage"):
        read_results(tmp_path, "results/panel.json")


def test_lookup_resolves_a_key_path_of_a_typed_record_and_names_file_and_key(tree: Path) -> None:
    """The paper's one key-path lookup reads a validated record as it reads the JSON."""
    relative = "results/models/tiny-a/layerwise.json"
    doc, raw = read_results(tree, relative), load(tree, relative)
    assert lookup(doc, "poolings/last/pearson_r/3", file=relative) == raw["poolings"]["last"]["pearson_r"][3]
    assert lookup(doc, "poolings/mean/sign_changes", file=relative) == doc.poolings["mean"].sign_changes
    assert lookup(doc, "n_layers", file=relative) == raw["n_layers"] == doc.n_layers
    validation = read_results(tree, "results/models/tiny-a/validation.json")
    assert lookup(validation, "variants/mean/global/label", file="v.json") == validation.variants["mean"].global_.label
    for path, missing in (("poolings/median/pearson_r", "median"), ("poolings/mean/pearson_r/99", "99"),
                          ("nothing", "nothing"), ("n_layers/0", "0")):
        with pytest.raises(ValueSourceError) as info:
            lookup(doc, path, file=relative)
        assert str(info.value).startswith(f"{relative}: no key {path!r} (stops at {missing!r}); rerun"), info.value
    # a key the schema knows but this file leaves out is missing too
    raw = load(tree, "results/models/tiny-a/anisotropy.json")
    del raw["l_star_bootstrap"]
    aniso = validate(raw, "anisotropy", shown="results/models/tiny-a/anisotropy.json")
    assert aniso.l_star_bootstrap is None and "l_star_bootstrap" not in aniso
    with pytest.raises(ValueSourceError, match="no key 'l_star_bootstrap/mode'"):
        lookup(aniso, "l_star_bootstrap/mode", file="a.json")


def test_the_plain_json_object_comes_back_from_a_model(tree: Path) -> None:
    relative = "results/models/tiny-b/anisotropy.json"
    doc = read_results(tree, relative)
    assert isinstance(doc, Record)
    assert json_text(doc.model_dump(mode="json", by_alias=True, exclude_unset=True)) == (tree / relative).read_text()


def test_results_text_writes_what_json_text_writes_and_refuses_what_readers_would(tree: Path) -> None:
    doc = load(tree, "results/models/tiny-a/pairs.json")
    assert results_text(doc, kind="pairs", shown="p.json") == json_text(doc)
    bad = copy.deepcopy(doc)
    bad["poolings"]["mean"]["final"]["r"] = None
    with pytest.raises(ResultsFileError, match=r"^p\.json: key 'poolings/mean/final/r' is null \(a missing value\) "
                                               r"without a reason in nan_reasons; the analyze stage built a file"):
        results_text(bad, kind="pairs", shown="p.json")


def test_the_panel_keeps_the_reason_of_a_missing_bell_curve_verdict(tree: Path) -> None:
    params = params_from_mapping(json.loads(json.dumps(write_params(tree)))).analysis
    ids = list(SYNTHETIC_MODELS)
    lw = {m: read_results(tree, f"results/models/{m}/layerwise.json") for m in ids}
    raw = {m: load(tree, f"results/models/{m}/anisotropy.json") for m in ids}
    raw["tiny-b"]["bell_curve"]["is_bell_curve"] = None
    raw["tiny-b"]["nan_reasons"]["bell_curve/is_bell_curve"] = "before: fewer than 2 points"
    an = {m: validate(doc, "anisotropy", shown=f"results/models/{m}/anisotropy.json") for m, doc in raw.items()}
    out = compare_panel(model_ids=ids, layerwise_results=lw, anisotropy_results=an,
                        params_millions={m: 1.0 for m in ids}, params=params)
    panel = out.results["panel"]
    assert panel["anisotropy"]["tiny-b"]["is_bell_curve"] is None
    assert panel["nan_reasons"]["anisotropy/tiny-b/is_bell_curve"] == (
        "undefined in results/models/tiny-b/anisotropy.json: before: fewer than 2 points")
    validate(panel, "panel", shown="results/panel.json")


def write_params(tree: Path) -> dict[str, Any]:
    import yaml
    return yaml.safe_load((tree / "params.yaml").read_text(encoding="utf-8"))


def test_the_committed_reference_is_the_generated_one() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "results.md").read_text(encoding="utf-8")
    assert reference.generated_part(doc) == reference.markdown(), "docs/results.md is stale: run `make docs`"


def test_the_reference_names_every_kind_and_every_key() -> None:
    text = reference.markdown()
    assert sorted(reference.ORDER) == sorted(MODELS)
    for model in MODELS.values():
        assert f"#### `{model.__name__}`" in text
    for key in ("pearson_r", "nan_reasons", "global", "is_bell_curve_significant", "size_matched_null_p"):
        assert f"| `{key}`" in text
    assert "| `global` | [`ValidationGlobal`](#validationglobal) |" in text
    assert "| `pearson_r` | per layer: number or null (missing) |" in text
    assert "| `model` | string or null | the model id; null for a figure of the whole panel |" in text


def test_schema_doc_rewrites_only_between_the_markers_and_checks(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    doc = tmp_path / "results.md"
    doc.write_text(f"# hand\n\ntext\n\n{reference.BEGIN}stale\n{reference.END}\n\nafter\n", encoding="utf-8")
    assert cli.main(["schema-doc", "--doc", str(doc), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert cli.main(["schema-doc", "--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# hand\n\ntext\n\n") and text.endswith(f"{reference.END}\n\nafter\n")
    assert reference.generated_part(text) == reference.markdown()
    assert cli.main(["schema-doc", "--doc", str(doc), "--check"]) == 0
    doc.write_text("no markers\n", encoding="utf-8")
    assert cli.main(["schema-doc", "--doc", str(doc)]) == 2


def test_the_bins_metrics_take_one_final_r_mean_key_per_k_and_no_other(tree: Path) -> None:
    relative = "metrics/models/tiny-a.json"
    doc = load(tree, relative)
    scheme = next(iter(doc["bins"]))
    assert {k for k in doc["bins"][scheme] if k.startswith("final_r_mean_k")} == {"final_r_mean_k3", "final_r_mean_k4"}
    doc["bins"][scheme]["final_r_mean_k99"] = 0.5
    assert validate(doc, "metrics", shown=relative).bins[scheme].model_extra["final_r_mean_k99"] == 0.5
    doc["bins"][scheme]["final_r_mean_k99"] = "0.5"
    assert f"key 'bins/{scheme}/final_r_mean_k99' holds a string, expected a number" in refused(
        doc, "metrics", shown=relative)
    del doc["bins"][scheme]["final_r_mean_k99"]
    doc["bins"][scheme]["final_r_mean_kx"] = 0.5
    assert "'final_r_mean_kx' is neither a field nor final_r_mean_k<k>" in refused(doc, "metrics", shown=relative)


def _flatten_states(h5: Path) -> None:
    with h5py.File(h5, "r+") as fh:
        for group in [g for g in fh if g.startswith("pooled")]:
            for name in fh[group]:
                fh[group][name][...] = 1.0
        fh["anisotropy/states"][...] = 1.0


def _constant_nll(h5: Path) -> None:
    with h5py.File(h5, "r+") as fh:
        fh["nll/mean"][...] = 2.0
        fh["nll/sum"][...] = 3.0


@pytest.mark.parametrize(("n_layers", "damage"), [(1, None), (4, _constant_nll), (4, _flatten_states)])
def test_a_degenerate_extraction_gives_files_the_schema_accepts(tmp_path: Path, n_layers: int, damage: Any) -> None:
    """Constant states, a constant preference, a single block: many statistics are undefined; every
    file still matches its schema, each null with its reason."""
    h5 = write_synthetic_h5(tmp_path / "m.h5", pairs_per_category=(4, 3, 4, 3, 4, 3), n_layers=n_layers, hidden=8,
                            seed=1)
    if damage:
        damage(h5)
    analysis = params_from_mapping(synthetic_params()).analysis
    out = analyze_model(read_embeddings(h5), params=analysis, model_id="m")
    for stem, doc in out.results.items():
        validate(doc, Path(stem).name, shown=f"results/models/m/{stem}.json")
    validate(out.metrics, "metrics", shown="metrics/models/m.json")
    assert any(doc["nan_reasons"] for doc in out.results.values()), "the case should leave a statistic undefined"
    if damage is _flatten_states:
        assert out.results["anisotropy"]["l_star"] is None and "l_star_bootstrap" not in out.results["anisotropy"]
    if damage is _constant_nll:
        assert out.results["robustness"]["loco"] == {"most_influential": None}
