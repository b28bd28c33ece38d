"""A copy of this repository as its own git + DVC project, with the tiny test model as the panel.

Used by the end-to-end tests: the whole pipeline (extract -> analyze -> compare -> figures ->
paper) runs through `dvc repro` exactly as a user runs it, only on a 3-layer model.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
OUTPUT_DIRS = ("data/embeddings", "results", "metrics", "plots", "figures", "paper/_output")


def env() -> dict[str, str]:
    """The environment the stages run in: this interpreter's venv first on PATH, no analytics."""
    out = dict(os.environ)
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out["DVC_NO_ANALYTICS"] = "1"
    out["PYTHONHASHSEED"] = "0"
    # an identity for the commits of the throw-away repositories (no fixed dates: no output depends on
    # the commit, the paper included)
    out.setdefault("GIT_AUTHOR_NAME", "uaprobe tests")
    out.setdefault("GIT_AUTHOR_EMAIL", "tests@uaprobe.invalid")
    out.setdefault("GIT_COMMITTER_NAME", "uaprobe tests")
    out.setdefault("GIT_COMMITTER_EMAIL", "tests@uaprobe.invalid")
    return out


def run(cmd: list[str], cwd: Path, *, check: bool = True, timeout: int = 1200,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env={**env(), **(extra_env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed in {cwd} ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def dvc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "dvc"), *args], cwd, check=check)


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(["git", *args], cwd)


def project_files() -> list[str]:
    """The repository's files as a fresh clone would have them (tracked and new, not ignored)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return [f for f in out if (REPO / f).is_file() and not f.startswith(OUTPUT_DIRS) and f != "dvc.lock"]


def make_project(dest: Path, model_dir: Path, *, drop: str = "special") -> Path:
    """Copy the repository to ``dest`` with the tiny model as the panel; git init and commit."""
    for rel in project_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    params = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = ["tiny"]
    params["catalog"]["tiny"] = {"display": "Tiny-NeoX", "source": "local", "location": str(model_dir),
                                 "params_millions": 0.1}
    params["extract"]["device"] = "cpu"
    params["pooling"]["drop"] = drop
    params["analysis"].update(bootstrap_resamples=500, permutations=500)
    params["analysis"]["bins"].update(partitions=20)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "tiny panel", cwd=dest)
    return dest


def output_digests(root: Path) -> dict[str, str]:
    """md5 of every pipeline output file under ``root``."""
    digests = {}
    for top in OUTPUT_DIRS:
        base = root / top
        if not base.exists():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file() and p.name != ".gitignore"):
            digests[str(path.relative_to(root))] = hashlib.md5(path.read_bytes()).hexdigest()
    return digests


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[str]:
    """``python -m http.server`` serving ``directory`` on 127.0.0.1 (no range requests, as any static server);
    yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
