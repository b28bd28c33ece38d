"""The Quarto engine: ``quarto render`` with the Jupyter engine and this interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from uaprobe.atomic import write_files
from uaprobe.publishing.provenance.outputs import FIGURES_DIR, FIGURES_DIR_ENV
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
    """Run ``quarto render`` in the paper directory and move its outputs to ``output_dir``."""
    env = dict(environ)
    env.setdefault("QUARTO_PYTHON", sys.executable)
    # Quarto compiles Typst with the Quarto project (the paper directory) as root, so images
    # outside it cannot be read: figures are copied in for the render and removed afterwards.
    staged = _stage_figures(qmd.parent)
    if staged is not None:
        env[FIGURES_DIR_ENV] = str(staged)
    try:
        return _run_quarto(quarto, qmd, output_dir=output_dir, env=env)
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


STAGED_FIGURES = "_figures"
"""Directory inside the paper directory that holds the figures while Quarto renders."""


def _stage_figures(paper_dir: Path) -> Path | None:
    for candidate in (paper_dir, *paper_dir.parents):
        if (candidate / "params.yaml").is_file():
            source = candidate / FIGURES_DIR
            if not source.is_dir():
                return None
            target = paper_dir / STAGED_FIGURES
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
            return target
    return None


def _run_quarto(quarto: Path, qmd: Path, *, output_dir: Path, env: Mapping[str, str]) -> RenderResult:
    with tempfile.TemporaryDirectory(prefix="quarto-", dir=qmd.parent) as tmp:
        command = quarto_command(quarto, qmd) + ["--output-dir", tmp]
        proc = subprocess.run(command, cwd=qmd.parent, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RenderError(
                f"{qmd}: `{' '.join(command)}` failed with exit code {proc.returncode}:\n"
                f"{proc.stderr[-4000:]}"
            )
        produced = {p.suffix: p for p in Path(tmp).rglob(f"{qmd.stem}.*") if p.suffix in (".html", ".pdf")}
        missing = {".html", ".pdf"} - set(produced)
        if missing:
            raise RenderError(
                f"{qmd}: quarto wrote no {', '.join(sorted(missing))}; check `format:` in _quarto.yml "
                "(html with embed-resources, and typst)"
            )
        html = output_dir / f"{qmd.stem}.html"
        pdf = output_dir / f"{qmd.stem}.pdf"
        write_files({html: produced[".html"].read_bytes(), pdf: produced[".pdf"].read_bytes()})
    return RenderResult(html=html, pdf=pdf, engine="quarto")
