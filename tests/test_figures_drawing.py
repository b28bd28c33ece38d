"""Figures drawn on worker processes: the same bytes, in the jobs' order, at any number of workers; a job's
failure is raised where the jobs were handed out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from matplotlib.figure import Figure

from uaprobe import memo
from uaprobe.publishing.figures import drawing, plotting
from uaprobe.publishing.figures.figure_registry import FigureSpec
from uaprobe.schema import Record


def _line(docs: Mapping[str, Any]) -> Figure:
    fig = plotting.new_figure(3.0, 2.0)
    ax = fig.add_subplot()
    ax.plot(range(len(docs["y"])), docs["y"], label=docs["name"])
    ax.legend()
    return fig


def _broken(docs: Mapping[str, Any]) -> Figure:
    raise KeyError(f"{docs['name']}: no series to draw")


def _spec(key: str, scope: str, draw: Any = _line) -> FigureSpec:
    return FigureSpec(key=key, scope=scope, sources=(), data=(), draw=draw, caption="")  # type: ignore[arg-type]


def _jobs() -> list[drawing.Job]:
    return [drawing.Job(_spec(f"f{i}", "model" if i % 3 else "panel"), {"name": f"series {i}", "y": [i, 1, i * i]})
            for i in range(7)]


def test_the_bytes_and_their_order_do_not_depend_on_the_workers() -> None:
    jobs = _jobs()
    serial = [drawing.job_bytes(job, ("png", "svg")) for job in jobs]
    assert len({files["png"] for files in serial}) == len(jobs)  # every job its own figure
    for workers in (1, 2, 3):
        assert drawing.draw_all(jobs, formats=("png", "svg"), workers=workers) == serial


def test_a_failing_job_is_raised_with_its_message() -> None:
    jobs = _jobs()
    jobs[4] = drawing.Job(_spec("bad", "model", _broken), {"name": "series 4"})
    with pytest.raises(KeyError, match="series 4: no series to draw"):
        drawing.draw_all(jobs, formats=("png",), workers=2)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        drawing.draw_all(_jobs(), formats=("png",), workers=0)


def test_the_plan_lists_each_models_figures_then_the_panels_with_their_sources() -> None:
    specs = [_spec("a", "model"), _spec("b", "models"), _spec("c", "panel")]
    specs = [FigureSpec(key=s.key, scope=s.scope, sources=("layerwise",) if s.scope != "panel" else ("results/panel.json",),
                        data=(), draw=_line, caption="") for s in specs]
    docs = {"m1": {"layerwise": "1", "bins": "b1"}, "m2": {"layerwise": "2", "bins": "b2"}}
    plan = drawing.plan(specs, docs, {"panel": {}})
    assert [(str(p.target), p.model) for p in plan] == [("models/m1/a", "m1"), ("models/m2/a", "m2"),
                                                         ("panel/b", None), ("panel/c", None)]
    assert plan[2].sources == ["results/models/m1/layerwise.json", "results/models/m2/layerwise.json"]
    assert plan[3].sources == ["results/panel.json"]
    assert plan[0].job.docs == {"layerwise": "1"} and plan[2].job.docs == {"m1": {"layerwise": "1"}, "m2": {"layerwise": "2"}}


def test_written_files_are_the_rendered_bytes(tmp_path) -> None:
    files = drawing.job_bytes(_jobs()[1], ("png", "svg"))
    written = plotting.write_figure(files, tmp_path / "x" / "fig.png")
    assert [p.name for p in written] == ["fig.png", "fig.svg"]
    assert [p.read_bytes() for p in written] == [files["png"], files["svg"]]


def test_a_figure_that_declares_a_key_its_files_schema_lacks_fails_when_it_is_declared() -> None:
    FigureSpec("ok", "model", ("layerwise",), (("layerwise", ("poolings/*/pearson_r",)),
                                               ("data/published/reference-models.json", ("anything",))),
               _line, "")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="figure 'x' plots sink_excluded/layerwise 'poolings/mean/pearson'.*"
                                        "layerwise has no key 'poolings/mean/pearson'"):
        FigureSpec("x", "model", ("layerwise",), (("sink_excluded/layerwise", ("poolings/mean/pearson",)),),
                   _line, "")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="schema of panel has no key 'poolings/mean/model'"):
        FigureSpec("y", "panel", ("results/panel.json",), (("results/panel.json", ("poolings/mean/model/*/r",)),),
                   _line, "")  # type: ignore[arg-type]


class _Doc(Record):
    """A results file's header fields that change with every parameter, and a series to draw."""

    settings: dict[str, Any]
    numerics: dict[str, Any] | None = None
    y: list[float]


def _from_doc(docs: Mapping[str, Any]) -> Figure:
    doc = docs["doc"]
    return _line({"name": f"alpha {doc.settings['alpha']}", "y": doc.y})


def _doc_jobs(alpha: float = 0.05, preference: str = "mean", y0: float = 1.0) -> list[drawing.Job]:
    spec = FigureSpec(key="d", scope="model", sources=("doc",), data=(), draw=_from_doc, caption="",
                      settings=("alpha",))
    docs = {f"m{i}": {"doc": _Doc(settings={"alpha": alpha, "preference": preference}, numerics={"cpu": "x"},
                                  y=[y0 + i, 2.0, 0.5])} for i in range(3)}
    return [item.job for item in drawing.plan([spec], docs, {})]


def test_a_figure_is_shown_only_the_settings_it_declares() -> None:
    doc = _doc_jobs()[0].docs["doc"]
    assert doc.settings["alpha"] == 0.05 and dict(doc.settings) == {"alpha": 0.05} and doc.numerics == {}
    for read in (lambda: doc.settings["preference"], lambda: doc.settings.get("preference", "mean"),
                 lambda: "preference" in doc.settings, lambda: doc.numerics["cpu"]):
        with pytest.raises(drawing.UndeclaredSetting, match="figure 'd' reads (settings|numerics)"):
            read()
    undeclared = FigureSpec(key="u", scope="model", sources=("doc",), data=(), draw=_from_doc, caption="")
    job = drawing.plan([undeclared], {"m": _doc_jobs()[0].docs}, {})[0].job
    with pytest.raises(drawing.UndeclaredSetting, match="add 'alpha' to its `settings`"):
        drawing.job_bytes(job, ("png",))


def test_the_key_follows_what_a_figure_is_shown_and_nothing_else() -> None:
    key = [drawing.job_key(j, ("png",)) for j in _doc_jobs()]
    assert len(set(key)) == 3  # every model's document its own
    assert [drawing.job_key(j, ("png",)) for j in _doc_jobs(preference="sum")] == key  # undeclared: not shown
    assert all(a != b for a, b in zip(key, [drawing.job_key(j, ("png",)) for j in _doc_jobs(alpha=0.01)]))
    moved = [drawing.job_key(j, ("png",)) for j in _doc_jobs(y0=1.5)]
    assert all(a != b for a, b in zip(key, moved))
    assert drawing.job_key(_doc_jobs()[0], ("png", "svg")) != key[0]


def test_a_figure_found_in_the_store_is_the_figure_drawn(tmp_path, monkeypatch) -> None:
    store = memo.Memo(tmp_path / "store")
    fresh = drawing.draw_all(_doc_jobs(), formats=("png", "svg"), workers=1)
    assert drawing.draw_all(_doc_jobs(), formats=("png", "svg"), workers=2, memo=store) == fresh
    drawn: list[str] = []
    real = drawing.job_bytes
    monkeypatch.setattr(drawing, "job_bytes", lambda job, formats: drawn.append(job.spec.key) or real(job, formats))
    # another parameter: nothing drawn, the same bytes
    assert drawing.draw_all(_doc_jobs(preference="sum"), formats=("png", "svg"), workers=1, memo=store) == fresh
    assert drawn == []
    # one model's document changed: that figure alone is drawn again, as a fresh drawing draws it
    changed = _doc_jobs()
    changed[1] = _doc_jobs(y0=7.0)[1]
    again = drawing.draw_all(changed, formats=("png", "svg"), workers=1, memo=store)
    assert drawn == ["d"] and again[0] == fresh[0] and again[2] == fresh[2] and again[1] != fresh[1]
    assert again[1] == real(changed[1], ("png", "svg"))
    off = memo.Memo.at(tmp_path, "figures", environ={memo.ENV: "off"})
    assert off.folder is None and drawing.draw_all(_doc_jobs(), formats=("png",), workers=1, memo=off)
    assert drawn == ["d"] + ["d"] * 3
