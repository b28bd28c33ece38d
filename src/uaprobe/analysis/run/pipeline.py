"""Library entry point of the ``analyze`` stage: every analysis of one model.

:func:`analyze_model` turns one extraction file's contents into the results, metrics and plot
series documented in ``docs/results.md`` (the panel's are :func:`uaprobe.analysis.panel.compare.compare_panel`'s).
Nothing here touches the file system: the stage writes what it returns.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from uaprobe.analysis.category import bins, power, preference, robustness, speccurve
from uaprobe.analysis.geometry import anisotropy, dimensions
from uaprobe.analysis.inference import clusterboot, phases
from uaprobe.analysis.pairs import mixed, option_b, pairmodels
from uaprobe.analysis.run import fit, length_matched
from uaprobe.analysis.run.documents import StageOutputs, header as results_header, plain
from uaprobe.analysis.pairs.pair_table import PairTable, pair_table
from uaprobe.analysis.run.policy_run import BIN_POOLINGS, PolicyRun, analyze_policy
from uaprobe.analysis.inference.groupstats import Resampling
from uaprobe.schema import missing
from uaprobe.schema.document import record
from uaprobe.schema.pairmodels import LengthMatched, Mixed
from uaprobe.schema.metrics import ControlMetrics
from uaprobe.schema.pairs import NeutralControl
from uaprobe.schema.geometry import Anisotropy, Robustness
from uaprobe.schema.specs import Dimensions, SpecificationCurve
from uaprobe.analysis.geometry.representation import transform_all
from uaprobe.analysis.inference.stats import rng_for
from uaprobe.analysis.run.summary import metrics_document, model_metrics, model_plots
from uaprobe.analysis.geometry.uniformity import CosineForm
from uaprobe.config import AnalysisParams
from uaprobe.errors import UAProbeError
from uaprobe.extraction.store import POLICIES, POOLINGS, Embeddings

BESIDE_THREAD = "uaprobe-beside"
"""Name prefix of the threads :func:`analyze_model` runs the sections on that need only the states and the
table (the representation sweep, Option B of each policy) or one earlier result (the anisotropy), beside
the rest."""
BESIDE_WORKERS = 2
"""Threads beside the main one: with the main thread's, the sections' units keep two cores busy
through the serial steps of each section."""

__all__ = ["BIN_POOLINGS", "Control", "analysis_steps", "analyze_control", "analyze_model", "table_from_embeddings"]


def table_from_embeddings(emb: Embeddings, *, source: str = "extraction file") -> PairTable:
    """The pairs, categories, NLLs and token counts of an extraction file."""
    return pair_table(category=emb.category, pair=emb.pair, side=emb.side, nll_mean=emb.nll_mean,
                      nll_sum=emb.nll_sum, n_tokens=emb.n_tokens, source=source)


def _check_layers(emb: Embeddings, source: str) -> None:
    for policy in POLICIES:
        pooled, _ = emb.policy(policy)
        for p in POOLINGS:
            if pooled[p].shape[1] != emb.n_layers + 1:
                raise UAProbeError(f"{source}: pooled/{p} ({policy}) has {pooled[p].shape[1]} layers, the attribute "
                                   f"n_layers says {emb.n_layers} (+1 for the embeddings); the file is inconsistent, "
                                   "re-extract it")


def _checked_preference(table: PairTable, params: AnalysisParams, source: str) -> np.ndarray:
    pref = table.preference(params.preference)
    if not np.isfinite(pref).all():
        raise UAProbeError(f"{source}: non-finite NLL values (nll/{params.preference}); re-extract the model")
    return pref


def analyze_model(emb: Embeddings, *, params: AnalysisParams, model_id: str, display: str | None = None,
                  source: str = "extraction file", form: CosineForm | None = None,
                  on_step: Callable[[], None] | None = None, control: Embeddings | None = None,
                  control_source: str = "control extraction file") -> StageOutputs:
    """Every per-model analysis of docs/results.md, from one extraction file's contents.

    Every analysis runs under both pooling policies of the file: the default (``pooled/*``, the
    ``pooling.drop`` of the extraction; results at the top level) and ``sink_excluded``
    (``pooled_sink_excluded/*``; results under ``sink_excluded/``). ``robustness.json`` sets them
    side by side with the controls.

    Every analysis that reads pooled states (layer-wise, validation, bins, pairs, preference, the
    robustness views, Option B, the pair-level models) reads them, pooled and pre-norm, after the transform
    ``params.representation`` (:mod:`uaprobe.analysis.geometry.representation`); the token-level analyses
    (anisotropy, the sink statistics) read the raw token states whatever the representation.
    ``dimensions.json`` and ``specification_curve.json`` run over every representation and both
    policies themselves, from the raw states.

    Args:
        emb: the extraction file, loaded.
        params: the ``analysis`` section of params.yaml.
        model_id: the catalog id (names the outputs).
        display: the model's display name (default: the file's ``display`` attribute or the id).
        source: the file's path, for error messages.
        form: force the Gram or the unit-vector form of the cosines (default: the
            smaller one, see :func:`~uaprobe.analysis.geometry.uniformity.cosine_form_for`); the results
            agree up to rounding.
        on_step: called after each of the :func:`analysis_steps` embedding-sized steps (progress).
        control: the control pairs' extraction (:func:`analyze_control`: ``neutral_control.json`` and the
            metrics key ``neutral_control``); ``control_source`` its path, for error messages.
    """
    n_layers = emb.n_layers
    _check_layers(emb, source)
    table = table_from_embeddings(emb, source=source)
    # every results file records the settings as params.yaml gives them (`auto` included: what dvc.lock
    # records); the analyses run on the values chosen for this dataset (bins.json records its k and ci_k)
    given, params = params, fit.check(params, categories=table.categories, n_pairs=table.n_pairs, source=source)
    display = display or str(plain(emb.attrs.get("display") or model_id))
    header = results_header(model_id=model_id, display=display, n_layers=n_layers, params=given, attrs=emb.attrs)
    categories = list(table.categories)
    n_cat = len(categories)
    pref = _checked_preference(table, params, source)
    mean_pref = preference.category_means(pref, category_of_pair=table.category_of_pair, n_categories=n_cat)
    default_name = str(plain(emb.attrs.get("pooling_drop", "special")))

    # the representation sweep reads only the raw states and the table, Option B a policy's transformed
    # states and the table, the anisotropy its own token states and the default policy's sign changes:
    # they run on threads beside the rest, so that their units fill the cores the main thread's serial
    # steps leave idle (each unit's bytes do not depend on which thread runs it; each analysis draws
    # from its own named generator)
    with ThreadPoolExecutor(max_workers=BESIDE_WORKERS, thread_name_prefix=BESIDE_THREAD) as beside:
        # submitted first, so it runs before the Option B units that wait on it
        option_b_draws = beside.submit(option_b.option_b_draws, n_pairs=table.n_pairs, params=params)
        sweep = beside.submit(dimensions.sweep, {policy: emb.policy(policy)[0] for policy in POLICIES},
                              row_a=table.row_a, row_b=table.row_b, category_of_pair=table.category_of_pair,
                              n_categories=n_cat, k=params.abtt_k)
        # after the sweep (submitted before it, so running or done when this starts): the dimensions, the
        # specification curve and its power, beside the pair level that does not need them
        swept = beside.submit(_swept, sweep, n_layers=n_layers, table=table, header=header, params=params,
                              default_name=default_name)
        out = StageOutputs()
        runs, states, option_b_of = _policy_runs(
            out, beside, emb, option_b_draws=option_b_draws, table=table, pref=pref, mean_pref=mean_pref,
            header=header, params=params, default_name=default_name, source=source, form=form, on_step=on_step)
        out.add("robustness", _robustness(out, runs, emb, table=table, pref=pref, mean_pref=mean_pref, header=header,
                                          params=params))

        out.pieces = model_metrics(out.records)
        out.plots = model_plots(out.records)

        # after Option B (submitted before it): the pair-level tests with the categories as random effects and on
        # the length-matched pairs, beside the fixed-effects tests that do not need them
        random_and_matched = beside.submit(_random_and_matched, emb, states=states, option_b_of=option_b_of,
                                           table=table, pref=pref, params=params, default_name=default_name)
        _add_pair_level(out, emb, states=states, option_b_of=option_b_of, random_and_matched=random_and_matched,
                        table=table, pref=pref, header=header, params=params, default_name=default_name)
        dims, curve = swept.result()
        out.add("dimensions", dims)
        out.add("specification_curve", curve)
        out.pieces["specification_curve"] = speccurve.curve_metrics(curve)
        if control is not None:
            ctrl = analyze_control(control, params=given, model_id=model_id, display=display, source=control_source)
            out.add("neutral_control", ctrl.results)
            out.pieces["neutral_control"] = ctrl.metrics
        out.metrics = metrics_document(out.pieces)
        out.plots["representation"] = speccurve.plot_columns(curve, dims, nll=params.preference)
        if on_step:
            on_step()
        return out


def _policy_runs(out: StageOutputs, beside: ThreadPoolExecutor, emb: Embeddings, *,
                 option_b_draws: Future[Any], table: PairTable, pref: np.ndarray, mean_pref: np.ndarray,
                 header: dict[str, Any], params: AnalysisParams, default_name: str, source: str,
                 form: CosineForm | None, on_step: Callable[[], None] | None
                 ) -> tuple[dict[str, PolicyRun], dict[str, dict[str, np.ndarray]],
                            dict[str, Future[option_b.OptionB]]]:
    """Each policy's analyses into ``out`` (the default policy's at the top level, the other's under its name),
    its Option B and, after the default policy, the anisotropy on the threads ``beside``; returns the runs, the
    transformed pooled states (policy -> pooling) and the Option B futures."""
    runs: dict[str, PolicyRun] = {}
    states: dict[str, dict[str, np.ndarray]] = {}
    option_b_of: dict[str, Future[option_b.OptionB]] = {}
    kind, k = params.representation, params.abtt_k
    for policy in POLICIES:
        pooled, prenorm = emb.policy(policy)
        pooled, prenorm = transform_all(pooled, kind, k=k), transform_all(prenorm, kind, k=k)
        states[policy] = pooled
        option_b_of[policy] = beside.submit(_option_b, pooled, draws=option_b_draws, table=table, pref=pref,
                                            n_content=emb.n_content, params=params)
        runs[policy] = analyze_policy(pooled=pooled, prenorm=prenorm,
                                      policy_name=default_name if policy == "default" else policy, table=table,
                                      pref=pref, mean_pref=mean_pref, header=header, params=params,
                                      form=form, on_step=on_step)
        prefix = "" if policy == "default" else f"{policy}/"
        for stem, rec in runs[policy].results.items():
            out.add(prefix + stem, rec)
        if policy == "default":  # the anisotropy needs the default policy's sign changes, nothing else
            sign_changes = out.records["layerwise"].poolings["mean"].sign_changes
            aniso = beside.submit(_anisotropy, emb, sign_changes=[dict(sc) for sc in sign_changes], header=header,
                                  params=params, default_name=default_name, source=source)
    out.add("anisotropy", aniso.result())
    return runs, states, option_b_of


def _robustness(out: StageOutputs, runs: Mapping[str, PolicyRun], emb: Embeddings, *, table: PairTable,
                pref: np.ndarray, mean_pref: np.ndarray, header: dict[str, Any], params: AnalysisParams
                ) -> Robustness:
    """``robustness.json``: the sink, the controls, the nulls, the inference, from both policies' runs."""
    n_layers = emb.n_layers
    mean = out.records["preference"].poolings["mean"]
    r_by_nll = {"mean": missing.number(mean.r_mean[n_layers]), "sum": missing.number(mean.r_sum[n_layers])}
    return robustness.robustness_results(
        default=runs["default"].view, sink_excluded=runs["sink_excluded"].view, table=table, preference=pref,
        mean_preference=mean_pref, sink=emb.sink, n_content=emb.n_content,
        tokens=(emb.token_ids, emb.token_offsets, emb.token_special), dim=int(emb.pooled["mean"].shape[-1]),
        bootstrap_counts=runs["default"].layerwise_draws.counts,
        permutation_mode=runs["default"].layerwise_draws.mode, r_by_nll=r_by_nll, preference_kind=params.preference,
        seeds=[params.seed + i for i in range(params.robustness.lexical_seeds)], n_layers=n_layers,
        n_chars=np.array([len(str(t)) for t in emb.text]), rng=rng_for(seed=params.seed, name="per_character"),
        permutations=params.permutations, header=header)


def _anisotropy(emb: Embeddings, *, sign_changes: Any, header: dict[str, Any], params: AnalysisParams,
                default_name: str, source: str) -> Anisotropy:
    """``anisotropy.json``: seed 004's profile, with and without position 0 of every prompt."""
    return anisotropy.analyze_anisotropy(
        states=emb.aniso_states, special=emb.aniso_special, prompt_index=emb.aniso_prompt_index,
        pooling_drop=default_name, n_layers=emb.n_layers, n_prompts=len(emb.prompts), params=params,
        sign_changes=sign_changes, rng=rng_for(seed=params.seed, name="anisotropy"), source=source, header=header)


def _option_b(pooled: dict[str, np.ndarray], *, draws: Future[Resampling], table: PairTable, pref: np.ndarray,
              n_content: np.ndarray, params: AnalysisParams) -> option_b.OptionB:
    """Option B and its phase means under one policy; ``draws``:
    :func:`option_b.option_b_draws`, the same for both policies (drawn once)."""
    return option_b.option_b_poolings(pooled=pooled, row_a=table.row_a, row_b=table.row_b, preference=pref,
                                      n_content=n_content, params=params, draws=draws.result())


def _random_and_matched(emb: Embeddings, *, states: dict[str, dict[str, np.ndarray]],
                        option_b_of: dict[str, Future[option_b.OptionB]], table: PairTable,
                        pref: np.ndarray, params: AnalysisParams, default_name: str
                        ) -> tuple[Mixed, LengthMatched]:
    """``pair_models.json``'s ``mixed`` and ``length_matched`` objects from the Option B metrics of both policies
    (``option_b_of``, running)."""
    values = {policy: future.result().values for policy, future in option_b_of.items()}
    n_content = {"default": emb.n_content, "sink_excluded": emb.n_content_sink_excluded}
    metric_values = {key: {p: {m: v[m] for m in option_b.METRICS} for p, v in values[key].items()} for key in values}
    random_effects = mixed.mixed_results(
        metric_values, lengths={key: np.column_stack([n[table.row_a], n[table.row_b]]) for key, n in n_content.items()},
        preference=pref, category_of_pair=table.category_of_pair, layer=params.primary.layer(emb.n_layers),
        level=params.ci_level, alpha=params.alpha)
    matched = length_matched.length_matched_results(
        states=states, values=metric_values, n_content=n_content,
        policy_names={"default": default_name, "sink_excluded": "sink_excluded"}, row_a=table.row_a,
        row_b=table.row_b, category_of_pair=table.category_of_pair, categories=table.categories, preference=pref,
        metrics=option_b.METRICS, params=params)
    return random_effects, matched


def _add_pair_level(out: StageOutputs, emb: Embeddings, *, states: dict[str, dict[str, np.ndarray]],
                    option_b_of: dict[str, Future[option_b.OptionB]],
                    random_and_matched: Future[tuple[Mixed, LengthMatched]], table: PairTable,
                    pref: np.ndarray, header: dict[str, Any], params: AnalysisParams, default_name: str) -> None:
    """Option B and its phase means under both policies (``option_b_of``: policy -> :func:`_option_b`,
    running), and the pair-level models (length out, permutation within categories): results, and the
    default policy's metrics and plots. ``states``: policy -> pooling -> the pooled states, transformed
    as ``params.representation`` says."""
    n_layers = emb.n_layers
    values: dict[str, dict[str, dict[str, np.ndarray]]] = {}  # policy -> pooling -> Option B metric -> (V, n)
    # --- Option B and phase means: the original study's pair-level analysis (analysis/pairs/option_b.py),
    # under both pooling policies (option_b.json, sink_excluded/option_b.json); metrics and plots
    # of the default policy
    cluster_draws = clusterboot.draws_for(params, category_of_pair=table.category_of_pair)
    for policy in POLICIES:
        ob = option_b_of[policy].result()
        values[policy] = ob.values
        cluster = clusterboot.cluster_block(
            {p: {m: v[m] for m in option_b.METRICS} for p, v in ob.values.items()}, pref, cluster_draws,
            params=params, phases=phases.partition(n_layers))
        policy_name = default_name if policy == "default" else policy
        out.add(("" if policy == "default" else f"{policy}/") + "option_b",
                option_b.option_b_file(ob, cluster_bootstrap=cluster, header=dict(header, policy=policy_name)))
        if policy == "default":
            out.pieces.update(option_b.headline_metrics(ob.poolings, n_layers=n_layers))
            out.plots["option_b"] = option_b.plot_columns(ob.poolings, base={"layer": list(range(n_layers + 1)),
                                                                             "depth_pct": header["depth_pct"]})

    # --- pair-level models: the Option B metrics (the values above), length out, permutation within
    # categories (analysis/pairs/pairmodels.py)
    # with the same tests with the categories as random effects, and on the length-matched pairs (on a thread)
    pm = pairmodels.from_embeddings(emb, states=states, values=values, table=table, preference=pref,
                                    params=params, default_name=default_name, header=header,
                                    mixed_and_matched=random_and_matched.result)
    out.pieces["pair_models"] = pairmodels.headline_metrics(pm, pooling=params.primary.pooling)
    out.plots["pair_models"] = missing.as_null(pairmodels.plot_columns(
        pm, base={"layer": list(range(n_layers + 1)), "depth_pct": header["depth_pct"]}))
    out.add("pair_models", pm)


def _swept(sweep: Future[dimensions.Sweep], *, n_layers: int, table: PairTable, header: dict[str, Any],
           params: AnalysisParams, default_name: str) -> tuple[Dimensions, SpecificationCurve]:
    """``dimensions.json`` and ``specification_curve.json`` (its power included) from the sweep over every
    representation and policy (:func:`dimensions.sweep` of the raw states, ``sweep``): the per-dimension
    breakdown and the specification curve."""
    sw = sweep.result()
    n_cat = len(table.categories)
    categories = list(table.categories)
    policy_names = {policy: default_name if policy == "default" else policy for policy in POLICIES}
    dims = dimensions.dimensions_results(sw, policy_names=policy_names, header=header)
    ua = {policy: {p: {r: sw.u_a[policy][p][r] - sw.u_b[policy][p][r] for r in sw.u_a[policy][p]}
                   for p in sw.u_a[policy]} for policy in sw.u_a}
    prefs = {nll: preference.category_means(table.preference(nll), category_of_pair=table.category_of_pair,
                                            n_categories=n_cat) for nll in ("mean", "sum")}
    declared = params.primary.layer(n_layers)
    spec = {"pooling": params.primary.pooling, "policy": policy_names["default"],
            "representation": params.representation, "nll": params.primary.nll, "layer": declared}
    power_of = power.power_results(
        ua["default"][params.primary.pooling][params.representation][declared], prefs[params.primary.nll],
        categories=categories, left_out=params.primary.left_out, specification=spec, params=params.power,
        alpha=params.alpha, rng=rng_for(seed=params.seed, name=power.RNG_NAME),
        permutations=params.permutations,
        universe=speccurve.universe_rows(ua, policy_names, primary=params.primary))
    curve = speccurve.curve_results(ua, prefs, categories=categories, policy_names=policy_names,
                                    primary=params.primary, alpha=params.alpha, level=params.ci_level,
                                    seed=params.seed, permutations=params.permutations, header=header,
                                    power=power_of)
    return dims, curve


class Control(NamedTuple):
    """The neutral control of one model: its results file and its headline metrics."""

    results: NeutralControl
    metrics: dict[str, dict[str, ControlMetrics]]
    """Per control category and metric (``metrics/models/<id>.json``'s ``neutral_control``)."""


def analyze_control(control: Embeddings, *, params: AnalysisParams, model_id: str, display: str | None = None,
                    source: str = "control extraction file") -> Control:
    """``neutral_control.json``: the Option B analysis on each category of the control pairs
    (``data/neutral_control.json`` extracted into ``<id>.control.h5``), and its headline metrics. The pooled states are transformed as ``params.representation`` says,
    over the control file's own statements."""
    table = table_from_embeddings(control, source=source)
    pref = _checked_preference(table, params, source)
    display = display or str(plain(control.attrs.get("display") or model_id))
    header = results_header(model_id=model_id, display=display, n_layers=control.n_layers, params=params,
                     attrs=control.attrs)
    pooled = transform_all(control.pooled, params.representation, k=params.abtt_k)
    categories = option_b.control_results(pooled=pooled, row_a=table.row_a, row_b=table.row_b,
                                          category_of_pair=table.category_of_pair, categories=table.categories,
                                          preference=pref, n_content=control.n_content, params=params)
    return Control(record(NeutralControl, header, categories=categories,
                          preference={name: missing.series(pref[table.category_of_pair == c])
                                      for c, name in enumerate(table.categories)}),
                   option_b.control_metrics(categories, n_layers=control.n_layers))


def analysis_steps(params: AnalysisParams) -> int:
    """How many times :func:`analyze_model` calls ``on_step``: per policy and pooling, the cosines
    with the category and pair-level sums, then the random-bins steps; then the representation sweep."""
    return len(POLICIES) * (len(POOLINGS) + len(BIN_POOLINGS) * bins.bins_steps(params)) + 1
