"""The specification curve as phrases.

Reads ``specification_curve.json`` (every analytic choice's category-level r, with the exact joint
permutation test of the curve's median r and share of r > 0). Every number shown is a sourced
:class:`~uaprobe.publishing.values.Value`; a median over a subset of the specifications is a derived
key (:func:`~uaprobe.publishing.values.median_key`) that the provenance checks recompute. The shared
direction and what each representation does to r are in :mod:`uaprobe.publishing.direction`.
"""

from __future__ import annotations

from typing import Any

from uaprobe.publishing.outputs import Outputs
from uaprobe.publishing.markdown import join_words, prose
from uaprobe.publishing.values import Value, median_key

CURVE = "specification_curve"

REPRESENTATION_WORDS = {"raw": "raw", "zscore": "z-scored", "abtt": "ABTT"}
POOLING_WORDS = {"mean": "mean", "last": "last-token", "first": "first-token"}


def alpha(out: Outputs, m: str) -> float:
    return float(out.raw(m, CURVE, "settings/alpha"))


def representations(out: Outputs, m: str) -> list[str]:
    return list(out.raw(m, CURVE, "choices/representation") or [])


def representation_median(out: Outputs, m: str, representation: str) -> Value:
    """The median r over every specification with ``representation`` (a derived, sourced value)."""
    return out.v(m, CURVE, median_key("specs/r", representation=representation))


def identical_policies(out: Outputs, m: str) -> list[str]:
    """The poolings under which the two position-0 policies give the same r in every specification."""
    specs = out.raw(m, CURVE, "specs")
    policies = list(out.raw(m, CURVE, "choices/policy") or [])
    if len(policies) != 2:
        return []
    by: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, r in enumerate(specs["r"]):
        key = tuple(specs[c][i] for c in ("pooling", "representation", "nll", "layer", "left_out"))
        by.setdefault(key, {})[specs["policy"][i]] = r
    same = []
    for pooling in out.raw(m, CURVE, "choices/pooling") or []:
        rows = [v for k, v in by.items() if k[0] == pooling]
        if rows and all(len(v) == 2 and v[policies[0]] == v[policies[1]] for v in rows):
            same.append(pooling)
    return same


def _joint(out: Outputs, m: str, part: str) -> str:
    j = f"joint/{part}"
    return (f"median r {out.v(m, CURVE, f'{j}/median_r')} (p = {out.v(m, CURVE, f'{j}/median_p', 'p')}), "
            f"r > 0 in {out.v(m, CURVE, f'{j}/share_positive', 'percent')} % of them "
            f"(p = {out.v(m, CURVE, f'{j}/share_p', 'p')})")


@prose
def curve_phrase(out: Outputs) -> str:
    """Per model: the number of specifications, the median r and the share of r > 0 with their exact joint
    p, the same without a left-out category, the medians by representation, and which policies coincide."""
    sentences = []
    for m in out.models:
        medians = join_words([f"{REPRESENTATION_WORDS.get(k, k)} {representation_median(out, m, k)}"
                              for k in representations(out, m)])
        sentences.append(
            f"{out.display(m)}'s {out.v(m, CURVE, 'joint/all/n_specs', 'thousands')} specifications have "
            f"{_joint(out, m, 'all')}; the {out.v(m, CURVE, 'joint/no_left_out/n_specs', 'thousands')} with every "
            f"category have {_joint(out, m, 'no_left_out')}. By representation, the median r is {medians}.")
        same = identical_policies(out, m)
        if same and len(same) == len(out.raw(m, CURVE, "choices/pooling")):
            sentences.append(f"{out.display(m)}'s two position-0 policies give the same r in every specification, "
                             "as no pooled state includes its position 0: half of its specifications repeat the "
                             "other half.")
        elif same:
            sentences.append(f"{out.display(m)}'s two position-0 policies give the same r with "
                             f"{join_words([POOLING_WORDS.get(p, p) for p in same])} pooling, which never pools "
                             "position 0.")
    return " ".join(sentences)


def differs(out: Outputs, m: str) -> dict[str, bool]:
    """Whether the curve's median r and its share of r > 0 differ from chance at the stored α."""
    a = alpha(out, m)
    return {s: (p := out.raw(m, CURVE, f"joint/all/{s}_p")) is not None and p < a for s in ("median", "share")}


@prose
def curve_verdict(out: Outputs) -> str:
    """Whether each model's curve differs from chance at α by its median r, its share of r > 0, both or
    neither (the joint exact permutation tests over all specifications)."""
    parts = []
    for m in out.models:
        d = differs(out, m)
        how = ("by both its median r and its share of r > 0" if all(d.values()) else
               "by its median r but not by its share of r > 0" if d["median"] else
               "by its share of r > 0 but not by its median r" if d["share"] else
               "by its median r or its share of r > 0")
        parts.append(f"{out.display(m)}'s curve {'differs' if any(d.values()) else 'does not differ'} from chance "
                     f"{how}")
    levels = {alpha(out, m) for m in out.models}
    at = f" at α = {levels.pop():g}" if len(levels) == 1 else ""
    return f"{at[1:].capitalize() + ', ' if at else ''}{join_words(parts, 'while' if len(parts) == 2 else 'and')}."


@prose
def curve_abstract(out: Outputs) -> str:
    """The curve in one clause, without model names (they hold digits): for how many models the exact
    joint test finds the median r different from chance, with each model's p, and that p is not adjusted
    for the share of r > 0, where that was tested beside it."""
    yes = [m for m in out.models if differs(out, m)["median"]]
    ps = [out.v(m, CURVE, "joint/all/median_p", "p") for m in out.models]
    total = len(out.models)
    if len(yes) == total:
        who = "for every model" if total > 2 else "for both models" if total == 2 else "for the one model"
    elif not yes:
        who = "for no model"
    else:
        who = f"for {'one' if len(yes) == 1 else len(yes)} of {'two' if total == 2 else total} models"
    share = any(out.raw(m, CURVE, "joint/all/share_p") is not None for m in out.models)
    unadjusted = ", unadjusted for a second statistic" if share else ""
    return (f"the median correlation differs from chance {who} "
            f"(exact p = {join_words([str(p) for p in ps])}{unadjusted})")

