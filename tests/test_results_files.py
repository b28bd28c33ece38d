"""The check of the results files that compare, figures and paper read (:mod:`uaprobe.results_files`),
on hand-built documents whose faults are known."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from uaprobe.results_files import REQUIRED, ResultsFileError, check_results, kind_of, read_results


def layerwise() -> dict[str, Any]:
    block = {"pearson_r": [0.1, None, 0.3], "bootstrap_ci_low": [0, 0, 0], "bootstrap_ci_high": [1, 1, 1],
             "loco_r": [[0.1], [0.2], [0.3]]}
    return {"model": "m", "display": "M", "n_layers": 2, "layers": [0, 1, 2], "depth_pct": [0, 50, 100],
            "categories": ["a", "b"], "poolings": {"mean": copy.deepcopy(block), "last": copy.deepcopy(block)}}


def refused(doc: Any, kind: str = "layerwise") -> str:
    with pytest.raises(ResultsFileError) as info:
        check_results(doc, kind, shown="results/models/m/layerwise.json")
    message = str(info.value)
    assert message.startswith("results/models/m/layerwise.json: ") and "\n" not in message
    return message


def test_a_complete_document_passes_and_every_rule_is_needed() -> None:
    check_results(layerwise(), "layerwise", shown="x")
    for rule in REQUIRED["layerwise"]:
        path = rule.partition(":")[0].replace("*", "last").split("/")
        doc = layerwise()
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]
        assert f"{'/'.join(path)!r}" in refused(doc), rule


def test_the_wildcard_names_the_pooling_that_lacks_the_key() -> None:
    doc = layerwise()
    del doc["poolings"]["last"]["bootstrap_ci_high"]
    assert "key 'poolings/last/bootstrap_ci_high' is missing; rerun the analyze stage" in refused(doc)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d.__setitem__("n_layers", "2"), "key 'n_layers' holds str, expected int"),
    (lambda d: d.__setitem__("n_layers", True), "key 'n_layers' holds bool, expected int"),
    (lambda d: d.__setitem__("poolings", []), "key 'poolings' holds list, expected dict"),
    (lambda d: d["poolings"].__setitem__("mean", [1]), "'poolings/mean' is not a mapping"),
    (lambda d: d["poolings"]["mean"]["pearson_r"].pop(), "'poolings/mean/pearson_r' has 2 entries, expected one per "
                                                         "layer (3)"),
    (lambda d: d.__setitem__("depth_pct", {"0": 0}), "key 'depth_pct' holds dict, expected layers"),
])
def test_wrong_kinds_and_lengths_are_named(change: Any, expected: str) -> None:
    doc = layerwise()
    change(doc)
    assert expected in refused(doc)


def test_the_top_level_must_be_an_object_and_an_unlisted_kind_is_checked_for_that_only() -> None:
    assert "expected a JSON object at the top level, got list" in refused([1, 2])
    check_results({"anything": 1}, "option_b", shown="x")
    assert "expected a JSON object" in refused("text", "option_b")


@pytest.mark.parametrize(("relative", "kind"), [
    ("results/models/m/bins.json", "bins"), ("results/models/m/sink_excluded/layerwise.json", "layerwise"),
    ("results/panel.json", "panel"), ("metrics/models/m.json", "metrics"), ("metrics/panel.json", "panel_metrics"),
    ("figures/manifest.json", "manifest"),
])
def test_the_kind_comes_from_the_path(relative: str, kind: str) -> None:
    assert kind_of(relative) == kind


def test_read_results_names_the_relative_path(tmp_path: Path) -> None:
    target = tmp_path / "results" / "models" / "m"
    target.mkdir(parents=True)
    (target / "layerwise.json").write_text(json.dumps(layerwise()))
    assert read_results(tmp_path, "results/models/m/layerwise.json")["model"] == "m"
    with pytest.raises(ResultsFileError, match=r"^results/models/m/bins\.json: not found; rerun the analyze stage"):
        read_results(tmp_path, "results/models/m/bins.json")
