"""The specification curve (Simonsohn, Simmons & Nelson 2020) of the category-level r(UA, preference).

A *specification* is one choice of every analytic option the params allow: pooling (mean, last,
first) x position-0 policy (the extraction's default, ``sink_excluded``) x representation (raw,
zscore, abtt) x NLL (per-token mean or sum) x layer (0..L) x left-out category (none or one of the
C categories). Its statistic is the Pearson r over the categories (C, or C - 1 with one left out)
of the category's UA = U(A) - U(B) (:mod:`uaprobe.analysis.geometry.dimensions` computes U with the
sum-of-unit-vectors identity) and its mean preference NLL(B) - NLL(A).

Inference is by permutation of the categories' preferences (:mod:`.curve_stats`: the relabellings, the r
of every specification under each, the joint statistics and the null band).

The **primary test** is declared in params.yaml (``analysis.primary``): its universe is the original study's
estimand, the per-token mean NLL (``nll``) with mean and last-token pooling (``poolings``), x policy x
representation at one pre-declared layer (``depth``; a depth curve is an estimand, not an analytic choice),
every category; specifications whose category UA vectors are bit-identical (the same states: Gemma's two
position-0 policies when its BOS is never pooled, SmolLM2's last-token pooling under both policies) are counted
once. Its statistic is ``analysis.primary.statistic`` (the median r). The secondary tests, Holm-adjusted as one
family: the other statistic of the universe; both statistics over every layer (``every_layer``); both with the
category ``analysis.primary.left_out`` left out (``without_category``: exact over the (C-1)! orders of the kept
categories' own preferences). Comparisons in no family: ``layer_zero`` (the universe's choices at layer 0, the
token embeddings: the model's own lexical baseline); ``full_universe`` (every pooling and NLL, the universe as
first declared); the named robustness checks ``other_nll`` (the summed NLL, which puts length into the
preference: another estimand) and ``other_poolings`` (first-token pooling: a lexical measure in a causal LM).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from uaprobe.analysis.category.curve_stats import (MAX_EXACT_ORDERS, CurveStats, JointStatistics, below_alpha,
                                                   curve_r, distinct_subset, first_identical, joint_test, null_band)
from uaprobe.analysis.inference.stats import TIE_TOLERANCE, holm, rng_for
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.metrics import SpecCurveMetrics
from uaprobe.schema.specs import (Dimensions, JointP, JointTest, LayerZero, MergedSpecs, NllSign, NullBand, Power,
                                  RobustnessCheck, Secondary, SecondaryP, SpecChoices, SpecColumns, SpecId,
                                  SpecificationCurve, Universe, UniverseAxis)
from uaprobe.config import PrimaryParams
from uaprobe.errors import UAProbeError
from uaprobe.names import REPRESENTATIONS

RNG_NAME = "specification-curve"
"""Names the generator of the random orders beyond :data:`~.curve_stats.MAX_EXACT_ORDERS` (:func:`stats.rng_for`)."""


def _band(r_perm: np.ndarray, level: float) -> NullBand:
    low, high = null_band(r_perm, level)
    why = "r is undefined under some relabelling at this rank"
    return NullBand(level=level, low=missing.series(low, why), high=missing.series(high, why))


AXIS_REASONS = {
    "pooling": "How a statement's token states become one vector: mean pooling summarises every content token and "
               "the last token is the one a causal LM has read the whole statement at; the original study reports "
               "both, and no theory prefers one.",
    "policy": "Whether position 0, the attention sink of a model without a BOS token, enters the pooled state: "
              "keeping and excluding it are both defensible.",
    "representation": "Raw cosines are dominated by a few large dimensions; z-scoring and all-but-the-top are the "
                      "standard corrections, and no theory prefers one of the three.",
    "nll": "The per-token mean NLL, the original study's: the preference compares how likely each token of the two "
           "framings is, not how long they are.",
    "layer": "Pre-declared (analysis.primary.depth), not varied: a depth curve is an estimand, not an analytic "
             "choice.",
}
"""One sentence per axis of the universe: why it is an analytic choice (or how it was fixed)."""
CHECK_REASONS = {
    "nll": "The summed NLL grows with the number of tokens, so it puts the statements' length into the preference "
           "itself: another estimand, not an analytic choice of this one.",
    "pooling": "First-token pooling in a causal LM is the state of the first content token, which has seen one or "
               "two tokens of the statement: a lexical measure, not a summary of the statement.",
}
"""Why each option outside the primary universe is a named robustness check and not an axis of it."""
DECLARED = ("The universe as first declared varied the NLL and all three poolings as well; it was restricted to the "
            "original study's estimand (the mean NLL; mean and last-token pooling) after those results had been "
            "read, and the first universe is reported beside it (`joint/full_universe`).")
"""When the primary universe was declared, said plainly."""
NOT_AXES = {
    "layer": "Every other layer is reported as the per-layer curve and tested as one curve in `every_layer`, "
             "not counted as alternative specifications of the primary test.",
    "left_out": "Leaving a category out is an influence diagnostic, not an analytic choice: reported per "
                "specification, and for the pre-declared category as the `without_category` test.",
}
DUPLICATE_RULE = ("Specifications whose category UA vectors are bit-identical (the same pooled states, e.g. two "
                  "position-0 policies that pool the same tokens) are one specification: the first in the order "
                  "pooling, policy, representation, layer is counted, the others are listed as merged.")


def _joint_record(t: JointStatistics, *, description: str, layers: list[int], left_out: str | None, n_merged: int,
                  relabellings: int, mode: str, band: NullBand, poolings: list[str], nll: list[str]) -> JointTest:
    why = "no specification has a defined r"
    return JointTest(description=description, layers=layers, left_out=left_out, n_specs=t.n_specs, n_merged=n_merged,
                     relabellings=relabellings, mode=mode, p_floor=1.0 / relabellings,
                     median_r=missing.value(t.median_r, why), median_p=missing.value(t.median_p, why),
                     share_positive=missing.value(t.share_positive, why), share_p=missing.value(t.share_p, why),
                     null_band=band, poolings=poolings, nll=nll)


def _joint_p(joint: Mapping[str, JointTest], test: str, statistic: str) -> JointP:
    j = joint[test]
    p = j.median_p if statistic == "median_r" else j.share_p
    why = f"no specification of `joint/{test}` has a defined r"
    return JointP(test=test, statistic=statistic, estimate=missing.value(missing.number(getattr(j, statistic)), why),
                  p=missing.value(missing.number(p), why), p_floor=j.p_floor, mode=j.mode,
                  at_floor=missing.flag(missing.present(p) and abs(p - j.p_floor) <= TIE_TOLERANCE,
                                        defined=missing.present(p), reason=why))


def _base_rows(ua: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], policy_names: Mapping[str, str]
               ) -> tuple[list[tuple[str, str, str, int]], np.ndarray]:
    """The universe's order: pooling, policy, representation, layer -> (pooling, policy name,
    representation, layer) and the (S, C) UA of each."""
    base: list[tuple[str, str, str, int]] = []
    rows: list[np.ndarray] = []
    for pooling in next(iter(ua.values())):
        for policy in ua:
            for kind in ua[policy][pooling]:
                values = ua[policy][pooling][kind]
                for layer in range(values.shape[0]):
                    base.append((pooling, policy_names[policy], kind, layer))
                    rows.append(values[layer])
    return base, np.array(rows)


def universe_rows(ua: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], policy_names: Mapping[str, str], *,
                  primary: PrimaryParams) -> np.ndarray:
    """(S, C) the category UA of the primary universe's distinct specifications (the pre-declared layer, the
    primary poolings, every policy and representation; bit-identical rows once), in the joint test's order."""
    base, rows = _base_rows(ua, policy_names)
    declared = primary.layer(max(b[3] for b in base))
    at = np.flatnonzero(np.array([b[3] == declared and b[0] in primary.poolings for b in base]))
    return rows[distinct_subset(rows, at)]


def _spec_id(b: tuple[str, str, str, int], nll: str) -> SpecId:
    return SpecId(pooling=b[0], policy=b[1], representation=b[2], nll=nll, layer=b[3])


WHY_UNDEFINED = "UA or the preference is constant over the specification's categories"


@dataclass(frozen=True)
class _Curve:
    """What every part of ``specification_curve.json`` reads: the specifications' rows and their r."""

    base: list[tuple[str, str, str, int]]
    """(pooling, policy, representation, layer) of each row of ``rows``"""
    rows: np.ndarray
    """(S, C) the category UA of each (pooling, policy, representation, layer)"""
    nll: list[str]
    stats: CurveStats
    declared: int
    primary: PrimaryParams

    @cached_property
    def layer_of(self) -> np.ndarray:
        return np.array([b[3] for b in self.base])

    @cached_property
    def pooling_of(self) -> np.ndarray:
        return np.array([b[0] for b in self.base])

    @cached_property
    def in_primary(self) -> np.ndarray:
        return np.isin(self.pooling_of, list(self.primary.poolings))

    @property
    def other_poolings(self) -> list[str]:
        return [q for q in dict.fromkeys(self.pooling_of) if q not in self.primary.poolings]

    @property
    def other_nll(self) -> list[str]:
        return [k for k in self.nll if k != self.primary.nll]


def curve_results(ua: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]], pref: Mapping[str, np.ndarray], *,
                  categories: Sequence[str], policy_names: Mapping[str, str], primary: PrimaryParams, alpha: float,
                  level: float, seed: int, permutations: int, header: Mapping[str, Any],
                  power: Power) -> SpecificationCurve:
    """``specification_curve.json``, with the keys every results file starts with (``header``).

    Args:
        ua: ``[policy][pooling][representation]`` -> (L+1, C) category UA.
        pref: NLL kind -> (C,) category mean preference (``mean`` and ``sum``).
        categories: the C category names.
        policy_names: policy key -> the name written (the default policy's ``pooling_drop``).
        primary: the pre-declared layer, statistic and left-out category (``analysis.primary``).
        alpha: level of the Holm correction of the secondary family.
        level: the share of the relabelled curves each null band holds (``analysis.ci_level``).
        seed, permutations: ``analysis.seed`` and ``analysis.permutations``, the random orders beyond
            :data:`~.curve_stats.MAX_EXACT_ORDERS` (:func:`~.curve_stats.relabellings`).
        power: the exact test's power (:func:`uaprobe.analysis.category.power.power_results`).
    """
    base, rows = _base_rows(ua, policy_names)
    nll = list(pref)
    pref_arr = np.array([pref[k] for k in nll])
    rng = rng_for(seed=seed, name=RNG_NAME)
    stats = curve_r(rows, pref_arr, rng=rng, permutations=permutations)
    curve = _Curve(base=base, rows=rows, nll=nll, stats=stats, declared=primary.layer(max(b[3] for b in base)),
                   primary=primary)
    left_out: list[str | None] = [None, *categories]
    specs, (s_idx, k_idx, j_idx) = _specs(curve, left_out)
    specs_distinct = np.asarray(specs.distinct, dtype=bool)
    every = specs_distinct & (j_idx == 0)  # the distinct specifications with every category
    keep = np.arange(len(categories)) != primary.left_out_index(categories)
    without = curve_r(rows[:, keep], pref_arr[:, keep], rng=rng, permutations=permutations, left_out=False)
    joint = _joint_tests(curve, without, level=level)
    kept = distinct_subset(rows, np.flatnonzero(curve.layer_of == curve.declared))
    return record(
        SpecificationCurve, header, categories=list(categories), n_specs=int(s_idx.size),
        choices=SpecChoices(pooling=list(dict.fromkeys(b[0] for b in base)),
                            policy=list(dict.fromkeys(b[1] for b in base)),
                            representation=list(dict.fromkeys(b[2] for b in base)), nll=nll,
                            layer=sorted({b[3] for b in base}), left_out=left_out),
        relabellings=int(stats.r_perm.shape[0]), mode=stats.mode, max_exact_orders=MAX_EXACT_ORDERS, specs=specs,
        null_band=_band(stats.r_perm[:, s_idx[specs_distinct], k_idx[specs_distinct], j_idx[specs_distinct]], level),
        below_alpha=below_alpha(stats.r_perm[:, s_idx[every], k_idx[every], j_idx[every]], alpha),
        universe=_universe(curve), joint=joint, primary=_joint_p(joint, "declared", primary.statistic),
        secondary=Secondary(alpha=alpha, tests=_secondary(joint, primary, alpha=alpha)),
        layer_zero=_layer_zero(curve, kept), nll_sign=_nll_sign(curve, kept), power=power)


def _specs(curve: _Curve, left_out: list[str | None]
           ) -> tuple[SpecColumns, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every specification (row, NLL, left-out category) in ascending r (undefined last), and its indices."""
    base, stats = curve.base, curve.stats
    distinct = first_identical(curve.rows) == np.arange(len(base))
    s_idx, k_idx, j_idx = (a.ravel() for a in np.meshgrid(np.arange(len(base)), np.arange(len(curve.nll)),
                                                           np.arange(len(left_out)), indexing="ij"))
    r = stats.r[s_idx, k_idx, j_idx]
    p = stats.spec_p[s_idx, k_idx, j_idx]
    order = np.argsort(np.where(np.isfinite(r), r, np.inf), kind="stable")
    s_idx, k_idx, j_idx, r, p = s_idx[order], k_idx[order], j_idx[order], r[order], p[order]
    specs = SpecColumns(
        pooling=[base[s][0] for s in s_idx], policy=[base[s][1] for s in s_idx],
        representation=[base[s][2] for s in s_idx], nll=[curve.nll[k] for k in k_idx],
        layer=[base[s][3] for s in s_idx], left_out=[left_out[j] for j in j_idx],
        r=missing.series(r, WHY_UNDEFINED), permutation_p=missing.series(p, WHY_UNDEFINED),
        permutation_count=[int(stats.spec_orders[j]) for j in j_idx],
        permutation_mode=[stats.spec_modes[j] for j in j_idx], distinct=[bool(distinct[s]) for s in s_idx])
    return specs, (s_idx, k_idx, j_idx)


def _joint_tests(curve: _Curve, without_stats: CurveStats, *, level: float) -> dict[str, JointTest]:
    """The joint tests: the distinct specifications of a set of layers, NLLs and poolings, every category
    (or the left-out one out, under its own orders ``without_stats``)."""
    primary, nll, stats = curve.primary, curve.nll, curve.stats
    in_primary, pooling_of, layer_of = curve.in_primary, curve.pooling_of, curve.layer_of
    others, other_nll = curve.other_poolings, curve.other_nll
    if primary.nll not in nll or not in_primary.any():
        raise UAProbeError(f"specification curve: analysis.primary.nll ({primary.nll}) or poolings "
                           f"({', '.join(primary.poolings)}) are not among the curve's ({', '.join(nll)}; "
                           f"{', '.join(dict.fromkeys(pooling_of))}); set them in params.yaml to options the "
                           "extraction has")
    declared, n_layers = curve.declared, int(layer_of.max())
    all_in, without = stats.r_perm[..., 0], without_stats.r_perm[..., 0]  # without: ((C-1)! or m + 1, S, K)
    estimand = ([primary.nll], in_primary)
    joint: dict[str, JointTest] = {}
    for key, layers, r_perm, mode, (nlls, rows_in), description in (
            ("declared", [declared], all_in, stats.mode, estimand,
             "the primary universe: the pre-declared layer, NLL and poolings, every category"),
            ("every_layer", list(range(n_layers + 1)), all_in, stats.mode, estimand,
             "the primary universe at every layer 0..L instead of the pre-declared one, every category"),
            ("without_category", [declared], without, without_stats.mode, estimand,
             f"the primary universe with {primary.left_out} left out"),
            ("layer_zero", [0], all_in, stats.mode, estimand,
             "the primary universe's choices at layer 0 (the token embeddings)"),
            ("full_universe", [declared], all_in, stats.mode, (nll, np.ones(len(curve.base), dtype=bool)),
             "every pooling and NLL at the pre-declared layer, every category: the primary universe with the "
             "robustness checks' options added"),
            ("other_nll", [declared], all_in, stats.mode, (other_nll, in_primary),
             f"robustness check: the primary universe with the {' and '.join(other_nll) or 'no other'} NLL instead"),
            ("other_poolings", [declared], all_in, stats.mode, ([primary.nll], np.isin(pooling_of, others)),
             f"robustness check: {' and '.join(others) or 'no other'} pooling instead of the primary poolings")):
        in_layers = np.flatnonzero(np.isin(layer_of, layers) & rows_in)
        sel = distinct_subset(curve.rows, in_layers)
        k_sel = [nll.index(k) for k in nlls]
        curves = r_perm[:, sel, :][:, :, k_sel].reshape(r_perm.shape[0], -1)
        joint[key] = _joint_record(joint_test(curves), description=description, layers=layers,
                                   left_out=primary.left_out if key == "without_category" else None,
                                   n_merged=(in_layers.size - sel.size) * len(k_sel),
                                   relabellings=int(r_perm.shape[0]), mode=mode, band=_band(curves, level),
                                   poolings=[str(q) for q in dict.fromkeys(pooling_of[in_layers])], nll=list(nlls))
    return joint


def _secondary(joint: Mapping[str, JointTest], primary: PrimaryParams, *, alpha: float) -> list[SecondaryP]:
    """The secondary family: the declared test's other statistic, both statistics of every layer and of the
    left-out category, Holm-adjusted at ``alpha``."""
    other = "share_positive" if primary.statistic == "median_r" else "median_r"
    family = [_joint_p(joint, test, stat) for i, (test, stat) in enumerate(
        [("declared", other)] + [(test, stat) for test in ("every_layer", "without_category")
                                 for stat in ("median_r", "share_positive")])]
    holm_p = holm(np.array([missing.number(f.p) for f in family]))
    why = "its joint p is undefined"
    return [SecondaryP(**dict(f), holm_p=missing.value(h, why),
                       holm_reject=missing.flag(h <= alpha, defined=bool(np.isfinite(h)), reason=why))
            for f, h in zip(family, holm_p)]


def _universe(curve: _Curve) -> Universe:
    """The primary universe: its axes and robustness checks with their reasons, and the specifications of
    the declared layer merged as duplicates."""
    base, primary, declared = curve.base, curve.primary, curve.declared
    primary_at = np.flatnonzero((curve.layer_of == declared) & curve.in_primary)
    primary_kept = distinct_subset(curve.rows, primary_at)
    first_at = primary_at[first_identical(curve.rows[primary_at])]
    merged = []
    for s in primary_kept:
        dup = [t for t, f in zip(primary_at, first_at) if f == s and t != s]
        if dup:
            merged.append(MergedSpecs(kept=_spec_id(base[s], primary.nll),
                                      merged=[_spec_id(base[t], primary.nll) for t in dup]))
    n_listed = primary_at.size
    n_merged = primary_at.size - primary_kept.size
    options: dict[str, list[str | int]] = {
        "pooling": list(primary.poolings), "policy": list(dict.fromkeys(b[1] for b in base)),
        "representation": list(dict.fromkeys(b[2] for b in base)), "nll": [primary.nll], "layer": [declared]}
    return Universe(
        axes={axis: UniverseAxis(options=o, reason=AXIS_REASONS[axis]) for axis, o in options.items()},
        robustness_checks={"nll": RobustnessCheck(options=curve.other_nll, test="other_nll",
                                                  reason=CHECK_REASONS["nll"]),
                           "pooling": RobustnessCheck(options=curve.other_poolings, test="other_poolings",
                                                      reason=CHECK_REASONS["pooling"])},
        declared=DECLARED, depth=float(primary.depth), not_axes=dict(NOT_AXES), duplicate_rule=DUPLICATE_RULE,
        n_listed=n_listed, n_distinct=n_listed - n_merged, n_merged=n_merged, merged=merged)


def _layer_zero(curve: _Curve, kept: np.ndarray) -> LayerZero:
    """Layer 0's r beside the declared layer's, for every distinct specification of the declared layer and NLL."""
    base, nll, r = curve.base, curve.nll, curve.stats.r
    zero_of = {b[:3]: i for i, b in enumerate(base) if b[3] == 0}
    lz_rows = [(s, k) for s in kept for k in range(len(nll))]
    r_zero = np.array([r[zero_of[base[s][:3]], k, 0] for s, k in lz_rows])
    r_decl = np.array([r[s, k, 0] for s, k in lz_rows])
    return LayerZero(pooling=[base[s][0] for s, _ in lz_rows], policy=[base[s][1] for s, _ in lz_rows],
                     representation=[base[s][2] for s, _ in lz_rows], nll=[nll[k] for _, k in lz_rows],
                     layer=[curve.declared] * len(lz_rows), r=missing.series(r_decl, WHY_UNDEFINED),
                     r_layer_zero=missing.series(r_zero, WHY_UNDEFINED))


def _nll_sign(curve: _Curve, kept: np.ndarray) -> NllSign:
    """The mean and the summed NLL's r of every distinct specification of the declared layer, and where their
    signs differ."""
    base, nll, r = curve.base, curve.nll, curve.stats.r
    r_mean, r_sum = r[kept, nll.index("mean"), 0], r[kept, nll.index("sum"), 0]
    defined = np.isfinite(r_mean) & np.isfinite(r_sum)
    flips = defined & (np.sign(r_mean) * np.sign(r_sum) < 0)
    return NllSign(pooling=[base[s][0] for s in kept], policy=[base[s][1] for s in kept],
                   representation=[base[s][2] for s in kept], layer=[curve.declared] * kept.size,
                   r_mean=missing.series(r_mean, WHY_UNDEFINED), r_sum=missing.series(r_sum, WHY_UNDEFINED),
                   sign_changes=missing.flags(flips, defined=defined, reasons="r is undefined under one of the NLLs"),
                   n_sign_changes=int(flips.sum()))


def curve_metrics(curve: SpecificationCurve) -> SpecCurveMetrics:
    """The ``specification_curve`` record of ``metrics/models/<id>.json``."""
    pr, joint = curve.primary, curve.joint
    stat = pr.statistic
    wc = next(t for t in curve.secondary.tests if t.test == "without_category" and t.statistic == stat)
    full = joint["full_universe"]
    return SpecCurveMetrics(
        n_specs=joint["declared"].n_specs, n_merged=joint["declared"].n_merged, primary_estimate=pr.estimate,
        primary_p=pr.p, primary_p_floor=pr.p_floor, without_category_estimate=wc.estimate,
        without_category_p=wc.p, without_category_holm_p=wc.holm_p,
        layer_zero_estimate=getattr(joint["layer_zero"], stat), full_universe_estimate=getattr(full, stat),
        full_universe_p=full.median_p if stat == "median_r" else full.share_p,
        nll_sign_changes=curve.nll_sign.n_sign_changes, nll_rows=len(curve.nll_sign.r_mean))


def layer_r(specs: SpecColumns, *, pooling: str, policy: str, representation: str, nll: str,
            n_layers: int) -> list[float | None]:
    """The r per layer of one line of the curve without a left-out category (None where undefined)."""
    out: list[float | None] = [None] * (n_layers + 1)
    s = specs
    for i in range(len(s.r)):
        if (s.pooling[i] == pooling and s.policy[i] == policy and s.representation[i] == representation
                and s.nll[i] == nll and s.left_out[i] is None):
            r = s.r[i]
            out[s.layer[i]] = r if missing.present(r) else None
    return out


def plot_columns(curve: SpecificationCurve, dims: Dimensions, *, nll: str) -> dict[str, list[Any]]:
    """``plots/representation/<id>.csv``: per layer, r of the mean pooling under every representation
    and both policies (no category left out, the selected NLL), and the raw mean pairwise cosine and
    top-PC share of the mean pooling."""
    n_layers = curve.n_layers
    cols: dict[str, list[Any]] = {"layer": list(range(n_layers + 1)), "depth_pct": list(curve.depth_pct)}
    for policy, suffix in (("default", ""), ("sink_excluded", "_sink_excluded")):
        name = dims.policy_names[policy]
        for kind in REPRESENTATIONS:
            cols[f"r_mean_{kind}{suffix}"] = layer_r(curve.specs, pooling="mean", policy=name, representation=kind,
                                                     nll=nll, n_layers=n_layers)
    for policy, suffix in (("default", ""), ("sink_excluded", "_sink_excluded")):
        e = dims.policies[policy].poolings["mean"]
        cols[f"mean_cosine_raw{suffix}"] = list(e.mean_cosine["raw"])
        cols[f"variance_top1{suffix}"] = list(e.variance_share["top1"])
    return missing.as_null(cols)
