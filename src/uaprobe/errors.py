"""The project's own error type: every user-facing failure is raised as one of these; and the two
messages every input file (params, dataset, prompts) gives when it cannot be read or decodes into
something no loader can use."""

from pathlib import Path


class UAProbeError(Exception):
    """A failure the user can act on: the message names the file, the key and the fix."""


class ConfigError(UAProbeError):
    """A value in params.yaml is unknown, of the wrong type or impossible."""


class DatasetError(UAProbeError):
    """The statement-pair dataset is malformed."""


class ModelSourceError(UAProbeError):
    """A model cannot be had from the source the panel names."""


class NumericalError(UAProbeError):
    """A model produced NaN or inf hidden states or logits."""


def unreadable(path: Path, exc: OSError, what: str, fix: str) -> str:
    """``<path>: cannot read <what> (<the system's reason>); <fix>``."""
    return f"{path}: cannot read {what} ({exc.strerror or exc}); {fix}"


def unusable(path: Path, exc: RecursionError | ValueError, what: str, fix: str) -> str:
    """``<path>: not a usable <what> (<reason>); <fix>``: the file parses, but into nesting too deep for the
    parser or a value Python refuses (an integer too long to convert)."""
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return f"{path}: not a usable {what} ({reason}); {fix}"
