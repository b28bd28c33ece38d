"""A missing value carries its reason to the file: the builders, and the walk that writes ``nan_reasons``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from uaprobe.schema import missing
from uaprobe.schema.missing import Missing, take_reasons
from uaprobe.schema.text import json_text


def test_value_keeps_a_finite_number_and_marks_nan_and_infinity() -> None:
    assert missing.value(np.float32(0.25)) == 0.25 and isinstance(missing.value(np.int64(3)), float)
    assert missing.value(float("nan"), "constant") == Missing("constant")
    assert missing.value(-math.inf, np.str_("overflow")) == Missing("overflow")
    assert missing.value(math.nan) == Missing("")  # no reason given: refused when written (below)


def test_series_marks_each_non_finite_entry_with_the_reason_at_its_index() -> None:
    values = np.array([[1.0, np.nan], [np.inf, 4.0]])
    reasons = np.array([["", "a"], ["b", ""]], dtype=object)
    assert missing.series(values, reasons) == [[1.0, Missing("a")], [Missing("b"), 4.0]]
    assert missing.series([np.nan, 2.0], "one reason for all") == [Missing("one reason for all"), 2.0]
    assert missing.series(np.float64(np.nan), "scalar") == Missing("scalar")
    assert missing.series(np.arange(3.0)) == [0.0, 1.0, 2.0]


def test_flags_flag_and_label() -> None:
    got = missing.flags([True, False, True], defined=[True, True, False], reasons=["", "", "undefined p"])
    assert got == [True, False, Missing("undefined p")] and all(type(v) is not np.bool_ for v in got)
    assert missing.flag(np.bool_(True), defined=True, reason="x") is True
    assert missing.flag(True, defined=False, reason="no data") == Missing("no data")
    assert missing.label("kept", "unused") == "kept" and missing.label(None, "no driver") == Missing("no driver")


def test_take_reasons_replaces_every_missing_value_in_place_and_names_its_path_in_order() -> None:
    doc = {"b": {"r": [0.5, Missing("constant")], "p": Missing("no r")}, "a": [[Missing("x")]],
           "n": 3, "text": "kept", "none": None}
    reasons = take_reasons(doc)
    assert reasons == {"a/0/0": "x", "b/p": "no r", "b/r/1": "constant"}
    assert list(reasons) == sorted(reasons)
    assert doc == {"b": {"r": [0.5, None], "p": None}, "a": [[None]], "n": 3, "text": "kept", "none": None}
    assert take_reasons(doc) == {}  # nothing left to take
    assert json.loads(json_text({**doc, "nan_reasons": reasons}))["nan_reasons"]["b/r/1"] == "constant"


def test_a_missing_value_without_a_reason_is_refused_with_its_path() -> None:
    with pytest.raises(ValueError, match="poolings/mean/r/2: missing value without a reason"):
        take_reasons({"poolings": {"mean": {"r": missing.series([1.0, 2.0, np.nan])}}})


def test_a_missing_value_cannot_pass_for_a_number_or_a_truth_value() -> None:
    with pytest.raises(TypeError):
        float(Missing("x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no truth value"):
        bool(Missing("x"))
    with pytest.raises(TypeError, match="not JSON serialisable: Missing"):
        json_text({"r": Missing("x")})
    assert math.isnan(missing.number(Missing("x"))) and math.isnan(missing.number(None))
    assert missing.number(2) == 2.0 and missing.present(0.0) and not missing.present(Missing("x"))
    assert not missing.present(None)


def test_a_results_document_writes_its_top_level_and_nested_missing_values_as_null() -> None:
    from uaprobe.analysis.run.documents import finish

    body = {"r": Missing("constant"), "poolings": {"mean": {"p": [Missing("no r"), 0.5]}}}
    doc = finish(body, {"model": "m"})
    assert doc == {"model": "m", "r": None, "poolings": {"mean": {"p": [None, 0.5]}},
                   "nan_reasons": {"poolings/mean/p/0": "no r", "r": "constant"}}


# ------------------------------------------------------------------ a record that holds missing values


def test_a_record_takes_a_missing_value_where_the_schema_allows_one_and_dumps_it_as_it_is() -> None:
    from pydantic import ValidationError

    from uaprobe.schema.common import Peak, Spread
    from uaprobe.schema.document import document

    peak = Peak(layer=Missing("no finite r"), r=Missing("no finite r"), depth_pct=None)
    assert peak.layer == Missing("no finite r") and peak.depth_pct is None
    spread = Spread(mean=1.5, min=1.0, max=2.0, values=[1.0, Missing("seed failed"), 2.0])
    doc = document({"peak": peak, "spread": [spread]})
    assert doc["peak"]["layer"] == Missing("no finite r") and doc["spread"][0]["values"][1] == Missing("seed failed")
    assert take_reasons(doc) == {"peak/layer": "no finite r", "peak/r": "no finite r",
                                 "spread/0/values/1": "seed failed"}
    assert doc["peak"] == {"layer": None, "r": None, "depth_pct": None}
    # a missing value only where the schema allows one; a wrong type names the key alone
    from uaprobe.schema.common import SignChange
    with pytest.raises(ValidationError) as err:
        SignChange(layer_before=1, layer_after=2, r_before=Missing("x"), r_after=0.1, midpoint_depth_pct=5.0)
    assert [e["loc"] for e in err.value.errors()] == [("r_before",)]
    with pytest.raises(ValidationError) as err:
        Peak(layer="3", r=0.5, depth_pct=10.0)
    assert [(e["loc"], e["type"]) for e in err.value.errors()] == [(("layer",), "int_type")]
    # a field the record does not have, or one it needs and is not given, fails where the record is built
    with pytest.raises(ValidationError, match="peak_r"):
        Peak(layer=1, r=0.5, depth_pct=10.0, peak_r=0.5)
    with pytest.raises(ValidationError, match="depth_pct"):
        Peak(layer=1, r=0.5)


def test_a_results_file_built_as_its_record_is_the_document_its_writer_checks() -> None:
    from uaprobe.analysis.run.documents import finish
    from pydantic import ValidationError

    from uaprobe.schema import ResultsFileError, results_text
    from uaprobe.schema.document import record
    from uaprobe.schema.pairmodels import LengthMatched, Mixed, PairFamily, PairModels

    from synthetic_h5 import EXTRACTION
    from test_pairmodels import run, small_params, synthetic_input

    params = small_params()
    rec, _ = run(synthetic_input(), seeds=[3], params=params)
    assert isinstance(rec, PairModels) and isinstance(rec.family, PairFamily)
    assert isinstance(rec.mixed, Mixed) and isinstance(rec.length_matched, LengthMatched)
    doc = finish(rec)
    assert all(doc["nan_reasons"][k] for k in doc["nan_reasons"])
    assert doc["family"]["tests"]["base_partial_r"] == [None] * len(doc["family"]["tests"]["metric"])
    assert "family/tests/base_partial_r/0" in doc["nan_reasons"]
    # the built record misses the two objects run() leaves empty; everything else the writer accepts as built
    with pytest.raises(ResultsFileError, match="'mixed/model' is missing"):
        results_text(doc, kind="pair_models", shown="pair_models.json")
    with pytest.raises(ValidationError, match="n_pairs"):
        record(PairModels, {k: v for k, v in doc.items() if k not in ("n_pairs", "nan_reasons")})
    assert EXTRACTION["model_id"] == doc["extraction"]["model_id"]
