"""uaprobe: layer-wise Uniformity Asymmetry (UA) in causal language models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("uaprobe")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

from uaprobe.errors import UAProbeError

__all__ = ["UAProbeError", "__version__"]
