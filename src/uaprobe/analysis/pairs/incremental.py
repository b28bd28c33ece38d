"""The pair-level models' multiplicity and their test over the lexical baseline.

- **One family** (:func:`family_results`): every pair-level test at the pre-declared layer
  (``analysis.primary.depth``) -- metrics x poolings x position-0 policies -- Holm-adjusted
  together, with the pooling the summary reports (``analysis.primary.pooling``, declared before
  any result) flagged and the smallest p the permutation test can give (``1 / (1 + B)``) recorded.
- **Incremental models** (:func:`incremental_results`): each model metric against the preference
  with the lexical metric of the same pair and pooling among the covariates, beside the length
  covariates: ``Z = [1, n_content(A), n_content(B), m_lex,1, ..., m_lex,S]``, one column per
  lexical seed. The lexical states of a pooling are the random token vectors
  (:func:`uaprobe.analysis.inference.controls.lexical_embeddings`'s) pooled the same way: the mean of the
  tokens the policy pools, its first token, its last token. A metric that adds nothing to what
  the words alone give has a partial r near zero. Freedman-Lane within categories, the same draws
  as the length-only models (:class:`uaprobe.analysis.pairs.freedman_lane.PermutedProjections`).
- **Collinearity checks** of every test of a family (:func:`vif`): the variance inflation factor of
  the model metric on the family's covariates, and for the incremental families the partial r of the
  same pairs without the lexical covariates (``base_partial_r``). A lexical covariate that nearly
  spans the metric (a large VIF) can flip the sign of the partial r (suppression): a sign that the
  base covariates alone do not give is the lexical covariate's, not the metric's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from uaprobe.analysis.inference import controls, multiplicity, stats
from uaprobe.analysis.pairs import option_b
from uaprobe.schema import missing
from uaprobe.analysis.pairs.freedman_lane import PartialTest, PermutedProjections
from uaprobe.extraction.policy import takes_position_zero
from uaprobe.schema.pairmodels import FamilyTests, PairFamily, PairModelMetric

COVARIATES = ("intercept, one indicator per category, n_content(A), n_content(B), and the same metric of the pair computed from the lexical "
              "states of the same pooling, one column per lexical seed")
LEXICAL_POOLING = ("each distinct token id gets one seeded N(0, I) vector (the lexical baseline's); `mean`: the mean "
                   "of the vectors of the tokens the policy pools; `first` and `last`: the vector of the token at "
                   "the position that pooling takes under the policy")


def pooled_positions(token_offsets: np.ndarray, keep: np.ndarray, *, drop: str) -> dict[str, np.ndarray]:
    """(N,) global token index of each statement's ``first`` and ``last`` pooled token (-1: none).

    ``drop = "first"`` (the seeds' convention): position 0 and the last token, whatever ``keep``;
    otherwise the first and last token of ``keep`` (the policy's content tokens), as the
    extraction's pooling takes them."""
    offsets = np.asarray(token_offsets, dtype=np.int64)
    n = offsets.size - 1
    if takes_position_zero(drop):
        ends = offsets[1:] - 1
        return {"first": np.where(ends >= offsets[:-1], offsets[:-1], -1), "last": np.where(ends >= offsets[:-1],
                                                                                            ends, -1)}
    owner = np.repeat(np.arange(n), np.diff(offsets))
    idx = np.flatnonzero(np.asarray(keep, dtype=bool))
    first, last = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    last[owner[idx]] = idx  # ascending: the last write of each statement is its last kept token
    first[owner[idx[::-1]]] = idx[::-1]
    return {"first": first, "last": last}


def lexical_states(token_ids: np.ndarray, token_offsets: np.ndarray, keep: np.ndarray, *, drop: str, dim: int,
                   seed: int) -> dict[str, np.ndarray]:
    """pooling -> (N, dim): one seed's lexical states of every statement under a pooling policy.

    ``mean`` is :func:`uaprobe.analysis.inference.controls.lexical_embeddings`; ``first`` and ``last`` are
    the same token vectors (drawn in ascending order of the ids from ``default_rng(seed)``) at
    :func:`pooled_positions` (the zero vector where a statement has none)."""
    ids = np.asarray(token_ids, dtype=np.int64)
    vocab, inverse = np.unique(ids, return_inverse=True)
    table = np.random.default_rng(seed).standard_normal((vocab.size, dim))
    out = {"mean": controls.lexical_embeddings(ids, token_offsets, keep, dim=dim, seed=seed)}
    for pooling, at in pooled_positions(token_offsets, keep, drop=drop).items():
        out[pooling] = np.where((at >= 0)[:, None], table[inverse[np.maximum(at, 0)]], 0.0)
    return out


def lexical_metrics(states: Sequence[Mapping[str, np.ndarray]], *, row_a: np.ndarray, row_b: np.ndarray,
                    k: int) -> dict[str, dict[str, np.ndarray]]:
    """pooling -> metric -> (S, n): the pair metrics of each seed's lexical states (``states[s]``:
    :func:`lexical_states`), the seeds as the views of :func:`uaprobe.analysis.pairs.option_b.pair_metrics`."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for pooling in states[0]:
        x = np.stack([s[pooling] for s in states], axis=1)  # (N, S, dim)
        out[pooling] = option_b.pair_metrics(x[row_a], x[row_b], k=k)
    return out


def incremental_tests(values: Mapping[str, Mapping[str, np.ndarray]], lexical: Mapping[str, Mapping[str, np.ndarray]],
                      *, metrics: Sequence[str], preference: np.ndarray, base: np.ndarray, orders: np.ndarray,
                      layer: int) -> tuple[dict[str, dict[str, PartialTest]], dict[tuple[str, str], tuple[int, np.ndarray]]]:
    """pooling -> metric -> the partial r with ``preference`` (n,) and permutation p of the model metric's values
    (V, n) given the covariates ``base`` (n, k) and the lexical metric's seeds (S, n), under the within-category
    draws ``orders`` (B, n) (:class:`~uaprobe.analysis.pairs.freedman_lane.PermutedProjections`). Beside it, (pooling, metric) -> the rank of
    the covariates beside the intercept and the (B,) permuted partial r at ``layer`` (the max-T's input)."""
    tests: dict[str, dict[str, PartialTest]] = {}
    at_layer: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
    for p in values:
        tests[p] = {}
        for m in metrics:
            proj = PermutedProjections(preference, np.column_stack([base, np.asarray(lexical[p][m]).T]), orders)
            tests[p][m] = proj.test(values[p][m])
            at_layer[p, m] = (int(proj.q.shape[1] - 1), proj.permuted_r(np.asarray(values[p][m])[layer][None, :])[0])
    return tests, at_layer


def vif(x: np.ndarray, covariates: np.ndarray) -> float:
    """The variance inflation factor ``1 / (1 - R^2)`` of ``x`` (n,) regressed on ``[1, covariates]``
    (n, k): how far the covariates span the metric (inf where they span it exactly, NaN for a
    constant ``x``)."""
    x = np.asarray(x, dtype=float)
    total = float(((x - x.mean()) ** 2).sum())
    left = float((controls.residualize(x, covariates) ** 2).sum())
    if total <= 0.0:
        return float("nan")
    return float("inf") if left <= 1e-12 * total else total / left


class FamilyTest(NamedTuple):
    """One test of a family at the family's layer (NaN where undefined)."""

    policy: str
    pooling: str
    metric: str
    r: float
    """the partial r"""
    p: float
    """its permutation p"""
    vif: float
    """:func:`vif` of the metric on the test's covariates"""
    base_partial_r: float
    """the partial r of the same pairs without the lexical covariates (NaN in a family without them)"""
    pearson_r: float
    """the metric's r with the preference over the same pairs, without covariates"""
    n: int = 0
    """the pairs tested"""
    n_covariates: int = 0
    """the rank of the covariates beside the intercept (the partial r's interval loses one degree of freedom each)"""
    permuted: np.ndarray | None = None
    """(B,) the partial r under the family's permutations, the same draws for every test (None: not kept)"""


@dataclass(frozen=True)
class PolicyMetrics:
    """One policy's inputs of the incremental models."""

    values: Mapping[str, Mapping[str, np.ndarray]]
    """pooling -> metric -> (V, n) the model metric of every pair per layer."""
    lexical: Mapping[str, Mapping[str, np.ndarray]]
    """pooling -> metric -> (S, n) the lexical metric per seed (:func:`lexical_metrics`)."""
    base: np.ndarray
    """(n, k) the base covariates: the category indicators, the content tokens of A and of B."""


def tests_over(inputs: Mapping[str, PolicyMetrics], *, keep: np.ndarray, names: Sequence[str], layer: int,
               preference: np.ndarray, orders: np.ndarray) -> list[FamilyTest]:
    """The incremental test at ``layer`` over the pairs ``keep`` (n,) bool, with its collinearity
    checks, under the within-category draws ``orders`` (B, kept pairs) of those pairs; ``preference`` (n,)
    is that of every pair."""
    tests: list[FamilyTest] = []
    y = np.asarray(preference, dtype=float)[keep]
    for key, pm in inputs.items():
        base = pm.base[keep]
        for p in pm.values:
            for m in names:
                x = np.asarray(pm.values[p][m])[layer, keep]
                extra = np.asarray(pm.lexical[p][m])[:, keep].T
                proj = PermutedProjections(y, np.column_stack([base, extra]), orders)
                t = proj.test(x[None, :])
                tests.append(FamilyTest(key, p, m, float(t.r[0]), float(t.p[0]), vif(x, np.column_stack([base, extra])),
                                        controls.partial_r(x, y, base).r, float(stats.pearson(x, y).r),
                                        int(keep.sum()), int(proj.q.shape[1] - 1), proj.permuted_r(x[None, :])[0]))
    return tests


def family_results(tests: Sequence[FamilyTest], *, layer: int, reported_pooling: str,
                   permutations: int, alpha: float, same: Sequence[bytes] | None = None,
                   degenerate_vif: float = float("inf"), level: float = 0.95) -> PairFamily:
    """One family of pair-level tests (:class:`FamilyTest`) at ``layer``, corrected by Holm and by the max-T
    step-down over the tests' joint permutations (:func:`uaprobe.analysis.inference.multiplicity.maxt_stepdown`; every
    test's ``permuted`` must be given for it). ``p_floor = 1 / (1 + B)``.

    A test whose VIF exceeds ``degenerate_vif`` is degenerate (its covariates all but span the metric): reported,
    and kept out of both corrections and of the family's size; so is an undefined test. ``same[i]``: the bytes of
    test i's metric values; a test whose bytes and p equal an earlier test's and whose r is within 1e-12 of it
    (covariates that differ by a constant, as the content-token counts of two policies that pool the same tokens
    but for position 0) is that test: merged into it, with its adjusted p, and counted once. Each partial r has its
    Fisher-z interval at ``level`` (:func:`uaprobe.analysis.inference.multiplicity.partial_r_interval`)."""
    r = np.array([t.r for t in tests], dtype=float)
    p = np.array([t.p for t in tests], dtype=float)
    vifs = np.array([t.vif for t in tests], dtype=float)
    twin = np.arange(len(tests))
    if same is not None:
        for i in range(len(tests)):
            twin[i] = next((j for j in range(i) if twin[j] == j and same[j] == same[i] and _equal(r[j], r[i], 1e-12)
                            and _equal(p[j], p[i], 0.0)), i)
    counted = twin == np.arange(len(tests))
    degenerate = vifs > degenerate_vif
    in_family = counted & ~degenerate & np.isfinite(p)
    holm_p = np.full(p.shape, np.nan)
    holm_p[in_family] = stats.holm(p[in_family])
    holm_p = holm_p[twin]
    maxt_p = np.full(p.shape, np.nan)
    have_perm = all(t.permuted is not None for t in tests)
    if have_perm and in_family.any():
        joint = np.column_stack([np.asarray(t.permuted, dtype=float) for t, k in zip(tests, in_family) if k])
        maxt_p[in_family] = multiplicity.maxt_stepdown(r[in_family], joint)
    maxt_p = maxt_p[twin]
    low, high = multiplicity.partial_r_interval(r, n=np.array([t.n for t in tests]),
                                                n_covariates=np.array([t.n_covariates for t in tests]), level=level)
    ok = np.isfinite(holm_p)
    reject = ok & (holm_p <= alpha)
    maxt_ok = np.isfinite(maxt_p)
    maxt_reject = maxt_ok & (maxt_p <= alpha)
    floor = stats.p_floor(permutations, mode="random")
    n_tests = int(in_family.sum())
    why = "the test is undefined (a constant metric or residual)"
    out_why = np.where(degenerate, f"degenerate: its VIF exceeds {degenerate_vif:g}, so it is kept out of the family",
                       why)
    maxt_why = out_why if have_perm else "the family's permuted r were not kept"
    ci_why = "the partial r is undefined, or too few pairs for its covariates"
    return PairFamily(
        layer=int(layer), reported_pooling=reported_pooling, n_tests=n_tests,
        n_merged=int((~counted).sum()), n_degenerate=int((counted & degenerate).sum()),
        degenerate_vif=float(degenerate_vif),
        n_reject=int((reject & counted).sum()), n_maxt_reject=int((maxt_reject & counted).sum()),
        alpha=float(alpha), ci_level=float(level), p_floor=floor, holm_floor=min(1.0, n_tests * floor),
        tests=FamilyTests(
            policy=[t.policy for t in tests], pooling=[t.pooling for t in tests], metric=[t.metric for t in tests],
            n=[int(t.n) for t in tests], n_covariates=[int(t.n_covariates) for t in tests],
            partial_r=missing.series(r, why),
            partial_r_low=missing.series(low, ci_why),
            partial_r_high=missing.series(high, ci_why),
            permutation_p=missing.series(p, why),
            holm_p=missing.series(holm_p, out_why),
            holm_reject=missing.flags(reject, defined=ok, reasons=out_why),
            maxt_p=missing.series(maxt_p, maxt_why),
            maxt_reject=missing.flags(maxt_reject, defined=maxt_ok, reasons=maxt_why),
            at_floor=missing.flags(np.abs(p - floor) <= 1e-15, defined=np.isfinite(p), reasons=why),
            degenerate=degenerate.tolist(),
            reported=[t.pooling == reported_pooling for t in tests], same_as=twin.tolist(),
            vif=missing.series(vifs, "the metric is constant over the pairs"),
            base_partial_r=missing.series(np.array([t.base_partial_r for t in tests], dtype=float),
                                          "no lexical covariate in this family, or the partial r is undefined"),
            pearson_r=missing.series(np.array([t.pearson_r for t in tests], dtype=float),
                                     "the metric or the preference is constant over the pairs")))


def _equal(a: float, b: float, tol: float) -> bool:
    return bool((np.isnan(a) and np.isnan(b)) or abs(a - b) <= tol)


def family_of(policies: Mapping[str, Mapping[str, Mapping[str, PairModelMetric]]], *, layer: int,
              checks: Mapping[tuple[str, str, str], tuple[Any, ...]]) -> list[FamilyTest]:
    """The tests at ``layer`` of the per-layer entries ``policies[policy][pooling][metric]``
    (their ``partial_r`` and ``permutation_p``; a missing value -> NaN), with ``checks[policy, pooling, metric] = (vif,
    base_partial_r, pearson_r, n, n_covariates, permuted)`` (the fields of :class:`FamilyTest` after the p)."""
    f = missing.number
    return [FamilyTest(key, p, m, f(e.partial_r[layer]), f(e.permutation_p[layer]), *checks[key, p, m])
            for key, poolings in policies.items() for p, ms in poolings.items() for m, e in ms.items()]


__all__: Sequence[str] = ("COVARIATES", "LEXICAL_POOLING", "FamilyTest", "PolicyMetrics", "family_of",
                          "family_results", "incremental_tests", "lexical_metrics", "lexical_states",
                          "pooled_positions", "tests_over", "vif")
