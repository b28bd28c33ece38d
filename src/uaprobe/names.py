"""The names every layer shares: poolings, position-0 policies, representations, Option B's metrics
the panel's results file, and the models' short names. Defined once here (nothing but the standard library), so the extraction, the analyses, the
schema and the manuscript spell them the same."""

from __future__ import annotations

from typing import Literal, get_args

POOLINGS: tuple[str, ...] = ("mean", "last", "first")
"""How a statement's token states become one vector per layer, in the order every output lists them."""

POLICIES: tuple[str, ...] = ("default", "sink_excluded")
"""Position-0 policies of every extraction file: ``default`` is ``pooled/*`` (the run's ``pooling.drop``),
``sink_excluded`` is ``pooled_sink_excluded/*`` (special tokens and position 0 excluded)."""

Representation = Literal["raw", "zscore", "abtt"]
"""A transform of the pooled states before an analysis (``analysis.representation``)."""

REPRESENTATIONS: tuple[Representation, ...] = get_args(Representation)
"""Every :data:`Representation`, in the order every output lists them."""

OPTION_B_METRICS: tuple[str, ...] = ("centroid_asymmetry", "cross_centroid", "within_pair_sim",
                                     "knn_density_asymmetry", "margin_asymmetry")
"""The original study's five per-pair metrics, in its order."""
OPTION_B_METRIC_WORDS: dict[str, str] = {
    "centroid_asymmetry": "centroid asymmetry", "cross_centroid": "cross-centroid score",
    "within_pair_sim": "within-pair similarity", "knn_density_asymmetry": "kNN density asymmetry",
    "margin_asymmetry": "margin asymmetry"}
"""Each per-pair metric's one name in the paper's text, tables and figures."""

PANEL_RESULTS = "results/panel.json"
"""The compare stage's results file."""


def short_names(names: list[str]) -> dict[str, str]:
    """Each full name's short name: its first k hyphen-separated parts, the smallest k at which no other
    name of ``names`` starts with the same parts (a name no shorter form identifies keeps itself)."""
    parts = {n: n.split("-") for n in names}
    short = {}
    for n, p in parts.items():
        for k in range(1, len(p) + 1):
            if not any(o != n and parts[o][:k] == p[:k] for o in names):
                short[n] = "-".join(p[:k])
                break
        else:
            short[n] = n
    return short
