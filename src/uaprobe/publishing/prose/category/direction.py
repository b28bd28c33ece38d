"""The shared direction and what each representation does to r, as phrases and a table.

Reads ``dimensions.json`` (the mean pairwise cosine of every statement under each representation, the
share of the uniformity on the top dimensions, the variance on the top principal components) and
``specification_curve.json`` (the category-level r of every specification, here compared across the
raw, z-scored and ABTT representations). Every number shown is a sourced
:class:`~uaprobe.publishing.provenance.values.Value`; a median over layers or over a subset of the specifications
is a derived key (:func:`~uaprobe.publishing.provenance.values.median_key`) that the provenance checks recompute.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uaprobe.publishing.prose.category.curve import (POOLING_WORDS, REPRESENTATION_WORDS, curve_of,
                                                     representation_median, representations, spec_median)
from uaprobe.publishing.provenance.outputs import Outputs
from uaprobe.publishing.prose.primitives.markdown import join_words, markdown_table, prose
from uaprobe.publishing.provenance.values import Value
from uaprobe.publishing.prose.primitives.wording import DOMINATES, NEAR_ZERO
from uaprobe.names import POLICIES
from uaprobe.schema.specs import Dimensions, SpecificationCurve

Series = Callable[[Any], Any]
"""A getter of one per-layer series of ``dimensions.json`` (``lambda r: r.policies["default"].poolings["mean"]...``)."""


def _pooling(policy: str, pooling: str, statistic: str, key: str) -> Series:
    """The getter of ``<statistic>[<key>]`` of one policy and pooling: ``mean_cosine`` ``raw``, say."""
    return lambda r: getattr(r.policies[policy].poolings[pooling], statistic)[key]

ACTION_WORDS = {"zscore": "z-scoring", "abtt": "ABTT"}


def _argmax(values: list[Any]) -> int | None:
    finite = [(v, i) for i, v in enumerate(values or []) if v is not None]
    return max(finite)[1] if finite else None


def _peak(out: Outputs, m: str, get: Series, fmt: str = "f2") -> tuple[Value, Value] | None:
    """The largest entry of a per-layer series of ``dimensions.json`` and its layer."""
    i = _argmax(get(out.record(m, Dimensions)))
    read = out.reader(m, Dimensions)
    return None if i is None else (read(lambda r: get(r)[i], fmt), read(lambda r: r.layers[i], "int"))


def _range(out: Outputs, m: str, get: Series, fmt: str) -> tuple[Value, Value] | None:
    """The smallest and largest entry of a per-layer series of ``dimensions.json``, as values."""
    finite = [(v, i) for i, v in enumerate(get(out.record(m, Dimensions)) or []) if v is not None]
    if not finite:
        return None
    (_, lo), (_, hi) = min(finite), max(finite)
    read = out.reader(m, Dimensions)
    return read(lambda r: get(r)[lo], fmt), read(lambda r: get(r)[hi], fmt)


def _extreme_abs(out: Outputs, m: str, get: Series) -> float:
    return max((abs(v) for v in get(out.record(m, Dimensions)) or [] if v is not None), default=float("nan"))



@prose
def direction_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model (mean pooling): the largest raw mean cosine over layers under each policy, the largest
    share of the uniformity on the top dimension and of the variance on the first principal component,
    with their layers; then whether one dimension carries most of the uniformity."""
    parts, shares = [], []
    for m in out.models:
        cos, top, pc = (_peak(out, m, _pooling("default", pooling, statistic, key), "f4" if key == "raw" else "f3")
                        for statistic, key in (("mean_cosine", "raw"), ("uniformity_share", "top1"),
                                               ("variance_share", "top1")))
        if cos is None or top is None or pc is None:
            parts.append(f"no per-dimension breakdown is recorded for {out.display(m)}")
            continue
        shares.append(top[0].raw)
        text = f"{cos[0]} at layer {cos[1]} for {out.display(m)}"
        excluded, default = (_pooling(policy, pooling, "mean_cosine", "raw") for policy in ("sink_excluded", "default"))
        sx = _peak(out, m, excluded, "f4")
        dims = out.record(m, Dimensions)
        if sx is not None and excluded(dims) != default(dims):
            text += f" ({sx[0]} at layer {sx[1]} with position 0 excluded)"
        text += (f", while the top dimension's share of the uniformity peaks at {top[0]} at layer {top[1]} and the "
                 f"first principal component's share of the variance at {pc[0]} at layer {pc[1]}")
        parts.append(text)
    most = bool(shares) and all(s > DOMINATES for s in shares)
    verdict = ("so at the layers where these shares peak the raw cosines mostly measure one dimension" if most else
               "so no single dimension carries most of the uniformity everywhere")
    return (f"With {POOLING_WORDS.get(pooling, pooling)} pooling under the default policy, the raw mean pairwise cosine "
            f"over all statements peaks at {'; '.join(parts)}; {verdict}")


@prose
def standardized_phrase(out: Outputs, pooling: str = "mean") -> str:
    """What z-scoring and ABTT do to the mean cosine over all statements: its range over the layers of
    every model and policy, and whether it is within :data:`NEAR_ZERO` of zero everywhere (the range is the
    bound the text gives: centred states of unequal norms need not have a mean cosine of −1/(n − 1))."""
    lows, highs, worst = [], [], 0.0
    for m in out.models:
        for policy in POLICIES:
            for rep in ("zscore", "abtt"):
                get = _pooling(policy, pooling, "mean_cosine", rep)
                found = _range(out, m, get, "s4")
                if found is None:
                    continue
                lows.append(found[0])
                highs.append(found[1])
                worst = max(worst, _extreme_abs(out, m, get))
    if not lows:
        return "No standardized representation is recorded"
    low, high = min(lows, key=lambda v: v.raw), max(highs, key=lambda v: v.raw)
    near = worst < NEAR_ZERO
    if not near:
        return (f"With {POOLING_WORDS.get(pooling, pooling)} pooling, after z-scoring or ABTT the mean cosine over all "
                f"statements lies between {low} and {high} at every layer of every model and policy: some shared "
                "direction remains")
    return (f"With {POOLING_WORDS.get(pooling, pooling)} pooling, both transforms centre the states; n centred vectors of "
            "equal norm have a mean pairwise cosine of exactly −1/(n − 1), so a mean cosine near zero is an identity "
            f"of centring, not a finding (here between {low} and {high} at every layer of every model and policy)")


def representation_rs(out: Outputs, m: str, *, layer: int | None = None, pooling: str = "mean",
                      policy: str | None = None, nll: str = "mean") -> dict[str, Value]:
    """The category-level r of one specification (every category, the given layer, pooling, policy and NLL)
    under each representation, as values at their index of ``specs/r``; the last layer by default."""
    curve = curve_of(out, m)
    specs = curve.specs
    policy = policy or curve.choices.policy[0]
    layer = max(curve.choices.layer) if layer is None else layer
    found = {}
    for i in range(len(specs.r)):
        if (specs.layer[i], specs.pooling[i], specs.policy[i], specs.nll[i], specs.left_out[i]) == \
                (layer, pooling, policy, nll, None):
            found[specs.representation[i]] = out.value(m, SpecificationCurve, lambda r: r.specs.r[i])
    return {k: found[k] for k in representations(out, m) if k in found}


@prose
def layer_zero_representation_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model, r at layer 0 (every category, ``pooling``, default policy, mean NLL) under each representation,
    and whether its sign depends on the representation."""
    parts, mixed = [], False
    for m in out.models:
        rs = representation_rs(out, m, layer=0, pooling=pooling)
        signs = {v.raw > 0 for v in rs.values() if v.raw is not None and v.raw != 0}
        mixed = mixed or len(signs) > 1
        parts.append(join_words([f"{v} {REPRESENTATION_WORDS.get(k, k)}" for k, v in rs.items()])
                     + f" for {out.display(m)}")
    verdict = ("so the sign of r at layer 0 depends on the representation" if mixed else
               "every representation gives it the same sign")
    return f"At layer 0 with {pooling} pooling, r is {'; '.join(parts)}; {verdict}"


def widest_layer(out: Outputs, m: str, pooling: str = "mean",
                 keep: Callable[[int], bool] = lambda layer: True) -> int | None:
    """The layer whose r (every category, default policy, mean NLL) differs most between representations,
    among the layers ``keep`` accepts (the first of equals)."""
    spread = {}
    for layer in curve_of(out, m).choices.layer or []:
        rs = [v.raw for v in representation_rs(out, m, layer=layer, pooling=pooling).values() if v.raw is not None]
        if len(rs) > 1 and keep(layer):
            spread[layer] = max(rs) - min(rs)
    return max(spread, key=lambda k: (spread[k], -k)) if spread else None


def layer_value(out: Outputs, m: str, layer: int) -> Value:
    """``layer`` as the value its specification curve's ``layers`` holds."""
    i = curve_of(out, m).layers.index(layer)
    return out.value(m, SpecificationCurve, lambda r: r.layers[i], "int")


def _signs(rs: dict[str, Value]) -> int:
    return len({v.raw > 0 for v in rs.values() if v.raw is not None and v.raw != 0})


@prose
def representation_r_phrase(out: Outputs, pooling: str = "mean") -> str:
    """Per model, with mean pooling under the default policy, every category and the mean NLL: the r under
    each representation at the layer where they differ most, and at the last layer; led by whether the
    representation changes the sign of r at some layer."""
    parts, flips = [], []
    for m in out.models:
        layer = widest_layer(out, m, pooling)
        if layer is None:
            continue
        wide, last = representation_rs(out, m, layer=layer, pooling=pooling), representation_rs(out, m, pooling=pooling)
        if _signs(wide) > 1:
            flips.append(out.display(m))
        parts.append(f"at layer {layer_value(out, m, layer)} of {out.display(m)}, "
                     + ", ".join(f"{v} {REPRESENTATION_WORDS.get(k, k)}" for k, v in wide.items())
                     + " (last layer: " + ", ".join(f"{v} {REPRESENTATION_WORDS.get(k, k)}" for k, v in last.items())
                     + ")")
    lead = (f"The representation changes the sign of the category-level r at some layer of {join_words(flips)}"
            if flips else "The representation changes the size but not the sign of the category-level r")
    return (f"{lead}: with {POOLING_WORDS.get(pooling, pooling)} pooling under the default policy and every "
            f"category, r differs most between representations {'; '.join(parts)}")


def representation_table(out: Outputs, pooling: str = "mean") -> str:
    """Per model and representation: the largest and smallest mean cosine over all statements (default
    policy), the median r over every distinct specification with that representation, and the last-layer r."""
    header = ["Model", "Representation", "Mean cosine, min–max over layers", "Median r, distinct specifications",
              "r, last layer"]
    rows = []
    for m in out.models:
        last = representation_rs(out, m, pooling=pooling)
        for k in representations(out, m):
            low, high = _range(out, m, _pooling("default", pooling, "mean_cosine", k), "s3") or (None, None)
            cos = ("n/a" if low is None else f"{low} at every layer" if low.text == high.text  # .text numbers nothing
                   else f"{low} to {high}")
            rows.append([out.display(m) if k == representations(out, m)[0] else "", REPRESENTATION_WORDS.get(k, k), cos,
                         str(representation_median(out, m, k)), str(last[k]) if k in last else "n/a"])
    return markdown_table(header, rows)


def _direction_word(out: Outputs, rep: str, pooling: str | None = None) -> str:
    """``raises``/``lowers`` where the median r under ``rep`` (over every specification, or those with
    ``pooling``) is above/below the raw median for every model, ``changes`` otherwise."""
    where: dict[str, object] = {"distinct": True} if pooling is None else {"pooling": pooling, "distinct": True}
    moves = set()
    for m in out.models:
        a = spec_median(out, m, representation=rep, **where).raw
        b = spec_median(out, m, representation="raw", **where).raw
        if a is not None and b is not None:
            moves.add(a > b)
    return "changes" if len(moves) != 1 else ("raises" if moves.pop() else "lowers")


def sign_changers(out: Outputs, m: str, layer: int | None = None, pooling: str = "mean") -> list[str]:
    """The transforms whose r at ``layer`` (the last by default; every category, default policy, mean NLL) has
    the other sign than the raw representation's."""
    rs = representation_rs(out, m, layer=layer, pooling=pooling)
    raw = rs["raw"].raw if "raw" in rs else None
    return [k for k, v in rs.items() if k != "raw" and raw and v.raw and v.raw * raw < 0]


def widest_sign_change(out: Outputs, m: str, pooling: str = "mean") -> int | None:
    """The layer before the last where some transform gives r of the other sign than the raw representation's
    and the representations differ most, or None."""
    last = max(curve_of(out, m).choices.layer or [0])
    return widest_layer(out, m, pooling,
                        keep=lambda layer: layer != last and bool(sign_changers(out, m, layer, pooling)))


def _names(reps: list[str]) -> str:
    return join_words([ACTION_WORDS.get(k, k) for k in reps])


@prose
def representation_change(out: Outputs, pooling: str = "mean") -> str:
    """Which transform (z-scoring, ABTT) changes the category-level r's sign against the raw representation's,
    and where: at some layer before the last, layer 0 included (with an example), at the last layer, or nowhere (every category,
    default policy, mean NLL)."""
    transforms = [k for k in ACTION_WORDS if any(k in representations(out, m) for m in out.models)]
    changed = {k for m in out.models for x in sorted(curve_of(out, m).choices.layer or [])[:-1]
               for k in sign_changers(out, m, x, pooling)}
    mid = [k for k in transforms if k in changed]
    last = {m: ks for m in out.models if (ks := sign_changers(out, m, pooling=pooling))}
    at_last = [k for k in transforms if any(k in ks for ks in last.values())]
    subject = mid or at_last or transforms
    if not subject:
        return "no representation that removes it is recorded"
    text = (f"{_names(subject)}, which {'removes it, changes' if len(subject) == 1 else 'remove it, each change'} "
            f"the {'sign' if mid or last else 'size but not the sign'} of the category-level r")
    where = f"at the last layer of {join_words([out.display(m) for m in last])}"
    if not mid:
        return f"{text} {where}" if last else text
    m, layer = next((m, x) for m in out.models if (x := widest_sign_change(out, m, pooling)) is not None)
    which = f"{_names(sign_changers(out, m, layer, pooling))} at " if len(mid) > 1 else ""
    text += f" at layers before the last (e.g. {which}layer {layer_value(out, m, layer)} of {out.display(m)})"
    if not last:
        return text + ", not at the last layer"
    return text + (f" and {where}" if at_last == mid else f", and {_names(at_last)} {where}")
