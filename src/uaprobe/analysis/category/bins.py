"""Seed 002: random partitions of the pairs into k bins; r(UA, preference) across bins.

Two schemes: ``randint`` (the seed's: each pair draws a bin uniformly, so bin sizes vary and bins
with fewer than 2 pairs are skipped) and ``balanced`` (a random permutation cut into k bins whose
sizes differ by at most one). For each k: mean and std of r and mean p over the partitions, per
layer. One seeded partition with k = ``ci_k`` gets the full statistics (bootstrap CI of r over its
bins), compared with the category-level result (n = 6).

All partitions of both schemes (every k) are evaluated in one call of the resampling kernel,
:meth:`~uaprobe.analysis.geometry.uniformity.Cosines.uniformity` (which picks Gram entries or sums of unit
vectors by cost); bin preferences come from a weighted bincount, correlations from masked,
vectorised moments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from uaprobe.analysis.inference import stats
from uaprobe.analysis.inference.groupstats import GroupStats, Resampling, group_stats
from uaprobe.schema import missing
from uaprobe.schema.categories import Bins, BinsByK, BinsComparison, BinsPooling, BinsScheme
from uaprobe.schema.categories import CiPartition as CiPartitionRecord
from uaprobe.schema.document import record
from uaprobe.analysis.geometry.uniformity import Cosines, group_means
from uaprobe.config import AnalysisParams
from uaprobe.errors import ConfigError

Scheme = Literal["randint", "balanced"]
SCHEMES: tuple[Scheme, ...] = ("randint", "balanced")
MIN_BIN_PAIRS = 2
"""A bin needs two pairs for a uniformity (the seed skips smaller bins)."""


DEFAULT_K = (10, 15, 20, 25, 30)
"""The bin counts of the default parameters (the seed's 10..30 in steps of 5)."""
DEFAULT_CI_K = 20
"""The seed's k of the bootstrap CI."""


def _fitting_bins(values: Sequence[int], limit: int) -> list[int]:
    """The values of ``values`` that fit under ``limit``, or up to five evenly spaced counts from 3 to it."""
    kept = [k for k in values if k <= limit]
    if kept:
        return kept
    if limit < 3:
        return []
    step = max(1, (limit - 3) // 4)
    return sorted({*range(3, limit + 1, step), limit})[-5:]


def auto_bins(params: AnalysisParams, *, n_pairs: int) -> tuple[AnalysisParams, list[str]]:
    """``params`` with ``analysis.bins.k`` and ``ci_k`` of ``auto`` replaced by the counts ``n_pairs`` allow, and
    a sentence for each choice: k, the default's counts that fit (or up to five from 3 to the largest that fits);
    ci_k, the largest chosen k up to the seed's 20 (or the smallest chosen)."""
    b = params.bins
    if b.k != "auto" and b.ci_k != "auto":
        return params, []
    limit = n_pairs // MIN_BIN_PAIRS
    notes = []
    k = tuple(_fitting_bins(DEFAULT_K, limit) or [3]) if b.k == "auto" else b.k
    if b.k == "auto":
        notes.append(f"analysis.bins.k: auto chose {list(k)} for {n_pairs} pairs (at most {limit} bins)")
    ci_k = b.ci_k
    if ci_k == "auto":
        ci_k = max([x for x in k if x <= DEFAULT_CI_K], default=min(k))
        notes.append(f"analysis.bins.ci_k: auto chose {ci_k}")
    return params.model_copy(update={"bins": b.model_copy(update={"k": k, "ci_k": ci_k})}), notes


def bin_problems(params: AnalysisParams, *, n_pairs: int) -> list[str]:
    """The bin counts (``analysis.bins.k``, ``analysis.bins.ci_k``) that cannot give bins of at least
    :data:`MIN_BIN_PAIRS` pairs of ``n_pairs``, each with a value that fits."""
    found: list[str] = []
    limit = n_pairs // MIN_BIN_PAIRS
    too_many = [k for k in params.bins.k if k > limit]
    if too_many:
        fit = _fitting_bins(params.bins.k, limit)
        flow = "[" + ",".join(map(str, fit)) + "]"
        found.append(f"analysis.bins.k: {too_many} {'is' if len(too_many) == 1 else 'are'} more bins than {n_pairs} "
                     f"pairs allow (at most {limit}, for bins of {MIN_BIN_PAIRS} pairs); set it to "
                     + (f"{flow} (`dvc exp run -S 'analysis.bins.k={flow}'`)" if fit else
                        "a list of integers from 3 to that bound"))
    if params.bins.ci_k > limit:
        fit = max([k for k in params.bins.k if k <= limit], default=limit)
        found.append(f"analysis.bins.ci_k: {params.bins.ci_k} is more bins than {n_pairs} pairs allow (at most "
                     f"{limit}); set it to {fit} (`dvc exp run -S analysis.bins.ci_k={fit}`)")
    return found


def check_bins(params: AnalysisParams, *, n_pairs: int) -> None:
    """Refuse bin counts that cannot give bins of at least two pairs (:func:`bin_problems`)."""
    found = bin_problems(params, n_pairs=n_pairs)
    if found:
        raise ConfigError("; ".join(found))


def partitions(rng: np.random.Generator, *, scheme: Scheme, n: int, k: int, count: int) -> np.ndarray:
    """(count, n) bin labels in 0..k-1."""
    if scheme == "randint":
        return rng.integers(0, k, size=(count, n))
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    base = np.repeat(np.arange(k), sizes)  # (n,)
    order = rng.permuted(np.broadcast_to(np.arange(n), (count, n)), axis=1)
    labels = np.empty((count, n), dtype=np.int64)
    np.put_along_axis(labels, order, np.broadcast_to(base, (count, n)), axis=1)
    return labels


@dataclass(frozen=True)
class KSummary:
    """Summary over the partitions of one k, per view: arrays (V,)."""

    r_mean: np.ndarray
    r_std: np.ndarray
    p_mean: np.ndarray
    n_valid: np.ndarray
    share_positive: np.ndarray
    """share of the partitions with a defined r whose r > 0"""
    share_excludes_zero: np.ndarray
    """share of the partitions with a defined r whose Fisher-z interval (level ``ci_level``) excludes 0"""
    bins_used_mean: float
    bin_size_min: int
    bin_size_max: int


def summarize_partitions(*, cosines: Cosines, preference: np.ndarray, labels: np.ndarray, k: int,
                         level: float = 0.95) -> KSummary:
    """r across the bins of every partition, then mean / std (ddof 0) / mean p over partitions.

    Args:
        cosines: the A and B statements of one pooling (pairs in pair order).
        preference: (n,) per-pair preference.
        labels: (P, n) bin of each pair in each partition.
        k: bins per partition.
        level: the level of the Fisher-z intervals behind ``share_excludes_zero``.
    """
    return summarize_many(cosines=cosines, preference=preference, labels_by_k={k: labels}, level=level)[k]


def summarize_many(*, cosines: Cosines, preference: np.ndarray, labels_by_k: Mapping[int, np.ndarray],
                   level: float = 0.95) -> dict[int, KSummary]:
    """:func:`summarize_partitions` for several k at once: all partitions go through one call of
    the resampling kernel (groups numbered up to the largest k; the bins a partition lacks are
    empty), so its embeddings are read once for all of them."""
    batches = [(k, np.asarray(lab)) for k, lab in labels_by_k.items()]
    return dict(zip(labels_by_k, _summaries(cosines=cosines, preference=preference, batches=batches, level=level)))


def _summaries(*, cosines: Cosines, preference: np.ndarray, batches: Sequence[tuple[int, np.ndarray]],
               level: float) -> list[KSummary]:
    """One :class:`KSummary` per batch ``(k, labels (P, n))``, every batch's partitions in one call
    of :meth:`Cosines.uniformity` (each partition's values do not depend on the others in the call)."""
    n_groups = max(k for k, _ in batches)
    stacked = np.concatenate([lab for _, lab in batches], axis=0)
    ua_all, sizes_all = cosines.uniformity(stacked, n_groups=n_groups, side="diff")  # (V, sum P, max k)
    out, start = [], 0
    for k, lab in batches:
        rows = slice(start, start + len(lab))
        start += len(lab)
        out.append(_summary(ua=ua_all[:, rows, :k], sizes=sizes_all[rows, :k], preference=preference,
                            labels=lab, k=k, level=level))
    return out


def _summary(*, ua: np.ndarray, sizes: np.ndarray, preference: np.ndarray, labels: np.ndarray, k: int,
             level: float) -> KSummary:
    pref, _ = group_means(preference, labels, n_groups=k)  # (P, k)
    used = sizes >= MIN_BIN_PAIRS
    corr = stats.pearson(ua, np.where(used, pref, 0.0)[None], mask=used[None])  # (V, P)
    ok = np.isfinite(corr.r)
    n_valid = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r0 = np.where(ok, corr.r, 0.0)
        r_mean = r0.sum(axis=1) / n_valid
        r_std = np.sqrt(np.where(ok, (corr.r - r_mean[:, None]) ** 2, 0.0).sum(axis=1) / n_valid)
        p_mean = np.where(ok, corr.p, 0.0).sum(axis=1) / n_valid
        share_pos = (ok & (corr.r > 0)).sum(axis=1) / n_valid
    f_lo, f_hi, _ = stats.fisher_interval(r=corr.r, n=corr.n, level=level)
    with np.errstate(invalid="ignore", divide="ignore"):
        share_excl = (ok & np.isfinite(f_lo) & ((f_lo > 0) | (f_hi < 0))).sum(axis=1) / n_valid
    none = n_valid == 0
    return KSummary(r_mean=np.where(none, np.nan, r_mean), r_std=np.where(none, np.nan, r_std),
                    p_mean=np.where(none, np.nan, p_mean), n_valid=n_valid,
                    share_positive=np.where(none, np.nan, share_pos), share_excludes_zero=np.where(none, np.nan, share_excl),
                    bins_used_mean=float(used.sum(axis=1).mean()), bin_size_min=int(sizes.min()),
                    bin_size_max=int(sizes.max()))


@dataclass(frozen=True)
class CiPartition:
    """The one seeded partition with k = ci_k; per-bin arrays cover the bins with >= 2 pairs."""

    k: int
    assignment: np.ndarray
    """(n_pairs,) bin of each pair."""
    bin_ids: np.ndarray
    """(n_bins,) the used bins (labels)."""
    bin_sizes: np.ndarray
    mean_preference: np.ndarray
    u_a: np.ndarray
    """(V, n_bins)"""
    u_b: np.ndarray
    stats: GroupStats


def ci_partition(*, cosines: Cosines, preference: np.ndarray, labels: np.ndarray, k: int,
                 params: AnalysisParams, rng: np.random.Generator) -> CiPartition:
    """Full statistics of r across the bins of one partition ``labels`` (n,)."""
    return _ci_partition(cosines=cosines, preference=preference, labels=labels, k=k, params=params,
                         draws=_ci_draws(labels, k=k, params=params, rng=rng))


def _ci_draws(labels: np.ndarray, *, k: int, params: AnalysisParams, rng: np.random.Generator) -> Resampling:
    """The bootstrap and permutation draws over the used bins (>= 2 pairs) of the partition ``labels``."""
    used = int((np.bincount(np.asarray(labels), minlength=k) >= MIN_BIN_PAIRS).sum())
    return Resampling.draw(rng, n=used, resamples=params.bootstrap_resamples, permutations=params.permutations)


def _ci_partition(*, cosines: Cosines, preference: np.ndarray, labels: np.ndarray, k: int,
                  params: AnalysisParams, draws: Resampling) -> CiPartition:
    lab = np.asarray(labels)[None, :]
    u_a, sizes = cosines.uniformity(lab, n_groups=k, side="a")
    u_b, _ = cosines.uniformity(lab, n_groups=k, side="b")
    pref, _ = group_means(preference, lab, n_groups=k)
    used = np.flatnonzero(sizes[0] >= MIN_BIN_PAIRS)
    x = (u_a[:, 0, used] - u_b[:, 0, used])
    y = pref[0, used]
    gs = group_stats(x=x, y=y, draws=draws, level=params.ci_level)
    return CiPartition(k=k, assignment=np.asarray(labels), bin_ids=used, bin_sizes=sizes[0, used], mean_preference=y,
                       u_a=u_a[:, 0, used], u_b=u_b[:, 0, used], stats=gs)


@dataclass(frozen=True)
class SchemeResult:
    by_k: dict[int, KSummary]
    ci: CiPartition


def analyze_bins(*, cosines: Cosines, preference: np.ndarray, params: AnalysisParams,
                 rng: np.random.Generator, on_step: Callable[[], None] | None = None) -> dict[str, SchemeResult]:
    """Both schemes for one pooling, every view of ``cosines``. Draw order from ``rng``: per scheme,
    the partitions of each k (in params order), then the ci_k partition, then its bootstrap and
    permutation draws. Every partition of both schemes then goes through one call of the resampling
    kernel (a Gram table built in pieces is built once for all of them). ``on_step`` is called
    after each of those :func:`bins_steps` steps."""
    n = preference.size
    check_bins(params, n_pairs=n)
    drawn = {}
    for scheme in SCHEMES:
        labels_by_k = {k: partitions(rng, scheme=scheme, n=n, k=k, count=params.bins.partitions)
                       for k in params.bins.k}
        ci_labels = partitions(rng, scheme=scheme, n=n, k=params.bins.ci_k, count=1)[0]
        drawn[scheme] = (labels_by_k, ci_labels, _ci_draws(ci_labels, k=params.bins.ci_k, params=params, rng=rng))
    summaries = iter(_summaries(cosines=cosines, preference=preference, level=params.ci_level,
                                batches=[(k, lab) for labels_by_k, _, _ in drawn.values()
                                         for k, lab in labels_by_k.items()]))
    out = {}
    for scheme, (labels_by_k, ci_labels, ci_draws) in drawn.items():
        by_k = {k: next(summaries) for k in labels_by_k}
        if on_step:
            for _k in params.bins.k:
                on_step()
        ci = _ci_partition(cosines=cosines, preference=preference, labels=ci_labels, k=params.bins.ci_k,
                           params=params, draws=ci_draws)
        out[scheme] = SchemeResult(by_k=by_k, ci=ci)
        if on_step:
            on_step()
    return out


def bins_steps(params: AnalysisParams) -> int:
    """Steps of :func:`analyze_bins`: one per scheme and k, one per scheme for the ci_k partition."""
    return len(SCHEMES) * (len(params.bins.k) + 1)


def _excludes_zero(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    defined = np.isfinite(lo) & np.isfinite(hi)
    with np.errstate(invalid="ignore"):
        return defined & ~((lo <= 0) & (0 <= hi)), defined


def change_labels(*, before_excludes: np.ndarray, after_excludes: np.ndarray) -> list[str]:
    """Seed 002's comparison labels, per layer."""
    out = []
    for b, a in zip(before_excludes, after_excludes):
        if not b and a:
            out.append("NOW SIGNIFICANT")
        elif b and not a:
            out.append("Lost significance")
        else:
            out.append("No change")
    return out


def bins_results(result: Mapping[str, SchemeResult], *, categories_stats: GroupStats, n_layers: int) -> BinsPooling:
    """One pooling of ``bins.json`` (see docs/results.md)."""
    sel = slice(0, n_layers + 1)
    out: dict[str, BinsScheme] = {}
    for scheme, res in result.items():
        by_k = {}
        for k, s in res.by_k.items():
            why = "no partition had a defined r (fewer than 3 usable bins or constant values)"
            by_k[str(k)] = BinsByK(
                r_mean=missing.series(s.r_mean[sel], why),
                r_std=missing.series(s.r_std[sel], why),
                p_mean=missing.series(s.p_mean[sel], why),
                share_positive=missing.series(s.share_positive[sel], why),
                share_excludes_zero=missing.series(s.share_excludes_zero[sel], why),
                n_valid=s.n_valid[sel].tolist(),
                bins_used_mean=s.bins_used_mean, bin_size_min=s.bin_size_min, bin_size_max=s.bin_size_max)
        ci = res.ci
        g = ci.stats
        lo, hi = g.bootstrap.low[sel], g.bootstrap.high[sel]
        excl, defined = _excludes_zero(lo, hi)
        ci_obj = CiPartitionRecord(
            k=ci.k,
            assignment=ci.assignment.tolist(),
            bin_ids=ci.bin_ids.tolist(),
            bin_sizes=ci.bin_sizes.tolist(),
            mean_preference=missing.series(ci.mean_preference),
            u_a=missing.series(ci.u_a[sel]),
            u_b=missing.series(ci.u_b[sel]),
            ua=missing.series((ci.u_a - ci.u_b)[sel]),
            r=missing.series(g.pearson.r[sel], g.pearson.reason[sel]),
            p=missing.series(g.pearson.p[sel], g.pearson.reason[sel]),
            spearman_rho=missing.series(g.spearman.r[sel], g.spearman.reason[sel]),
            bootstrap_ci_low=missing.series(lo, g.bootstrap.reason[sel]),
            bootstrap_ci_high=missing.series(hi, g.bootstrap.reason[sel]),
            bootstrap_valid=g.bootstrap.valid[sel].tolist(),
            fisher_ci_low=missing.series(g.fisher_low[sel], g.fisher_reason[sel]),
            fisher_ci_high=missing.series(g.fisher_high[sel], g.fisher_reason[sel]),
            permutation_p=missing.series(g.permutation_p[sel], g.pearson.reason[sel]),
            ci_excludes_zero=missing.flags(excl, defined=defined, reasons=g.bootstrap.reason[sel]))
        # comparison with the categories (n = number of categories)
        c = categories_stats
        c_lo, c_hi = c.bootstrap.low[sel], c.bootstrap.high[sel]
        c_excl, c_def = _excludes_zero(c_lo, c_hi)
        both = c_def & defined
        labels = change_labels(before_excludes=c_excl, after_excludes=excl)
        change = [missing.label(lab if both[i] else None,
                                "an interval is undefined") for i, lab in enumerate(labels)]
        w_cat = c_hi - c_lo
        w_bin = hi - lo
        mean_cat = float(np.mean(w_cat[both])) if both.any() else np.nan
        mean_bin = float(np.mean(w_bin[both])) if both.any() else np.nan
        reduction = (mean_cat - mean_bin) / mean_cat * 100.0 if both.any() and mean_cat != 0 else np.nan
        no_layer = "no layer where both intervals are defined"
        comparison = BinsComparison(
            categories_r=missing.series(c.pearson.r[sel], c.pearson.reason[sel]),
            categories_ci_low=missing.series(c_lo, c.bootstrap.reason[sel]),
            categories_ci_high=missing.series(c_hi, c.bootstrap.reason[sel]),
            categories_ci_width=missing.series(w_cat, c.bootstrap.reason[sel]),
            categories_ci_excludes_zero=missing.flags(c_excl, defined=c_def, reasons=c.bootstrap.reason[sel]),
            bins_ci_width=missing.series(w_bin, g.bootstrap.reason[sel]),
            change=change,
            n_significant_categories=int(c_excl.sum()),
            n_significant_bins=int(excl.sum()),
            mean_ci_width_categories=missing.value(mean_cat, no_layer),
            mean_ci_width_bins=missing.value(mean_bin, no_layer),
            ci_width_reduction_pct=missing.value(reduction, no_layer + " (or a zero category width)"))
        out[scheme] = BinsScheme(by_k=by_k, ci_partition=ci_obj, comparison=comparison)
    return BinsPooling(schemes=out)


def bins_file(poolings: Mapping[str, BinsPooling], *, n_pairs: int, params: AnalysisParams,
              header: Mapping[str, Any]) -> Bins:
    """``bins.json``: the settings and every pooling's schemes (:func:`bins_results`), with the keys every results
    file of the policy starts with (``header``)."""
    return record(Bins, header, n_pairs=n_pairs, k=list(params.bins.k), partitions=params.bins.partitions,
                  ci_k=params.bins.ci_k, schemes=list(SCHEMES), min_bin_pairs=MIN_BIN_PAIRS, poolings=dict(poolings))


__all__: Sequence[str] = ("analyze_bins", "auto_bins", "bin_problems", "bins_file", "bins_steps", "bins_results", "check_bins", "partitions", "summarize_partitions",
                          "summarize_many",
                          "ci_partition", "change_labels")
