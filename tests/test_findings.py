"""The paper's main findings as phrases: the words follow the numbers (a different result gives a
different sentence) and every number shown keeps its source."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from test_phrases import Panel, layerwise, robustness
from uaprobe.publishing import findings as fd
from uaprobe.publishing import phrases as ph
from uaprobe.publishing.tables import confound_table, length_category, other_range
from uaprobe.publishing.values import plain_text

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
                    "in content tokens, B − A, is largest in size in cat y for A (−4.0, against +0.5 to +1.2 in the "
                    "other categories).")
    close = Panel({"a": model(diffs=[0.5, -1.0, 1.2])})
    assert plain_text(fd.length_phrase(close)).startswith("No category's framings differ in length far more")


def test_the_confound_verdict_follows_the_category_the_reversal_and_the_baseline() -> None:
    both = Panel({"a": model(diffs=[4.8, 1.4, 0.0], sum_nll=0.27), "b": model(diffs=[5.2, 1.4, 0.0], sum_nll=-0.65)})
    text = plain_text(fd.confound_verdict(both))
    assert text.startswith("For both models, that category is also the one whose removal changes the last-layer r most")
    assert "the models' r changes sign for both models, while the lexical baseline's stays positive" in text
    assert "the last-layer r moves for both models" in text and "one length confound" in text
    abstract = plain_text(fd.confound_abstract(both))
    assert "without it r changes sign for both models" in abstract and "words stays positive" in abstract
    assert "moves r for both" in abstract and not any(c.isdigit() for c in abstract)

    other = Panel({"a": model(diffs=[0.1, 4.0, 0.0]), "b": model(diffs=[0.1, 4.0, 0.0])})
    assert plain_text(fd.confound_verdict(other)).startswith("For no model is the category")
    assert plain_text(fd.confound_abstract(other)).startswith("The category that most influences the correlation is not")

    kept = Panel({"a": model(diffs=[4.0, 0.1, 0.0], without=0.5, lexical_without=-0.2)})
    text = plain_text(fd.confound_verdict(kept))
    assert "no model's r changes sign, and the lexical baseline's turns negative" in text
    assert "summed NLL" not in text and "length confound" not in text  # the summed-NLL r equals the mean-NLL r here


def knn(partial: list[float], reject: list[bool], partial_p: list[float]) -> dict[str, Any]:
    metric = {"partial_r": partial, "permutation_holm_reject": reject, "partial_p": partial_p}
    return {"layers": list(range(len(partial))),
            "poolings": {"mean": {"metrics": {"knn_density_asymmetry": metric}}}}


def test_the_knn_phrases_give_the_range_the_holm_count_and_the_largest_p() -> None:
    p = Panel({"a": {"sink_excluded/option_b": knn([0.3, 0.46, 0.32], [True, True, True], [1e-6, 1e-9, 1e-7])},
               "b": {"sink_excluded/option_b": knn([0.19, 0.39], [True, False], [0.004, 1e-5])}})
    text = plain_text(fd.knn_phrase(p))
    assert text == ("partial r from +0.300 to +0.460 over the layers of A, whose r survives the permutation test with "
                    "Holm's correction at 3 of 3 layers (largest t-test p of the partial r over the layers: <\u00a00.001); "
                    "partial r from +0.190 to +0.390 over the layers of B, whose r survives the permutation test with "
                    "Holm's correction at 1 of 2 layers (largest t-test p of the partial r over the layers: 0.004)")
    abstract = fd.knn_abstract(p)
    assert "keeps a positive correlation" in plain_text(abstract)
    assert "(partial r +0.190 to +0.460 over layers and models)" in plain_text(abstract)
    assert "at some layers" in plain_text(abstract)
    assert 'data-file="results/models/b/sink_excluded/option_b.json"' in abstract
    every = Panel({"a": {"sink_excluded/option_b": knn([-0.3, 0.2], [True, True], [0.01, 0.01])}})
    assert "keeps a mixed correlation" in plain_text(fd.knn_abstract(every))
    assert plain_text(fd.knn_abstract(every)).endswith("at every layer of every model")


@pytest.mark.parametrize("reject,expected", [(None, "a significant layer in none of the 6 specifications"),
                                             ([False, True], "a significant layer in 1 of the 6 specifications")])
def test_the_specification_count_and_the_conclusion(reject: list[bool] | None, expected: str) -> None:
    p = Panel({"a": model(diffs=[4.0, 0.1, 0.0])})
    if reject is not None:
        p.files["results/models/a/sink_excluded/layerwise.json"]["poolings"]["first"]["permutation_holm_reject"] = reject
    assert plain_text(fd.specification_count_phrase(p)).startswith(expected)
    text = plain_text(fd.conclusion_phrase(p))
    assert "matched by a model-free lexical baseline" in text and "single category for A" in text
    assert expected in text
    beaten = Panel({"a": model(diffs=[4.0, 0.1, 0.0], without=0.5)})
    beaten.files["results/models/a/robustness.json"]["lexical_baseline"]["final_r"]["mean"] = 0.2
    text = plain_text(fd.conclusion_phrase(beaten))
    assert "exceeds what the statements' words alone give" in text and "single category" not in text


def anisotropy(value: float, layer: int, sx: list[float] | None = None) -> dict[str, Any]:
    ratios = [0.1] * 4
    ratios[layer] = value
    sx_ratios = sx if sx is not None else ratios
    return {"l_star_value": value, "l_star": layer, "lambda1_ratio": ratios,
            "variants": {"sink_excluded": {"l_star": max(range(4), key=lambda i: sx_ratios[i]), "lambda1_ratio": sx_ratios}}}


def test_the_anisotropy_phrase_says_one_direction_only_where_it_carries_most_variance() -> None:
    p = Panel({"a": {"anisotropy": anisotropy(0.99, 2, sx=[0.1, 0.7, 0.2, 0.1])}, "b": {"anisotropy": anisotropy(0.95, 1)}})
    text = plain_text(fd.anisotropy_phrase(p))
    assert text.startswith("0.99 at layer 2 for A (0.70 at layer 1 with position 0 of every prompt excluded) and "
                           "0.95 at layer 1 for B;")
    assert "a single direction carries most of the variance" in text
    low = Panel({"a": {"anisotropy": anisotropy(0.3, 2)}})
    assert "does not carry most of the variance everywhere" in plain_text(fd.anisotropy_phrase(low))


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
    text = ph.panel_phrase(p)
    assert "are 4-bit GGUF quantizations" in text and "dequantized to 32-bit floats, not the original weights" in text
    assert "Small-Instruct is an instruction-tuned model" in text and "without its chat template" in text
    specs["s"] = SimpleNamespace(**{**vars(specs["s"]), "display": "Small", "gguf_file": "small.Q8_0.gguf"})
    text = ph.panel_phrase(p)
    assert "quantized GGUF files" in text and "chat template" not in text


def test_the_position0_phrase_follows_the_bos_and_the_policies() -> None:
    p = Panel({"a": model(diffs=[1.0, 0.0, 0.0]), "b": model(diffs=[1.0, 0.0, 0.0])})
    p.files["results/models/b/layerwise.json"]["extraction"] = {"bos_added": True}
    p.files["results/models/b/sink_excluded/layerwise.json"] = p.files["results/models/b/layerwise.json"]
    text = plain_text(ph.position0_phrase(p))
    assert text == ("A's tokenizer adds no BOS, so its position 0 is the statement's first word; B's tokenizer adds a "
                    "BOS at position 0, which neither policy pools, so its two policies give identical numbers.")
    p.files["results/models/b/sink_excluded/layerwise.json"] = layerwise([0.1, 0.2])
    assert "yet its two policies give different numbers" in plain_text(ph.position0_phrase(p))
