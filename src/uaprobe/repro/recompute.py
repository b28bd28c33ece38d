"""The review's recomputation: every stage of ``dvc.yaml`` run again by its own command in a scratch copy of the
checkout, and every file it writes compared with the md5 ``dvc.lock`` records.

The stages are read from ``dvc.yaml`` (through DVC, ``foreach`` resolved), so a stage added or split is recomputed
like the others. A stage runs after the stages whose outputs it depends on; stages that do not depend on each other
run at the same time, up to ``jobs``. Two scratch copies, both made of the checkout's files as git lists them
(tracked, and new ones not ignored), without any output of the pipeline:

* ``pipeline/``: every stage but the extractions, from the pulled (and verified) extraction files;
* ``extract/``: the extractions, from the models, where the models can be had (:func:`extraction_plan`).

The workspace, the cache and ``dvc.lock`` are never written. A stage that reads a file ``dvc.yaml`` does not list
reads the checkout's copy: if that file changed after the lock, the recomputed bytes differ and the review names them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from uaprobe import memo
from uaprobe.errors import UAProbeError
from uaprobe.repro.numdiff import under

EXTRACTION = "extract"
"""The name (before ``@``) of the stages that run the models; every other stage is recomputed from their outputs."""


@dataclass(frozen=True)
class Stage:
    """One stage of ``dvc.yaml`` as DVC resolves it: its command, and the paths it reads and writes."""

    name: str
    cmd: str
    deps: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()

    @property
    def is_extraction(self) -> bool:
        return self.name.split("@", 1)[0] == EXTRACTION

    @property
    def item(self) -> str:
        """The ``foreach`` item (``extract@<model>``: the model id), or the name."""
        return self.name.split("@", 1)[-1]


def pipeline(root: Path) -> list[Stage]:
    """Every stage with a command that ``root/dvc.yaml`` declares, in its order."""
    from uaprobe.repro.verify import open_repo

    def rel(path: str) -> str:
        return Path(os.path.relpath(path, root)).as_posix()

    out = []
    with open_repo(root) as (repo, _notes):
        for stage in repo.index.stages:
            cmd = getattr(stage, "cmd", None)
            if not cmd:
                continue
            out.append(Stage(stage.name, cmd if isinstance(cmd, str) else " && ".join(cmd),
                             tuple(rel(d.fs_path) for d in stage.deps), tuple(rel(o.fs_path) for o in stage.outs)))
    return out


def upstream(stages: list[Stage]) -> dict[str, set[str]]:
    """For each stage, the stages whose outputs it reads (a dependency at, under or above one of their outputs)."""
    return {s.name: {o.name for o in stages if o is not s and any(under(d, p) or under(p, d)
                                                                  for d in s.deps for p in o.outs)}
            for s in stages}


def source_files(root: Path, outputs: Iterable[str]) -> list[str]:
    """The checkout's files as git lists them (tracked, and new ones not ignored) that are no output of the
    pipeline, and the libraries built in place under ``src/`` (``*.so``, ignored by git and DVC alike)."""
    try:
        proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                              capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UAProbeError(f"{root}: git cannot list the checkout's files ({exc}); run the review in a git clone of "
                           "the project") from None
    outs = tuple(outputs)
    files = [f for f in proc.stdout.decode("utf-8").split("\0") if f and not any(under(f, o) for o in outs)]
    built = [p.relative_to(root).as_posix() for p in (root / "src").rglob("*.so")] if (root / "src").is_dir() else []
    return sorted({f for f in files + built if (root / f).is_file()})


def scratch_copy(root: Path, dest: Path, files: Iterable[str], inputs: Iterable[str] = ()) -> Path:
    """``dest`` holding ``files`` and ``inputs`` (files or directories) of ``root``, copied (never linked: a stage
    cannot write through to the workspace or the cache), and the libraries the installed uaprobe has built in place
    where the checkout has none (an environment set up from another checkout)."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target, follow_symlinks=True)
    for rel in inputs:
        source, target = root / rel, dest / rel
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    import uaprobe

    package = Path(uaprobe.__file__).parent
    if (dest / "src" / "uaprobe").is_dir():
        for built in package.rglob("*.so"):
            target = dest / "src" / "uaprobe" / built.relative_to(package)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(built, target)
    return dest


def stage_env(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a recomputed stage: this interpreter's environment (``stages/run.sh`` honours
    ``UAPROBE_VENV``), the scratch copy's ``src/`` first on the import path, hash seed fixed, and no product
    taken from a store of earlier runs (:mod:`uaprobe.memo` off): every output is made again."""
    env = dict(os.environ)
    if "UAPROBE_VENV" not in env and sys.prefix != sys.base_prefix:
        env["UAPROBE_VENV"] = sys.prefix
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(scratch / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONHASHSEED"] = "0"
    env["DVC_NO_ANALYTICS"] = "1"
    env[memo.ENV] = "off"
    env.update(extra or {})
    return env


@dataclass
class StageRun:
    """What became of one stage: ``code`` None when it did not run (``skipped`` says why)."""

    stage: Stage
    scratch: Path
    code: int | None = None
    seconds: float = 0.0
    log: Path | None = None
    skipped: str = ""

    @property
    def tail(self) -> list[str]:
        if self.log is None or not self.log.is_file():
            return []
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-12:]


@dataclass
class Job:
    """One stage to run: where, with what environment."""

    stage: Stage
    scratch: Path
    env: dict[str, str] = field(default_factory=dict)


Progress = Callable[[str], None]


def run_jobs(jobs: list[Job], logs: Path, *, workers: int, progress: Progress = lambda _line: None,
             timeout: float = 6 * 3600) -> dict[str, StageRun]:
    """Run every job after the jobs of the same scratch copy whose outputs it reads, up to ``workers`` at once, the
    extractions last when there is a choice. A job whose upstream failed is not run."""
    by_name = {j.stage.name: j for j in jobs}
    # a stage waits for the stages of its own scratch copy only: the other copy's outputs are not what it reads
    graph = {name: {u for u in ups if by_name[u].scratch == by_name[name].scratch}
             for name, ups in upstream([j.stage for j in jobs]).items()}
    done: dict[str, StageRun] = {}
    pending = list(by_name)
    running: dict[Future[StageRun], str] = {}
    lock = threading.Lock()
    logs.mkdir(parents=True, exist_ok=True)

    def one(job: Job) -> StageRun:
        log = logs / f"{job.stage.name.replace('/', '_')}.log"
        with lock:
            progress(f"  {job.stage.name}: running `{job.stage.cmd}`")
        started = time.perf_counter()
        with log.open("wb") as sink:
            try:
                code = subprocess.run(["sh", "-c", job.stage.cmd], cwd=job.scratch, env=job.env, stdout=sink,
                                      stderr=subprocess.STDOUT, timeout=timeout).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                sink.write(f"\n{exc}\n".encode())
                code = 124
        run = StageRun(job.stage, job.scratch, code, time.perf_counter() - started, log)
        with lock:
            progress(f"  {job.stage.name}: {'done' if code == 0 else f'FAILED (exit {code})'} in {run.seconds:.1f} s")
        return run

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        while pending or running:
            for name in list(pending):
                ups = graph[name] & set(by_name)
                failed = [u for u in sorted(ups) if u in done and done[u].code != 0]
                if failed:
                    pending.remove(name)
                    done[name] = StageRun(by_name[name].stage, by_name[name].scratch,
                                          skipped=f"not run: the stage it reads from, {failed[0]}, did not complete")
            ready = [n for n in pending if graph[n] & set(by_name) <= set(done)]
            ready.sort(key=lambda n: by_name[n].stage.is_extraction)
            while ready and len(running) < max(1, workers):
                name = ready.pop(0)
                pending.remove(name)
                running[pool.submit(one, by_name[name])] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                done[running.pop(fut)] = fut.result()
    return done


@dataclass(frozen=True)
class Plan:
    """Whether an extraction can be recomputed here, and how its bytes are compared."""

    recompute: bool
    why: str = ""
    """Why not (``recompute`` False), and what would recompute it."""
    gpu: bool = False
    """Recorded on a GPU: compared within tolerance, not by bytes."""


def recorded_device(h5: Path) -> str:
    """The ``device`` attribute of an extraction file ('' when it cannot be read)."""
    try:
        import h5py

        with h5py.File(h5, "r") as f:
            return str(f.attrs.get("device", ""))
    except (OSError, ImportError):
        return ""


def extraction_plan(root: Path, stage: Stage) -> Plan:
    """Can ``stage`` (``extract@<model>``) run here: the model's weights can be had (without loading them) and, for
    an extraction recorded on a GPU, this machine has one."""
    from uaprobe.config import load_params
    from uaprobe.errors import ModelSourceError

    model = stage.item
    rerun = f"`uaprobe review` where the model's weights can be had, or `dvc repro -f -s {stage.name}`"
    device = next((recorded_device(root / o) for o in stage.outs if o.endswith(".h5") and (root / o).is_file()), "")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return Plan(False, f"recorded on a GPU ({device}) and this machine has none; `uaprobe review` on a "
                        "machine with a CUDA GPU recomputes it and compares it within `uaprobe verify --against`'s "
                        "tolerance (a GPU's bf16 kernels give other bytes)", gpu=True)
    try:
        from uaprobe.extraction.models import resolve_source

        params = load_params(root / "params.yaml")
        resolve_source(params.model(model), model)
    except ModelSourceError as exc:
        return Plan(False, f"{exc} (what would recompute it: that fix, then {rerun})")
    except UAProbeError as exc:
        return Plan(False, f"model {model!r} cannot be read from params.yaml ({exc}); {rerun}")
    return Plan(True, gpu=device.startswith("cuda"))


__all__ = ["EXTRACTION", "Job", "Plan", "Stage", "StageRun", "extraction_plan", "pipeline", "recorded_device",
           "run_jobs", "scratch_copy", "source_files", "stage_env", "upstream"]
