"""The HDF5 layout, described once (:mod:`uaprobe.extraction.layout`), and the reader's check derived from it.

Every broken file -- a dataset missing, stored as int where floats are expected, a row short, a
hidden size that differs between poolings, a NaN or inf at any index, an attribute missing -- is
refused by :func:`uaprobe.extraction.store.read_embeddings` with one message naming the file, the dataset and
(for a non-finite value) the first bad index.
"""

from __future__ import annotations

import re
from pathlib import Path
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synthetic_h5 import write_synthetic_h5
from uaprobe.extraction import layout, store
from uaprobe.extraction.extract import BatchResult
from uaprobe.errors import UAProbeError
from uaprobe.extraction.layout import DATASETS, LayoutError, first_non_finite, shape_of
from uaprobe.extraction.store import ExtractionWriter, read_embeddings

FUZZ = settings(max_examples=60, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
N_LAYERS, HIDDEN = 3, 8
FLOATS = [d.name for d in DATASETS if d.kind == "float"]
REQUIRED = [d.name for d in DATASETS if not d.optional]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_h5(tmp_path_factory.mktemp("layout") / "good.h5", pairs_per_category=(3, 3, 2),
                              n_layers=N_LAYERS, hidden=HIDDEN)


def rewrite(source: Path, target: Path, *, drop: tuple[str, ...] = (), replace: dict[str, Any] | None = None,
            drop_attrs: tuple[str, ...] = ()) -> Path:
    """A copy of ``source`` with datasets dropped or replaced (new values, any dtype or shape)."""
    replace = replace or {}
    with h5py.File(source, "r") as src, h5py.File(target, "w") as dst:
        for key, value in src.attrs.items():
            if key not in drop_attrs:
                dst.attrs[key] = value

        def copy(name: str, node: Any) -> None:
            if isinstance(node, h5py.Dataset) and name not in drop:
                if name in replace:
                    dst.create_dataset(name, data=replace[name])
                else:
                    src.copy(node, dst, name=name)

        src.visititems(copy)
    return target


def refused(path: Path) -> str:
    with pytest.raises(LayoutError) as info:
        read_embeddings(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert message.endswith("rerun the extract stage (`dvc repro`)")
    return message


# ---------------------------------------------------------------------------------------------
# The description
# ---------------------------------------------------------------------------------------------

def test_shape_symbols_resolve_with_plus_one() -> None:
    assert shape_of(("N", "L+1", "D"), {"N": 4, "L": 6, "D": 16}) == (4, 7, 16)
    assert shape_of(("N+1",), {"N": 4}) == (5,)
    with pytest.raises(ValueError, match=r"shape symbol 'L\+2' is not a letter"):
        shape_of(("L+2",), {"L": 1})


def test_names_are_unique_and_every_streamed_dataset_has_a_batch_field() -> None:
    names = [d.name for d in DATASETS]
    assert len(names) == len(set(names))
    streamed = {d.name: d.stream for d in DATASETS if d.stream}
    assert streamed["pooled/mean"] == "pooled.mean" and streamed["nll/sum"] == "nll_sum"
    assert {d.kind for d in DATASETS} == {"str", "int", "float", "bool"}


def test_first_non_finite_matches_a_direct_search() -> None:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((5, 4, 3))
    assert first_non_finite(values) is None
    values[3, 1, 2], values[2, 3, 0] = np.inf, np.nan
    expected = next((i, j, k) for i in range(5) for j in range(4) for k in range(3) if not np.isfinite(values[i, j, k]))
    assert first_non_finite(values) == expected == (2, 3, 0)


def test_the_synthetic_file_and_the_writer_follow_the_layout(good: Path, tmp_path: Path) -> None:
    emb = read_embeddings(good)
    assert set(emb.arrays) == set(REQUIRED)  # the synthetic file has no optional dataset
    assert emb.pooled["mean"].shape == (16, N_LAYERS + 1, HIDDEN)
    written = _write_with_writer(tmp_path / "w.h5", emb)
    again = read_embeddings(written)
    assert set(again.arrays) == {d.name for d in DATASETS}
    for name in REQUIRED:
        got, want = again.arrays[name], emb.arrays[name]
        assert np.array_equal(np.asarray(got), np.asarray(want)), name
    with h5py.File(written, "r") as fh:
        for spec in DATASETS:
            stored = fh[spec.name].dtype
            assert (h5py.check_string_dtype(stored) is not None) if spec.kind == "str" else stored == np.dtype(spec.dtype)


def _batch(emb: Any, rows: np.ndarray) -> BatchResult:
    """The rows of a loaded file as the extraction's batch result."""
    return BatchResult.from_datasets({d.name: emb.arrays[d.name][rows] for d in DATASETS if d.stream})


def _write_with_writer(path: Path, emb: Any, batch: Callable[[Any, np.ndarray], Any] = _batch) -> Path:
    writer = ExtractionWriter(path, texts=emb.text, categories=list(emb.category), pairs=emb.pair, sides=emb.side,
                              n_layers=emb.n_layers, hidden_size=int(emb.attrs["hidden_size"]), prompts=emb.prompts,
                              aniso_states=emb.aniso_states, aniso_prompt_index=emb.aniso_prompt_index,
                              aniso_special=emb.aniso_special,
                              tokens=(emb.token_ids, emb.token_offsets, emb.token_special),
                              attrs={"n_layers": emb.n_layers,
                                                                      "hidden_size": int(emb.attrs["hidden_size"])})
    rows = np.arange(len(emb.text))
    for rows_of_batch in (rows[::2], rows[1::2]):
        writer.write(rows_of_batch, batch(emb, rows_of_batch))
    return writer.finish()


def test_a_new_dataset_is_one_line(good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset added to the description is written by the writer, checked by the reader, and may be absent
    from an older file when it is optional."""
    extra = layout.DatasetSpec("sink/example", "float32", ("N", "L+1"), "a new per-statement statistic",
                               stream="example", optional=True)
    monkeypatch.setattr(layout, "DATASETS", (*layout.DATASETS, extra))
    emb = read_embeddings(good)  # older file: the optional dataset is absent
    assert "sink/example" not in emb.arrays

    class WithExample:
        def __init__(self, e: Any, rows: np.ndarray) -> None:
            self.__dict__.update(vars(_batch(e, rows)))
            self.example = np.full((len(rows), e.n_layers + 1), 2.0, dtype=np.float32) + rows[:, None]

    written = _write_with_writer(tmp_path / "example.h5", emb, WithExample)
    got = read_embeddings(written).arrays["sink/example"]
    assert got.shape == (16, N_LAYERS + 1) and got[5, 0] == 7.0
    broken = tmp_path / "example-short.h5"
    rewrite(written, broken, replace={"sink/example": np.ones((15, N_LAYERS + 1), dtype=np.float32)})
    assert "dataset 'sink/example' has shape (15, 4)" in refused(broken)


# ---------------------------------------------------------------------------------------------
# The examples of the issue, one by one
# ---------------------------------------------------------------------------------------------

def test_an_int32_pooled_mean_is_refused(good: Path, tmp_path: Path) -> None:
    with h5py.File(good, "r") as fh:
        ints = fh["pooled/mean"][()].astype(np.int32)
    message = refused(rewrite(good, tmp_path / "int.h5", replace={"pooled/mean": ints}))
    assert "dataset 'pooled/mean' is stored as int32, expected float (float32)" in message


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("pooled/mean", np.zeros((15, N_LAYERS + 1, HIDDEN), np.float32), "axis 0 is 15, but N = 16"),
    ("nll/sum", np.zeros(14), "axis 0 is 14, but N = 16"),
    ("pooled/last", np.zeros((16, N_LAYERS + 1, HIDDEN + 1), np.float32), "axis 2 is 9, but D = 8 from attribute"),
    ("anisotropy/states", np.zeros((24, N_LAYERS, HIDDEN), np.float32), "axis 1 is 3, but L+1 = 4 from attribute"),
    ("prenorm/first", np.zeros(16, np.float32), "expected 2 dimensions (N, D)"),
    ("statements/text", np.arange(16), "stored as int64, expected str"),
    ("anisotropy/special", np.zeros(24, np.float32), "stored as float32, expected bool"),
])
def test_inconsistent_shapes_and_dtypes_name_the_dataset(good: Path, tmp_path: Path, name: str, value: np.ndarray,
                                                         expected: str) -> None:
    message = refused(rewrite(good, tmp_path / "bad.h5", replace={name: value}))
    assert f"dataset {name!r}" in message and expected in message


@pytest.mark.parametrize("attr", ["n_layers", "hidden_size"])
def test_a_missing_attribute_is_named(good: Path, tmp_path: Path, attr: str) -> None:
    message = refused(rewrite(good, tmp_path / "noattr.h5", drop_attrs=(attr,)))
    assert f"attribute {attr!r}" in message and "is missing" in message


def test_a_missing_dataset_is_named(good: Path, tmp_path: Path) -> None:
    assert "dataset 'nll/mean' (" in refused(rewrite(good, tmp_path / "nonll.h5", drop=("nll/mean",)))


# ---------------------------------------------------------------------------------------------
# Generated corpus: every float dataset, NaN or inf at any index; any dataset dropped or cut short
# ---------------------------------------------------------------------------------------------

@FUZZ
@given(data=st.data())
def test_fuzz_a_non_finite_value_is_named_with_its_first_index(good: Path, tmp_path_factory: pytest.TempPathFactory,
                                                               data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(FLOATS), label="dataset")
    with h5py.File(good, "r") as fh:
        values = fh[name][()]
    bad = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]), label="value")
    count = data.draw(st.integers(1, 3), label="count")
    flat = data.draw(st.lists(st.integers(0, values.size - 1), min_size=count, max_size=count), label="positions")
    values.reshape(-1)[flat] = bad
    first = np.unravel_index(min(flat), values.shape)
    path = rewrite(good, tmp_path_factory.mktemp("nan") / "nan.h5", replace={name: values})
    message = refused(path)
    assert f"dataset {name!r} holds {values[first]} at index {[int(i) for i in first]}" in message


@FUZZ
@given(name=st.sampled_from(REQUIRED), mode=st.sampled_from(["drop", "short", "flat", "int"]))
def test_fuzz_any_dataset_dropped_or_cut_or_retyped_is_named(good: Path, tmp_path_factory: pytest.TempPathFactory,
                                                             name: str, mode: str) -> None:
    spec = layout.spec(name)
    with h5py.File(good, "r") as fh:
        values = fh[name][()]
    if mode == "int" and spec.kind in ("int", "str"):
        mode = "short"
    replace: dict[str, Any] = {}
    if mode == "short":
        replace[name] = values[:-1]
    elif mode == "flat":
        replace[name] = np.zeros(values.shape + (2,), dtype=np.float32)
    elif mode == "int":
        replace[name] = np.zeros(values.shape, dtype=np.int16)
    path = rewrite(good, tmp_path_factory.mktemp("bad") / "bad.h5", drop=(name,) if mode == "drop" else (),
                   replace=replace)
    message = refused(path)
    named = re.findall(r"dataset '([^']+)'", message)
    # a row cut from the first dataset that fixes a symbol shows up in the next one that uses it
    assert named and (named[0] == name or mode == "short"), message


def test_indices_out_of_range_and_values_outside_their_choices_are_named(good: Path, tmp_path: Path) -> None:
    with h5py.File(good, "r") as fh:
        side, index = fh["statements/side"][()], fh["anisotropy/prompt_index"][()]
    side[5] = 2
    message = refused(rewrite(good, tmp_path / "side.h5", replace={"statements/side": side}))
    assert "dataset 'statements/side' holds 2 at index 5, expected one of [0, 1]" in message
    index[7] = len(np.unique(index))
    message = refused(rewrite(good, tmp_path / "index.h5", replace={"anisotropy/prompt_index": index}))
    assert f"dataset 'anisotropy/prompt_index' holds {index[7]} at index 7, outside 0..{index[7] - 1}" in message


def test_the_documented_layout_is_the_description() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "inputs-and-faults.md").read_text(encoding="utf-8")
    between = doc.split("<!-- layout:begin -->\n", 1)[1].split("<!-- layout:end -->", 1)[0]
    assert between == layout.markdown_table()


def test_offsets_must_rise_from_zero_to_the_token_count(good: Path, tmp_path: Path) -> None:
    with h5py.File(good, "r") as fh:
        offsets = fh["tokens/offsets"][()]
    total = int(offsets[-1])
    for index, value, name in ((0, 1, "start"), (len(offsets) - 1, total - 1, "end"), (4, int(offsets[6]), "fall")):
        bad = offsets.copy()
        bad[index] = value
        message = refused(rewrite(good, tmp_path / f"offsets-{name}.h5", replace={"tokens/offsets": bad}))
        first = next(i for i in range(len(bad)) if (i == 0 and bad[0] != 0) or (i == len(bad) - 1 and bad[i] != total)
                     or (0 < i and bad[i] < bad[i - 1]))
        assert f"dataset 'tokens/offsets' holds {bad[first]} at index {first}; offsets must rise from 0 to K" in message


def test_a_disk_without_room_for_the_file_is_refused_before_hdf5_writes(good: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    emb = read_embeddings(good)
    written = _write_with_writer(tmp_path / "fits.h5", emb)
    sizes = {"N": len(emb.text), "L": emb.n_layers, "D": HIDDEN, "T": len(emb.aniso_prompt_index),
             "P": len(emb.prompts), "K": len(emb.token_ids)}
    need = store._bytes_needed(emb.arrays, sizes)
    assert written.stat().st_size <= need <= 2 * written.stat().st_size + 200_000  # an upper estimate, not a wild one
    monkeypatch.setattr(store, "_free_bytes", lambda _directory: need - 1)
    out = tmp_path / "sub"
    out.mkdir()
    with pytest.raises(UAProbeError, match=r"sub/x\.h5: creating the output file failed \(No space left on device "
                                           r"\[errno 28\]: it needs .* MiB, .* MiB are free\)"):
        _write_with_writer(out / "x.h5", emb)
    assert list(out.iterdir()) == []
