"""Figures drawn on worker processes: the same bytes, in the jobs' order, at any number of workers; a job's
failure is raised where the jobs were handed out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from matplotlib.figure import Figure

from uaprobe.publishing.figures import drawing, plotting
from uaprobe.publishing.figures.figure_registry import FigureSpec


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
    docs = {"m1": {"name": "1"}, "m2": {"name": "2"}}
    plan = drawing.plan(specs, docs, {"panel": {}})
    assert [(str(p.target), p.model) for p in plan] == [("models/m1/a", "m1"), ("models/m2/a", "m2"),
                                                         ("panel/b", None), ("panel/c", None)]
    assert plan[2].sources == ["results/models/m1/layerwise.json", "results/models/m2/layerwise.json"]
    assert plan[3].sources == ["results/panel.json"] and plan[0].job.docs is docs["m1"]


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
