"""The paper's main findings as phrases: the words follow the numbers (a different result gives a
different sentence) and every number shown keeps its source."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import numpy as np
from test_phrases import Panel, layerwise, robustness
from uaprobe.publishing.prose.category import curve as cv
from uaprobe.publishing.prose.category import direction as dr
from uaprobe.publishing.prose.category import findings as fd
from uaprobe.publishing.prose.pairs import pair_findings as pl
from uaprobe.publishing.prose.category import phrases as ph
from uaprobe.publishing.prose.tables.manuscript import confound_table, length_category, other_range
from uaprobe.names import PANEL_RESULTS
from uaprobe.publishing.provenance.values import plain_text
from uaprobe.schema import KeyPathError

CATEGORIES = ["cat_x", "cat_y", "cat_z"]


def model(*, diffs: list[float], influential: str = "cat_x", final_r: float = 0.9, without: float = -0.3,
          lexical_without: float = 0.4, sum_nll: float | None = None) -> dict[str, Any]:
    """One model's results: ``robustness.json`` with token differences per category and the leave-one-out
    numbers, and a ``layerwise.json`` naming the categories."""
    rob = robustness(final_r=final_r, sx_r=[0.5, 0.8], r=[0.5, final_r], lexical=0.95, without=without,
                     sum_nll=sum_nll)
    rob["loco"].update(most_influential=influential,
                       lexical_final_r_without={"mean": lexical_without, "min": lexical_without, "max": lexical_without})
    rob["length"] = {"mean_token_difference": diffs, "category_r_tokens_ua": -0.9, "category_r_tokens_preference": -0.8}
    lw = layerwise([0.5, final_r])
    lw["categories"] = CATEGORIES
    return {"robustness": rob, "layerwise": lw, "sink_excluded/layerwise": layerwise([0.5, 0.8])}


def test_the_length_category_is_the_largest_difference_in_size_and_the_others_keep_their_sources() -> None:
    p = Panel({"a": model(diffs=[0.5, -4.0, 1.2])})
    assert length_category(p, "a") == 1
    low, high = other_range(p, "a", 1)
    assert (low.text, high.text) == ("+0.5", "+1.2")
    assert low.source.key == "length/mean_token_difference/0" and high.source.key == "length/mean_token_difference/2"
    text = plain_text(fd.length_phrase(p))
    assert text == ("The framings differ in length in one category far more than in any other: the mean difference "
                    "in content tokens, B − A, is largest in size in cat y: −4.0 for A, against +0.5 to +1.2 "
                    "elsewhere.")
    close = Panel({"a": model(diffs=[0.5, -1.0, 1.2])})
    assert plain_text(fd.length_phrase(close)).startswith("No category's framings differ in length far more")


def test_the_confound_verdict_follows_the_category_the_reversal_and_the_baseline() -> None:
    from test_phrases import with_published

    both = Panel({"a": model(diffs=[4.8, 1.4, 0.0], sum_nll=0.27), "b": model(diffs=[5.2, 1.4, 0.0], sum_nll=-0.65)})
    both.files["data/published/pythia-6-9b.json"] = {"category_level": {"r": [0.5]}}  # of this panel's sign
    text = plain_text(fd.confound_verdict(both))
    assert text.startswith("For both models, that category is also the one whose removal changes the last-layer r most")
    assert ("the last-layer r (mean pooling) has the other sign for both models, while the lexical baseline's stays "
            "positive; over the categories left, the exact test has too little power to establish either sign") in text
    # where the original study's r has the sign the category's removal gives, the sentence says so
    assert ("has the other sign, the original study's, for both models" in
            plain_text(fd.confound_verdict(with_published(both))))
    assert "the last-layer r changes sign for B (+0.900 to −0.650) and moves for A (+0.900 to +0.270)" in text
    assert ("rest on one category, cat x, whose B statements are also much longer. Length is one explanation; the "
            "kind of token (numbers against names) is another") in text
    assert plain_text(fd.length_limitation(both)).startswith("With one influential category (cat x), its length")

    other = Panel({"a": model(diffs=[0.1, 4.0, 0.0]), "b": model(diffs=[0.1, 4.0, 0.0])})
    assert plain_text(fd.confound_verdict(other)).startswith("For no model is the category")
    assert fd.length_limitation(other) == ""

    kept = Panel({"a": model(diffs=[4.0, 0.1, 0.0], without=0.5, lexical_without=-0.2)})
    text = plain_text(fd.confound_verdict(kept))
    assert "no model's r changes sign, and the lexical baseline's turns negative" in text
    assert "summed NLL" not in text and "likeliest" not in text  # the summed-NLL r equals the mean-NLL r here


def test_the_confound_table_has_one_column_per_model_and_every_number_sourced() -> None:
    p = Panel({"a": model(diffs=[4.8, 1.4, -0.2]), "b": model(diffs=[0.1, 5.2, 0.0], influential="cat_y")})
    table = confound_table(p)
    lines = table.splitlines()
    assert lines[0].count("|") == 4 and "| A" in lines[0] and "| B" in lines[0]
    assert "cat x" in lines[2] and "cat y" in lines[2]
    numbers = [line for line in lines[2:] if any(c.isdigit() for c in plain_text(line).split("|", 2)[-1])]
    assert numbers and all("{.uav" in line for line in numbers)
    assert "length/mean_token_difference/1" in table and "loco/lexical_final_r_without/mean" in table


def test_the_panel_phrase_names_the_quantization_and_the_chat_template() -> None:
    specs = {"s": SimpleNamespace(display="Small-Instruct", source="packaged", location="pkg_s",
                                  gguf_file="Small-Instruct.Q4_1.gguf", params_millions=135),
             "g": SimpleNamespace(display="Base", source="packaged", location="pkg_g", gguf_file="base-q4_k_m.gguf",
                                  params_millions=270)}
    p = Panel({"s": {}, "g": {}})
    p.params = SimpleNamespace(model=lambda m: specs[m])  # type: ignore[assignment]
    p.files["data/published/pythia-6-9b.json"] = {"model": "EleutherAI/pythia-6.9b"}
    weights = ph.weights_phrase(p)
    assert "are 4-bit GGUF quantizations (`Small-Instruct.Q4_1.gguf` and `base-q4_k_m.gguf`)" in weights
    assert "dequantized to 32-bit floats" in weights
    text = ph.panel_phrase(p)
    assert text.startswith("Quantized weights keep the quantization error")
    assert "Small is an instruction-tuned model" in text and "without its chat template" in text  # short name
    specs["s"] = SimpleNamespace(**{**vars(specs["s"]), "display": "Small", "gguf_file": "small.Q8_0.gguf"})
    assert "quantized GGUF files" in ph.weights_phrase(p) and "chat template" not in ph.panel_phrase(p)
    specs["s"] = SimpleNamespace(**{**vars(specs["s"]), "source": "hub"})
    specs["g"] = SimpleNamespace(**{**vars(specs["g"]), "source": "hub"})
    assert ph.weights_phrase(p) == "" and "Quantized" not in ph.panel_phrase(p)


def test_short_names_are_the_shortest_unique_leading_parts() -> None:
    from uaprobe.names import short_names

    assert short_names(["SmolLM2-135M-Instruct", "Gemma-3-270M"]) == {"SmolLM2-135M-Instruct": "SmolLM2",
                                                                        "Gemma-3-270M": "Gemma"}
    assert short_names(["Pythia-70m", "Pythia-160m", "Gemma-3-270M"]) == {
        "Pythia-70m": "Pythia-70m", "Pythia-160m": "Pythia-160m", "Gemma-3-270M": "Gemma"}
    assert short_names(["A-1", "A-1-x"]) == {"A-1": "A-1", "A-1-x": "A-1-x"}


def test_the_position0_phrase_follows_the_bos_and_the_policies() -> None:
    p = Panel({"a": model(diffs=[1.0, 0.0, 0.0]), "b": model(diffs=[1.0, 0.0, 0.0])})
    p.files["results/models/b/layerwise.json"]["extraction"] = {"bos_added": True}
    p.files["results/models/b/sink_excluded/layerwise.json"] = p.files["results/models/b/layerwise.json"]
    text = plain_text(ph.position0_phrase(p))
    assert text == ("The tokenizer of A adds no BOS, so its position 0 is the statement's first word; the tokenizer of "
                    "B adds a BOS at position 0, which neither policy pools, so its two policies give identical "
                    "numbers.")
    p.files["results/models/b/sink_excluded/layerwise.json"] = layerwise([0.1, 0.2])
    assert "yet its two policies give different numbers" in plain_text(ph.position0_phrase(p))


# ------------------------------------------------------------------------------------------------
# The specification curve and the shared direction


def curve(rs: dict[tuple[str, str, int], float], *, median_p: float = 0.04, share_p: float = 0.2,
          same_policies: bool = False) -> dict[str, Any]:
    """A ``specification_curve.json``: ``rs[(representation, policy, layer)]`` the r with mean pooling, mean
    NLL and every category; each also with one category left out (r shifted by 0.01)."""
    cols: dict[str, list[Any]] = {c: [] for c in ("r", "representation", "policy", "pooling", "nll", "layer", "left_out",
                                                  "distinct")}
    for (rep, policy, layer), r in rs.items():
        for left, shift in ((None, 0.0), ("cat_x", 0.01)):
            for k, v in zip(cols, (r + shift, rep, policy, "mean", "mean", layer, left, True)):
                cols[k].append(v)
    if same_policies:
        cols["r"] = [rs[(rep, "special", layer)] + (0.01 if left else 0.0)
                     for rep, layer, left in zip(cols["representation"], cols["layer"], cols["left_out"])]
    layers = sorted({k[2] for k in rs})
    reps = list(dict.fromkeys(k[0] for k in rs))

    def joint_p(test: str, statistic: str, p: float, floor: float, holm: float | None = None) -> dict[str, Any]:
        entry = {"test": test, "statistic": statistic, "estimate": 0.4 if statistic == "median_r" else 0.75, "p": p,
                 "p_floor": floor, "at_floor": abs(p - floor) < 1e-12}
        return entry if holm is None else {**entry, "holm_p": holm, "holm_reject": holm <= 0.05}

    secondary = [joint_p("declared", "share_positive", share_p, 1 / 720, min(1.0, 3 * share_p)),
                 joint_p("without_category", "median_r", 0.5, 1 / 120, 1.0)]
    return {"settings": {"alpha": 0.05}, "relabellings": 720, "layers": layers, "specs": cols,
            "choices": {"layer": layers, "policy": ["special", "sink_excluded"], "pooling": ["mean"],
                        "representation": reps},
            "universe": {"axes": {"pooling": {"options": ["mean"]}, "policy": {"options": ["special", "sink_excluded"]},
                                  "representation": {"options": reps}, "nll": {"options": ["mean"]},
                                  "layer": {"options": [layers[-1]]}},
                         "robustness_checks": {"nll": {"options": ["sum"]}, "pooling": {"options": ["first"]}},
                         "depth": 1.0, "n_listed": 4 * len(reps), "n_distinct": (2 if same_policies else 4) * len(reps)},
            "joint": {"declared": {"relabellings": 720, "mode": "exact", "median_r": 0.4},
                      "without_category": {"relabellings": 120, "left_out": "cat_x"},
                      "layer_zero": {"median_r": 0.6, "median_p": 0.02}},
            "primary": joint_p("declared", "median_r", median_p, 1 / 720),
            "secondary": {"alpha": 0.05, "tests": secondary}}


def grid(values: dict[str, list[float]]) -> dict[tuple[str, str, int], float]:
    """r per (representation, policy, layer) from one curve over layers per representation."""
    return {(rep, policy, i): r + (0.001 if policy == "sink_excluded" else 0.0)
            for rep, curve_ in values.items() for i, r in enumerate(curve_) for policy in ("special", "sink_excluded")}


def test_the_representation_median_is_a_derived_key_that_the_values_recompute() -> None:
    rs = grid({"raw": [0.1, -0.5, 0.9], "zscore": [0.2, 0.3, 0.8], "abtt": [-0.4, -0.6, 0.7]})
    p = Panel({"a": {"specification_curve": curve(rs)}})
    value = cv.representation_median(p, "a", "abtt")
    specs = p.files["results/models/a/specification_curve.json"]["specs"]
    specs["distinct"][0] = False  # a merged duplicate is left out of the median
    direct = [r for r, k, d in zip(specs["r"], specs["representation"], specs["distinct"]) if k == "abtt" and d]
    value = cv.representation_median(p, "a", "abtt")
    assert value.raw == pytest.approx(float(np.median(direct)))
    assert value.source.key == "median(specs/r where representation=abtt and distinct=True)"
    with pytest.raises(KeyPathError):  # a column the schema lacks fails where the median is asked for
        cv.spec_median(p, "a", representations="abtt")


def test_the_primary_test_is_stated_with_its_universe_its_floor_and_the_secondary_family() -> None:
    rs = grid({"raw": [0.1, -0.5, 0.9], "zscore": [0.2, 0.3, 0.8]})
    p = Panel({"a": {"specification_curve": curve(rs, median_p=0.03, share_p=0.01)},
               "b": {"specification_curve": curve(rs, median_p=0.4, share_p=0.7, same_policies=True)}})
    universe = plain_text(cv.universe_phrase(p))
    assert ("the preference from the per-token mean NLL, with mean pooling (a state that summarises the whole "
            "statement), crossed with 2 position-0 policies and 2 representations at one pre-declared layer, the last"
            ) in universe
    assert "a declaration, not a preregistration, with the first universe reported beside it" in universe
    assert ("The summed NLL (it puts the statements' length into the preference: another estimand) and first-token "
            "pooling (a lexical measure in a causal model) are named robustness checks outside it") in universe
    assert "8 of 8 for A and 4 of 8 for B are distinct" in universe
    assert ("are the share of r > 0 over the universe and the median r without cat x; the last two run over the 120 "
            "relabellings") in universe
    assert "Specifications with bit-identical category UA and the same NLL are one, counted once" in universe
    assert "Cat x is the category `params.yaml` declares to leave out" in universe  # not the original dataset
    text = plain_text(cv.primary_phrase(p))
    assert text.startswith("Over the universe, the median r is +0.400 for A (p = 0.030) and +0.400 for B (p = 0.400). "
                           "The test runs once per model, so α = 0.05 is split across the two models by Holm's "
                           "correction, declared with the primary test: the corrected p is 0.060 for A and 0.400 for B. "
                           "The p of A is below α only before that correction: the primary test is inconclusive for "
                           "every model.")
    assert "the secondary tests find the share of r > 0 over the universe of A (Holm p = 0.030)" in text
    assert "Without cat x, over the same choices, the median r is +0.400 for A (p = 0.500, Holm p = 1.000)" in text
    both = Panel({"a": {"specification_curve": curve(rs, median_p=0.01, share_p=0.01)},
                  "b": {"specification_curve": curve(rs, median_p=0.4, share_p=0.7)}})
    assert "The primary test finds the statistic different from chance for A." in plain_text(cv.primary_phrase(both))
    floor = Panel({"a": {"specification_curve": curve(rs, median_p=1 / 720, share_p=0.5)}})
    text = plain_text(cv.primary_phrase(floor))
    assert "(p = 0.001, the smallest p its test can give)" in text and "no secondary test is significant" in text
    assert "different from chance for A." in text  # a panel of one: nothing to correct across
    assert plain_text(cv.layer_zero_phrase(floor)).endswith("the median r is +0.600 (p = 0.020) for A; this is an "
                                                           "exploratory comparison, in no family and uncorrected")


def dimensions(raw: list[float], top1: list[float], pc1: list[float], z: list[float], sx: list[float] | None = None
               ) -> dict[str, Any]:
    def policy(cos: list[float]) -> dict[str, Any]:
        return {"poolings": {"mean": {"mean_cosine": {"raw": cos, "zscore": z, "abtt": [-v for v in z]},
                                      "uniformity_share": {"top1": top1}, "variance_share": {"top1": pc1}}}}
    return {"layers": list(range(len(raw))), "settings": {"abtt_k": 5},
            "policies": {"default": policy(raw), "sink_excluded": policy(sx if sx is not None else raw)}}


def test_the_direction_phrases_give_the_peaks_and_whether_one_dimension_dominates() -> None:
    p = Panel({"a": {"dimensions": dimensions([0.5, 0.99, 0.9], [0.2, 0.6, 0.95], [0.3, 0.99, 0.5], [0.001, -0.002, 0.0],
                                              sx=[0.4, 0.8, 0.85])}})
    text = plain_text(dr.direction_phrase(p))
    assert "peaks at 0.9900 at layer 1 for A (0.8500 at layer 2 with position 0 excluded), while the top dimension's " \
           "share of the uniformity peaks at 0.950 at layer 2 and the first principal component's share of the " \
           "variance at 0.990 at layer 1" in text
    assert text.endswith("the raw cosines mostly measure one dimension")
    assert plain_text(dr.standardized_phrase(p)) == (
        "With mean pooling, both transforms centre the states; n centred vectors of equal norm have a mean pairwise "
        "cosine of exactly −1/(n − 1), so a mean cosine near zero is an identity of centring, not a finding (here "
        "between −0.0020 and +0.0020 at every layer of every model and policy)")
    positive = Panel({"a": {"dimensions": dimensions([0.5, 0.9], [0.2, 0.6], [0.3, 0.9], [0.0095, 0.002])}})
    text = plain_text(dr.standardized_phrase(positive))  # the identity stated as one; the observed range beside it
    assert "identity of centring, not a finding" in text
    assert text.endswith("between −0.0095 and +0.0095 at every layer of every model and policy)")
    low = Panel({"a": {"dimensions": dimensions([0.5, 0.6], [0.2, 0.3], [0.3, 0.2], [0.1, 0.2])}})
    assert "no single dimension carries most" in plain_text(dr.direction_phrase(low))
    assert plain_text(dr.standardized_phrase(low)).endswith("every model and policy: some shared direction remains")
    assert "near zero" not in plain_text(dr.standardized_phrase(low))


def test_the_representation_phrase_finds_the_layer_where_the_representations_differ_most() -> None:
    rs = grid({"raw": [0.1, -0.9, 0.9], "zscore": [0.2, 0.3, 0.8], "abtt": [0.1, -0.6, 0.7]})
    p = Panel({"a": {"specification_curve": curve(rs)}})
    assert dr.widest_layer(p, "a") == 1
    text = plain_text(dr.representation_r_phrase(p))
    assert text.startswith("The representation changes the sign of the category-level r at some layer of A")
    assert "at layer 1 of A, −0.900 raw, +0.300 z-scored, −0.600 ABTT (last layer: +0.900 raw, +0.800 z-scored" in text
    same = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, 0.9], "zscore": [0.2, 0.3]}))}})
    assert plain_text(dr.representation_r_phrase(same)).startswith("The representation changes the size but not the sign")
    p.files["results/models/a/dimensions.json"] = dimensions([0.5, 0.99, 0.9], [0.2, 0.6, 0.95], [0.3, 0.9, 0.5],
                                                             [0.001, -0.002, 0.0])
    table = dr.representation_table(p)
    assert table.count("\n") == 4 and "median(specs/r where representation=zscore and distinct=True)" in table


# ------------------------------------------------------------------------------------------------
# The pair-level models

METRICS = ("centroid_asymmetry", "knn_density_asymmetry", "margin_asymmetry")


def pair_models(holm: dict[str, tuple[int, int]], knn: tuple[float, float] = (0.2, 0.34), lexical: float = 0.45,
                n: int = 4, first: tuple[int, int] = (0, 0), first_r: tuple[float, float] = (0.1, 0.3)) -> dict[str, Any]:
    """A ``pair_models.json``: ``holm[metric] = (layers surviving with position 0 excluded, under the default)``
    with mean pooling; ``first`` the kNN counts with first-token pooling, ``first_r`` its partial r range
    under the default policy."""
    def policy(i: int) -> dict[str, Any]:
        mean = {k: {"n_holm_layers": holm[k][i], "partial_r_min": knn[0] if k == METRICS[1] else -0.1,
                    "partial_r_max": knn[1] if k == METRICS[1] else 0.1} for k in METRICS}
        lo, hi = first_r if i == 1 else (0.1, 0.3)
        return {"poolings": {"mean": mean, "first": {METRICS[1]: {"n_holm_layers": first[i], "partial_r_min": lo,
                                                                  "partial_r_max": hi}}},
                "lexical_baseline": {"metrics": {k: {"median_partial_r": lexical, "significant": [True, True, False]}
                                                 for k in METRICS}}}
    return {"layers": list(range(n)), "permutations": 100,
            "policies": {"sink_excluded": policy(0), "default": policy(1)}}


def option_b(reject: list[bool]) -> dict[str, Any]:
    return {"layers": list(range(len(reject))),
            "poolings": {"mean": {"metrics": {"knn_density_asymmetry": {"permutation_holm_reject": reject}}}}}


def test_the_old_knn_phrase_the_table_and_the_limitation_follow_the_holm_counts() -> None:
    p = Panel({"a": {"pair_models": pair_models({"centroid_asymmetry": (2, 2), "knn_density_asymmetry": (1, 1),
                                                 "margin_asymmetry": (0, 3)}, first=(3, 4), first_r=(0.296, 0.2962)),
                     "sink_excluded/option_b": option_b([True] * 4), "option_b": option_b([True, False, False, False])},
               "b": {"pair_models": pair_models({k: (0, 0) for k in METRICS}, knn=(0.05, 0.2), lexical=0.18),
                     "sink_excluded/option_b": option_b([True, True, False]), "option_b": option_b([True, True, False])}})
    old = plain_text(pl.old_knn_phrase(p))
    assert ("at 4 of 4 layers of A with position 0 excluded (1 under the default policy) and 2 of 3 layers of B under "
            "both policies; with the category indicators and both sides' lengths as covariates and the permutation "
            "within categories, it survives at 1 of 4 and 0 of 4 layers, though its partial r stays positive at every layer (+0.200 to +0.340; "
            "+0.050 to +0.200)") in old
    assert pl.pooling_limitation(p).startswith("The pair-level Holm counts depend on the pooling")
    table = pl.pair_table(p)
    assert table.count("\n") == 2 + 2 * len(METRICS) - 1 and "n_holm_layers" in table

    strong = Panel({"a": {"pair_models": pair_models({k: (0, 0) for k in METRICS}, knn=(-0.1, 0.6), lexical=0.1),
                          "sink_excluded/option_b": option_b([False] * 4), "option_b": option_b([False] * 4)}})
    assert "stays positive" not in plain_text(pl.old_knn_phrase(strong))
    assert pl.pooling_limitation(strong) == ""


def test_the_conclusion_follows_the_lexical_baseline_the_category_and_the_curve() -> None:
    rs = grid({"raw": [0.1, 0.9]})
    p = Panel({"a": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.01)}})
    text = plain_text(fd.conclusion_phrase(p))
    assert text.startswith("a lexical baseline that sees only the statements' tokens matches the category-level r")
    assert "With mean pooling, its sign rests on a single category for A." in text
    # one model: no correction across models is said
    assert ("the primary test finds the correlation different from chance for A. "
            "Without cat x, it is below α for no model") in text
    p = Panel({"a": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.5)}})
    assert ("different from chance for no model, which at the power of this design (@tbl-power) is no evidence "
            "either way. Without cat x, it is below α for no model, again inconclusive by design"
            ) in plain_text(fd.conclusion_phrase(p))
    two = Panel({"a": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.04)},
                 "b": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.5)}})
    assert ("is no evidence either way; the p of A, 0.040, becomes 0.080, so it is inconclusive"
            in plain_text(fd.conclusion_phrase(two)))
    one_of_two = Panel({"a": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.01)},
                        "b": {**model(diffs=[4.0, 0.1, 0.0]), "specification_curve": curve(rs, median_p=0.5)}})
    assert "different from chance for A." in plain_text(fd.conclusion_phrase(one_of_two))
    beaten = Panel({"a": {**model(diffs=[4.0, 0.1, 0.0], without=0.5), "specification_curve": curve(rs)}})
    beaten.files["results/models/a/robustness.json"]["lexical_baseline"]["final_r"]["mean"] = 0.2
    text = plain_text(fd.conclusion_phrase(beaten))
    assert "exceeds what the statements' tokens alone give" in text and "single category" not in text


def test_the_representation_change_names_the_transform_and_the_layers_where_the_sign_differs() -> None:
    mid = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, -0.9, 0.9], "zscore": [0.2, 0.3, 0.8]}))}})
    assert plain_text(dr.representation_change(mid)) == ("z-scoring, which removes it, changes the sign of the "
                                                         "category-level r at layers before the last (e.g. layer 1 of A), "
                                                         "not at the last layer")
    abtt = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, -0.9, 0.9], "zscore": [0.2, -0.3, 0.8],
                                                           "abtt": [0.1, 0.2, 0.7]}))}})
    assert plain_text(dr.representation_change(abtt)).startswith("ABTT, which removes it, changes the sign")
    each = Panel({"a": {"specification_curve": curve(grid({"raw": [-0.2, -0.9, 0.9], "zscore": [-0.2, 0.3, 0.8],
                                                           "abtt": [0.1, -0.6, 0.7]}))}})
    assert plain_text(dr.representation_change(each)) == ("z-scoring and ABTT, which remove it, each change the sign of "
                                                          "the category-level r at layers before the last (e.g. z-scoring at "
                                                          "layer 1 of A), not at the last layer")
    last = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, -0.9, 0.9], "zscore": [0.2, 0.3, -0.8]}))}})
    assert plain_text(dr.representation_change(last)).endswith("at layers before the last (e.g. layer 1 of A) and at the "
                                                               "last layer of A")
    split = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, -0.9, 0.9], "zscore": [0.2, 0.3, 0.8],
                                                            "abtt": [0.1, -0.6, -0.7]}))}})
    assert plain_text(dr.representation_change(split)) == ("z-scoring, which removes it, changes the sign of the "
                                                           "category-level r at layers before the last (e.g. layer 1 of A), "
                                                           "and ABTT at the last layer of A")
    only_last = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, 0.9], "zscore": [0.2, -0.3]}))}})
    assert plain_text(dr.representation_change(only_last)) == ("z-scoring, which removes it, changes the sign of the "
                                                               "category-level r at the last layer of A")
    none = Panel({"a": {"specification_curve": curve(grid({"raw": [0.1, 0.9], "zscore": [0.2, 0.3]}))}})
    assert plain_text(dr.representation_change(none)) == ("z-scoring, which removes it, changes the size but not the "
                                                          "sign of the category-level r")


def family(rows: list[tuple[str, str, str, float, float, bool]], *, n_tests: int | None = None,
           base: list[float | None] | None = None) -> dict[str, Any]:
    """A pair-level family: rows of (policy, pooling, metric, partial r, Holm p, reject); mean reported; ``base``:
    the partial r without the lexical covariates (None: a family without them); VIF 1.5 throughout."""
    cols = ("policy", "pooling", "metric", "partial_r", "holm_p", "holm_reject")
    tests = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    tests["reported"] = [r[1] == "mean" for r in rows]
    tests["permutation_p"] = [r[4] / 4 for r in rows]
    tests["at_floor"] = [False for _ in rows]
    tests["vif"] = [1.5 for _ in rows]
    tests["base_partial_r"] = [None for _ in rows] if base is None else base
    tests["pearson_r"] = [-0.1 for _ in rows]  # r without covariates
    tests["partial_r_low"] = [r[3] - 0.1 for r in rows]
    tests["partial_r_high"] = [r[3] + 0.1 for r in rows]
    tests["maxt_p"] = [r[4] / 2 for r in rows]
    tests["maxt_reject"] = [r[5] for r in rows]
    tests["degenerate"] = [False for _ in rows]
    n_reject = sum(r[5] for r in rows) if n_tests is None else sum(r[5] for r in rows) // 2
    return {"reported_pooling": "mean", "n_tests": len(rows) if n_tests is None else n_tests, "n_reject": n_reject,
            "n_maxt_reject": n_reject, "n_degenerate": 0, "degenerate_vif": 10.0, "tests": tests}


def pair_doc(length: dict[str, Any], incremental: dict[str, Any], without: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    """A ``pair_models.json`` with the three families (the one without cat x the incremental one by default)."""
    return {"family": length, "incremental": {"family": incremental, "without_category": {
        "left_out": "cat_x", "family": incremental if without is None else without}}}


def raw_r(r: float) -> dict[str, Any]:
    """An ``option_b.json`` whose every metric has r at the last layer (layer 1) ``r`` without covariates."""
    metrics = {k: {"pearson_r": [0.0, r]} for k in ("centroid_asymmetry", "knn_density_asymmetry", "margin_asymmetry")}
    return {"n_layers": 1, "poolings": {pool: {"metrics": metrics} for pool in ("mean", "first", "last")}}


def test_the_pair_family_names_each_surviving_test_once_with_its_pooling_and_policy() -> None:
    from uaprobe.publishing.prose.pairs import pair_family as pf

    knn, margin = "knn_density_asymmetry", "margin_asymmetry"
    a = family([("default", "mean", knn, 0.2, 0.5, False), ("default", "first", knn, 0.3, 0.01, True),
                ("sink_excluded", "mean", knn, 0.2, 0.6, False), ("sink_excluded", "first", knn, 0.1, 0.9, False)])
    same = [("default", "mean", margin, 0.2, 0.03, True), ("sink_excluded", "mean", margin, 0.2, 0.03, True)]
    b = family(same, n_tests=1)  # both policies pool the same states: one test
    p = Panel({"a": {"pair_models": pair_doc(a, family([("default", "mean", knn, 0.1, 0.9, False)])),
                     "option_b": raw_r(-0.1)},
               "b": {"pair_models": pair_doc(b, b, family([("default", "mean", margin, 0.1, 0.3, False)])),
                     "option_b": raw_r(-0.1)}})
    text = plain_text(pf.family_phrase(p))
    assert "for both models: 9 tests, those on the same states counted once" in text  # 4+1+1 and 1+1+1
    assert ("With the category and length covariates, 1 and 1 of the 4 tests of A and 1 and 1 of the 1 tests of B "
            "survive max-T and Holm respectively.") in text
    assert ("With both, over the pairs outside cat x, 0 and 0 of the 1 tests of A and 0 and 0 of the 1 tests of B "
            "survive max-T and Holm respectively.") in text
    assert "No test has a variance inflation factor (VIF) of its metric on its covariates above 10." in text
    assert plain_text(pf.family_conclusion(p)) == (
        "with mean pooling at the last layer, what survives both statements' lengths, the lexical baseline and cat x "
        "left out together in one pair-level family is, for A, nothing; for B, nothing")
    kept = Panel({"b": {"pair_models": pair_doc(b, b)}})
    assert plain_text(pf.family_conclusion(kept)).endswith("is, for B, the margin asymmetry with a positive partial r")
    against = family([("default", "mean", "centroid_asymmetry", -0.3, 0.01, True),
                      ("default", "mean", margin, 0.2, 0.01, True)])
    signs = Panel({"b": {"pair_models": pair_doc(against, against)}})
    assert plain_text(pf.family_conclusion(signs)).endswith(
        "for B, the centroid asymmetry with a negative partial r, the margin asymmetry with a positive one; there, of "
        "the centroid asymmetry and kNN density asymmetry, whose sign UA predicts, what survives has the opposite sign")
    # a sign that only the lexical covariate gives (the partial r without it has the other sign) is not the metric's
    flipped = family([("default", "mean", "centroid_asymmetry", -0.3, 0.01, True),
                      ("default", "mean", margin, 0.2, 0.01, True)], base=[0.1, 0.25])
    suppressed = Panel({"b": {"pair_models": pair_doc(against, flipped)}})
    assert plain_text(pf.family_conclusion(suppressed)).endswith(
        "for B, the centroid asymmetry with a sign that only the lexical covariate gives, the margin asymmetry with a "
        "positive partial r")
    assert plain_text(pf.suppression_phrase(suppressed)) == (
        "A covariate that nearly spans the metric can reverse the sign of a partial r (suppression): of the 4 "
        "surviving tests with the lexical covariates, 2 keep the sign that the category and length covariates alone "
        "give over the same pairs, and the variance inflation factor of their metrics on the covariates is at most "
        "1.50")
    assert "every one keeps the sign" in plain_text(pf.suppression_phrase(signs))
    table = plain_text(pf.family_table(p))
    assert table.count("\n") == 2 + 3 + 3 - 1  # header, rule; A: one row per family; B: 1 + 1 + none
    # r without covariates beside the partial r: the sign may change
    assert "| A | base | kNN density | first | default | +0.30 [+0.20, +0.40] | — | 1.50 | 0.010 | 0.005 |" in table
    assert ("| B | base | margin | mean | both | +0.20 [+0.10, +0.30] | — | 1.50 | 0.030 | 0.015 |"
            in table)  # one test, both policies
    assert "|  | subset | none |" in table
    # one test on the same states under several poolings: one row naming them; a p at its floor is starred
    shared = family([("default", pool, margin, 0.2, 0.03, True) for pool in ("mean", "last")], n_tests=1)
    shared["tests"]["at_floor"] = [True, True]
    shared["tests"]["pearson_r"] = [0.1, 0.1]
    q = Panel({"b": {"pair_models": pair_doc(shared, shared), "option_b": raw_r(0.1)}})
    assert ("| B | base | margin | mean, last | both | +0.20 [+0.10, +0.30] | — | 1.50 | 0.030* | 0.015 |"
            in plain_text(pf.family_table(q)))


def _abstract_curve(rs: dict[tuple[str, str, int], float], *, median_p: float, abtt_zero: float,
                    zero: float) -> dict[str, Any]:
    """:func:`curve` with the power and layer 0 beside the last layer (mean pooling, mean NLL, both policies)."""
    doc = curve(rs, median_p=median_p)
    doc["power"] = {"specification": {"policy": "special"},
                    "sets": [{"planted": [0.5, 0.9], "power": [0.15, 0.6], "observed_p": 0.3}]}
    rows = [(rep, pol) for rep in ("raw", "abtt") for pol in ("special", "sink_excluded")]
    doc["layer_zero"] = {"pooling": ["mean"] * 4, "policy": [pol for _, pol in rows],
                         "representation": [rep for rep, _ in rows], "nll": ["mean"] * 4,
                         "r": [0.9] * 4, "r_layer_zero": [zero if rep == "raw" else abtt_zero for rep, _ in rows]}
    return doc


def test_the_abstract_reports_the_original_the_power_layer_zero_and_every_survivor() -> None:
    """The original study's r and this panel's of the other sign, the power, the primary p, layer 0 reversed
    under ABTT, and every surviving pair-level metric with its sign (the one with the hypothesis's sign marked),
    within the budget of words and numbers."""
    import re

    from test_phrases import with_published
    from uaprobe.publishing.prose.panel import abstract as ab

    knn, margin, centroid = "knn_density_asymmetry", "margin_asymmetry", "centroid_asymmetry"
    survivors = {"a": [("default", "mean", centroid, -0.3, 0.01, True), ("default", "mean", margin, 0.2, 0.01, True)],
                 "b": [("default", "last", knn, 0.29, 0.01, True), ("default", "mean", centroid, 0.1, 0.9, False)]}
    models = {}
    for name in ("a", "b"):
        docs = model(diffs=[4.8, 1.4, 0.0])
        docs["layerwise"]["poolings"]["mean"]["pearson_r"] = [0.95, 0.9]  # layer 0 as large as the last
        docs["specification_curve"] = _abstract_curve(grid({"raw": [0.1, 0.9]}), median_p=0.09, abtt_zero=-0.9,
                                                      zero=0.95)
        docs["pair_models"] = pair_doc(family(survivors[name]), family(survivors[name]))
        models[name] = docs
    p = with_published(Panel(models))
    text = plain_text(ab.abstract(p))
    words = [w for w in text.split() if re.search(r"\w", w)]
    numbers = re.findall(r"(?<![\w.])[−-]?\d+(?:\.\d+)?", text)
    assert len(words) <= ab.WORDS and len(numbers) <= ab.NUMBERS, (len(words), numbers, text)
    assert "its original study reported r = −0.87 across" in text
    assert "Two small models give the opposite sign (r = +0.90 and +0.90)" in text
    assert "the exact test's power at a planted correlation of 0.9 is at most 0.60" in text
    assert "the primary test gives uncorrected p = 0.090 and 0.090" in text or "the primary test is inconclusive" in text
    assert "Layer-0 token embeddings already show it (reversed without the top principal directions)" in text
    assert ("Within categories, pair-level survivors of panel-wide Holm correction (UA predicts positive centroid "
            "and kNN-density): A, negative centroid and positive margin; B, positive kNN-density as predicted") in text
    # a survivor whose sign only the lexical covariate gives is not the metric's: left out
    flipped = family([("default", "mean", centroid, -0.3, 0.01, True)], base=[0.2])
    models["a"]["pair_models"] = pair_doc(family([]), flipped)
    assert "kNN-density): A, none; B," in plain_text(ab.abstract(with_published(Panel(models))))


def test_the_abstract_drops_detail_before_it_breaks_its_budget() -> None:
    """With more models than the budget has numbers for both, the abstract gives the per-model r, not their p."""
    import re

    from test_phrases import with_published
    from uaprobe.publishing.prose.panel import abstract as ab

    models = {}
    for name in ("a", "b", "c", "d"):
        docs = model(diffs=[4.8, 1.4, 0.0])
        docs["specification_curve"] = _abstract_curve(grid({"raw": [0.1, 0.9]}), median_p=0.2, abtt_zero=0.5,
                                                      zero=0.1)
        docs["pair_models"] = pair_doc(family([]), family([]))
        models[name] = docs
    text = plain_text(ab.abstract(with_published(Panel(models))))
    numbers = re.findall(r"(?<![\w.])[−-]?\d+(?:\.\d+)?", text)
    words = [w for w in text.split() if re.search(r"\w", w)]
    assert len(numbers) <= ab.NUMBERS and len(words) <= ab.WORDS, (len(words), numbers)
    assert "is inconclusive." in text and "gives uncorrected p = " not in text
    assert "show a smaller correlation." in text


def test_the_checks_phrase_sets_the_first_universe_and_the_checks_beside_the_primary_one() -> None:
    from uaprobe.publishing.prose.panel import design as ds

    doc = curve(grid({"raw": [0.1, 0.9]}))
    doc["joint"].update({"declared": {"relabellings": 720, "median_r": 0.9, "median_p": 0.07},
                         "full_universe": {"median_r": 0.2, "median_p": 0.4},
                         "other_nll": {"median_r": -0.6, "median_p": 0.1},
                         "other_poolings": {"median_r": 0.8, "median_p": 0.06}})
    text = plain_text(ds.checks_phrase(Panel({"a": {"specification_curve": doc}})))
    assert text.startswith("Beside the primary universe, as comparisons in no family: over the universe as first "
                           "declared, every pooling and NLL, the median r is +0.200 (p = 0.400) for A; with the summed "
                           "NLL instead, −0.600 (p = 0.100) for A; with first-token pooling instead, +0.800 (p = 0.060)")
    assert text.endswith("its median falls between the medians of each")
    doc["joint"]["full_universe"]["median_r"] = 0.95  # not between: no such reading
    assert "falls between" not in plain_text(ds.checks_phrase(Panel({"a": {"specification_curve": doc}})))


def test_the_original_points_are_faced_with_their_exact_test_and_the_scattered_negatives_named() -> None:
    """The original's published points under this paper's test: r, exact p, power and the leave-one-out range;
    that its sign passes and keeps with any category out is said only where the numbers show it; the most negative
    r with position 0 excluded is named per model and pooling, a positive minimum left out."""
    from test_phrases import with_published
    from uaprobe.publishing.prose.panel import design as ds

    def panel(p_orig: float, loo: list[float]) -> Panel:
        docs = model(diffs=[4.8, 1.4, 0.0])
        docs["sink_excluded/layerwise"] = {"poolings": {"mean": {"pearson_r": [0.3, -0.4, 0.2]},
                                                        "last": {"pearson_r": [0.1, 0.2, 0.5]}}}
        docs["specification_curve"] = _abstract_curve(grid({"raw": [0.1, 0.9]}), median_p=0.3, abtt_zero=-0.9,
                                                      zero=0.95)
        p = with_published(Panel({"a": docs}))
        p.files[PANEL_RESULTS]["original"] = {
            "categories": ["x", "y", "z", "w"], "r": -0.87, "p": p_orig, "orders": 24, "leave_one_out_r": loo,
            "power": {"planted": [0.5, 0.9], "power": [0.2, 0.7]}}
        return p
    text = plain_text(ds.original_test_words(panel(0.028, [-0.6, -0.9, -0.95, -0.8])))
    assert text.startswith(": the original's own four published category points give, under this paper's exact "
                           "test, r = −0.870 with p = 0.028 over 24 orders (power 0.70 at a planted ρ of 0.9), and r "
                           "from −0.950 to −0.600 with one category left out")
    assert "passes the exact test, uncorrected for the layers it was read at, and keeps its sign" in text
    flipped = plain_text(ds.original_test_words(panel(0.2, [-0.6, 0.3, -0.95, -0.8])))
    assert "passes" not in flipped and "keeps" not in flipped
    # this panel's r (exact p 0.3, reversed without its most influential category) does neither: said in the end
    assert plain_text(ds.original_conclusion(panel(0.028, [-0.6, -0.9, -0.95, -0.8]))).endswith(
        "this panel's do neither, though with four points on each side that contrast is not itself a test of a "
        "difference.")
    assert plain_text(ds.original_conclusion(panel(0.2, [-0.6, -0.9, -0.95, -0.8]))) == ""
    assert plain_text(ds.negative_without_sink(panel(0.2, [-0.6]))) == (
        "at 1 of the 3 layers of A with mean pooling (layer 1, down to −0.400)")
    bare = Panel({"a": model(diffs=[4.8, 1.4, 0.0])})
    bare.files[PANEL_RESULTS] = {}  # a panel without the published points
    assert plain_text(ds.original_test_words(bare)) == ""


def test_a_survivor_with_the_predicted_sign_is_marked_where_only_every_category_keeps_it() -> None:
    """The kNN density survivor of the base covariates that no test without the pre-declared category keeps is
    marked as surviving only without the lexical covariate; kept without the category too, it is not marked."""
    from test_phrases import with_published
    from uaprobe.publishing.prose.panel import abstract as ab

    knn = "knn_density_asymmetry"
    docs = model(diffs=[4.8, 1.4, 0.0])
    docs["specification_curve"] = _abstract_curve(grid({"raw": [0.1, 0.9]}), median_p=0.09, abtt_zero=-0.9, zero=0.95)
    hit = [("default", "last", knn, 0.29, 0.01, True)]
    docs["pair_models"] = pair_doc(family(hit), family([]), family([]))
    only_all = plain_text(ab.pair_sentence(with_published(Panel({"a": docs})), poolings=False))
    assert "A, positive kNN-density as predicted (only without the lexical covariate)" in only_all
    docs["pair_models"] = pair_doc(family(hit), family([]), family(hit))
    kept = plain_text(ab.pair_sentence(with_published(Panel({"a": docs})), poolings=False))
    assert kept.endswith("A, positive kNN-density as predicted")


def test_the_lexical_baseline_is_set_beside_the_surviving_tests() -> None:
    """Per model, the baseline's median partial r beside the range of |partial r| of the model's survivors, and how
    many tests survive with the lexical covariate over every pair."""
    from uaprobe.publishing.prose.pairs import pair_family as pf

    def panel(lex: float) -> Panel:
        docs = {"pair_models": pair_doc(family([("default", "mean", "centroid_asymmetry", -0.3, 0.01, True),
                                                ("default", "last", "margin_asymmetry", 0.2, 0.01, True)]),
                                        family([]), family([]))}
        docs["pair_models"]["policies"] = {"sink_excluded": {"lexical_baseline": {"metrics": {"centroid_asymmetry": {
            "median_partial_r": lex, "significant": [True, True]}}}}}
        return Panel({"a": docs})
    text = plain_text(pf.lexical_versus_models(panel(0.35)))
    assert ("a median partial r of +0.350 with the tokenizer of A, against |partial r| from 0.20 to 0.30 for its "
            "surviving tests") in text
    assert text.endswith("over every pair, with that covariate, no test of any model survives Holm's correction.")


def test_the_pair_level_verdict_on_the_predicted_signs() -> None:
    """A model whose surviving centroid test is negative speaks against UA's hypothesis, one whose kNN test is
    positive for it: together, no consistent support; a model whose survivors all need the declared category left
    out is named as such."""
    from uaprobe.publishing.prose.pairs import pair_family as pf

    against = family([("default", "mean", "centroid_asymmetry", -0.3, 0.01, True)])
    supports = family([("default", "last", "knn_density_asymmetry", 0.29, 0.01, True)])
    p = Panel({"a": {"pair_models": pair_doc(family([]), family([]), against)},
               "b": {"pair_models": pair_doc(supports, family([]), family([]))}})
    text = plain_text(pf.hypothesis_synthesis(p))
    assert ("show, for A, the centroid asymmetry with the opposite sign; for B, the kNN density asymmetry with the "
            "predicted sign: so the pair level does not support UA's hypothesis consistently from one model to the other") in text
    assert text.endswith("For A, every survivor needs cat x left out, and none survives over every pair: the "
                         "within-category association differs between the categories, which one slope per family "
                         "does not describe.")
    both = Panel({"b": {"pair_models": pair_doc(supports, family([]), supports)}})
    assert "so the pair level supports UA's hypothesis for B" in plain_text(pf.hypothesis_synthesis(both))


def test_the_preference_per_character_is_set_beside_the_per_token_one() -> None:
    """Per character with the original's sign for every model, per token the other: the sentence says the sign is
    set by the normalisation, the conclusion and the abstract say it too; one model keeping the per-token sign:
    named, and no such claim."""
    from test_phrases import with_published
    from uaprobe.publishing.prose.panel import abstract as ab

    def panel(chars: list[float]) -> Panel:
        models = {}
        for name, r_char in zip(("a", "b"), chars):
            docs = model(diffs=[4.8, 1.4, 0.0], final_r=0.9, without=-0.3)
            docs["robustness"]["preference"].update({"final_r_char_nll": r_char, "final_p_char_nll": 0.04,
                                                     "char_category_means": [0.2, 0.1, 0.0]})
            docs["specification_curve"] = _abstract_curve(grid({"raw": [0.1, 0.9]}), median_p=0.3, abtt_zero=-0.9,
                                                          zero=0.95)
            docs["pair_models"] = pair_doc(family([]), family([]))
            models[name] = docs
        return with_published(Panel(models))
    flipped = panel([-0.8, -0.9])
    assert fd.per_character_flips(flipped)
    text = plain_text(fd.per_character_words(flipped, ["a", "b"]))
    assert text.startswith("With the NLL per character instead (each statement's summed NLL over its characters, "
                           "a normalisation no tokenizer sets; an exploratory check, added after the per-token "
                           "results had been read, in no family and uncorrected), the last-layer r is −0.800 for A "
                           "(exact p = 0.040; "
                           "mean preference of cat x +0.200 nats per character)")
    assert text.endswith("per token the opposite of the original's, per character the original's.")
    assert "per character it is the original's" in plain_text(fd.conclusion_phrase(flipped))
    assert "per character (exploratory), both models give the original's sign" in plain_text(ab.abstract(flipped))
    mixed = panel([-0.8, 0.5])
    assert not fd.per_character_flips(mixed)
    assert plain_text(fd.per_character_words(mixed, ["a", "b"])).endswith("the other sign than per token for A.")
