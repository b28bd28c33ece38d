"""Pair-level models of the Option B metrics: each metric against the preference over the pairs,
length partialled out, tested by permutation within categories.

For every metric of :data:`uaprobe.analysis.pairs.option_b.METRICS` (values from
:func:`uaprobe.analysis.pairs.option_b.pair_metrics`), pooling, layer and position-0 policy:

- **Partial r** of the metric ``x`` with the preference ``y = NLL(B) - NLL(A)`` given the category
  indicators and the length covariates ``Z = [1, 1{category = c} for every c, n_content(A),
  n_content(B)]`` (the content tokens behind each side's pooled state under that policy; the two
  counts span their difference): ``r = corr(R x, R y)`` with ``R`` the residual maker of ``Z``
  (:func:`uaprobe.analysis.inference.controls.partial_r`). With the category fixed effects the r measures the
  association within categories, the one the within-category permutation tests.
- **Freedman-Lane permutation p, within categories.** The metric's residuals ``e = R x`` are
  permuted within each category, ``x* = (I - R) x + P e``, and the partial r recomputed; ``p = (1 +
  #{|r*| >= |r|}) / (1 + B)`` over ``B = analysis.permutations`` draws of one generator
  (``rng_for(seed, "pair-models")``): the same draws for every metric, pooling, layer, policy and
  the lexical baseline. Permuting within categories keeps each category's pairs together, so a
  category-level offset in the metric cannot pass for a pair-level association.
- **Holm** across the layers of one metric, pooling and policy (:func:`uaprobe.analysis.inference.stats.holm`),
  at ``analysis.alpha``; the layers that survive and their count.
- **The lexical baseline** the same way: the metrics of each seed's model-free embeddings
  (:func:`uaprobe.analysis.inference.controls.lexical_embeddings` of the tokens pooled under the policy; the
  seeds of ``analysis.robustness.lexical_seeds``), one "layer" per seed (a family of one test:
  Holm leaves its p unchanged).

- **One family and the incremental models** (:mod:`uaprobe.analysis.pairs.incremental`): every test at
  the pre-declared layer (``analysis.primary.depth``) Holm-adjusted as one family (``family``);
  each metric again with the lexical metric of the same pair and pooling among the covariates
  (``incremental``), as one family over all pairs and one without the pairs of
  ``analysis.primary.left_out`` (``incremental/without_category``).

The permutation test itself is :mod:`uaprobe.analysis.pairs.freedman_lane`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import controls, stats
from uaprobe.analysis.pairs import incremental, option_b
from uaprobe.analysis.pairs.freedman_lane import PartialTest, PermutedProjections, within_category_orders
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.metrics import PairModelsMetrics
from uaprobe.schema.pairmodels import (Incremental, IncrementalPolicy, IncrementalWithout, LengthMatched,
                                       LexicalPairModelMetric, LexicalPairModels, Mixed, PairFamily, PairModelMetric,
                                       PairModels, PairModelsPolicy)
from uaprobe.config import AnalysisParams
from uaprobe.extraction.policy import pooled_tokens

if TYPE_CHECKING:
    from uaprobe.analysis.pairs.pair_table import PairTable
    from uaprobe.extraction.store import Embeddings

RNG_NAME = "pair-models"
"""Names the one generator of the within-category permutations (:func:`uaprobe.analysis.inference.stats.rng_for`)."""
RNG_NAME_WITHOUT = "pair-models-without-category"
"""Names the generator of the within-category permutations of the incremental family without
``analysis.primary.left_out``."""
COVARIATES = ("intercept, one indicator per category (category fixed effects), n_content(A), "
              "n_content(B): the content tokens behind each side's pooled state under the policy (they span the "
              "token-count difference)")
SCHEME = ("Freedman-Lane: the metric's residuals on the covariates are permuted within each category and added "
          "back to its fitted values; p = (1 + #{|r*| >= |r|}) / (1 + B)")


def _layer_entry(t: PartialTest, *, alpha: float) -> PairModelMetric:
    """One metric's per-layer partial r, permutation p, Holm and the surviving layers."""
    holm_p = stats.holm(t.p)
    why = np.where(np.isfinite(holm_p), "", np.where(t.reason == "", "p-value is undefined", t.reason))
    reject = np.isfinite(holm_p) & (holm_p <= alpha)
    finite = t.r[np.isfinite(t.r)]
    none_why = "partial r is undefined at every layer"
    return PairModelMetric(
        partial_r=missing.series(t.r, t.reason),
        permutation_p=missing.series(t.p, t.reason),
        holm_p=missing.series(holm_p, why),
        holm_reject=missing.flags(reject, defined=np.isfinite(holm_p), reasons=why),
        holm_layers=np.flatnonzero(reject).tolist(),
        n_holm_layers=int(reject.sum()),
        partial_r_min=missing.value(finite.min() if finite.size else np.nan, none_why),
        partial_r_max=missing.value(finite.max() if finite.size else np.nan, none_why))


def _lexical_entry(t: PartialTest, *, alpha: float) -> LexicalPairModelMetric:
    """One metric over the lexical seeds: partial r and p per seed, medians, any seed significant."""
    ok_r, ok_p = np.isfinite(t.r), np.isfinite(t.p)
    sig = ok_p & (t.p <= alpha)
    none_why = "partial r is undefined for every seed"
    return LexicalPairModelMetric(
        partial_r=missing.series(t.r, t.reason),
        permutation_p=missing.series(t.p, t.reason),
        significant=missing.flags(sig, defined=ok_p, reasons=t.reason),
        median_partial_r=missing.value(np.median(t.r[ok_r]) if ok_r.any() else np.nan, none_why),
        median_permutation_p=missing.value(np.median(t.p[ok_p]) if ok_p.any() else np.nan, none_why),
        any_seed_significant=bool(sig.any()))


@dataclass(frozen=True)
class PolicyInput:
    """One position-0 policy's pooled states and lengths."""

    name: str
    """The policy's name as the other results files write it (``special``, ``first``, ``sink_excluded``)."""
    pooled: Mapping[str, np.ndarray]
    """pooling -> (N, L+1, D) states of the N statements."""
    n_content: np.ndarray
    """(N,) content tokens behind each pooled state."""
    lexical_keep: np.ndarray
    """(total tokens,) bool: the tokens pooled under the policy (the lexical baseline pools them)."""
    values: Mapping[str, Mapping[str, np.ndarray]] | None = None
    """pooling -> metric -> (V, n): :func:`uaprobe.analysis.pairs.option_b.pair_metrics` of the pairs of
    ``pooled`` with the same k, where already computed (:attr:`uaprobe.analysis.pairs.option_b.OptionB.values`);
    None: computed here."""


def pair_models_results(*, policies: Mapping[str, PolicyInput], row_a: np.ndarray, row_b: np.ndarray,
                        category_of_pair: np.ndarray, categories: Sequence[str], preference: np.ndarray,
                        token_ids: np.ndarray, token_offsets: np.ndarray, seeds: Sequence[int],
                        params: AnalysisParams, header: Mapping[str, Any],
                        mixed_and_matched: Callable[[], tuple[Mixed, LengthMatched]],
                        k: int = option_b.KNN_K) -> PairModels:
    """``pair_models.json`` (docs/results.md).

    Args:
        policies: policy key (``default``, ``sink_excluded``) -> its states and lengths.
        row_a, row_b, category_of_pair, preference: (n,) statement rows of the pairs' A and B, category index
            of each pair (the permutation strata), NLL(B) - NLL(A); categories: the category names.
        token_ids, token_offsets, seeds: every statement's tokens and the seeds of the lexical baseline.
        params: the analysis parameters (seed, permutations, alpha).
        header: the keys every results file starts with (:func:`uaprobe.analysis.run.documents.header`).
        mixed_and_matched: the same tests as mixed models and on the length-matched pairs
            (:func:`uaprobe.analysis.pairs.mixed.mixed_results`,
            :func:`uaprobe.analysis.run.length_matched.length_matched_results`), called last.
        k: neighbours of the kNN density (capped at n - 1).
    """
    row_a, row_b = np.asarray(row_a), np.asarray(row_b)
    pref = np.asarray(preference, dtype=float)
    n = pref.size
    orders = within_category_orders(rng_for_pair_models(params), category_of_pair=category_of_pair,
                                    permutations=params.permutations)
    names = option_b.METRICS
    layer = params.primary.layer(int(next(iter(next(iter(policies.values())).pooled.values())).shape[1]) - 1)
    values_at: dict[tuple[str, str, str], bytes] = {}  # (policy, pooling, metric) -> values at the declared layer
    inc_inputs: dict[str, incremental.PolicyMetrics] = {}
    checks: dict[str, dict[tuple[str, str, str], tuple[Any, ...]]] = {"family": {}, "incremental": {}}
    fixed = controls.category_indicators(category_of_pair, len(categories))
    length_only: dict[str, PairModelsPolicy] = {}
    with_lexical: dict[str, IncrementalPolicy] = {}
    for key, pol in policies.items():
        n_content = np.asarray(pol.n_content, dtype=float)
        base = np.column_stack([fixed, n_content[row_a], n_content[row_b]])
        proj = PermutedProjections(pref, base, orders)
        poolings: dict[str, dict[str, PairModelMetric]] = {}
        values: dict[str, Mapping[str, np.ndarray]] = {}
        for p, x in pol.pooled.items():
            values[p] = option_b.pair_metrics(x[row_a], x[row_b], k=k) if pol.values is None else pol.values[p]
            values_at.update({(key, p, m): np.ascontiguousarray(values[p][m][layer]).tobytes() for m in names})
            n_views = x.shape[1]
            t = proj.test(np.concatenate([values[p][m] for m in names]))
            poolings[p] = {m: _layer_entry(_rows(t, slice(i * n_views, (i + 1) * n_views)), alpha=params.alpha)
                           for i, m in enumerate(names)}
        dim = int(next(iter(pol.pooled.values())).shape[-1])
        lex_states = [incremental.lexical_states(token_ids, token_offsets, pol.lexical_keep, drop=pol.name, dim=dim,
                                                 seed=seed) for seed in seeds]
        lex = incremental.lexical_metrics(lex_states, row_a=row_a, row_b=row_b, k=k)  # pooling -> metric -> (S, n)
        t = proj.test(np.concatenate([lex["mean"][m] for m in names]))
        s = len(seeds)
        inc, inc_at = incremental.incremental_tests(values, lex, metrics=names, layer=layer, preference=pref,
                                                    base=base, orders=orders)
        inc_inputs[key] = incremental.PolicyMetrics(values=values, lexical=lex, base=base)
        for p in values:
            for m in names:
                checks["family"][key, p, m], checks["incremental"][key, p, m] = _checks(
                    np.asarray(values[p][m])[layer], pref, base=base, lexical=np.asarray(lex[p][m]).T, proj=proj,
                    r_base=poolings[p][m].partial_r[layer], incremental_at=inc_at[p, m])
        with_lexical[key] = IncrementalPolicy(
            policy=pol.name, poolings={p: {m: _layer_entry(inc[p][m], alpha=params.alpha) for m in names} for p in inc})
        length_only[key] = PairModelsPolicy(
            policy=pol.name, poolings=poolings,
            lexical_baseline=LexicalPairModels(
                seeds=list(seeds), dim=dim, pooling="mean",
                metrics={m: _lexical_entry(_rows(t, slice(i * s, (i + 1) * s)), alpha=params.alpha)
                         for i, m in enumerate(names)}))
    # the tests of identical values are twins (values_at: each test's metric values at the declared layer)
    same = [values_at[key, p, m] for key, pol in length_only.items() for p, ms in pol.poolings.items() for m in ms]
    length_family = _family(length_only, checks=checks["family"], same=same, layer=layer, params=params)
    lexical_family = _family(with_lexical, checks=checks["incremental"], same=same, layer=layer, params=params)
    without = _without_category(inc_inputs, category_of_pair=np.asarray(category_of_pair), categories=categories,
                                preference=pref, names=names, layer=layer, same=same, params=params)
    random_effects, length_matched = mixed_and_matched()
    return record(
        PairModels, header,
        n_pairs=n, k_neighbours=min(k, n - 1), categories=list(categories),
        pairs_per_category=np.bincount(np.asarray(category_of_pair), minlength=len(categories)).tolist(),
        preference_definition="NLL(B) - NLL(A)", covariates=COVARIATES, permutation_scheme=SCHEME,
        permutations=int(params.permutations), alpha=params.alpha,
        definitions={m: option_b.DEFINITIONS[m] for m in names},
        policies=length_only, family=length_family,
        incremental=Incremental(covariates=incremental.COVARIATES, lexical_pooling=incremental.LEXICAL_POOLING,
                                seeds=list(seeds), policies=with_lexical, family=lexical_family,
                                without_category=without),
        mixed=random_effects, length_matched=length_matched)


def _family(policies: Mapping[str, PairModelsPolicy | IncrementalPolicy], *,
            checks: Mapping[tuple[str, str, str], tuple[Any, ...]], same: Sequence[bytes], layer: int,
            params: AnalysisParams) -> PairFamily:
    """The tests of every policy's per-layer entries at the declared ``layer`` as one family (``checks``: see
    :func:`_checks`; ``same``: each test's metric values at that layer, the tests of identical values twins)."""
    return incremental.family_results(
        incremental.family_of({key: pol.poolings for key, pol in policies.items()}, layer=layer, checks=checks),
        same=same, layer=layer, reported_pooling=params.primary.pooling, permutations=params.permutations,
        alpha=params.alpha, degenerate_vif=params.degenerate_vif, level=params.ci_level)


def _checks(x: np.ndarray, preference: np.ndarray, *, base: np.ndarray, lexical: np.ndarray,
            proj: PermutedProjections, r_base: Any, incremental_at: tuple[int, np.ndarray]
            ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The collinearity checks and max-T input of one test at the declared layer (``x``: the metric (n,)), in the
    length-only family (``base`` covariates, ``proj`` their permuted projections) and the incremental one
    (``lexical``: (n, S) the lexical metric's seeds; ``incremental_at``: its rank and permuted r): the fields of
    :class:`~uaprobe.analysis.pairs.incremental.FamilyTest` after the p."""
    r = float(stats.pearson(x, preference).r)
    n = int(np.asarray(preference).size)
    return ((incremental.vif(x, base), np.nan, r, n, int(proj.q.shape[1] - 1), proj.permuted_r(x[None, :])[0]),
            (incremental.vif(x, np.column_stack([base, lexical])), missing.number(r_base), r, n, *incremental_at))


def _without_category(inputs: Mapping[str, incremental.PolicyMetrics], *, category_of_pair: np.ndarray,
                      categories: Sequence[str], preference: np.ndarray, names: Sequence[str], layer: int,
                      same: Sequence[bytes], params: AnalysisParams) -> IncrementalWithout:
    """The incremental family at the declared layer over the pairs of every category but
    ``analysis.primary.left_out``: the metrics as computed over all pairs, the test over the others
    (their own within-category draws, generator :data:`RNG_NAME_WITHOUT`)."""
    out = params.primary.left_out_index(categories)
    keep = category_of_pair != out
    orders = within_category_orders(stats.rng_for(seed=params.seed, name=RNG_NAME_WITHOUT),
                                    category_of_pair=category_of_pair[keep], permutations=params.permutations)
    tests = incremental.tests_over(inputs, keep=keep, names=names, layer=layer, preference=preference, orders=orders)
    return IncrementalWithout(
        left_out=categories[out], n_pairs=int(keep.sum()),
        family=incremental.family_results(tests, same=same, layer=layer, reported_pooling=params.primary.pooling,
                                          permutations=params.permutations, alpha=params.alpha,
                                          degenerate_vif=params.degenerate_vif, level=params.ci_level))


def _rows(t: PartialTest, rows: slice) -> PartialTest:
    return PartialTest(r=t.r[rows], p=t.p[rows], reason=t.reason[rows])


def rng_for_pair_models(params: AnalysisParams) -> np.random.Generator:
    """The one generator of the pair-level models."""
    return stats.rng_for(seed=params.seed, name=RNG_NAME)


def pooled_token_mask(token_offsets: np.ndarray, special: np.ndarray, *, drop: str) -> np.ndarray:
    """(total,) the tokens a pooling policy pools: ``special`` (not special), ``first`` (not at
    position 0) or ``sink_excluded`` (neither special nor at position 0)."""
    offsets = np.asarray(token_offsets, dtype=np.int64)
    special = np.asarray(special, dtype=bool)
    position = np.arange(special.size) - np.repeat(offsets[:-1], np.diff(offsets))
    return pooled_tokens(special, position, drop)


def from_embeddings(emb: Embeddings, *, states: Mapping[str, Mapping[str, np.ndarray]], table: PairTable,
                    preference: np.ndarray, params: AnalysisParams, default_name: str, header: Mapping[str, Any],
                    mixed_and_matched: Callable[[], tuple[Mixed, LengthMatched]],
                    values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]] | None = None) -> PairModels:
    """:func:`pair_models_results` of one extraction: both policies, the lexical seeds of
    ``analysis.robustness.lexical_seeds``.

    ``states``: policy -> pooling -> the policy's pooled states, already transformed as
    ``analysis.representation`` says (:mod:`uaprobe.analysis.geometry.representation`). ``values``: policy ->
    :attr:`PolicyInput.values` of those states (Option B's, :attr:`uaprobe.analysis.pairs.option_b.OptionB.values`),
    where already computed."""
    policies = {}
    for key, name, n_content in (("default", default_name, emb.n_content),
                                 ("sink_excluded", "sink_excluded", emb.n_content_sink_excluded)):
        policies[key] = PolicyInput(name=name, pooled=states[key], n_content=n_content,
                                    lexical_keep=pooled_token_mask(emb.token_offsets, emb.token_special, drop=name),
                                    values=None if values is None else values[key])
    return pair_models_results(policies=policies, row_a=table.row_a, row_b=table.row_b,
                               category_of_pair=table.category_of_pair, categories=table.categories,
                               preference=preference, token_ids=emb.token_ids, token_offsets=emb.token_offsets,
                               seeds=[params.seed + i for i in range(params.robustness.lexical_seeds)],
                               params=params, header=header, mixed_and_matched=mixed_and_matched)


def headline_metrics(body: PairModels, *, pooling: str = "mean") -> dict[str, dict[str, PairModelsMetrics]]:
    """``pair_models`` of ``metrics/models/<id>.json``: per policy and metric (one pooling), the
    layers surviving Holm, the range of partial r, the lexical baseline's median, and at the
    pre-declared layer the partial r and its Holm p in the one family, without and with the lexical
    covariates."""
    def in_family(family: PairFamily) -> dict[tuple[str, str, str], tuple[Any, Any]]:
        t = family.tests
        return {(t.policy[i], t.pooling[i], t.metric[i]): (t.partial_r[i], t.holm_p[i]) for i in range(len(t.policy))}

    length, lexical = in_family(body.family), in_family(body.incremental.family)
    without = in_family(body.incremental.without_category.family)
    out: dict[str, dict[str, PairModelsMetrics]] = {}
    for key, pol in body.policies.items():
        lex = pol.lexical_baseline.metrics
        out[key] = {m: PairModelsMetrics(
            n_holm_layers=e.n_holm_layers, partial_r_min=e.partial_r_min, partial_r_max=e.partial_r_max,
            lexical_median_partial_r=lex[m].median_partial_r, lexical_any_seed_significant=lex[m].any_seed_significant,
            declared_partial_r=length[key, pooling, m][0], declared_family_holm_p=length[key, pooling, m][1],
            incremental_partial_r=lexical[key, pooling, m][0], incremental_family_holm_p=lexical[key, pooling, m][1],
            incremental_without_category_partial_r=without[key, pooling, m][0],
            incremental_without_category_holm_p=without[key, pooling, m][1])
            for m, e in pol.poolings[pooling].items()}
    return out


def plot_columns(body: PairModels, *, base: Mapping[str, list[Any]], pooling: str = "mean") -> dict[str, list[Any]]:
    """Per-layer partial r of every metric (``plots/pair_models/<id>.csv``), one pooling:
    ``<metric>_<pooling>`` (default policy) and ``<metric>_<pooling>_sink_excluded``."""
    cols: dict[str, list[Any]] = dict(base)
    for key, pol in body.policies.items():
        suffix = "" if key == "default" else f"_{key}"
        for m, e in pol.poolings[pooling].items():
            cols[f"{m}_{pooling}{suffix}"] = list(e.partial_r)
    return cols


__all__: Sequence[str] = ("COVARIATES", "RNG_NAME", "SCHEME", "PolicyInput", "from_embeddings", "headline_metrics",
                          "pair_models_results", "plot_columns", "pooled_token_mask", "rng_for_pair_models")
