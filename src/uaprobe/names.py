"""The names every layer shares: poolings, position-0 policies, representations, Option B's metrics
and the panel's results file. Defined once here (no imports), so the extraction, the analyses, the
schema and the manuscript spell them the same."""

from __future__ import annotations

POOLINGS: tuple[str, ...] = ("mean", "last", "first")
"""How a statement's token states become one vector per layer, in the order every output lists them."""

POLICIES: tuple[str, ...] = ("default", "sink_excluded")
"""Position-0 policies of every extraction file: ``default`` is ``pooled/*`` (the run's ``pooling.drop``),
``sink_excluded`` is ``pooled_sink_excluded/*`` (special tokens and position 0 excluded)."""

REPRESENTATIONS: tuple[str, ...] = ("raw", "zscore", "abtt")
"""The transforms of the pooled states before an analysis (``analysis.representation``)."""

OPTION_B_METRICS: tuple[str, ...] = ("centroid_asymmetry", "cross_centroid", "within_pair_sim",
                                     "knn_density_asymmetry", "margin_asymmetry")
"""The original study's five per-pair metrics, in its order."""

PANEL_RESULTS = "results/panel.json"
"""The compare stage's results file."""
