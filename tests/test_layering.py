"""The library's layout shows the flow: extraction -> analysis -> publishing, over shared infrastructure.

Every import between the library's modules is read from the source (no module is executed) and
checked against the allowed direction, so a publishing module that reaches into the analyses, or an
analysis that imports the renderer, fails here rather than in a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "uaprobe"

ALLOWED: dict[str, set[str]] = {
    "infrastructure": {"infrastructure"},
    "extraction": {"infrastructure", "extraction"},
    "analysis": {"infrastructure", "extraction", "analysis"},
    "publishing": {"infrastructure", "publishing"},
    "repro": {"infrastructure", "extraction", "analysis", "publishing", "repro"},
    "command": {"infrastructure", "extraction", "analysis", "publishing", "repro", "command"},
}
"""For each layer, the layers its modules may import."""


def layer(module: str) -> str:
    """``uaprobe.extraction.store`` -> ``extraction``; the top-level helpers (and the pins) are the
    infrastructure; ``repro`` checks what the other layers made."""
    parts = module.split(".")
    if parts[:2] == ["uaprobe", "cli"]:  # the command: it runs every layer's code
        return "command"
    if module in ("uaprobe.repro.numerics", "uaprobe.repro.mkl_pin"):  # the pins: every process sets them
        return "infrastructure"                                            # first, whatever it runs
    if len(parts) > 1 and parts[1] in ("extraction", "analysis", "publishing", "repro"):
        return parts[1]
    return "infrastructure"


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The ``uaprobe`` modules ``path`` imports (``from uaprobe.x import y`` counts as ``uaprobe.x.y``
    when ``y`` is a module of the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("uaprobe")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("uaprobe"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (SRC.parent / candidate.replace(".", "/")).with_suffix(".py").is_file() or \
                    (SRC.parent / candidate.replace(".", "/")).is_dir()
                found.add(candidate if is_module else node.module)
    return found


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_follow_the_flow(path: Path) -> None:
    here = layer(module_name(path))
    wrong = sorted(m for m in imports(path) if m != "uaprobe" and layer(m) not in ALLOWED[here])
    assert not wrong, f"{module_name(path)} ({here}) imports {wrong}, against the flow {ALLOWED[here]}"


def test_the_layers_are_packages_and_the_check_sees_their_imports() -> None:
    assert {layer(module_name(p)) for p in MODULES} == set(ALLOWED)
    assert "uaprobe.extraction.store" in imports(SRC / "analysis" / "run" / "pipeline.py")
    assert layer("uaprobe.publishing.render") == "publishing" and layer("uaprobe.config") == "infrastructure"


FAMILIES: dict[str, tuple[str, ...]] = {
    "uaprobe.analysis": ("compute", "inference", "geometry", "pairs", "category", "run", "panel"),
    "uaprobe.publishing.prose": ("primitives", "tables", "category", "pairs", "panel"),
}
"""Each package of families, and its families in the order of their imports (the package's ``FAMILIES``)."""


def family(module: str, package: str) -> str | None:
    """``uaprobe.analysis.pairs.option_b`` -> ``pairs``; None outside the package's families (its face, a module
    beside them)."""
    rest = module.removeprefix(package + ".").split(".") if module.startswith(package + ".") else []
    return rest[0] if len(rest) > 1 and rest[0] in FAMILIES[package] else None


IN_FAMILIES = [(package, p) for package in FAMILIES for p in MODULES
               if module_name(p).startswith(package + ".") or module_name(p) == package]


@pytest.mark.parametrize(("package", "path"), IN_FAMILIES, ids=lambda v: v if isinstance(v, str) else module_name(v))
def test_a_family_imports_only_the_families_before_it(package: str, path: Path) -> None:
    here, order = family(module_name(path), package), FAMILIES[package]
    if here is None:  # the package's face and a module beside the families import no family
        assert not {family(m, package) for m in imports(path)} - {None}, f"{module_name(path)} imports a family"
        return
    allowed = set(order[:order.index(here) + 1])
    wrong = sorted(m for m in imports(path) if family(m, package) not in (None, *allowed))
    assert not wrong, f"{module_name(path)} ({here}) imports {wrong}: only {sorted(allowed)} come before it"


@pytest.mark.parametrize("package", FAMILIES)
def test_every_module_is_in_a_family_and_the_order_is_the_packages(package: str) -> None:
    import importlib

    assert importlib.import_module(package).FAMILIES == FAMILIES[package]
    folder = SRC.parent / package.replace(".", "/")
    inside = [p for p in MODULES if p.is_relative_to(folder)]
    assert {p.parent.name for p in inside if p.parent != folder} == set(FAMILIES[package])
    beside = {"uaprobe.analysis": ["__init__.py"], "uaprobe.publishing.prose": ["__init__.py"]}
    assert sorted(p.name for p in inside if p.parent == folder) == beside[package]
    assert family("uaprobe.analysis.pairs.option_b", "uaprobe.analysis") == "pairs"
    assert family("uaprobe.schema.missing", "uaprobe.analysis") is None


WRITTEN_OUT_KERNELS = {("uaprobe.analysis.compute.kernels", "_add_runs")}
"""The one function allowed past :data:`LONGEST` lines: a compiled loop written out, case by case."""
LONGEST = 90
STAGES = sorted((SRC.parents[1] / "stages").glob("*.py"))


def test_every_stage_is_its_arguments_and_a_call_of_the_library() -> None:
    assert len(STAGES) == 5
    long = {p.name: n for p in STAGES if (n := len(p.read_text(encoding="utf-8").splitlines())) > 100}
    assert not long, f"stages over 100 lines (their bodies belong in the library): {long}"


def test_no_function_is_longer_than_the_limit_but_the_written_out_kernel() -> None:
    long = []
    for path in [*MODULES, *STAGES]:
        name = module_name(path) if path.is_relative_to(SRC) else f"stages.{path.stem}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (name, node.name) not in WRITTEN_OUT_KERNELS:
                if (length := node.end_lineno - node.lineno + 1) > LONGEST:
                    long.append(f"{name}.{node.name}: {length} lines")
    assert not long, long
    assert all(any(module_name(p) == m for p in MODULES) for m, _ in WRITTEN_OUT_KERNELS)
