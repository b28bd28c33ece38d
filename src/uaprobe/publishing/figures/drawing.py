"""Drawing the figures of the registry on worker processes: each figure one job, drawn and rendered to bytes
on one process from start to end, the files written by the caller.

The bytes do not depend on the number of workers: a job's figure is drawn from its documents alone, by the
same code, and the results come back in the jobs' order (tested at 1 and 2 workers); the workers are forked
from the caller (:mod:`uaprobe.forking`), so they share its documents without pickling them.

A figure whose documents did not change is not drawn again: each job is keyed (:func:`job_key`) on exactly the
documents it is shown, and its files are kept under that key (:class:`uaprobe.memo.Memo`). A job is shown its
results files whole but for two fields of their header that change with every parameter: ``settings`` (the
``analysis`` section of params.yaml) holds only the keys its :class:`FigureSpec` declares, and ``numerics``
(the machine's provenance) none; reading any other key of them raises :class:`UndeclaredSetting`. So a figure
is a function of its key, and a parameter edit redraws only the figures whose documents it changed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from uaprobe import memo as memos
from uaprobe.forking import forked_map, worker_count
from uaprobe.publishing.figures import plotting
from uaprobe.publishing.figures.figure_registry import FigureSpec
from uaprobe.schema import Record
from uaprobe.schema.document import document

log = logging.getLogger("uaprobe.figures")

HIDDEN = ("settings", "numerics")
"""The header fields of a results file that a figure is shown only the declared keys of."""
KEEP_RUNS = 4
"""The store keeps the figures of about this many runs (every figure of each)."""


class UndeclaredSetting(LookupError):
    """A figure read a key of ``settings`` (or ``numerics``) that its :class:`FigureSpec` does not declare."""


class Declared(dict):  # type: ignore[type-arg]
    """The keys of a header field (``settings``, ``numerics``) a figure declares; any other key read raises
    :class:`UndeclaredSetting` (``[]``, ``get`` and ``in`` alike)."""

    def __init__(self, values: Mapping[str, Any] | None, declared: Sequence[str], *, figure: str, field: str) -> None:
        super().__init__({k: values[k] for k in declared if values is not None and k in values})
        self.figure, self.field = figure, field

    def _refuse(self, key: object) -> UndeclaredSetting:
        return UndeclaredSetting(f"figure {self.figure!r} reads {self.field}[{key!r}], which its FigureSpec does not "
                                 f"declare: add {key!r} to its `settings` in figure_registry.py (a figure is drawn "
                                 "again only when what it declares changes)")

    def __getitem__(self, key: str) -> Any:
        if not dict.__contains__(self, key):
            raise self._refuse(key)
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key]

    def __contains__(self, key: object) -> bool:
        if not dict.__contains__(self, key):
            raise self._refuse(key)
        return True


def shown(doc: Any, spec: FigureSpec) -> Any:
    """What figure ``spec`` is shown of one document: a results record with ``settings`` and ``numerics``
    narrowed to the keys it declares (:class:`Declared`); anything else as it is."""
    if not isinstance(doc, Record):
        return doc
    fields = type(doc).model_fields
    return doc.model_copy(update={name: Declared(getattr(doc, name), spec.settings if name == "settings" else (),
                                                 figure=spec.key, field=name)
                                  for name in HIDDEN if name in fields})


def _shown_all(docs: Mapping[str, Any], spec: FigureSpec) -> dict[str, Any]:
    """The documents of ``spec``'s sources (and the published reference points, where given), as it is shown them:
    a source it does not declare is not there."""
    return {name: shown(doc, spec) for name, doc in docs.items() if name in spec.sources or name == "reference"}


@dataclass(frozen=True)
class Job:
    """One figure: ``spec`` drawn from ``docs``."""

    spec: FigureSpec
    docs: Mapping[str, Any]


class Planned(NamedTuple):
    """One figure of the stage: its job, its file under the output directory (without its suffix), its model
    (None for a panel figure) and the results files it is drawn from, relative to the root."""

    job: Job
    target: Path
    model: str | None
    sources: list[str]


def plan(figures: Sequence[FigureSpec], docs_by_model: Mapping[str, Mapping[str, Any]],
         panel: Mapping[str, Any]) -> list[Planned]:
    """Every figure of ``figures`` the stage draws, in the manifest's order: each model's figures
    (``models/<id>/<key>``), then the figures of every model together and the panel's (``panel/<key>``)."""
    out = [Planned(Job(spec, _shown_all(docs, spec)), Path("models") / model_id / spec.key, model_id,
                   [f"results/models/{model_id}/{n}.json" for n in spec.sources])
           for model_id, docs in docs_by_model.items() for spec in figures if spec.scope == "model"]
    out += [Planned(Job(spec, {m: _shown_all(docs, spec) for m, docs in docs_by_model.items()}), Path("panel") / spec.key,
                    None, [f"results/models/{m}/{n}.json" for m in docs_by_model for n in spec.sources])
            for spec in figures if spec.scope == "models"]
    out += [Planned(Job(spec, _shown_all(panel, spec)), Path("panel") / spec.key, None, list(spec.sources))
            for spec in figures if spec.scope == "panel"]
    return out


def job_bytes(job: Job, formats: Sequence[str]) -> dict[str, bytes]:
    """One job's files, per format."""
    return plotting.figure_bytes(job.spec.draw(job.docs), formats=formats)


def _canonical(value: Any) -> Any:
    if isinstance(value, Record):
        return document(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    return value


def job_key(job: Job, formats: Sequence[str]) -> str:
    """The key of a job's files: its figure, the formats and every document it is shown (:func:`shown`), as
    canonical JSON, with the code (:func:`uaprobe.memo.key`)."""
    text = json.dumps({"figure": job.spec.key, "scope": job.spec.scope, "formats": list(formats),
                       "docs": _canonical(job.docs)}, sort_keys=True, default=repr)
    return memos.key(text)


def draw_all(jobs: Sequence[Job], *, formats: Sequence[str], workers: int,
             memo: memos.Memo | None = None) -> list[dict[str, bytes]]:
    """Every job's files, in the jobs' order: those ``memo`` holds under their key (:func:`job_key`) as found, the
    others drawn on ``workers`` forked processes (:func:`uaprobe.forking.forked_map`) and stored; an exception in
    a job is raised here."""
    memo = memo or memos.Memo(None)
    keys = [job_key(job, formats) if memo.folder is not None else "" for job in jobs]
    found = [memo.get(k) if k else None for k in keys]
    todo = [i for i, files in enumerate(found) if files is None or sorted(files) != sorted(formats)]
    # a figure of the whole panel draws every model: those start first, so that no long one starts last
    first = [t for t, i in enumerate(todo) if jobs[i].spec.scope != "model"]
    drawn = dict(zip(todo, forked_map(lambda t: job_bytes(jobs[todo[t]], formats), len(todo), workers=workers,
                                      first=first, what="figures")))
    for i, files in drawn.items():
        memo.put(keys[i], files)
    if memo.folder is not None:
        memo.prune(keep=KEEP_RUNS * len(jobs))
        log.info("%d figures drawn, %d unchanged since an earlier run (%s)", len(todo), len(jobs) - len(todo),
                 memo.folder)
    return [drawn[i] if i in drawn else files for i, files in enumerate(found)]


__all__: Sequence[str] = ("Declared", "Job", "Planned", "UndeclaredSetting", "draw_all", "job_bytes", "job_key", "plan", "shown",
                          "worker_count")
