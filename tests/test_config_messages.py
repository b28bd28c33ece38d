"""The params' error sentences, built from pydantic's failures and the fields' own annotations."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ValidationError

from uaprobe.config import AnalysisParams, BinsParams, Params, PrimaryParams, Section
from uaprobe.config.messages import describe
from uaprobe.config.sections import Floats, Ints, Text, Texts
from uaprobe.errors import ConfigError


@pytest.mark.parametrize("annotation,words", [
    (int, "an integer"),
    (float, "a finite number"),
    (bool, "true or false"),
    (Text, "a non-empty string"),
    (Literal["a", "b"], "one of 'a', 'b'"),
    (int | None, "an integer or null"),
    (Ints, "a list of an integer"),
    (Floats, "a list of a finite number"),
    (Texts, "a list of a non-empty string"),
    (Ints | Literal["auto"], "a list of an integer or one of 'auto'"),
    (PrimaryParams, "a mapping with keys ['across_models', 'depth', 'left_out', 'nll', 'pooling', 'poolings', "
                    "'statistic']"),
])
def test_each_annotation_is_described_in_words(annotation: Any, words: str) -> None:
    assert describe(annotation) == words


def _sections(model: type[BaseModel], key: str) -> list[tuple[type[Section], str]]:
    """Every section under ``model`` with the key it sits at, read from the fields."""
    found = []
    for name, info in model.model_fields.items():
        tp = info.annotation
        if isinstance(tp, type) and issubclass(tp, Section):
            where = f"{key}.{name}" if key else name
            found += [(tp, where), *_sections(tp, where)]
    return found


def test_each_section_knows_where_it_sits() -> None:
    """A section's KEY prefixes its errors when it is built alone: it must be its place in params.yaml."""
    placed = _sections(Params, "")
    assert {cls.__name__ for cls, _ in placed} >= {"ExtractParams", "AnalysisParams", "BinsParams", "PrimaryParams"}
    for cls, where in placed:
        assert cls.KEY == where, cls


def test_every_field_has_its_docstring() -> None:
    missing = [f"{cls.__name__}.{name}" for cls, _ in [(Params, ""), *_sections(Params, "")]
               for name, info in cls.model_fields.items()
               if not info.description and not (isinstance(info.annotation, type)
                                                and issubclass(info.annotation, Section))]
    assert not missing


def _message(cls: type[Section], mapping: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        cls.build(mapping)
    return str(info.value)


def test_a_value_of_one_alternatives_shape_names_its_wrong_item() -> None:
    assert _message(BinsParams, {"k": [10, 3.5]}) == "analysis.bins.k[1]: got 3.5, expected an integer"
    assert _message(BinsParams, {"k": {"a": 1}}) == ("analysis.bins.k: got {'a': 1}, expected a list of an integer "
                                                   "or one of 'auto'")
    assert _message(BinsParams, {"ci_k": "often"}) == "analysis.bins.ci_k: got 'often', expected an integer or one " \
                                                      "of 'auto'"
    assert _message(BinsParams, {"k": {3, 4}}).startswith("analysis.bins.k: got {3, 4}")  # a set has no order


def test_a_sections_own_check_names_the_field_under_the_section() -> None:
    assert _message(AnalysisParams, {"bins": {"partitions": 0}}) == ("analysis.bins.partitions: got 0, expected "
                                                                     "an integer >= 1")
    assert _message(AnalysisParams, {"primary": {"poolings": ["mean", "mean"]}}).startswith(
        "analysis.primary.poolings: got ['mean', 'mean'], expected a non-empty list of distinct poolings")
    assert _message(AnalysisParams, {"seed": -1}).startswith("analysis.seed: got -1")


def test_the_first_problem_in_the_files_order_and_unknown_keys_together() -> None:
    """As a reader meets them: fields in their declared order, a section's unknown keys before its own fields."""
    assert _message(AnalysisParams, {"bins": {"kk": 1, "kj": 2, "partitions": 0}}) == (
        "analysis.bins: unknown key(s) ['kj', 'kk']; allowed: ['ci_k', 'k', 'partitions']")
    assert _message(AnalysisParams, {"seed": "x", "bins": {"kk": 1}}).startswith("analysis.seed: got 'x'")
    assert _message(AnalysisParams, {"seed": "x", "sed": 1}).startswith("analysis: unknown key(s) ['sed']")
    assert _message(AnalysisParams, {"bins": {"k": [3, "a", "b"]}, "seed": -1}) == ("analysis.bins.k[1]: got 'a', "
                                                                                 "expected an integer")


def test_strict_types_and_a_float_from_an_integer() -> None:
    assert _message(AnalysisParams, {"permutations": "100"}) == ("analysis.permutations: got '100', expected an "
                                                                 "integer")
    assert _message(AnalysisParams, {"ci_level": True}) == "analysis.ci_level: got True, expected a finite number"
    assert AnalysisParams.build({"ci_level": 1 - 1 / 20}).ci_level == 0.95
    assert AnalysisParams.build({"neutral_ua": 0}).neutral_ua == 0.0
    assert type(AnalysisParams.build({"neutral_ua": 0}).neutral_ua) is float


def test_sections_are_frozen_and_keywords_in_code_are_validated_too() -> None:
    params = AnalysisParams()
    with pytest.raises(ValidationError):
        params.seed = 3  # type: ignore[misc]
    with pytest.raises(ValidationError, match="permutations"):
        AnalysisParams(permutations=0)
    assert AnalysisParams(bins=BinsParams(k=[3, 4])).bins.k == (3, 4)  # a list given in code is held as a tuple
