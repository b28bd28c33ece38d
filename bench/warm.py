"""The untimed run before the timed sizes: every compiled kernel the analysis can run, loaded first.

numba compiles a kernel for each signature on its first call and keeps it in its on-disk cache; a
fresh clone has no cache, so a kernel that the timed analysis meets first is compiled inside its
time (at 230 pairs on a fresh clone that was about 6 s of the unit-vector form's kernels, which a
small subset's analysis, where the Gram form is always the cheaper, never ran). :func:`every_path`
runs the analysis in the cosines' default form and in the unit-vector form, and the Gram form in
pieces (the form where its tables would pass their cap) on every side; the benchmark runs it on a
small subset first.
:func:`signatures` lists every kernel signature loaded in this process, so a benchmark can check
that the timed runs loaded none that the warm-up did not.
"""

from __future__ import annotations

import sys

import numpy as np
from numba.core.dispatcher import Dispatcher

from uaprobe.analysis.pair_table import pooling_cosines
from uaprobe.analysis.pipeline import analyze_model, table_from_embeddings
from uaprobe.analysis.uniformity import SIDES
from uaprobe.config import AnalysisParams
from uaprobe.extraction.store import Embeddings


def signatures() -> set[tuple[str, str]]:
    """(kernel, signature) of every compiled overload of the uaprobe modules' kernels loaded in this
    process (compiled, or read from numba's cache). It finds the kernels bound at a module's top level,
    as every ``@njit`` of the library is; one made inside a function would not be listed."""
    out = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith("uaprobe") or module is None:
            continue
        for obj in vars(module).values():
            if isinstance(obj, Dispatcher):
                key = f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"
                out.update((key, str(sig)) for sig in obj.overloads)
    return out


def every_path(emb: Embeddings, params: AnalysisParams) -> None:
    """Run every code path of the analysis once on ``emb`` (for the warm-up: a few pairs per category):
    the default form of the cosines, the unit-vector form, and the Gram form in pieces on the sides
    ``a``, ``b`` and ``diff`` (:class:`~uaprobe.analysis.uniformity.Cosines` with no table held:
    ``gram_bytes`` 0)."""
    for form in (None, "vectors"):
        analyze_model(emb, params=params, model_id="bench", form=form)
    table = table_from_embeddings(emb)
    cos = pooling_cosines(pooled=emb.pooled["mean"], prenorm=emb.prenorm["mean"], table=table, form="gram")
    cos.gram_bytes = 0  # no table held: every call builds and sums the table in pieces
    labels = (np.arange(table.n_pairs) % 3)[None, :].repeat(2, axis=0)
    for s in SIDES:
        cos.uniformity(labels, n_groups=3, side=s)
