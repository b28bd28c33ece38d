"""The data-dependent phrases of the manuscript: each choice of words follows the numbers, and each
number keeps its source."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from uaprobe.publishing.prose.category import phrases as fd
from uaprobe.publishing.prose.primitives.markdown import count_phrase, sign_word
from outputs_double import InMemory
from uaprobe.names import PANEL_RESULTS
from uaprobe.publishing.provenance.values import Ledger, Source, Value, plain_text
from uaprobe.schema.geometry import Robustness


class Panel(InMemory):
    """Outputs whose files are given in memory (``results[model][stem]``)."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        params = SimpleNamespace(model=lambda m: SimpleNamespace(display=m.upper()))
        files = {self.model_file(m, stem): doc for m, docs in results.items() for stem, doc in docs.items()}
        primary = {m: docs["specification_curve"]["primary"]["p"] for m, docs in results.items()
                   if "primary" in docs.get("specification_curve", {})}
        if primary:
            files[PANEL_RESULTS] = {"primary": holm_across(primary)}
        pairs = {m: docs["pair_models"] for m, docs in results.items() if "family" in docs.get("pair_models", {})}
        if pairs:
            files.setdefault(PANEL_RESULTS, {})["pair_family"] = pair_family_as_given(pairs)
        super().__init__(root=Path("."), params=params, models=tuple(results), ledger=Ledger(Path(".")),  # type: ignore[arg-type]
                         files=files)
        self.results = results


def holm_across(ps: dict[str, float], alpha: float = 0.05) -> dict[str, Any]:
    """``results/panel.json``'s ``primary``: Holm's step-down over the models' primary p, written out by hand."""
    order = sorted(ps, key=ps.__getitem__)
    adjusted, running = {}, 0.0
    for rank, m in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[m]))
        adjusted[m] = running
    return {"statistic": "median_r", "correction": "holm", "alpha": alpha,
            "models": {m: {"p": ps[m], "adjusted_p": adjusted[m], "reject": adjusted[m] <= alpha} for m in ps}}


def pair_family_as_given(pairs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``results/panel.json``'s ``pair_family`` that keeps each family's own ``holm_p`` and ``holm_reject`` (the
    phrases read the panel-wide verdicts from there)."""
    keys = {"length": ("family",), "lexical": ("incremental", "family"),
            "lexical_without_category": ("incremental", "without_category", "family")}
    models: dict[str, Any] = {}
    n_tests = 0
    for m, doc in pairs.items():
        models[m] = {}
        for name, path in keys.items():
            fam = doc
            for k in path:
                fam = fam[k]
            models[m][name] = {"holm_p": fam["tests"]["holm_p"], "holm_reject": fam["tests"]["holm_reject"],
                               "n_reject": fam["n_reject"], "maxt_p": fam["tests"]["maxt_p"],
                               "maxt_reject": fam["tests"]["maxt_reject"], "n_maxt_reject": fam["n_maxt_reject"],
                               "power": {"n": 100, "n_covariates": 7, "mde": 0.28, "mde_panel": 0.41}}
            n_tests += fam["n_tests"]
    return {"alpha": 0.05, "n_tests": n_tests, "n_degenerate": 0, "holm_floor": n_tests / 10001, "n_families": 6,
            "n_maxt_reject": 0, "power_target": 0.8, "models": models}


def v(x: Any) -> Value:
    return Value(x, "r", Source("f.json", "k"), Ledger(Path(".")))


def robustness(*, final_r: float, sx_r: list[float], r: list[float], lexical: float, without: float | None,
               holm: int = 0, parametric: int = 5, share: list[float] | None = None,
               sum_nll: float | None = None) -> dict[str, Any]:
    return {
        "sink": {"mean_share_median": share if share is not None else [0.9] * len(r)},
        "preference": {"final_r_mean_nll": final_r, "final_r_sum_nll": final_r if sum_nll is None else sum_nll},
        "policies": {
            "default": {"final_r": final_r, "r": r, "n_sign_changes": 1, "n_layers_permutation_holm": holm,
                        "size_matched_null_p": [0.5, 0.01], "final_spearman": 0.3},
            "sink_excluded": {"final_r": sx_r[-1], "r": sx_r, "n_sign_changes": 0, "n_layers_permutation_holm": 0},
        },
        "loco": {"most_influential": "cat_x", "final_r_with": final_r, "final_r_without": without,
                 "sign_reversed": without is not None and without * final_r < 0},
        "lexical_baseline": {"final_r": {"mean": lexical, "min": lexical - 0.01, "max": lexical + 0.01}},
        "inference": {"n_layers_parametric_holm": parametric},
    }


def layerwise(r: list[float], *, reject: dict[str, list[bool]] | None = None, holm_p: dict[str, list[float]] | None = None,
              bos: bool = False) -> dict[str, Any]:
    """A ``layerwise.json`` with one curve ``r`` for every pooling; ``reject``/``holm_p``: per pooling, the
    Holm decisions and corrected p of the exact permutation test (none rejected by default)."""
    reject, holm_p = reject or {}, holm_p or {}
    return {"n_layers": len(r) - 1, "layers": list(range(len(r))), "extraction": {"bos_added": bos},
            "settings": {"alpha": 0.05}, "permutation_count": 720,
            "poolings": {p: {"pearson_r": list(r), "permutation_holm_reject": reject.get(p, [False] * len(r)),
                             "permutation_holm_p": holm_p.get(p, [1.0] * len(r))} for p in ("mean", "first", "last")}}


def panel(**models: dict[str, Any]) -> Panel:
    """Models with ``robustness.json`` as given, and layer-wise results under both policies built from its
    curves (the default policy's ``r``, the sink-excluded ``r``)."""
    return Panel({m: {"robustness": rob, "layerwise": layerwise(rob["policies"]["default"]["r"]),
                      "sink_excluded/layerwise": layerwise(rob["policies"]["sink_excluded"]["r"]),
                      "anisotropy": {"variants": {"all_tokens": {"l_star": 1}, "sink_excluded": {"l_star": 1}}}}
                  for m, rob in models.items()})


def test_small_phrases() -> None:
    assert count_phrase(0, "layer") == "no layer"
    assert count_phrase(1, "layer") == "1 layer"
    assert count_phrase(3, "layer") == "3 layers"
    assert fd.comparison_word(0.99, 0.97) == "matches"
    assert fd.comparison_word(0.99, 0.5) == "exceeds"
    assert fd.comparison_word(0.2, 0.9) == "falls short of"
    assert sign_word(-0.1) == "negative" and sign_word(None) == "undefined" and sign_word(0.0) == "zero"


def test_values_read_a_key_path_and_carry_it() -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.8], r=[-0.5, 0.9], lexical=0.2, without=0.7))
    assert p.raw_at("results/models/a/robustness.json", "policies/sink_excluded/r/0") == 0.5
    assert p.record("a", Robustness).policies.sink_excluded.r[0] == 0.5
    text = fd.per_model(p, Robustness, lambda r: r.policies.default.final_r)
    assert plain_text(text) == "+0.900 (A)"
    assert 'data-file="results/models/a/robustness.json" data-key="policies/default/final_r" data-fmt="r"' in text
    assert p.ledger.entries[(Source("results/models/a/robustness.json", "policies/default/final_r"), "r")] == (1, "+0.900")


def test_a_block_reads_the_values_under_its_prefix() -> None:
    p = Panel({"a": {"bins": {"by_k": {"r": [0.1, -0.25], "n": [3, 4]}}}})
    file = p.model_file("a", "bins")
    row = p.under(file, "by_k", suffix="1")
    assert row("r").source == Source(file, "by_k/r/1") and row("r").text == "\u2212" + "0.250"
    assert row("n", "int").text == "4" and row("n", "int").fmt == "int"
    whole = p.under(file, fmt="int")
    assert whole("by_k/n/0").source == Source(file, "by_k/n/0") and whole("by_k/n/0").text == "3"
    assert whole("by_k/r/0", "s1").text == "+0.1"


def test_same_pooling_models_asks_every_pooling() -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.9], r=[0.5, 0.9], lexical=0.2, without=0.3),
              b=robustness(final_r=0.9, sx_r=[0.4, 0.9], r=[0.5, 0.9], lexical=0.2, without=0.3))
    assert fd.same_pooling_models(p) == ["a"]
    p.files["results/models/a/sink_excluded/layerwise.json"]["poolings"]["first"]["pearson_r"] = [0.1, 0.9]
    assert fd.same_pooling_models(p) == []


def test_sink_exclusion_phrase_says_when_the_policies_give_the_same_numbers() -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.9], r=[0.5, 0.9], lexical=0.2, without=0.3),
              b=robustness(final_r=0.9, sx_r=[0.4, 0.8], r=[-0.5, 0.9], lexical=0.2, without=0.3))
    p.files["results/models/a/layerwise.json"]["extraction"] = {"bos_added": True}
    assert plain_text(fd.sink_exclusion_phrase(p)) == (
        "Excluding position 0 from the pooling leaves no sign change in the layer curve of B (1 under the default "
        "policy); for A it gives the same numbers: position 0 is the BOS, which no pooled state includes, so there "
        "the exclusion is no check.")
    assert "and a last-layer r of +0.800 (+0.900 under the default policy);" in plain_text(
        fd.sink_exclusion_phrase(p, final_r=True))
    p.files["results/models/a/layerwise.json"]["extraction"] = {"bos_added": False}
    only_same = Panel({"a": p.results["a"]})
    assert plain_text(fd.sink_exclusion_phrase(only_same)) == (
        "Excluding position 0 from the pooling changes no number: for A it gives the same numbers: the default "
        "policy already leaves position 0 out of every pooled state, so there the exclusion is no check.")
    only_changed = Panel({"b": p.results["b"]})
    assert "same numbers" not in plain_text(fd.sink_exclusion_phrase(only_changed))
    assert plain_text(fd.published_comparison(with_published(p))).endswith(
        "as its published table gives it (`data/published/pythia-6-9b.json`), against +0.900 for both models here")


def with_published(p: Panel) -> Panel:
    p.files["data/published/pythia-6-9b.json"] = {"category_level": {"r": [-0.87]}}
    return p


@pytest.mark.parametrize("rejects,expected", [
    ({}, "no layer of any model, in any of the 6 specifications (1 model × 3 poolings × 2 position-0 policies)"),
    ({("sink_excluded", "first"): ([False, True, True], [1.0, 0.04, 0.04])},
     "layers 1 and 2 of A with first-token pooling and position 0 excluded (Holm p = 0.040 at both), and no layer in "
     "the other 5 of the 6 specifications"),
    ({("default", "mean"): ([True, False, True], [0.01, 1.0, 0.03]), ("default", "last"): ([True, False, False],
                                                                                             [0.02, 1.0, 1.0])},
     "layers 0 and 2 of A with mean pooling under the default policy (Holm p = 0.010 at layer 0 and 0.030 at layer 2)"
     " and layer 0 of A with last-token pooling under the default policy (Holm p = 0.020), and no layer in the other "
     "4 of the 6 specifications"),
    ({("default", "mean"): ([True, False, False], [0.02, 1.0, 1.0]), ("default", "last"): ([True, False, False],
                                                                                              [0.02, 1.0, 1.0]),
      ("sink_excluded", "first"): ([True, False, False], [0.02, 1.0, 1.0])},
     "layer 0 of A with mean and last-token pooling under the default policy and with first-token pooling and "
     "position 0 excluded (Holm p = 0.020), and no layer in the other 3 of the 6 specifications"),
    ({(policy, pooling): ([False, False, True], [1.0, 1.0, 0.01]) for policy in ("default", "sink_excluded")
      for pooling in ("mean", "first", "last")},
     "layer 2 of A with every pooling under both position-0 policies (Holm p = 0.010), a layer in every one of the 6 "
     "specifications"),
])
def test_specification_significance_names_every_surviving_specification(
        rejects: dict[tuple[str, str], tuple[list[bool], list[float]]], expected: str) -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.8, 0.9], r=[0.5, 0.7, 0.9], lexical=0.2, without=0.3))
    for (policy, pooling), (reject, holm) in rejects.items():
        stem = "layerwise" if policy == "default" else "sink_excluded/layerwise"
        p.files[f"results/models/a/{stem}.json"]["poolings"][pooling].update(permutation_holm_reject=reject,
                                                                             permutation_holm_p=holm)
    text = plain_text(fd.specification_significance_phrase(p))
    assert text.startswith(expected)
    if rejects:  # what chance predicts, from the distinct specifications and α; no Holm p here is at its floor
        assert text.endswith("so chance alone predicts up to 6 × α of them, fewer than one")
        assert "smallest the test can give" not in text


def test_a_holm_p_at_its_floor_is_called_so() -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.8, 0.9], r=[0.5, 0.7, 0.9], lexical=0.2, without=0.3))
    floor = 3 / 720  # three layers, 720 orders
    p.files["results/models/a/layerwise.json"]["settings"]["alpha"] = 0.2
    p.files["results/models/a/layerwise.json"]["poolings"]["mean"].update(
        permutation_holm_reject=[True, False, False], permutation_holm_p=[floor, 1.0, 1.0])
    text = plain_text(fd.specification_significance_phrase(p))
    assert "These Holm p-values are the smallest the test can give: the number of layers times one over the 720 orders" \
        in text
    assert text.endswith("chance alone predicts up to 6 × α of them")  # 6 × 0.2 is not below one


def test_specifications_scope_counts_the_distinct_ones() -> None:
    p = panel(a=robustness(final_r=0.9, sx_r=[0.5, 0.9], r=[0.5, 0.9], lexical=0.2, without=0.3),
              b=robustness(final_r=0.9, sx_r=[0.4, 0.9], r=[0.5, 0.9], lexical=0.2, without=0.3))
    assert plain_text(fd.specifications_scope(p)) == (
        "the 12 specifications (2 models × 3 poolings × 2 position-0 policies; 9 of them distinct, as the two "
        "policies agree wherever no pooled state includes position 0)")
    q = Panel({"b": p.results["b"]})
    assert plain_text(fd.specifications_scope(q)).endswith("× 2 position-0 policies)")


def test_loco_cell_gives_the_range_or_n_a() -> None:
    from uaprobe.publishing.prose.tables.manuscript import loco_cell

    lw = layerwise([0.5, 0.9])
    lw["poolings"]["mean"]["loco_r"] = [[0.1, -0.2], [None, None]]
    p = Panel({"a": {"layerwise": lw}})
    assert plain_text(loco_cell(p, "a", 0)) == "[\u22120.20, +0.10]"
    assert 'data-key="poolings/mean/loco_r/0/1" data-fmt="s2"' in loco_cell(p, "a", 0)
    assert loco_cell(p, "a", 1) == "n/a"


def test_a_published_number_is_shown_with_the_decimals_it_was_published_with() -> None:
    assert fd.published_format(-0.87) == "s2" and fd.published_format(0.123) == "s3" and fd.published_format(0.5) == "s1"
    assert fd.published_format(0.123456) == "s4"
    p = Panel({"a": {"robustness": robustness(final_r=0.9, sx_r=[0.5, 0.9], r=[0.5, 0.9], lexical=0.5, without=None)}})
    p.files["results/models/a/layerwise.json"] = layerwise([0.5, 0.9])
    p.files["results/models/a/sink_excluded/layerwise.json"] = layerwise([0.5, 0.9])
    assert plain_text(fd.published_comparison(with_published(p))).startswith("−0.87 for Pythia-6.9B")


def test_a_possessive_after_a_digit_keeps_its_apostrophe() -> None:
    """Typst sets ' after a digit as a prime: a phrase writes the typographic apostrophe there, and only there."""
    from uaprobe.publishing.prose.primitives.markdown import prose

    phrase = prose(lambda: "SmolLM2's curve, Gemma's curve, 5'10\"")
    assert phrase() == "SmolLM2\u02bcs curve, Gemma's curve, 5'10\""


def test_position_0_inversion_is_named_where_excluding_it_removes_the_negative_stretch() -> None:
    from uaprobe.publishing.prose.category import phrases as ph

    made = robustness(final_r=0.9, sx_r=[0.5, 0.4, 0.3, 0.6, 0.9], r=[0.5, -0.2, -0.8, -0.1, 0.9], lexical=0.5,
                      without=-0.2)
    partly = robustness(final_r=0.9, sx_r=[0.5, 0.4, -0.3, 0.6, 0.9], r=[0.5, -0.2, -0.8, 0.2, 0.9], lexical=0.5,
                        without=-0.2)
    same = robustness(final_r=0.9, sx_r=[0.5, -0.4, 0.3, 0.6, 0.9], r=[0.5, -0.4, 0.3, 0.6, 0.9], lexical=0.5,
                      without=-0.2)  # the two policies agree: no check, not named
    p = panel(a=made, b=partly, c=same)
    assert plain_text(ph.inversion_phrase(p)) == (
        "With mean pooling, under the default policy, the category-level r of A is negative at 3 of its 5 layers "
        "(layers 1 to 3, down to −0.800) and, with position 0 excluded, at none of them; under the default policy, "
        "the category-level r of B is negative at 2 of its 5 layers (layers 1 and 2, down to −0.800) and, with "
        "position 0 excluded, at 1 (layer 2).")
    conclusion = plain_text(ph.inversion_conclusion(p))
    assert conclusion.startswith("With mean pooling, the negative r at the intermediate layers of A comes from position 0")
    assert "With mean pooling, position 0 makes part of the negative r at the intermediate layers of B" in conclusion
    assert ph.inversion_phrase(panel(c=same)) == "" and ph.inversion_conclusion(panel(c=same)) == ""
    more = robustness(final_r=0.9, sx_r=[-0.5, -0.4, -0.3, 0.6, 0.9], r=[0.5, -0.2, 0.3, 0.6, 0.9], lexical=0.5,
                      without=-0.2)  # excluding position 0 leaves more negative layers: no claim for it
    assert ph.inversion_conclusion(panel(d=more)) == ""
