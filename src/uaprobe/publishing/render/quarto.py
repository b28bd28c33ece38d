"""The Quarto engine: ``quarto render`` with the Jupyter engine and this interpreter."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from uaprobe.atomic import write_files
from uaprobe.publishing.render.result import RenderError, RenderResult


def find_quarto(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Quarto executable to use, or None: ``$UAPROBE_QUARTO``, ``$QUARTO_PATH``, PATH, quarto-cli."""
    env = os.environ if environ is None else environ
    for var in ("UAPROBE_QUARTO", "QUARTO_PATH"):
        value = env.get(var)
        if value:
            path = Path(value)
            if path.is_dir():
                path = path / "bin" / "quarto"
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise RenderError(f"${var}={value!r} is not an executable quarto; fix or unset it")
            return path
    on_path = shutil.which("quarto", path=env.get("PATH"))
    if on_path:
        return Path(on_path)
    try:
        import importlib.util

        spec = importlib.util.find_spec("quarto_cli")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            for candidate in (Path(location) / "bin" / "quarto", Path(location) / "quarto"):
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return candidate
    return None


def quarto_command(quarto: Path, qmd: Path) -> list[str]:
    """The ``quarto render`` command line: every format, executed afresh (``_quarto.yml`` sets
    ``execute.freeze: false``, so nothing is frozen either)."""
    return [str(quarto), "render", qmd.name, "--execute", "--no-cache"]


def render_with_quarto(
    quarto: Path, qmd: Path, *, output_dir: Path, environ: Mapping[str, str]
) -> RenderResult:
    """Run ``quarto render`` on a scratch copy of the paper directory and move its outputs to ``output_dir``.

    Quarto writes its working files (``.quarto/``, ``<stem>_files/``, the intermediate ``.typ``, a failed
    format's output) beside the manuscript and leaves them there when a render fails. The copy is made beside
    the paper directory, so that every relative path of the manuscript (``../figures/…``) and the repository
    root above it hold as they do there, and removed afterwards: the paper directory stays as it was, whatever
    happens. A warning of Quarto or pandoc (an unresolved citation, say) fails the render, as it does under
    the fallback.
    """
    env = dict(environ)
    env.setdefault("QUARTO_PYTHON", sys.executable)
    paper = qmd.parent
    skip = {".quarto"} | ({output_dir.name} if output_dir.parent == paper else set())

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) != paper:
            return set()
        return {n for n in names if n in skip or n.endswith("_files")}

    # not a hidden directory: Quarto takes no file inside one for a project input (and --output-dir fails)
    with tempfile.TemporaryDirectory(prefix=f"{paper.name}-quarto-", dir=paper.parent) as tmp:
        scratch = Path(tmp)
        shutil.copytree(paper, scratch, ignore=ignore, dirs_exist_ok=True)
        return _run_quarto(quarto, scratch / qmd.name, output_dir=output_dir, env=env, source=qmd)


_WARNING = re.compile(r"^(?:\[WARNING\]|WARN(?:ING)?\b).*$", flags=re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def render_warnings(log: str) -> list[str]:
    """The warnings of Quarto (``WARN …``, ``WARNING (…)``) and pandoc (``[WARNING] …``) in a render's log."""
    return [m.group(0).strip() for m in _WARNING.finditer(_ANSI.sub("", log))]


def _run_quarto(quarto: Path, qmd: Path, *, output_dir: Path, env: Mapping[str, str], source: Path) -> RenderResult:
    """Render ``qmd`` (the scratch copy of ``source``, which the messages name) into ``output_dir``."""
    rendered = qmd.parent / "_render"
    command = quarto_command(quarto, qmd) + ["--output-dir", str(rendered)]
    proc = subprocess.run(command, cwd=qmd.parent, env=env, capture_output=True, text=True)
    shown = " ".join(quarto_command(quarto, qmd))
    if proc.returncode != 0:
        raise RenderError(
            f"{source}: `{shown}` failed with exit code {proc.returncode}:\n{_ANSI.sub('', proc.stderr)[-4000:]}"
        )
    warnings = render_warnings(proc.stderr + proc.stdout)
    if warnings:
        raise RenderError(f"{source}: `{shown}` warned (a warning fails the render, as under the fallback):\n"
                          + "\n".join(warnings[:20]))
    produced = {p.suffix: p for p in rendered.rglob(f"{qmd.stem}.*") if p.suffix in (".html", ".pdf")}
    missing = {".html", ".pdf"} - set(produced)
    if missing:
        raise RenderError(
            f"{source}: quarto wrote no {', '.join(sorted(missing))}; check `format:` in _quarto.yml "
            "(html with embed-resources, and typst)"
        )
    html = output_dir / f"{qmd.stem}.html"
    pdf = output_dir / f"{qmd.stem}.pdf"
    write_files({html: produced[".html"].read_bytes(), pdf: produced[".pdf"].read_bytes()})
    return RenderResult(html=html, pdf=pdf, engine="quarto")
