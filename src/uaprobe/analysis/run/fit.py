"""Whether the analysis parameters fit the dataset: one check, run by the extract stage before any model
loads and again by the analyze stage on the extraction file, listing every problem at once, each with its
key, why, and a value that fits.

The parameters that depend on the dataset (and on nothing the model decides):

- ``analysis.bins.k`` and ``analysis.bins.ci_k``: a bin needs :data:`~uaprobe.analysis.category.bins.MIN_BIN_PAIRS`
  pairs, so at most ``n_pairs // 2`` bins;
- ``analysis.primary.left_out``: a category of the dataset;
- ``analysis.abtt_k``: below the rank of the centred states, ``min(N - 1, D)`` with N the statements; the
  hidden size D is the model's (checked by :mod:`uaprobe.analysis.run.limits` on the extraction file), N - 1 is
  the dataset's.

Any number of categories from three (the dataset's own rule) is analysed: the category-level permutation
tests are exact up to :data:`~uaprobe.analysis.category.curve_stats.MAX_EXACT_ORDERS` orders and Monte Carlo beyond.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from uaprobe.analysis.category.bins import auto_bins, bin_problems
from uaprobe.config import AnalysisParams
from uaprobe.errors import ConfigError

log = logging.getLogger(__name__)


def resolve(params: AnalysisParams, *, n_pairs: int) -> tuple[AnalysisParams, list[str]]:
    """``params`` with every ``auto`` value chosen for a dataset of ``n_pairs`` pairs (``analysis.bins.k`` and
    ``ci_k``: :func:`~uaprobe.analysis.category.bins.auto_bins`), and a sentence per choice."""
    return auto_bins(params, n_pairs=n_pairs)


def problems(params: AnalysisParams, *, categories: Sequence[str], n_pairs: int) -> list[str]:
    """Every parameter of ``params`` (its ``auto`` values chosen) that the dataset (its categories in order, its
    pair count) cannot take, as sentences naming the key, the reason and a value that fits."""
    params, _ = resolve(params, n_pairs=n_pairs)
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


def check(params: AnalysisParams, *, categories: Sequence[str], n_pairs: int, source: str) -> AnalysisParams:
    """The parameters for the dataset of ``source``, their ``auto`` values chosen (each choice logged); refused,
    with one error listing every problem and its fix, where the dataset cannot take them."""
    resolved, notes = resolve(params, n_pairs=n_pairs)
    for note in notes:
        log.info("%s: %s", source, note)
    found = problems(resolved, categories=categories, n_pairs=n_pairs)
    if found:
        raise ConfigError(f"params.yaml does not fit {source} ({len(categories)} categories, {n_pairs} pairs): "
                          f"{len(found)} problem{'s' if len(found) > 1 else ''}:\n  - " + "\n  - ".join(found))
    return resolved
