"""Fault injection at every stage boundary after extraction, and in the ``uaprobe`` command.

A small project (two synthetic models, small analysis parameters) is built once with analyze and
compare, beside an earlier figures directory; each test copies it, breaks one input or injects one fault, runs one stage,
and asserts what the user sees: exit code 2, one error message naming the file (and the dataset
or key), no "Traceback" on stderr, and no file of the project changed or appeared. Extraction's
own faults are in ``test_faults.py`` and ``test_inputs.py``.

A full disk is injected as ``ENOSPC`` from ``fsync`` (where a deferred write error surfaces) and,
as root, made real with a small tmpfs; a read-only directory is injected as ``EROFS`` from the
write probe and, as root, made real by remounting a tmpfs read-only (root ignores file modes).
"""

from __future__ import annotations

import errno
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import h5py
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import remount_read_only
from synthetic_h5 import write_synthetic_h5
from uaprobe import atomic, cli, memo
from uaprobe.schema import MODELS as SCHEMAS
from uaprobe.stage import EXIT_ERROR, stage_main

REPO = Path(__file__).resolve().parents[1]
MODELS = ("m1", "m2")
PAPER_FILES = ("_quarto.yml", "paper.qmd", "references.bib", "chicago-author-date.csl")
FUZZ = settings(max_examples=25, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def load_stage(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"faults_stage_{name}", REPO / "stages" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


STAGES = {name: load_stage(name) for name in ("analyze", "compare", "figures", "paper")}


def listing(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones included) with its bytes, but the store of figures drawn
    (``.cache/``: no output; what a failed stage drew is kept there, under the figure's inputs, to save the
    next run the time)."""
    store = root / memo.FOLDER
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and store not in p.parents}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project with every output of analyze and compare, and an earlier figures directory (drawing the real
    one takes most of a minute on two cores; a failing stage must leave any earlier one as it was)."""
    root = tmp_path_factory.mktemp("project")
    params = {
        "models": list(MODELS),
        "catalog": {m: {"display": f"Model {m}", "source": "local", "location": f"/nowhere/{m}",
                        "params_millions": 10.0 * (i + 1)} for i, m in enumerate(MODELS)},
        "analysis": {"seed": 7, "bootstrap_resamples": 200, "permutations": 200, "ci_level": 0.9,
                     "bins": {"k": [3, 4], "partitions": 8, "ci_k": 4},
                     "robustness": {"lexical_seeds": 1, "null_partitions": 20, "anisotropy_bootstrap": 5}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    shutil.copytree(REPO / "data" / "published", root / "data" / "published")  # the published reference values
    for i, m in enumerate(MODELS):
        write_synthetic_h5(root / "data" / "embeddings" / f"{m}.h5", seed=i, n_layers=4, hidden=12, model_id=m)
        write_synthetic_h5(root / "data" / "embeddings" / f"{m}.control.h5", seed=10 + i, n_layers=4, hidden=12,
                           model_id=m, pairs_per_category=(6, 4), category_names=("neutral", "political"))
    (root / "paper").mkdir()
    for name in PAPER_FILES:
        shutil.copyfile(REPO / "paper" / name, root / "paper" / name)
    (root / "figures" / "models" / "m1").mkdir(parents=True)
    (root / "figures" / "models" / "m1" / "layerwise.png").write_bytes(b"\x89PNG earlier figure")
    (root / "figures" / "manifest.json").write_text('{"figures": [], "formats": ["png"], "stage": "figures"}\n')
    cwd = Path.cwd()
    os.chdir(root)
    try:
        for m in MODELS:
            assert stage_main("analyze", STAGES["analyze"].main,
                              ["--model", m, "--control", f"data/embeddings/{m}.control.h5"]) == 0
        assert stage_main("compare", STAGES["compare"].main, []) == 0
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture()
def project(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    shutil.copytree(built, root, symlinks=True)
    monkeypatch.chdir(root)
    return root


def run_refused(stage: str, argv: list[str], *, root: Path, names: list[str], caplog: pytest.LogCaptureFixture,
                capsys: pytest.CaptureFixture, before: dict[str, bytes] | None = None) -> str:
    """Run ``stage`` in-process; assert exit 2, one message naming ``names``, no traceback, nothing changed."""
    before = listing(root) if before is None else before
    caplog.clear()
    main = STAGES[stage].main if stage in STAGES else (lambda a: cli.run(cli.parser().parse_args(a)))
    with caplog.at_level(logging.INFO):
        code = stage_main(stage, main, argv)
    err = capsys.readouterr().err
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert code == EXIT_ERROR, (code, err, errors)
    assert "Traceback" not in err
    assert len(errors) == 1, errors
    for name in names:
        assert name in errors[0], (name, errors[0])
    assert listing(root) == before
    return errors[0]


def never(what: str) -> Callable[..., Any]:
    def called(*_a: Any, **_k: Any) -> Any:
        raise AssertionError(f"{what} ran although an input or output check should have stopped the stage first")
    return called


def full_disk(monkeypatch: pytest.MonkeyPatch, *, on_call: int = 1) -> None:
    """``fsync`` reports ENOSPC from its ``on_call``-th call on (a write-back the disk had no room for)."""
    original, calls = os.fsync, [0]

    def fsync(fd: int) -> None:
        calls[0] += 1
        if calls[0] >= on_call:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        original(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)


def read_only_probe(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Files cannot be created in ``directory`` (EROFS), as on a read-only mount."""
    original = atomic.tempfile.mkstemp

    def mkstemp(*args: Any, dir: Any = None, **kwargs: Any) -> Any:  # noqa: A002 - tempfile's own keyword
        if dir is not None and Path(dir).resolve() == directory.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return original(*args, dir=dir, **kwargs)

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)


# ---------------------------------------------------------------------------------------------
# analyze: the extraction file's contract, a full disk, a read-only results directory
# ---------------------------------------------------------------------------------------------

def _rewrite_h5(path: Path, change: Callable[[h5py.File], None]) -> None:
    with h5py.File(path, "r+") as fh:
        change(fh)


def _replace(name: str, make: Callable[[np.ndarray], np.ndarray]) -> Callable[[h5py.File], None]:
    def change(fh: h5py.File) -> None:
        values = make(fh[name][()])
        del fh[name]
        fh.create_dataset(name, data=values)
    return change


def _plant(value: float, index: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    def make(values: np.ndarray) -> np.ndarray:
        values[index] = value
        return values
    return make


H5_FAULTS: dict[str, tuple[Callable[[h5py.File], None], list[str]]] = {
    "int32 pooled/mean": (_replace("pooled/mean", lambda v: v.astype(np.int32)), ["'pooled/mean'", "int32"]),
    "NaN in pooled/last": (_replace("pooled/last", _plant(np.nan, (3, 2, 5))), ["'pooled/last'", "[3, 2, 5]"]),
    "inf in pooled/first": (_replace("pooled/first", _plant(np.inf, (0, 0, 1))), ["'pooled/first'", "[0, 0, 1]"]),
    "NaN in nll/mean": (_replace("nll/mean", _plant(np.nan, (7,))), ["'nll/mean'", "[7]"]),
    "pooled/mean one row short": (_replace("pooled/mean", lambda v: v[:-1]), ["'pooled/mean'", "axis 0"]),
    "nll/sum two rows short": (_replace("nll/sum", lambda v: v[:-2]), ["'nll/sum'", "axis 0"]),
    "hidden size differs between poolings": (_replace("pooled/last", lambda v: v[:, :, :-1]),
                                             ["'pooled/last'", "axis 2"]),
    "no n_layers attribute": (lambda fh: fh.attrs.__delitem__("n_layers"), ["'n_layers'", "is missing"]),
    "no anisotropy/states": (lambda fh: fh.__delitem__("anisotropy/states"), ["'anisotropy/states'", "missing"]),
    "not complete": (lambda fh: fh.attrs.__setitem__("complete", False), ["incomplete extraction file"]),
}


@pytest.mark.parametrize("fault", sorted(H5_FAULTS))
def test_analyze_refuses_a_broken_extraction_file_before_any_work(project: Path, fault: str,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture,
                                                                  capsys: pytest.CaptureFixture) -> None:
    change, names = H5_FAULTS[fault]
    h5 = project / "data" / "embeddings" / "m1.h5"
    _rewrite_h5(h5, change)
    monkeypatch.setattr(STAGES["analyze"], "analyze_models", never("the analysis"))
    message = run_refused("analyze", ["--model", "m1"], root=project, names=[str(Path("data/embeddings/m1.h5")),
                                                                               *names], caplog=caplog, capsys=capsys)
    assert "rerun the extract stage" in message


@FUZZ
@given(data=st.data())
def test_fuzz_analyze_on_generated_broken_files(built: Path, tmp_path_factory: pytest.TempPathFactory,
                                                data: st.DataObject) -> None:
    """Any float dataset, NaN/inf at any index, or any dataset cut by any number of rows: exit 2, the file and the
    dataset named, no output touched."""
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(built / "data", root / "data")
    shutil.copyfile(built / "params.yaml", root / "params.yaml")
    h5 = root / "data" / "embeddings" / "m1.h5"
    with h5py.File(h5, "r") as fh:
        names = sorted(n for n in ("pooled/mean", "pooled/last", "pooled/first", "prenorm/mean", "nll/sum",
                                   "nll/mean", "anisotropy/states", "n_tokens", "statements/pair"))
        name = data.draw(st.sampled_from(names), label="dataset")
        values = fh[name][()]
    if values.dtype.kind == "f" and data.draw(st.booleans(), label="non-finite"):
        flat = data.draw(st.integers(0, values.size - 1), label="position")
        values.reshape(-1)[flat] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        expected = str([int(i) for i in np.unravel_index(flat, values.shape)])
    else:
        values = values[: -data.draw(st.integers(1, values.shape[0] - 1), label="cut")]
        expected = "axis 0"
    _rewrite_h5(h5, _replace(name, lambda _v: values))
    before = listing(root)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger().addHandler(handler)
    try:
        code = stage_main("analyze", STAGES["analyze"].main,
                          ["--model", "m1", "--params", str(root / "params.yaml"), "--embeddings", str(h5),
                           "--results", str(root / "results/models"), "--metrics", str(root / "metrics/models"),
                           "--plots", str(root / "plots")])
    finally:
        logging.getLogger().removeHandler(handler)
    message = " ".join(r.getMessage() for r in records)
    assert code == EXIT_ERROR
    assert str(h5) in message and expected in message, message
    if expected != "axis 0":  # a non-finite value: the dataset and its first bad index are named
        assert repr(name) in message, message
    assert listing(root) == before


IMPOSSIBLE_VALUES = {
    # a count whose arrays no machine holds: refused with its key before anything is allocated
    "bootstrap_resamples": (("bootstrap_resamples",), 1_000_000_000,
                            ["analysis.bootstrap_resamples: got 1,000,000,000", "GiB", "available", "at most about"]),
    "permutations": (("permutations",), 10**10, ["analysis.permutations: got 10,000,000,000", "available"]),
    "bins.partitions": (("bins", "partitions"), 10**12, ["analysis.bins.partitions", "available"]),
    "null_partitions": (("robustness", "null_partitions"), 10**12, ["analysis.robustness.null_partitions"]),
    # as many directions as the states' rank: refused with the range (24 pairs, hidden size 12)
    "abtt_k": (("abtt_k",), 100_000, ["analysis.abtt_k: 100000 directions cannot be removed",
                                      "data/embeddings/m1.h5", "rank at most 47", "set it below that"]),
    "abtt_k at the rank": (("abtt_k",), 12, ["analysis.abtt_k: got 12", "from 1 to 11"]),
}


@pytest.mark.parametrize("case", sorted(IMPOSSIBLE_VALUES))
def test_analyze_refuses_a_value_the_file_or_the_machine_cannot_take(project: Path, case: str,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     caplog: pytest.LogCaptureFixture,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """``-S analysis.bootstrap_resamples=1000000000`` or ``-S analysis.abtt_k=100000``: exit 2 with the key, the
    reason and what fits, before the analysis starts -- no MemoryError, no clamped removal."""
    path, value, names = IMPOSSIBLE_VALUES[case]
    doc = yaml.safe_load((project / "params.yaml").read_text())
    section = doc["analysis"]
    for part in path[:-1]:
        section = section[part]
    section[path[-1]] = value
    (project / "params.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(STAGES["analyze"], "analyze_models", never("the analysis"))
    run_refused("analyze", ["--model", "m1"], root=project, names=names, caplog=caplog, capsys=capsys)


def test_analyze_on_a_full_disk_leaves_every_earlier_output(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture,
                                                            capsys: pytest.CaptureFixture) -> None:
    """The third file's write-back fails: the two written before it are not moved into place either."""
    full_disk(monkeypatch, on_call=3)
    run_refused("analyze", ["--model", "m1"], root=project, names=["No space left on device", "free space"],
                caplog=caplog, capsys=capsys)


def test_analyze_checks_a_read_only_results_directory_before_the_analysis(project: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          caplog: pytest.LogCaptureFixture,
                                                                          capsys: pytest.CaptureFixture) -> None:
    read_only_probe(monkeypatch, project / "results" / "models" / "m1")
    monkeypatch.setattr(STAGES["analyze"], "analyze_models", never("the analysis"))
    run_refused("analyze", ["--model", "m1"], root=project,
                names=["results/models/m1", "is not writable (Read-only file system", "--results"],
                caplog=caplog, capsys=capsys)


def _on_tmpfs(directory: Path, tmpfs: Any, *, spare: int) -> None:
    """Move ``directory``'s content onto a tmpfs mounted in its place, with ``spare`` bytes free (about)."""
    saved = directory.with_name(directory.name + "-saved")
    shutil.move(directory, saved)
    used = sum(-(-p.stat().st_size // 4096) * 4096 for p in saved.rglob("*") if p.is_file())
    used += 4096 * sum(1 for p in saved.rglob("*") if p.is_dir())
    tmpfs(directory, str(used + spare))
    shutil.copytree(saved, directory, dirs_exist_ok=True)
    shutil.rmtree(saved)


def test_analyze_on_a_real_read_only_results_directory(project: Path, tmpfs: Any, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture,
                                                       capsys: pytest.CaptureFixture) -> None:
    _on_tmpfs(project / "results", tmpfs, spare=1 << 20)
    remount_read_only(project / "results")
    monkeypatch.setattr(STAGES["analyze"], "analyze_models", never("the analysis"))
    run_refused("analyze", ["--model", "m1"], root=project, names=["results/models/m1", "Read-only file system"],
                caplog=caplog, capsys=capsys)


def test_analyze_on_a_real_full_disk(project: Path, tmpfs: Any, caplog: pytest.LogCaptureFixture,
                                     capsys: pytest.CaptureFixture) -> None:
    """A tmpfs with room for the earlier results and little more: the new files do not fit beside them."""
    _on_tmpfs(project / "results", tmpfs, spare=8192)
    run_refused("analyze", ["--model", "m1"], root=project, names=["results/models/m1/", "No space left on device"],
                caplog=caplog, capsys=capsys)


# ---------------------------------------------------------------------------------------------
# compare: the per-model results it reads
# ---------------------------------------------------------------------------------------------

def _drop(doc: dict[str, Any], path: str) -> None:
    node = doc
    keys = path.split("/")
    for key in keys[:-1]:
        node = node[next(iter(sorted(node)))] if key == "*" else node[key]
    if keys[-1] == "*":
        node.pop(next(iter(sorted(node))))
    else:
        del node[keys[-1]]


COMPARE_READS = {"layerwise": ("model", "display", "n_layers", "layers", "depth_pct", "categories", "poolings",
                                "poolings/*/pearson_r", "poolings/*/bootstrap_ci_low", "poolings/*/bootstrap_ci_high",
                                "poolings/*/loco_r"),
                 "anisotropy": ("model", "display", "n_layers", "layers", "depth_pct", "l_star", "l_star_depth_pct",
                                "bell_curve/is_bell_curve", "spectrum", "var_top1")}
"""Keys the comparison reads; each a required key of its file's schema."""


def _required(kind: str, key: str) -> bool:
    model = SCHEMAS[kind]
    for part in key.split("/"):
        if part == "*":
            continue
        info = model.model_fields[part]
        if not info.is_required():
            return False
        model = info.annotation
        args = getattr(model, "__args__", ())
        model = args[-1] if args else model
    return True


def _rules(kind: str) -> list[str]:
    keys = list(COMPARE_READS[kind])
    assert all(_required(kind, key) for key in keys)
    return keys


@pytest.mark.parametrize(("name", "key"), [("layerwise", k) for k in _rules("layerwise")]
                         + [("anisotropy", k) for k in _rules("anisotropy")])
def test_compare_names_a_missing_key(project: Path, name: str, key: str, monkeypatch: pytest.MonkeyPatch,
                                     caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture) -> None:
    path = project / "results" / "models" / "m2" / f"{name}.json"
    doc = json.loads(path.read_text())
    _drop(doc, key)
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(STAGES["compare"], "compare_panel", never("the comparison"))
    shown = key.replace("*", sorted(doc["poolings"])[0]) if "*" in key else key
    run_refused("compare", [], root=project, names=[f"results/models/m2/{name}.json", f"{shown!r}", "analyze stage"],
                caplog=caplog, capsys=capsys)


@pytest.mark.parametrize(("change", "names"), [
    (lambda d: d["poolings"]["mean"]["pearson_r"].__setitem__(0, None),
     ["'poolings/mean/pearson_r/0' is null (a missing value) without a reason in nan_reasons"]),
    (lambda d: d["poolings"]["mean"]["bootstrap_valid"].__setitem__(0, None),
     ["'poolings/mean/bootstrap_valid/0' holds null, expected an int"]),
    (lambda d: d.__setitem__("n_layers", "4"), ["'n_layers' holds a string, expected an int"]),
])
def test_compare_names_a_value_its_schema_refuses(project: Path, change: Any, names: list[str],
                                                  monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                                  capsys: pytest.CaptureFixture) -> None:
    path = project / "results" / "models" / "m1" / "layerwise.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(STAGES["compare"], "compare_panel", never("the comparison"))
    run_refused("compare", [], root=project, names=["results/models/m1/layerwise.json", *names, "analyze stage"],
                caplog=caplog, capsys=capsys)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "not found"), ("{", "not valid JSON"), ("[1, 2]", "expected a JSON object"),
    (b"\xff\xfe{}", "not UTF-8"), ("DIR", "is a directory"),
])
def test_compare_refuses_a_missing_or_malformed_results_file(project: Path, content: Any, expected: str,
                                                             caplog: pytest.LogCaptureFixture,
                                                             capsys: pytest.CaptureFixture) -> None:
    path = project / "results" / "models" / "m1" / "layerwise.json"
    path.unlink()
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    run_refused("compare", [], root=project, names=["results/models/m1/layerwise.json", expected],
                caplog=caplog, capsys=capsys)


def test_compare_refuses_a_per_layer_list_of_the_wrong_length(project: Path, caplog: pytest.LogCaptureFixture,
                                                              capsys: pytest.CaptureFixture) -> None:
    path = project / "results" / "models" / "m1" / "layerwise.json"
    doc = json.loads(path.read_text())
    doc["poolings"]["last"]["pearson_r"].pop()
    path.write_text(json.dumps(doc))
    run_refused("compare", [], root=project, names=["'poolings/last/pearson_r'", "one per layer"],
                caplog=caplog, capsys=capsys)


def test_compare_on_a_full_disk_and_a_read_only_directory(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture,
                                                          capsys: pytest.CaptureFixture) -> None:
    with monkeypatch.context() as m:
        full_disk(m, on_call=2)
        run_refused("compare", [], root=project, names=["No space left on device"], caplog=caplog, capsys=capsys)
    read_only_probe(monkeypatch, project / "plots" / "panel")
    monkeypatch.setattr(STAGES["compare"], "compare_panel", never("the comparison"))
    run_refused("compare", [], root=project, names=["plots/panel", "not writable", "--out-plots"],
                caplog=caplog, capsys=capsys)


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("relative", "key"), [("results/models/m1/validation.json", "variants"),
                                               ("results/models/m2/bins.json", "display"),
                                               ("results/models/m1/pairs.json", "poolings"),
                                               ("results/panel.json", "models")])
def test_figures_refuses_a_results_file_without_what_it_draws(project: Path, relative: str, key: str,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture,
                                                              capsys: pytest.CaptureFixture) -> None:
    path = project / relative
    doc = json.loads(path.read_text())
    del doc[key]
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(STAGES["figures"].plotting, "figure_bytes", never("drawing"))
    run_refused("figures", [], root=project, names=[relative, f"'{key}'"], caplog=caplog, capsys=capsys)


def test_figures_on_a_full_disk_keeps_the_earlier_figures(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture,
                                                          capsys: pytest.CaptureFixture) -> None:
    full_disk(monkeypatch, on_call=5)
    run_refused("figures", [], root=project, names=["figures/", "No space left on device"], caplog=caplog,
                capsys=capsys)


def test_figures_checks_a_read_only_directory_first(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture,
                                                    capsys: pytest.CaptureFixture) -> None:
    read_only_probe(monkeypatch, project)
    monkeypatch.setattr(STAGES["figures"].plotting, "figure_bytes", never("drawing"))
    run_refused("figures", [], root=project, names=["figures", "not writable", "--out"], caplog=caplog,
                capsys=capsys)


# ---------------------------------------------------------------------------------------------
# paper: every results file checked before the kernel starts
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("relative", "damage", "expected"), [
    ("results/models/m2/anisotropy.json", "delete", "not found"),
    ("results/models/m1/neutral_control.json", "delete", "not found"),
    ("results/models/m1/layerwise.json", "truncate", "not valid JSON"),
    ("results/panel.json", "empty-object", "'models' is missing"),
])
def test_paper_refuses_missing_or_broken_results_before_rendering(project: Path, relative: str, damage: str,
                                                                  expected: str, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture,
                                                                  capsys: pytest.CaptureFixture) -> None:
    path = project / relative
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_text(path.read_text()[:100])
    else:
        path.write_text("{}")
    monkeypatch.setattr(STAGES["paper"], "render_manuscript", never("rendering"))
    run_refused("paper", ["--engine", "fallback"], root=project, names=[relative, expected, "dvc repro"],
                caplog=caplog, capsys=capsys)


def test_paper_missing_manuscript_and_read_only_output(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture,
                                                       capsys: pytest.CaptureFixture) -> None:
    run_refused("paper", ["--qmd", "paper/nope.qmd"], root=project, names=["paper/nope.qmd", "not found", "--qmd"],
                caplog=caplog, capsys=capsys)
    from uaprobe.publishing import render

    read_only_probe(monkeypatch, project / "paper")
    monkeypatch.setattr(render, "render_fallback", never("rendering"))
    run_refused("paper", ["--engine", "fallback"], root=project,
                names=["paper/_output", "cannot be created in", "Read-only file system"], caplog=caplog, capsys=capsys)


def test_paper_full_disk_at_the_final_write_leaves_no_output(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture,
                                                             capsys: pytest.CaptureFixture) -> None:
    """The render is replaced by its last step (HTML and PDF written through the helper) on a full disk."""
    from uaprobe.publishing import render

    def last_step(qmd: Path, *, output_dir: Path, timeout: int) -> Any:
        atomic.write_files({output_dir / "paper.html": "<html/>", output_dir / "paper.pdf": b"%PDF"})
        raise AssertionError("the write should have failed")

    monkeypatch.setattr(render, "render_fallback", last_step)
    full_disk(monkeypatch, on_call=2)
    run_refused("paper", ["--engine", "fallback"], root=project, names=["paper.pdf", "No space left on device"],
                caplog=caplog, capsys=capsys)


def test_a_project_error_raised_in_a_manuscript_cell_is_reported_without_its_traceback(tmp_path: Path) -> None:
    from uaprobe.publishing.render import RenderError, execute_manuscript, parse_manuscript

    qmd = tmp_path / "p.qmd"
    # the settings the fallback requires (uaprobe.publishing.render.qmd.REQUIRED_VALUES), so that the cell runs
    (tmp_path / "_quarto.yml").write_text("tbl-colwidths: false\nformat:\n  typst:\n    citeproc: true\n"
                                          "    resource-path: [\".\"]\n")
    qmd.write_text("---\ntitle: t\n---\n\n```{python}\nfrom uaprobe.schema import ResultsFileError\n"
                   "raise ResultsFileError('results/panel.json: not found; rerun the compare stage')\n```\n")
    with pytest.raises(RenderError) as info:
        execute_manuscript(parse_manuscript(qmd), timeout=60)
    assert str(info.value).endswith("results/panel.json: not found; rerun the compare stage")
    assert "Traceback" not in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# The uaprobe command
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: p.write_text("plain text\n"), "not an HDF5 file"),
    (lambda p: p.write_text('{"a": 1}'), "not an HDF5 file"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, "not found"),
    (lambda p: h5py.File(p, "w").close(), "without provenance attributes"),
])
def test_provenance_refuses_what_is_not_an_extraction_file(project: Path, make: Callable[[Path], Any], expected: str,
                                                          caplog: pytest.LogCaptureFixture,
                                                          capsys: pytest.CaptureFixture) -> None:
    target = project / "data" / "thing.h5"
    make(target)
    run_refused("uaprobe provenance", ["provenance", str(target)], root=project, names=[str(target), expected],
                caplog=caplog, capsys=capsys)


def test_provenance_of_a_truncated_extraction_file(project: Path, caplog: pytest.LogCaptureFixture,
                                                   capsys: pytest.CaptureFixture) -> None:
    h5 = project / "data" / "embeddings" / "m1.h5"
    h5.write_bytes(h5.read_bytes()[:3000])
    run_refused("uaprobe provenance", ["provenance", str(h5)], root=project, names=[str(h5)], caplog=caplog,
                capsys=capsys)


@pytest.mark.parametrize(("make", "expected"), [
    (lambda p: None, "not found"),
    (lambda p: p.mkdir(), "not a DVC repository"),
    (lambda p: p.write_text("x"), "not a directory"),
])
def test_verify_refuses_a_repo_that_is_not_one(project: Path, make: Callable[[Path], Any], expected: str,
                                               caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture) -> None:
    target = project / "elsewhere"
    make(target)
    run_refused("uaprobe verify", ["verify", "--repo", str(target)], root=project, names=[str(target), expected],
                caplog=caplog, capsys=capsys)


# ---------------------------------------------------------------------------------------------
# As processes: what a user's terminal shows
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "prepare", "names"), [
    (["stages/analyze.py", "--model", "m1"], "int32", ["data/embeddings/m1.h5", "'pooled/mean'"]),
    (["stages/compare.py"], "no-layerwise", ["results/models/m2/layerwise.json", "not found"]),
    (["stages/figures.py"], "no-panel", ["results/panel.json", "not found"]),
    (["stages/paper.py", "--engine", "fallback"], "no-layerwise", ["results/models/m2/layerwise.json"]),
    (["-m", "uaprobe.cli", "provenance", "params.yaml"], "", ["params.yaml", "not an HDF5 file"]),
    (["-m", "uaprobe.cli", "verify", "--repo", "data"], "", ["data", "not a DVC repository"]),
])
def test_the_process_prints_one_line_and_exits_2(project: Path, command: list[str], prepare: str,
                                                 names: list[str]) -> None:
    if prepare == "int32":
        _rewrite_h5(project / "data/embeddings/m1.h5", _replace("pooled/mean", lambda v: v.astype(np.int32)))
    elif prepare == "no-layerwise":
        (project / "results/models/m2/layerwise.json").unlink()
    elif prepare == "no-panel":
        (project / "results/panel.json").unlink()
    before = listing(project)
    if command[0] != "-m":
        command = [str(REPO / command[0]), *command[1:]]
    proc = subprocess.run([sys.executable, *command], cwd=project, capture_output=True, text=True)
    assert proc.returncode == EXIT_ERROR, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert len(lines) == 1, proc.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])
    assert listing(project) == before


def test_verify_lists_an_unreadable_extraction_file_as_a_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture
                                                                  ) -> None:
    """A damaged extraction file is a finding of ``verify`` (exit 1, named), not a crash."""
    repo = tmp_path / "repo"
    (repo / "data" / "embeddings").mkdir(parents=True)
    subprocess.run([str(Path(sys.executable).with_name("dvc")), "init", "--no-scm", "-q"], cwd=repo, check=True)
    (repo / "dvc.yaml").write_text("stages: {}\n")
    (repo / "data" / "dataset.json").write_text("{}")
    (repo / "data" / "anisotropy_prompts.txt").write_text("a\nb\n")
    (repo / "data" / "embeddings" / "m.h5").write_text("not hdf5")
    assert cli.main(["verify", "--repo", str(repo)]) == 1
    out = capsys.readouterr()
    assert f"{repo / 'data' / 'embeddings' / 'm.h5'}: not a readable HDF5 file" in out.out
    assert "Traceback" not in out.err


# ---------------------------------------------------------------------------------------------
# SIGTERM in every stage; params.yaml changed while a stage runs
# ---------------------------------------------------------------------------------------------

DRIVER = """import os, runpy, signal, sys, importlib
module, attr, n, stage = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
from uaprobe.repro import numerics
numerics.pin(analysis=stage.endswith(("analyze.py", "compare.py")))  # as the stage would, before numpy
numerics.pin = lambda **kwargs: {}
target = importlib.import_module(module)
original, calls = getattr(target, attr), [0]
def patched(*args, **kwargs):
    calls[0] += 1
    result = original(*args, **kwargs) if calls[0] < n else None
    if calls[0] == n:
        os.kill(os.getpid(), signal.SIGTERM)
    return result
setattr(target, attr, patched)
sys.argv = [stage, *sys.argv[5:]]
runpy.run_path(stage, run_name="__main__")
"""


@pytest.mark.parametrize(("stage", "module", "attr", "n", "args"), [
    ("analyze", "uaprobe.atomic", "_write_temporary", 3, ["--model", "m1", "--control", "data/embeddings/m1.control.h5"]),
    ("compare", "uaprobe.atomic", "_write_temporary", 2, []),
    ("figures", "uaprobe.publishing.figures.plotting", "write_figure", 2, []),
    ("paper", "uaprobe.publishing.render.fallback", "execute_manuscript", 1, ["--engine", "fallback"]),
])
def test_sigterm_in_every_stage_leaves_nothing_behind(project: Path, tmp_path: Path, stage: str, module: str,
                                                     attr: str, n: int, args: list[str]) -> None:
    """SIGTERM (kill, a scheduler, a container stop) mid-write: exit 143, one message, every temporary file and
    build directory removed, every earlier output as it was."""
    before = listing(project)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(driver), module, attr, str(n), str(REPO / "stages" / f"{stage}.py"),
                           *args], cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 128 + 15, proc.stderr[-3000:]
    assert "stopped by SIGTERM" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert listing(project) == before, sorted(set(listing(project)) ^ set(before))
    stray = [p for p in project.iterdir() if p.name.startswith(".") and p.name != memo.FOLDER.parts[0]]
    assert not stray, list(project.iterdir())


DRAWING_DRIVER = """import os, runpy, signal, sys, time
stage, flag = sys.argv[1], sys.argv[2]
from uaprobe.repro import numerics
numerics.pin()
numerics.pin = lambda **kwargs: {}
from uaprobe.publishing.figures import plotting
MAIN, original = os.getpid(), plotting.figure_bytes
def patched(*args, **kwargs):
    if os.getpid() != MAIN:  # a worker: the first one to draw stops the stage, once
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
            os.kill(MAIN, signal.SIGTERM)
            time.sleep(0.5)
        except FileExistsError:
            pass
    return original(*args, **kwargs)
plotting.figure_bytes = patched
sys.argv = [stage, "--workers", "2"]
runpy.run_path(stage, run_name="__main__")
"""


def test_sigterm_while_the_workers_draw_leaves_nothing_behind(project: Path, tmp_path: Path) -> None:
    """SIGTERM to the figures stage while its worker processes draw: exit 143, one message, no build directory,
    the earlier figures as they were, and no worker left running."""
    before = listing(project)
    driver = tmp_path / "driver.py"
    driver.write_text(DRAWING_DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(driver), str(REPO / "stages" / "figures.py"), str(tmp_path / "flag")],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    # run() returned: every process holding the pipes, each worker included, has exited
    assert (tmp_path / "flag").exists()  # a worker did draw and send it
    assert proc.returncode == 128 + 15, proc.stderr[-3000:]
    assert "stopped by SIGTERM" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert listing(project) == before, sorted(set(listing(project)) ^ set(before))
    assert not [p for p in project.iterdir() if p.name.startswith(".")], list(project.iterdir())


def test_params_changed_while_analyze_runs_writes_nothing(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture,
                                                          capsys: pytest.CaptureFixture) -> None:
    """The race of a params.yaml edited and put back during a run: the stage computed with the edited seed, so it
    must not hand DVC outputs that dvc.lock would record with the restored one."""
    before = listing(project)
    params = project / "params.yaml"
    original = params.read_text()
    doc = yaml.safe_load(original)
    doc["analysis"]["seed"] = 4243
    params.write_text(yaml.safe_dump(doc))
    analyze = STAGES["analyze"]
    real = analyze.analyze_models

    def put_back(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        params.write_text(original)
        return out

    monkeypatch.setattr(analyze, "analyze_models", put_back)
    message = run_refused("analyze", ["--model", "m1"], root=project, names=["params.yaml", "analysis",
                          "4243", "dvc repro"], caplog=caplog, capsys=capsys, before=before)
    assert "changed while stage analyze ran" in message


def test_each_stage_watches_the_params_dvc_yaml_declares() -> None:
    from uaprobe.stage import STAGE_PARAMS

    declared = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    for name, body in declared.items():
        body = body.get("do", body)
        assert tuple(k.replace("${item}", "{item}") for k in body["params"]) == STAGE_PARAMS[name], name
