"""Whether the analysis parameters fit the dataset: one check, run by the extract stage before any model
loads and again by the analyze stage on the extraction file, listing every problem at once, each with its
key, why, and a value that fits.

The parameters that depend on the dataset (and on nothing the model decides):

- ``analysis.bins.k`` and ``analysis.bins.ci_k``: a bin needs :data:`~uaprobe.analysis.bins.MIN_BIN_PAIRS`
  pairs, so at most ``n_pairs // 2`` bins;
- ``analysis.primary.left_out``: a category of the dataset;
- ``analysis.abtt_k``: below the rank of the centred states, ``min(N - 1, D)`` with N the statements; the
  hidden size D is the model's (checked by :mod:`uaprobe.analysis.limits` on the extraction file), N - 1 is
  the dataset's.

Any number of categories from three (the dataset's own rule) is analysed: the category-level permutation
tests are exact up to :data:`~uaprobe.analysis.speccurve.MAX_EXACT_ORDERS` orders and Monte Carlo beyond.
"""

from __future__ import annotations

from collections.abc import Sequence

from uaprobe.analysis.bins import bin_problems
from uaprobe.config import AnalysisParams
from uaprobe.errors import ConfigError


def problems(params: AnalysisParams, *, categories: Sequence[str], n_pairs: int) -> list[str]:
    """Every parameter of ``params`` that the dataset (its categories in order, its pair count) cannot take, as
    sentences naming the key, the reason and a value that fits."""
    found = bin_problems(params, n_pairs=n_pairs)
    if params.primary.left_out not in categories:
        found.append(f"analysis.primary.left_out: {params.primary.left_out!r} is not a category of the dataset; set "
                     f"it to one of {', '.join(repr(c) for c in categories)}")
    statements = 2 * n_pairs
    if params.abtt_k >= statements - 1:
        found.append(f"analysis.abtt_k: {params.abtt_k} directions cannot be removed from the states of "
                     f"{statements} statements (rank at most {statements - 1}); set it below that, e.g. "
                     f"{max(1, min(5, statements - 2))}")
    return found


def check(params: AnalysisParams, *, categories: Sequence[str], n_pairs: int, source: str) -> None:
    """Refuse parameters the dataset of ``source`` cannot take: one error listing every problem with its fix."""
    found = problems(params, categories=categories, n_pairs=n_pairs)
    if found:
        raise ConfigError(f"params.yaml does not fit {source} ({len(categories)} categories, {n_pairs} pairs): "
                          f"{len(found)} problem{'s' if len(found) > 1 else ''}:\n  - " + "\n  - ".join(found))
