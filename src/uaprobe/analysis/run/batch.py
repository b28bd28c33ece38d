"""One run of the analyze stage over the models of a panel: every model's inputs read and checked before any
model is analysed, then the models analysed on forked worker processes (:mod:`uaprobe.forking`; as many at
once as the memory holds), each model's files built on the process that analysed it and returned, to be
written together by the stage.

A model's files are the same bytes whichever process analysed it and however many ran at once: each model's
analyses read only its own files and draw from their own named generators (tested at 1 and 2 workers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from uaprobe.analysis.geometry.uniformity import cosine_form_for
from uaprobe.analysis.run import fit, limits
from uaprobe.analysis.run.pipeline import analysis_steps, analyze_model
from uaprobe.config import AnalysisParams
from uaprobe.extraction.store import read_embeddings
from uaprobe.forking import forked_map, forks
from uaprobe.repro import numerics
from uaprobe.schema import results_text
from uaprobe.schema.text import csv_text

log = logging.getLogger("uaprobe.stages.analyze")


@dataclass(frozen=True)
class ModelJob:
    """One model of the run: its catalog id (names the outputs), its extraction file and, where the neutral
    control is analysed, the control pairs' extraction file."""

    model_id: str
    embeddings: Path
    control: Path | None = None


@dataclass(frozen=True)
class Targets:
    """Where the stage writes: ``results/<id>/*.json``, ``metrics/<id>.json``, ``plots/<kind>/<id>.csv``."""

    results: Path
    metrics: Path
    plots: Path


def check_inputs(job: ModelJob, params: AnalysisParams, *, available: int | None) -> int:
    """Read one model's files (checked against the layout) and refuse what the file or the machine cannot take
    (the dataset's own value of every ``auto`` parameter and every parameter it cannot take, at once; ``abtt_k``
    at the states' rank; counts beyond the memory); returns the bytes its analysis needs."""
    emb = read_embeddings(job.embeddings)
    analysis = fit.check(params, categories=list(dict.fromkeys(str(c) for c in emb.category)),
                         n_pairs=len(emb.text) // 2, source=str(job.embeddings))
    sizes = limits.sizes_of(emb)
    limits.check(analysis, sizes, available=available, source=str(job.embeddings))
    if job.control is not None:
        control = read_embeddings(job.control)
        limits.check(analysis, limits.sizes_of(control), available=available, source=str(job.control),
                     transformed=analysis.representation == "abtt")
    return limits.memory_total(analysis, sizes)


def model_files(job: ModelJob, params: AnalysisParams, targets: Targets, *, progress: bool) -> dict[Path, str]:
    """Every file of one model's analyses, by path; ``progress``: a progress bar of its steps."""
    started = time.perf_counter()
    emb = read_embeddings(job.embeddings)
    control = read_embeddings(job.control) if job.control is not None else None
    n_pairs, hidden = len(emb.text) // 2, emb.pooled["mean"].shape[-1]
    log.info("%s: %d pairs, %d layers, hidden size %d: cosines as %s", job.model_id, n_pairs, emb.n_layers + 1,
             hidden, "Gram matrices" if cosine_form_for(n_pairs, hidden) == "gram" else "sums of unit vectors")
    with tqdm(total=analysis_steps(params), desc=f"analyze {job.model_id}", unit="step", disable=not progress) as bar:
        out = analyze_model(emb, params=params, model_id=job.model_id, source=str(job.embeddings),
                            on_step=bar.update, control=control, control_source=str(job.control))
    res_dir = targets.results / job.model_id
    provenance = numerics.results_provenance(emb.attrs.get("numerics"), analysis=numerics.record(analysis=True))
    files = {res_dir / f"{stem}.json": results_text({**obj, "numerics": provenance}, kind=Path(stem).name,
                                                    shown=res_dir / f"{stem}.json")
             for stem, obj in sorted(out.results.items())}
    metrics_path = targets.metrics / f"{job.model_id}.json"
    files[metrics_path] = results_text(out.metrics, kind="metrics", shown=metrics_path)
    # one directory per kind of series, so that `dvc plots` can name each kind's columns once for the panel
    files.update({targets.plots / stem / f"{job.model_id}.csv": csv_text(cols) for stem, cols in sorted(out.plots.items())})
    log.info("%s: analysed in %.1f s: results in %s (%s), metrics in %s, plots in %s", job.model_id,
             time.perf_counter() - started, res_dir, ", ".join(sorted(out.results)), metrics_path,
             ", ".join(f"{k}/{job.model_id}.csv" for k in sorted(out.plots)))
    return files


def check_all(jobs: Sequence[ModelJob], params: AnalysisParams, *, workers: int) -> int:
    """Every model's inputs checked (:func:`check_inputs`); returns how many of the models' analyses may run at
    once, at most ``workers``: as many as the memory available holds."""
    available = limits.available_memory()
    totals = [check_inputs(job, params, available=available) for job in jobs]
    at_once = limits.at_once(totals, available=available, workers=workers)
    if at_once < min(workers, len(jobs)):
        log.info("%d models at a time: the memory available holds no more of these analyses at once", at_once)
    return at_once


def analyze_models(jobs: Sequence[ModelJob], params: AnalysisParams, targets: Targets, *,
                   workers: int) -> dict[Path, str]:
    """Every file of every model's analyses, by path, the models analysed on ``workers`` processes (checked
    first: :func:`check_all`)."""
    parallel = forks(len(jobs), workers)
    if len(jobs) > 1:
        log.info("%d models, %s", len(jobs), f"on {min(workers, len(jobs))} processes" if parallel else
                 "one after another" + ("" if workers == 1 else " (this process cannot fork its workers)"))
    per_model = forked_map(lambda i: model_files(jobs[i], params, targets, progress=not parallel), len(jobs),
                           workers=workers, what="analyses")
    return {path: text for files in per_model for path, text in files.items()}


__all__: Sequence[str] = ("ModelJob", "Targets", "analyze_models", "check_all", "check_inputs", "model_files")
