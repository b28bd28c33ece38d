"""The pooling policy's one rule (:mod:`uaprobe.extraction.policy`) against a hand-written table, the same on numpy
arrays and torch tensors, and the three places that pool by it agreeing with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uaprobe.analysis.pairs.incremental import pooled_positions
from uaprobe.analysis.pairs.pairmodels import pooled_token_mask
from uaprobe.extraction.policy import DROPS, check_drop, pooled_tokens, takes_position_zero
from uaprobe.extraction.pooling import content_positions

# one statement: BOS, three words, EOS
SPECIAL = [True, False, False, False, True]
WANT = {"special": [False, True, True, True, False],
        "first": [False, True, True, True, True],
        "sink_excluded": [False, True, True, True, False]}
# a statement without BOS: position 0 is a word
SPECIAL_NO_BOS = [False, False, False]
WANT_NO_BOS = {"special": [True, True, True], "first": [False, True, True], "sink_excluded": [False, True, True]}


@pytest.mark.parametrize("drop", DROPS)
def test_the_rule_is_the_table_on_numpy_and_torch(drop: str) -> None:
    for special, want in ((SPECIAL, WANT[drop]), (SPECIAL_NO_BOS, WANT_NO_BOS[drop])):
        position = np.arange(len(special))
        got = pooled_tokens(np.array(special), position, drop)
        assert got.tolist() == want
        assert pooled_tokens(torch.tensor(special), torch.arange(len(special)), drop).tolist() == want


def test_an_unknown_policy_is_refused_with_the_policies_named() -> None:
    for call in (lambda: check_drop("bos"), lambda: pooled_tokens(np.array([True]), np.array([0]), "bos"),
                 lambda: takes_position_zero("bos")):
        with pytest.raises(ValueError, match="unknown pooling policy 'bos'; expected 'special', 'first' or 'sink"):
            call()
    assert [takes_position_zero(d) for d in DROPS] == [False, True, False]


@pytest.mark.parametrize("drop", DROPS)
def test_the_batched_pooling_and_the_flat_token_tables_follow_the_rule(drop: str) -> None:
    statements = [SPECIAL, SPECIAL_NO_BOS]
    wants = [WANT[drop], WANT_NO_BOS[drop]]
    width = max(map(len, statements))
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in statements])
    special = torch.tensor([s + [False] * (width - len(s)) for s in statements])
    where = content_positions(attention, special, drop)
    for row, want in enumerate(wants):
        assert where.mean_mask[row, :len(want)].tolist() == want and not where.mean_mask[row, len(want):].any()
        pooled = [i for i, k in enumerate(want) if k]
        first, last = (0, len(want) - 1) if takes_position_zero(drop) else (pooled[0], pooled[-1])
        assert (int(where.first[row]), int(where.last[row])) == (first, last)
    offsets = np.cumsum([0] + [len(s) for s in statements])
    flat = pooled_token_mask(offsets, np.concatenate(statements), drop=drop)
    assert flat.tolist() == sum(wants, [])
    ends = pooled_positions(offsets, flat, drop=drop)
    assert ends["first"].tolist() == [int(where.first[r]) + offsets[r] for r in range(2)]
    assert ends["last"].tolist() == [int(where.last[r]) + offsets[r] for r in range(2)]
