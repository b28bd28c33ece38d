"""How every stage and the ``uaprobe`` command end: the project's error, or a bug report.

A foreseeable failure -- a :class:`~uaprobe.errors.UAProbeError` (bad input, a missing file, a
full or read-only disk) or an operating-system error on a named file -- is logged as one message
and the process exits with code 2, without a traceback. Anything else is a bug: one line names the
stage and its arguments (what a user needs to report it), then the traceback follows, exit code 1.
Standard output closed by its reader (``uaprobe verify | head``, a pager quit early) ends the process
quietly, as git does: no message, exit code 141 (128 + SIGPIPE).

Each stage's ``__main__`` block is ``run_stage("<name>", main)``. It makes SIGTERM (``kill``, a job
scheduler, a container stop) stop the stage as Ctrl-C does: every ``finally``/``except`` runs, so the
temporary files and build directories of the atomic writes are removed, and the exit code is 143.

:class:`ParamsWatch` holds the parameters a stage depends on (as ``dvc.yaml`` declares them,
:data:`STAGE_PARAMS`) from its start; :meth:`ParamsWatch.check`, called before the outputs are put in
place, fails if ``params.yaml`` changed meanwhile -- DVC reads the parameters *after* the command and
would otherwise record values the outputs were not computed with.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import shlex
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from uaprobe.atomic import locked_by_another_process, locked_message, os_reason
from uaprobe.errors import UAProbeError

EXIT_ERROR = 2
"""Exit code of a foreseeable failure (bad input, a fault of the disk)."""

EXIT_BUG = 1
"""Exit code of an unforeseen exception (printed with its traceback)."""

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT)."""

EXIT_CLOSED_PIPE = 128 + int(signal.SIGPIPE)
"""Exit code when the reader of standard output went away (141, as a process killed by SIGPIPE: git's)."""

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def foreseeable_message(exc: BaseException) -> str | None:
    """The one-line message of a foreseeable failure, or None for a bug."""
    if isinstance(exc, UAProbeError):
        return str(exc)
    if isinstance(exc, MemoryError):  # what the stages' own estimates did not foresee
        return ("out of memory (MemoryError): this machine cannot hold what the run allocates; close other programs, "
                "or lower the sizes params.yaml sets (the resampling counts of `analysis`, `extract.batch_size` and "
                "`extract.max_batch_tokens`) and rerun")
    if isinstance(exc, OSError) and exc.filename is not None and locked_by_another_process(exc):
        return locked_message(exc.filename, exc)
    if isinstance(exc, OSError) and exc.filename is not None:
        return (f"{exc.filename}: {os_reason(exc)}; check that the path exists and is readable, and that its "
                "directory is writable and its disk has space")
    return None


def stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (writing to it fails with EPIPE)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file descriptor (a captured stream), or a closed one
        return False


def _leave_closed_pipe() -> int:
    """Point standard output at /dev/null, so that the interpreter's last flush at exit cannot fail
    again on the closed pipe, and return :data:`EXIT_CLOSED_PIPE`."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def stage_main(name: str, main: Callable[[list[str] | None], int | None], argv: Sequence[str] | None = None, *,
               log: logging.Logger | None = None) -> int:
    """Run ``main(argv)`` and turn its outcome into an exit code (see the module docstring).

    ``name`` names the stage in the bug report; messages go to ``log`` (default ``uaprobe.<name>``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    log = log or logging.getLogger(f"uaprobe.{name}")
    try:
        code = main(args)
        sys.stdout.flush()  # what is still buffered goes now, where a closed pipe is still handled here
    except BrokenPipeError as exc:
        if exc.errno == errno.EPIPE and stdout_closed():
            return _leave_closed_pipe()
        return _report(name, args, exc, log)
    except KeyboardInterrupt as exc:
        signum = exc.args[0] if exc.args and isinstance(exc.args[0], int) else signal.SIGINT
        log.error("%s: stopped by %s; outputs written so far are complete files, no temporary file is left, "
                  "rerun to finish", name, signal.Signals(signum).name)
        return 128 + int(signum)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure ends here, foreseeable or not
        return _report(name, args, exc, log)
    return int(code or 0)


def _report(name: str, args: list[str], exc: BaseException, log: logging.Logger) -> int:
    """Log a foreseeable failure's message (exit 2), or print a bug report with the traceback (exit 1)."""
    message = foreseeable_message(exc)
    if message is not None:
        log.error("%s", message)
        return EXIT_ERROR
    print(f"{name}: unexpected {type(exc).__name__} with arguments {shlex.join(args) or '(none)'}; this is a "
          "bug in uaprobe, please report it with the traceback below", file=sys.stderr, flush=True)
    traceback.print_exception(exc)
    return EXIT_BUG


def _terminate(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signum)


def run_stage(name: str, main: Callable[[list[str] | None], int | None]) -> NoReturn:
    """The ``__main__`` of a stage: configure logging, make SIGTERM stop it like Ctrl-C, run
    :func:`stage_main`, exit with its code."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        signal.signal(signal.SIGTERM, _terminate)
    sys.exit(stage_main(name, main))


STAGE_PARAMS: dict[str, tuple[str, ...]] = {
    "extract": ("catalog.{item}", "extract", "pooling", "preset"),
    "analyze": ("models", "analysis"),
    "compare": ("models", "catalog", "analysis"),
    "figures": ("models",),
    "paper": ("models", "catalog", "extract", "pooling", "preset", "analysis"),
}
"""The parameters of each stage, as dvc.yaml declares them (``{item}``: the model of a foreach stage)."""

_ABSENT = object()


class ParamsWatch:
    """The values of a stage's parameters at its start, to compare with the file at its end."""

    def __init__(self, stage: str, path: str | Path = "params.yaml", item: str | None = None) -> None:
        self.stage, self.path = stage, Path(path)
        self.keys = [key.format(item=item) for key in STAGE_PARAMS[stage]]
        try:
            self.values: dict[str, Any] | None = self._read()
        except UAProbeError:
            self.values = None  # the stage's own reading of params.yaml says what is wrong with it

    def _read(self) -> dict[str, Any]:
        from uaprobe.config import param_at

        try:
            doc = yaml.safe_load(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise UAProbeError(f"{self.path}: cannot be read again at the end of stage {self.stage} ({exc}); the "
                               "outputs are not written: restore params.yaml and run `dvc repro` again") from None

        def value(key: str) -> Any:
            try:
                return param_at(doc, key)
            except KeyError:
                return _ABSENT
        return {key: value(key) for key in self.keys}

    def check(self) -> None:
        """Raise :class:`UAProbeError` if a watched parameter changed since the start."""
        if self.values is None:
            return
        now = self._read()
        from uaprobe.config import differing

        changed = [leaf for key in self.keys for leaf in differing(self.values[key], now[key], key)]
        if changed:
            shown = "; ".join(f"{key}: {_short(old)} at the start, {_short(new)} now" for key, old, new in changed)
            raise UAProbeError(
                f"{self.path}: changed while stage {self.stage} ran ({shown}). Its outputs were computed with the "
                "values at the start and are not written, so that dvc.lock cannot record other values: leave "
                "params.yaml as it should be and run `dvc repro` again")


def _short(value: Any) -> str:
    text = "(absent)" if value is _ABSENT else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = ["EXIT_BUG", "EXIT_CLOSED_PIPE", "EXIT_ERROR", "EXIT_INTERRUPTED", "STAGE_PARAMS", "ParamsWatch", "foreseeable_message", "run_stage", "stage_main"]
