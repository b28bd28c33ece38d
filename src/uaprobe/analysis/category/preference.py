"""Which NLL makes the preference: the per-token mean (the seeds) or the sum over the statement.

A sum rewards short statements; a mean does not. Both preferences per pair and per category,
their agreement, and r(UA, preference) per view with each.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from uaprobe.analysis.inference import stats
from uaprobe.analysis.pairs.pair_table import PairTable
from uaprobe.schema import missing
from uaprobe.schema.categories import Preference, PreferencePairs, PreferencePooling, PreferencePrenorm
from uaprobe.schema.document import record


def category_means(values: np.ndarray, *, category_of_pair: np.ndarray, n_categories: int) -> np.ndarray:
    """(n_categories,) mean of per-pair ``values`` (n_pairs,) in each category."""
    cat = np.asarray(category_of_pair)
    return (np.bincount(cat, weights=np.asarray(values, dtype=float), minlength=n_categories)
            / np.bincount(cat, minlength=n_categories))


def preference_results(*, table: PairTable, ua: Mapping[str, np.ndarray], selected: str,
                       n_layers: int, header: Mapping[str, Any]) -> Preference:
    """``preference.json``, with the keys every results file of the policy starts with (``header``); ``ua`` maps
    pooling -> (V, n_categories) per-view UA."""
    n_cat = len(table.categories)
    pref = {kind: table.preference(kind) for kind in ("mean", "sum")}
    cat_pref = {kind: category_means(pref[kind], category_of_pair=table.category_of_pair, n_categories=n_cat)
                for kind in ("mean", "sum")}
    r_pairs = stats.pearson(pref["mean"], pref["sum"], x_name="mean-NLL preference", y_name="sum-NLL preference")
    r_cats = stats.pearson(cat_pref["mean"], cat_pref["sum"], x_name="mean-NLL preference",
                           y_name="sum-NLL preference")
    poolings: dict[str, PreferencePooling] = {}
    sel = slice(0, n_layers + 1)
    for pooling, x in ua.items():
        cm = stats.pearson(x, cat_pref["mean"], x_name="UA", y_name="preference")
        cs = stats.pearson(x, cat_pref["sum"], x_name="UA", y_name="preference")
        defined = np.isfinite(cm.r) & np.isfinite(cs.r)
        agree_reason = stats.inherit(cm.reason, cs.reason)
        pre = n_layers + 1
        poolings[pooling] = PreferencePooling(
            r_mean=missing.series(cm.r[sel], cm.reason[sel]),
            p_mean=missing.series(cm.p[sel], cm.reason[sel]),
            r_sum=missing.series(cs.r[sel], cs.reason[sel]),
            p_sum=missing.series(cs.p[sel], cs.reason[sel]),
            sign_agree=missing.flags(np.sign(cm.r[sel]) == np.sign(cs.r[sel]), defined=defined[sel],
                                     reasons=agree_reason[sel]),
            prenorm=PreferencePrenorm(
                r_mean=missing.value(cm.r[pre], cm.reason[pre]),
                p_mean=missing.value(cm.p[pre], cm.reason[pre]),
                r_sum=missing.value(cs.r[pre], cs.reason[pre]),
                p_sum=missing.value(cs.p[pre], cs.reason[pre])))
    names = np.array(table.categories, dtype=object)[table.category_of_pair]
    return record(
        Preference, header, selected=selected,
        pairs=PreferencePairs(
            pair=table.pair_ids.tolist(), category=names.tolist(),
            nll_mean_a=table.nll_mean[:, 0].tolist(), nll_mean_b=table.nll_mean[:, 1].tolist(),
            nll_sum_a=table.nll_sum[:, 0].tolist(), nll_sum_b=table.nll_sum[:, 1].tolist(),
            n_tokens_a=table.n_tokens[:, 0].tolist(), n_tokens_b=table.n_tokens[:, 1].tolist(),
            preference_mean=pref["mean"].tolist(), preference_sum=pref["sum"].tolist()),
        categories=list(table.categories),
        category_preference_mean=missing.series(cat_pref["mean"], "non-finite NLL"),
        category_preference_sum=missing.series(cat_pref["sum"], "non-finite NLL"),
        r_pairs_mean_vs_sum=missing.value(r_pairs.r, r_pairs.reason[()]),
        r_categories_mean_vs_sum=missing.value(r_cats.r, r_cats.reason[()]),
        poolings=poolings)
