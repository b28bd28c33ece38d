"""Run a parsed manuscript's cells and inline expressions, in document order, in one Jupyter kernel
started from this interpreter."""

from __future__ import annotations

import base64
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uaprobe.errors import UAProbeError
from uaprobe.publishing.render.qmd import CodeCell, InlineExpr, Manuscript
from uaprobe.publishing.render.result import RenderError

_INLINE_HELPER = '''\
import numbers as __uaprobe_numbers__

from uaprobe.publishing.render.result import InlineValueError as __uaprobe_InlineValueError__

def __uaprobe_inline__(value):
    markdown = getattr(value, "_repr_markdown_", None)
    if markdown is not None:
        return markdown()
    if isinstance(value, __uaprobe_numbers__.Real):
        return repr(value)
    raise __uaprobe_InlineValueError__(
        "an inline " + type(value).__name__ + " (" + repr(value)[:60] + "): Quarto prints a value without a "
        "Markdown representation as its plain-text repr, escaped as text (a str without its quotes, with "
        "Python's escapes; Markdown in it is shown or misread, @sec-x as a citation), where this renderer "
        "would read it as Markdown; give a number, or make it Markdown: uaprobe.publishing.prose.primitives.markdown.Prose(text) "
        "(IPython.display.Markdown(text) reads a text that names a file or starts with http as one)")
'''
"""Defined in the kernel before the first cell: what an inline expression's value prints as. A value with a
Markdown representation (the paper's sourced values and :class:`~uaprobe.publishing.prose.primitives.markdown.Prose`
phrases, ``IPython.display.Markdown``) prints that Markdown, as under Quarto; a number its repr, which
Quarto prints the same; anything else (a plain ``str`` above all) is refused, since Quarto would print it
as escaped text and this renderer as Markdown."""


@dataclass
class CellOutput:
    """What one executed cell or inline expression produced."""

    stdout: str = ""
    stderr: str = ""
    markdown: list[str] = field(default_factory=list)
    images: list[tuple[str, bytes]] = field(default_factory=list)
    """(extension, bytes) of every image displayed, in order."""
    text: list[str] = field(default_factory=list)
    """``text/plain`` of results that had no richer representation."""


def _kernel_manager() -> Any:
    """A kernel manager that starts ipykernel with *this* interpreter, whatever kernelspecs exist."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec = KernelSpec(
        argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        display_name=f"Python ({sys.executable})",
        language="python",
        env={"PYDEVD_DISABLE_FILE_VALIDATION": "1", "MPLBACKEND": "Agg"},
    )

    class CurrentInterpreterSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:  # noqa: ARG002 - one spec
            return spec

    return KernelManager(kernel_name="uaprobe-current-python", kernel_spec_manager=CurrentInterpreterSpecs())


def execute_manuscript(manuscript: Manuscript, *, timeout: int = 900) -> dict[int, CellOutput]:
    """Run every cell and inline expression in document order; outputs keyed by ``id()`` of the item.

    Cells run in one kernel whose working directory is the manuscript's directory.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    notebook = nbformat.v4.new_notebook()
    items: list[tuple[int, str]] = []
    notebook.cells.append(nbformat.v4.new_code_cell(_INLINE_HELPER))
    items.append((0, "setup"))
    for chunk in manuscript.chunks:
        if isinstance(chunk, CodeCell):
            notebook.cells.append(nbformat.v4.new_code_cell(chunk.code))
            items.append((id(chunk), chunk.where))
        else:
            for part in chunk.parts:
                if isinstance(part, InlineExpr):
                    source = f"print(__uaprobe_inline__(({part.expr})), end='')"
                    notebook.cells.append(nbformat.v4.new_code_cell(source))
                    items.append((id(part), f"inline expression at line {part.line}: `{part.expr}`"))
    for index, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{index}"
    client = NotebookClient(
        notebook,
        km=_kernel_manager(),
        timeout=timeout,
        allow_errors=False,
        record_timing=False,
        resources={"metadata": {"path": str(manuscript.path.parent)}},
    )
    where = "setup"
    # The kernel's own log (start-up notices, crashes) goes to a file, quoted if the kernel dies.
    with tempfile.TemporaryFile(mode="w+b") as kernel_log:
        try:
            with client.setup_kernel(stderr=kernel_log, stdout=kernel_log):
                for index, cell in enumerate(notebook.cells):
                    where = items[index][1]
                    client.execute_cell(cell, index)
        except CellExecutionError as exc:
            if exc.ename in _project_error_names():  # the project's own message says it all: no traceback
                raise RenderError(f"{manuscript.path}: {where}: {exc.evalue}") from None
            raise RenderError(f"{manuscript.path}: {where} raised {exc.ename}: {exc.evalue}\n"
                              f"{_strip_ansi(exc.traceback)[-3000:]}") from None
        except CellTimeoutError:
            raise RenderError(f"{manuscript.path}: {where} did not finish within {timeout} s") from None
        except (DeadKernelError, RuntimeError) as exc:
            kernel_log.seek(0)
            log_tail = kernel_log.read().decode("utf-8", "replace")[-3000:]
            raise RenderError(f"{manuscript.path}: the kernel failed while running {where}: {exc}\n"
                              f"kernel log:\n{log_tail}") from None
    results: dict[int, CellOutput] = {}
    for (key, _where), cell in zip(items, notebook.cells):
        results[key] = _collect_outputs(cell.get("outputs", []))
    return results


def _project_error_names() -> set[str]:
    """Class names of :class:`~uaprobe.errors.UAProbeError` and its subclasses (as a kernel reports them)."""
    names, todo = set(), [UAProbeError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def _strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _collect_outputs(outputs: Sequence[Mapping[str, Any]]) -> CellOutput:
    collected = CellOutput()
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            if output.get("name") == "stdout":
                collected.stdout += output.get("text", "")
            else:
                collected.stderr += output.get("text", "")
        elif kind in ("display_data", "execute_result"):
            data = output.get("data", {})
            if "text/markdown" in data:
                collected.markdown.append(_joined(data["text/markdown"]))
            elif "image/png" in data:
                collected.images.append(("png", base64.b64decode(_joined(data["image/png"]))))
            elif "image/svg+xml" in data:
                collected.images.append(("svg", _joined(data["image/svg+xml"]).encode("utf-8")))
            elif "text/plain" in data:
                collected.text.append(_joined(data["text/plain"]))
    return collected


def _joined(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else "".join(value)
