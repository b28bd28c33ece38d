"""How every stage and the ``uaprobe`` command end: the project's error, or a bug report.

A foreseeable failure -- a :class:`~uaprobe.errors.UAProbeError` (bad input, a missing file, a
full or read-only disk) or an operating-system error on a named file -- is logged as one message
and the process exits with code 2, without a traceback. Anything else is a bug: one line names the
stage and its arguments (what a user needs to report it), then the traceback follows, exit code 1.

Each stage's ``__main__`` block is ``run_stage("<name>", main)``.
"""

from __future__ import annotations

import logging
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from uaprobe.atomic import os_reason
from uaprobe.errors import UAProbeError

EXIT_ERROR = 2
"""Exit code of a foreseeable failure (bad input, a fault of the disk)."""

EXIT_BUG = 1
"""Exit code of an unforeseen exception (printed with its traceback)."""

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT)."""

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def foreseeable_message(exc: BaseException) -> str | None:
    """The one-line message of a foreseeable failure, or None for a bug."""
    if isinstance(exc, UAProbeError):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:
        return (f"{exc.filename}: {os_reason(exc)}; check that the path exists and is readable, and that its "
                "directory is writable and its disk has space")
    return None


def stage_main(name: str, main: Callable[[list[str] | None], int | None], argv: Sequence[str] | None = None, *,
               log: logging.Logger | None = None) -> int:
    """Run ``main(argv)`` and turn its outcome into an exit code (see the module docstring).

    ``name`` names the stage in the bug report; messages go to ``log`` (default ``uaprobe.<name>``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    log = log or logging.getLogger(f"uaprobe.{name}")
    try:
        code = main(args)
    except KeyboardInterrupt:
        log.error("%s: interrupted; outputs written so far are complete files, rerun to finish", name)
        return EXIT_INTERRUPTED
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure ends here, foreseeable or not
        message = foreseeable_message(exc)
        if message is not None:
            log.error("%s", message)
            return EXIT_ERROR
        print(f"{name}: unexpected {type(exc).__name__} with arguments {shlex.join(args) or '(none)'}; this is a "
              "bug in uaprobe, please report it with the traceback below", file=sys.stderr, flush=True)
        traceback.print_exc()
        return EXIT_BUG
    return int(code or 0)


def run_stage(name: str, main: Callable[[list[str] | None], int | None]) -> NoReturn:
    """The ``__main__`` of a stage: configure logging, run :func:`stage_main`, exit with its code."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    sys.exit(stage_main(name, main))


__all__ = ["EXIT_BUG", "EXIT_ERROR", "EXIT_INTERRUPTED", "foreseeable_message", "run_stage", "stage_main"]
