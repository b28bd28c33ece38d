"""From the statements of an extraction file to the per-pair view every analysis works on.

A *view* is one set of pooled embeddings: layers ``0..L`` of a pooling, then the pre-final-norm
block as view ``L + 1``. :func:`pooling_cosines` gathers the A and the B statements of one pooling
(pairs in pair order, every view) into :class:`~uaprobe.analysis.geometry.uniformity.Cosines`, the only
embedding-sized object the analyses work on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from uaprobe.analysis.geometry.uniformity import Cosines, CosineForm
from uaprobe.errors import UAProbeError

PreferenceKind = Literal["mean", "sum"]


@dataclass(frozen=True)
class PairTable:
    """The statements grouped into pairs, in pair order (dataset order)."""

    categories: tuple[str, ...]
    """Category names, in order of first appearance."""
    pair_ids: np.ndarray
    """(n_pairs,) int: the ``pair`` index of each pair."""
    category_of_pair: np.ndarray
    """(n_pairs,) int: index into ``categories``."""
    row_a: np.ndarray
    """(n_pairs,) int: statement row of side A."""
    row_b: np.ndarray
    """(n_pairs,) int: statement row of side B."""
    nll_mean: np.ndarray
    """(n_pairs, 2) float: per-token mean NLL of (A, B)."""
    nll_sum: np.ndarray
    """(n_pairs, 2) float: summed NLL of (A, B)."""
    n_tokens: np.ndarray
    """(n_pairs, 2) int: scored tokens of (A, B)."""

    @property
    def n_pairs(self) -> int:
        return int(self.pair_ids.size)

    @property
    def pairs_per_category(self) -> np.ndarray:
        """(n_categories,) int."""
        return np.bincount(self.category_of_pair, minlength=len(self.categories))

    def preference(self, kind: PreferenceKind) -> np.ndarray:
        """(n_pairs,) NLL(B) - NLL(A) with the per-token mean or the summed NLL."""
        nll = self.nll_mean if kind == "mean" else self.nll_sum
        return nll[:, 1] - nll[:, 0]


def pair_table(*, category: np.ndarray, pair: np.ndarray, side: np.ndarray, nll_mean: np.ndarray,
               nll_sum: np.ndarray, n_tokens: np.ndarray, source: str = "extraction file") -> PairTable:
    """Group statement rows (N,) into pairs; every pair needs one A (side 0) and one B (side 1)
    of the same category. ``source`` names the file in errors."""
    category = np.asarray(category)
    pair = np.asarray(pair, dtype=np.int64)
    side = np.asarray(side, dtype=np.int64)
    ids = np.unique(pair)
    n_pairs = ids.size
    row_a = np.full(n_pairs, -1)
    row_b = np.full(n_pairs, -1)
    slot = np.searchsorted(ids, pair)
    for s, rows in ((0, row_a), (1, row_b)):
        sel = np.flatnonzero(side == s)
        counts = np.bincount(slot[sel], minlength=n_pairs)
        if (counts != 1).any():
            bad = int(ids[np.flatnonzero(counts != 1)[0]])
            raise UAProbeError(f"{source}: statements/pair {bad} has {counts[np.flatnonzero(counts != 1)[0]]} "
                               f"statement(s) with side {s}; every pair needs exactly one A and one B")
        rows[slot[sel]] = sel
    if (category[row_a] != category[row_b]).any():
        bad = int(ids[np.flatnonzero(category[row_a] != category[row_b])[0]])
        raise UAProbeError(f"{source}: statements/pair {bad}: A and B have different categories")
    names: list[str] = []
    for c in category[np.sort(np.concatenate([row_a, row_b]))]:
        if str(c) not in names:
            names.append(str(c))
    code = {name: i for i, name in enumerate(names)}
    cat_of_pair = np.array([code[str(c)] for c in category[row_a]], dtype=np.int64)
    nll_mean = np.asarray(nll_mean, dtype=float)
    nll_sum = np.asarray(nll_sum, dtype=float)
    n_tok = np.asarray(n_tokens, dtype=np.int64)
    return PairTable(
        categories=tuple(names), pair_ids=ids, category_of_pair=cat_of_pair, row_a=row_a, row_b=row_b,
        nll_mean=np.stack([nll_mean[row_a], nll_mean[row_b]], axis=1),
        nll_sum=np.stack([nll_sum[row_a], nll_sum[row_b]], axis=1),
        n_tokens=np.stack([n_tok[row_a], n_tok[row_b]], axis=1),
    )


def pooling_cosines(*, pooled: np.ndarray, prenorm: np.ndarray, table: PairTable,
                    form: CosineForm | None = None) -> Cosines:
    """The A and B statements of one pooling in every view.

    Args:
        pooled: (N, L+1, D) pooled states of one pooling.
        prenorm: (N, D) the pre-final-norm block of the same pooling.
        table: the pairs.
        form: force the Gram or the unit-vector form (default: the smaller one).

    Returns:
        :class:`Cosines` over (n_pairs, L+2, D): views = layers 0..L, then the prenorm block.
    """
    def side(rows: np.ndarray) -> np.ndarray:
        return np.concatenate([pooled[rows], prenorm[rows][:, None, :]], axis=1)

    return Cosines(side(table.row_a), side(table.row_b), form=form)
