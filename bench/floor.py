"""The floor of the ``analyze`` computation: operation counts of each component's cheapest exact form.

Pure arithmetic (no timing; the only I/O is ``params.yaml``, read once for the defaults of
:class:`Shape`): :func:`components` counts, for one run of
:func:`~uaprobe.analysis.pipeline.analyze_model` on ``n`` pairs, the operations of every component
in the cheapest exact float64 form, in three kinds:

- ``gemm``: multiply-adds of matrix products (rate: a float64 GEMM on all cores);
- ``add``: float64 additions or comparisons streaming from cache (rate: a float64 sum from L2 on all
  cores);
- ``draw``: random integers of the seeded generators (rate: one generator, one core: a seeded
  stream is sequential).

What components can share is counted once: the cosine Gram matrix of one view (``n^2 D / 2``
multiply-adds per side: the symmetric half) serves the categories, the random bins, the size-matched
null and Option B's kNN density of that view; the draws that are the same in both pooling policies
and in every pooling (the generators are seeded by name only) are drawn once. ``bench/scale.py``
divides these counts by rates it measures in the same process (:func:`seconds`).

The model follows ``analyze_model`` as it is configured in ``params.yaml``; ``tests/test_bench_floor.py``
checks the counts against direct counts on tiny cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, Sequence

from uaprobe.config import AnalysisParams, load_params

KINDS = ("gemm", "add", "draw")
PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"
"""The project's parameters: the defaults of :class:`Shape`'s analysis settings."""


def settings(analysis: AnalysisParams) -> dict[str, Any]:
    """The fields of :class:`Shape` that the ``analysis`` section of params.yaml sets."""
    return {"bins_k": tuple(analysis.bins.k), "bins_partitions": analysis.bins.partitions,
            "ci_k": analysis.bins.ci_k, "null_partitions": analysis.robustness.null_partitions,
            "resamples": analysis.bootstrap_resamples, "permutations": analysis.permutations,
            "lexical_seeds": analysis.robustness.lexical_seeds,
            "aniso_resamples": analysis.robustness.anisotropy_bootstrap}


@cache
def _project_settings() -> dict[str, Any]:
    return settings(load_params(PARAMS).analysis)


def _from_params(name: str) -> Any:
    """A field's default: its value in the project's params.yaml."""
    return field(default_factory=lambda: _project_settings()[name])


@dataclass(frozen=True)
class Ops:
    """Operations of one component, by kind."""

    gemm: float = 0.0
    add: float = 0.0
    draw: float = 0.0

    def __add__(self, other: "Ops") -> "Ops":
        return Ops(*(getattr(self, k) + getattr(other, k) for k in KINDS))

    def __mul__(self, factor: float) -> "Ops":
        return Ops(*(getattr(self, k) * factor for k in KINDS))

    __rmul__ = __mul__

    def seconds(self, rates: "Rates") -> float:
        return sum(getattr(self, k) / getattr(rates, k) for k in KINDS)


@dataclass(frozen=True)
class Rates:
    """Operations per second of each kind on this machine (measured by ``bench/scale.py``)."""

    gemm: float
    add: float
    draw: float


@dataclass(frozen=True)
class Shape:
    """What the analyze computation's cost depends on."""

    n_pairs: int
    dim: int
    n_layers: int
    """L: Option B runs on the L + 1 layers, the resampling analyses on them and the prenorm view."""
    category_sizes: tuple[int, ...]
    """Pairs per category (sum = n_pairs)."""
    tokens_per_statement: float
    """Mean tokens per statement (the lexical baseline pools them)."""
    aniso_tokens: int
    """T: token states of the anisotropy prompts per layer."""
    vocabulary: int = 0
    """Distinct token ids of the statements (the lexical baseline draws one Gaussian vector each)."""
    # the analysis settings: by default params.yaml's (:func:`settings`)
    bins_k: tuple[int, ...] = _from_params("bins_k")
    bins_partitions: int = _from_params("bins_partitions")
    ci_k: int = _from_params("ci_k")
    schemes: int = 2
    null_partitions: int = _from_params("null_partitions")
    resamples: int = _from_params("resamples")
    permutations: int = _from_params("permutations")
    lexical_seeds: int = _from_params("lexical_seeds")
    aniso_resamples: int = _from_params("aniso_resamples")
    policies: int = 2
    poolings: int = 3
    optionb_metrics: int = 8
    knn_k: int = 10

    @property
    def views(self) -> int:
        """Views of the resampling analyses: L + 1 layers and the prenorm state."""
        return self.n_layers + 2

    @property
    def layers(self) -> int:
        return self.n_layers + 1

    @classmethod
    def of(cls, *, n_pairs: int, dim: int, n_layers: int, category_sizes: Sequence[int],
           tokens_per_statement: float, aniso_tokens: int, vocabulary: int, params) -> "Shape":
        """From the extraction's shapes and ``params.analysis`` (:class:`~uaprobe.config.AnalysisParams`)."""
        return cls(n_pairs=n_pairs, dim=dim, n_layers=n_layers, category_sizes=tuple(int(s) for s in category_sizes),
                   tokens_per_statement=float(tokens_per_statement), aniso_tokens=int(aniso_tokens),
                   vocabulary=int(vocabulary), **settings(params))


def pairs_within(sizes: Sequence[int]) -> float:
    """Pairs inside groups of ``sizes``: sum of m (m - 1) / 2."""
    return float(sum(m * (m - 1) / 2 for m in sizes))


def balanced_sizes(n: int, k: int) -> list[int]:
    """The ``balanced`` scheme's bin sizes (:func:`uaprobe.analysis.bins.partitions`)."""
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def randint_pairs(n: int, k: int) -> float:
    """Expected pairs inside the bins of the ``randint`` scheme (each member uniform over k bins):
    ``n (n - 1) / (2 k)``."""
    return n * (n - 1) / (2.0 * k)


def gram_macs(n: int, dim: int) -> float:
    """Multiply-adds of one symmetric Gram matrix ``U U^T`` of n rows of D: its upper triangle and
    diagonal, ``n (n + 1) / 2 * D``."""
    return n * (n + 1) / 2.0 * dim


def group_sum_adds(pairs: float, n: int, dim: int, groups: int) -> tuple[float, float]:
    """Additions of one partition and view on side ``diff`` in each exact form: the Gram form
    (one addition per pair inside a group, from the table ``G_A - G_B``) and the unit-vector form
    (every member's D coordinates of both sides added to its group, then each group's two squared
    norms, D each)."""
    return pairs, 2.0 * n * dim + 2.0 * groups * dim


def bootstrap_ops(*, n: int, rows: int, resamples: int, permutations: int) -> Ops:
    """Bootstrap r and permutation r of ``rows`` series against one y over n points: the count-weighted
    moments (three (B, n) x (n, M) products and two vector products), the permuted products
    ((M, n) x (n, P)), the sorts of the percentile intervals and the permutation hits."""
    gemm = 3.0 * resamples * n * rows + 2.0 * resamples * n + float(rows) * n * permutations
    sort = rows * resamples * math.log2(max(resamples, 2))
    return Ops(gemm=gemm, add=sort + rows * permutations)


def components(shape: Shape, rates: Rates) -> dict[str, Ops]:
    """The operations of every component of the analyze computation in its cheapest exact form.

    ``rates`` decides between forms of different kinds (the prenorm view's Gram matrices or its unit
    vectors); within one kind the smaller count wins."""
    n, d, s = shape.n_pairs, shape.dim, shape
    runs = s.policies * s.poolings  # (policy, pooling) combinations; each has its own states
    cat_pairs = pairs_within(s.category_sizes)
    c = len(s.category_sizes)
    # per (policy, pooling) and view: the partitions' pairs in each form
    bins_gram = bins_vec = 0.0
    for k in s.bins_k:
        for scheme in range(s.schemes):
            pairs = randint_pairs(n, k) if scheme == 0 else pairs_within(balanced_sizes(n, k))
            g, v = group_sum_adds(pairs, n, d, k)
            bins_gram += s.bins_partitions * g
            bins_vec += s.bins_partitions * v
    null_gram, null_vec = (s.null_partitions * x for x in group_sum_adds(cat_pairs, n, d, c))
    bins_vec += 2.0 * s.schemes * n * d  # the ci_k partition's sides a and b, in the unit-vector form
    bins_gram += 2.0 * s.schemes * pairs_within(balanced_sizes(n, s.ci_k))
    table = n * (n - 1) / 2.0  # G_A - G_B of one view, built once for every partition summed in the Gram form

    def cheapest(null: bool) -> tuple[float, float]:
        """(bins, null) additions of one view in the cheapest combination of forms; the table goes to
        the bins where they use it, else to the null."""
        best = None
        for b_gram in (True, False):
            for n_gram in ((True, False) if null else (False,)):
                b = (bins_gram + table) if b_gram else bins_vec
                z = (null_gram + (0.0 if b_gram else table)) if (null and n_gram) else (null_vec if null else 0.0)
                if best is None or b + z < sum(best):
                    best = (b, z)
        assert best is not None
        return best

    # layer views: their Gram matrices are paid by the kNN density; each analysis takes the cheaper sums
    layer_bins, layer_null = cheapest(True)
    layer_bins_other, _ = cheapest(False)  # the poolings without the null
    # the prenorm view has no kNN: its Gram matrices only where they beat its unit vectors

    def prenorm(null: bool) -> tuple[float, float, float]:
        """(Gram multiply-adds, bins additions, null additions) of the prenorm view."""
        by_gram = Ops(gemm=2 * gram_macs(n, d), add=bins_gram + table + (null_gram if null else 0.0))
        by_vec = Ops(add=bins_vec + (null_vec if null else 0.0))
        if by_gram.seconds(rates) < by_vec.seconds(rates):
            return by_gram.gemm, bins_gram + table, null_gram if null else 0.0
        return 0.0, bins_vec, null_vec if null else 0.0

    mean_runs = s.policies  # the null runs on the mean pooling only
    other_runs = runs - mean_runs
    pre_mean, pre_other = prenorm(True), prenorm(False)
    out: dict[str, Ops] = {}
    out["Gram matrices (shared)"] = Ops(gemm=runs * s.layers * 2 * gram_macs(n, d)
                                       + mean_runs * pre_mean[0] + other_runs * pre_other[0])
    out["random bins"] = Ops(add=mean_runs * (s.layers * layer_bins + pre_mean[1])
                             + other_runs * (s.layers * layer_bins_other + pre_other[1]))
    out["size-matched null"] = Ops(add=mean_runs * (s.layers * layer_null + pre_mean[2]))
    # categories (one partition, both sides, from the Gram matrices) and the pair scores (centroid
    # cosines: category sums of the unit vectors and one dot product per member, both sides)
    out["categories, pair scores"] = Ops(add=runs * s.views * (2 * cat_pairs + 2 * (2 * n * d)))
    # kNN: every entry of the distance matrix offered to its row's k nearest (n^2 per call), and
    # Option B's other metrics (centroids, cosines, margins; about 12 n D per view)
    out["Option B kNN, metrics"] = Ops(add=runs * s.layers * (2.0 * n * n + 12.0 * n * d))
    # bootstrap and permutation tests over pairs: Option B (metrics x layers rows per pooling) and the
    # pair level (poolings x views rows per policy); over categories (layer-wise) and bins (ci_k)
    rs, ps = s.resamples, s.permutations
    perms_c = min(ps, math.factorial(c)) if c <= 12 else ps
    stats = (runs * bootstrap_ops(n=n, rows=s.optionb_metrics * s.layers, resamples=rs, permutations=ps)
             + s.policies * bootstrap_ops(n=n, rows=s.poolings * s.views, resamples=rs, permutations=ps)
             + s.policies * bootstrap_ops(n=c, rows=s.poolings * s.views, resamples=rs, permutations=perms_c)
             + runs * s.schemes * bootstrap_ops(n=s.ci_k, rows=s.views, resamples=rs, permutations=ps))
    out["bootstrap, permutation tests"] = stats
    # the draws, each once: every generator is seeded by name, the same in both policies and poolings
    bins_draws = s.schemes * (len(s.bins_k) * s.bins_partitions * n + n)
    out["random draws (shared)"] = Ops(draw=bins_draws + s.null_partitions * n + 2 * (rs + ps) * n
                                       + 2 * s.schemes * (rs + ps) * s.ci_k, add=2 * rs * n)
    tokens = 2 * n * s.tokens_per_statement
    out["lexical baseline"] = Ops(add=s.lexical_seeds * (tokens * d + 2 * (2 * n * d) + 2 * cat_pairs),
                                  draw=s.lexical_seeds * s.vocabulary * d)
    t = s.aniso_tokens
    out["anisotropy"] = Ops(gemm=s.layers * t * t * d + s.aniso_resamples * s.layers * (2.0 / 3.0) * t ** 3)
    return out


def seconds(ops: dict[str, Ops], rates: Rates) -> dict[str, float]:
    """Each component's floor in seconds at ``rates``."""
    return {name: o.seconds(rates) for name, o in ops.items()}


def as_dict(ops: Ops) -> dict[str, float]:
    return {f.name: getattr(ops, f.name) for f in fields(ops)}
