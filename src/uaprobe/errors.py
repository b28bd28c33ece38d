"""The project's own error type: every user-facing failure is raised as one of these."""


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
