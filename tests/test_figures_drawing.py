"""The figures stage's drawing: the same bytes on 1 and 2 worker processes, a figure whose inputs did not
change taken from the store (and only such a figure), a damaged store entry drawn again, the formats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from synthetic_h5 import SYNTHETIC_MODELS
from uaprobe.config import load_params
from uaprobe.errors import ConfigError
from uaprobe.publishing.figures import drawing, figures_geometry, figures_page, plotting
from uaprobe.schema import read_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "stages"))

import figures as figures_stage  # noqa: E402  (stages/figures.py)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, make_synthetic_project) -> Path:
    models = {name: SYNTHETIC_MODELS[name] for name in ("tiny-a", "tiny-b")}
    return make_synthetic_project(tmp_path_factory.mktemp("drawing") / "two-models", models=models)


def _keys(project: Path, jobs: list[drawing.Job], code: str = "code") -> list[str]:
    params = load_params(project / "params.yaml")
    return [drawing.job_key(job, root=project, models=params.models, formats=("png",), code=code) for job in jobs]


def test_one_and_two_workers_write_the_same_bytes(project: Path, tmp_path: Path) -> None:
    one = figures_stage.run(params_path=project / "params.yaml", root=project, out=tmp_path / "one", workers=1)
    two = figures_stage.run(params_path=project / "params.yaml", root=project, out=tmp_path / "two", workers=2)
    assert [(e["key"], e["model"]) for e in one] == [(e["key"], e["model"]) for e in two]
    a, b = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert a.keys() == b.keys() and len(a) == len(one) + 1  # one PNG per figure, and the manifest
    assert [k for k in a if a[k] != b[k]] == ["manifest.json"]  # it names its own directory
    assert json.loads(a["manifest.json"].replace(b"/one/", b"/x/")) == json.loads(b["manifest.json"].replace(b"/two/", b"/x/"))


def test_draw_all_keeps_the_jobs_order_on_two_workers(project: Path) -> None:
    jobs = figures_stage.jobs_of(project / "params.yaml", project)[:4]
    serial = drawing.draw_all(jobs, formats=("png",), workers=1)
    parallel = drawing.draw_all(jobs, formats=("png",), workers=2, cost=lambda job: float(jobs.index(job) % 2))
    assert serial == parallel
    assert len({files["png"] for files in serial}) == len(jobs)  # four different figures
    with pytest.raises(ValueError, match="workers"):
        drawing.draw_all(jobs, formats=("png",), workers=0)


def test_the_store_gives_back_only_figures_whose_inputs_did_not_change(project: Path, tmp_path: Path) -> None:
    root = Path(tmp_path / "p")
    import shutil

    shutil.copytree(project, root)
    store = drawing.FigureStore(tmp_path / "store")
    jobs = figures_stage.jobs_of(root / "params.yaml", root)
    first, drawn = drawing.drawn_or_stored(jobs, keys=_keys(root, jobs), store=store, formats=("png",), workers=1)
    assert drawn == len(jobs)
    again, drawn = drawing.drawn_or_stored(jobs, keys=_keys(root, jobs), store=store, formats=("png",), workers=1)
    assert drawn == 0 and again == first
    # the same document in other bytes: the figures drawn from it are drawn again, no other
    path = root / "results" / "models" / "tiny-b" / "anisotropy.json"
    path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=1) + "\n", encoding="utf-8")
    jobs = figures_stage.jobs_of(root / "params.yaml", root)
    changed = [j for j in jobs if "results/models/tiny-b/anisotropy.json" in j.inputs]
    assert {(j.spec.key, j.model) for j in changed} == {("anisotropy", "tiny-b"), ("spectrum", "tiny-b")}
    third, drawn = drawing.drawn_or_stored(jobs, keys=_keys(root, jobs), store=store, formats=("png",), workers=1)
    assert drawn == len(changed) and third == first  # drawn again, to the same bytes
    # other code: every figure is drawn again
    _, drawn = drawing.drawn_or_stored(jobs, keys=_keys(root, jobs, code="other"), store=store, formats=("png",),
                                       workers=1)
    assert drawn == len(jobs)
    assert len(list(store.folder.glob("*.png"))) == len(jobs)  # the store holds the last run's figures only


def test_a_damaged_store_entry_is_drawn_again(project: Path, tmp_path: Path) -> None:
    store = drawing.FigureStore(tmp_path / "store")
    jobs = figures_stage.jobs_of(project / "params.yaml", project)[:2]
    keys = _keys(project, jobs)
    first, _ = drawing.drawn_or_stored(jobs, keys=keys, store=store, formats=("png",), workers=1)
    (store.folder / f"{keys[0]}.png").write_bytes(b"not the figure")
    assert store.get(keys[0], ("png",)) is None
    again, drawn = drawing.drawn_or_stored(jobs, keys=keys, store=store, formats=("png",), workers=1)
    assert drawn == 1 and again == first
    assert store.get(keys[1], ("png", "svg")) is None  # a format never stored


def test_a_key_changes_with_each_input_it_covers(project: Path) -> None:
    job = figures_stage.jobs_of(project / "params.yaml", project)[0]
    base = dict(root=project, models=("tiny-a", "tiny-b"), formats=("png",), code="c")
    key = drawing.job_key(job, **base)
    assert key == drawing.job_key(job, **base)
    assert key != drawing.job_key(job, **{**base, "code": "d"})
    assert key != drawing.job_key(job, **{**base, "formats": ("png", "svg")})
    assert key != drawing.job_key(job, **{**base, "models": ("tiny-b", "tiny-a")})
    digest = drawing.code_digest()
    assert digest == drawing.code_digest() and len(digest) == 64
    assert digest != drawing.code_digest([REPO / "stages" / "figures.py"])


def test_figure_bytes_are_the_saved_files(project: Path, tmp_path: Path) -> None:
    doc = read_results(project, "results/models/tiny-a/anisotropy.json")
    written = plotting.save_figure(figures_geometry.anisotropy_figure(doc), tmp_path / "fig", formats=("png", "svg"))
    files = plotting.figure_bytes(figures_geometry.anisotropy_figure(doc), formats=("png", "svg"))
    assert [p.name for p in written] == ["fig.png", "fig.svg"]
    assert files == {"png": written[0].read_bytes(), "svg": written[1].read_bytes()}


def test_the_formats_come_from_params_and_always_include_png(project: Path, tmp_path: Path) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({**params, "figures": {"formats": ["png", "svg"]}}), encoding="utf-8")
    entries = figures_stage.run(params_path=path, root=project, out=tmp_path / "figs", workers=2)
    assert all(set(e["files"]) == {"png", "svg"} for e in entries)
    assert json.loads((tmp_path / "figs" / "manifest.json").read_text())["formats"] == ["png", "svg"]
    for formats in (["svg"], ["png", "png"], ["png", "jpg"]):
        path.write_text(yaml.safe_dump({**params, "figures": {"formats": formats}}), encoding="utf-8")
        with pytest.raises(ConfigError, match="figures.formats"):
            load_params(path)


def test_the_supplement_names_the_vector_versions_only_where_they_were_drawn() -> None:
    assert figures_page.vector_note(["png"]) == ""
    assert figures_page.vector_note(["png", "svg", "pdf"]) == (
        " Vector versions (SVG, PDF) lie beside each PNG under <code>figures/</code>.")
