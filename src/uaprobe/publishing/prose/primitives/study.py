"""The study's own words: the dataset and the panel as the outputs describe them, and the counts a sentence
about the panel depends on (one model: no correction or claim across models; "both" only for two).

The Methods call the dataset the original study's only when ``data/dataset.json`` is the file
``data/README.md`` documents by its sha256 (its "as shipped" block) and every model read it
(``dataset_sha256`` of the extraction); another dataset is this study's own, described by its categories'
counts and names. The panel is the default one only when ``params.yaml`` lists the default models.
"""

from __future__ import annotations

import re

from uaprobe.publishing.prose.primitives.markdown import NUMBER_WORDS, category, join_words, prose
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.schema.categories import Layerwise
from uaprobe.schema.specs import SpecificationCurve

DATA_README = "data/README.md"
"""Documents the dataset; holds the sha256 of the dataset it describes."""

DATASET = "data/dataset.json"

DEFAULT_PANEL = ("smollm2-135m", "gemma3-270m")
"""The embedded default panel (both GGUF models inside Python packages), which the Methods cite."""

_SHIPPED_SHA = re.compile(r"^([0-9a-f]{64})\s+dataset\.json\s*$", re.M)


def number_word(n: int) -> str:
    return NUMBER_WORDS.get(n, str(n))


def the_models(out: Outputs) -> str:
    """``the model``, ``both models``, ``the three models``."""
    n = len(out.models)
    return "the model" if n == 1 else "both models" if n == 2 else f"the {number_word(n)} models"


def models_possessive(out: Outputs) -> str:
    """``the model's`` or ``the models'``."""
    return "the model's" if len(out.models) == 1 else "the models'"


def documented_sha256(out: Outputs) -> str | None:
    """The sha256 of the dataset ``data/README.md`` documents, or None (no README or no such line)."""
    path = out.root / DATA_README
    if not path.is_file():
        return None
    found = _SHIPPED_SHA.search(path.read_text(encoding="utf-8"))
    return found.group(1) if found else None


def is_documented_dataset(out: Outputs) -> bool:
    """Whether every model's extraction read the dataset ``data/README.md`` documents."""
    documented = documented_sha256(out)
    return documented is not None and all(
        out.record(m, Layerwise).extraction.dataset_sha256 == documented
        for m in out.models)


def is_default_panel(out: Outputs) -> bool:
    return tuple(out.models) == DEFAULT_PANEL


@prose
def dataset_sentence(out: Outputs) -> str:
    """Methods: whose dataset it is, its pairs and categories (counts and names)."""
    m0 = out.models[0]
    read = out.reader(m0, Layerwise)
    counts = (f"{read(lambda r: r.n_pairs, 'sum')} statement pairs in {read(lambda r: r.categories, 'count')} "
              f"categories ({read(lambda r: r.categories, 'names')})")
    if is_documented_dataset(out):
        return f"The dataset is the original study's: {counts}."
    return (f"The dataset is this study's own (`{DATASET}`, documented in `{DATA_README}`; not the original "
            f"study's): {counts}.")


@prose
def panel_sentence(out: Outputs) -> str:
    """Methods: the panel, with the default panel's citations where it is the default."""
    if is_default_panel(out):
        return ("The default panel uses SmolLM2 [@allal2025smollm2] and Gemma 3 [@gemma2025gemma3], small models "
                "that ship as GGUF files (the quantized-weights format of llama.cpp) inside Python packages and run on a CPU (@tbl-panel); the original study's "
                "Pythia panel [@biderman2023pythia] is one change of `params.yaml` away.")
    n = len(out.models)
    names = join_words([out.full_name(m) for m in out.models])
    return (f"The panel of `params.yaml` has {number_word(n)} {'model' if n == 1 else 'models'}, {names} "
            "(@tbl-panel); the original study's Pythia panel [@biderman2023pythia] is one change of "
            "`params.yaml` away.")


ORIGINAL_LEFT_OUT = "ground_truth_numeric"
"""The original dataset's category the primary tests leave out, for the reason :func:`left_out_reason` gives."""


@prose
def left_out_reason(out: Outputs, m: str) -> str:
    """Why the second joint test leaves out its category: the original dataset's reason, else the declaration."""
    raw = str(out.record(m, SpecificationCurve).joint["without_category"].left_out)
    words = category(raw)
    name = f"{words[:1].upper()}{words[1:]}"
    if raw == ORIGINAL_LEFT_OUT and is_documented_dataset(out):
        return (f"{name} was declared as the category to leave out because its two "
                "framings differ most in relative length and in kind of token, a name against a number, which the "
                "dataset's text shows before any model output; it was declared with the primary test, after the "
                "curves over every layer had been seen (a declaration, like the universe, not a preregistration), "
                "and the pair-level set without it follows that declaration.")
    return (f"{name} is the category `params.yaml` declares to leave out "
            "(`analysis.primary.left_out`).")


def across_models_clause(out: Outputs) -> str:
    """``, corrected across the models,`` where the panel has more than one model; empty for one."""
    return ", corrected across the models," if len(out.models) > 1 else ""


@prose
def layer_test_phrase(out: Outputs) -> str:
    """Methods: the category-level permutation test of one layer, exact over every order of the category
    preferences or, beyond ``analysis.permutations`` orders, over that many random ones."""
    m0 = out.models[0]
    count = out.value(m0, Layerwise, lambda r: r.permutation_count, "thousands")
    if out.record(m0, Layerwise).permutation_mode == "exact":
        return (f"At that size only an exact test is valid: the permutation test over all {count} orders of the "
                "category preferences")
    return (f"At that size only a permutation test is valid; the categories' orders outnumber "
            f"`analysis.permutations`, so it draws {count} random orders of the category preferences (seeded), with "
            "p = (b + 1)/(m + 1) for b of its m orders at least as extreme")


def curve_test_words(out: Outputs, m: str) -> str:
    """The specification curve's joint permutation p: exact over every relabelling, or Monte Carlo."""
    read = out.reader(m, SpecificationCurve)
    count = read(lambda r: r.joint["declared"].relabellings, "thousands")
    if out.record(m, SpecificationCurve).joint["declared"].mode == "exact":
        return (f"its exact joint permutation p applies each of the {count} relabellings of the category preferences "
                "to every specification at once, so its smallest value is one over that number")
    bound = read(lambda r: r.max_exact_orders, "thousands")
    return (f"the categories have more orders than the exact test's bound of {bound}, so its joint permutation p "
            f"applies {count} relabellings of the category preferences (the identity and random orders from a seeded "
            "generator) to every specification at once, as a Monte Carlo test: p = (b + 1)/(m + 1) for b of the m "
            "random relabellings at least as extreme, so its smallest value, its resolution, is one over that number")


@prose
def layer_test_word(out: Outputs) -> str:
    """``exact`` or ``Monte Carlo``: the category-level permutation test of one layer (``layerwise.json``)."""
    return "exact" if out.record(out.models[0], Layerwise).permutation_mode == "exact" else "Monte Carlo"


@prose
def curve_test_word(out: Outputs) -> str:
    """``exact`` or ``Monte Carlo``: the specification curve's per-specification and joint permutation tests."""
    return ("exact" if out.record(out.models[0], SpecificationCurve).joint["declared"].mode == "exact"
            else "Monte Carlo")
