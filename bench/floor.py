"""The floor of the ``analyze`` computation: operation counts of each component's cheapest exact form.

Pure arithmetic (no timing; the only I/O is ``params.yaml``, read once for the defaults of
:class:`Shape`): :func:`components` counts, for one run of
:func:`~uaprobe.analysis.pipeline.analyze_model` on ``n`` pairs, the operations of every component
in the cheapest exact float64 form, in five kinds:

- ``gemm``: multiply-adds of matrix products (rate: a float64 GEMM on all cores);
- ``add``: float64 additions or comparisons streaming from cache (rate: a float64 sum from L2 on all
  cores);
- ``gather``: float64 entries of a Gram table summed at the positions of the pairs inside the groups
  of a random partition (rate: such sums from a table of that n, on all cores): the Gram form of the
  random bins, whose pairs are scattered over the table;
- ``gather_null``: the same for the size-matched null's partitions (groups of the categories' sizes:
  fewer, larger groups, so more of the entries read share a cache line; rate measured on them);
- ``draw``: random integers of the seeded generators (rate: one generator, one core: a seeded
  stream is sequential).

What components can share is counted once: the cosine Gram matrix of one view (``n^2 D / 2``
multiply-adds per side: the symmetric half) serves the categories, the random bins, the size-matched
null and Option B's kNN density of that view; the draws that are the same in both pooling policies
and in every pooling (the generators are seeded by name only) are drawn once; the pair-level models
read Option B's metrics and the lexical baseline's embeddings; the specification curve's
per-specification permutations are among its joint relabellings. Where two exact forms exist (the
random bins and the null: Gram entries or unit vectors), the one of fewer seconds at the measured
rates is counted (:func:`cheapest_forms`). ``bench/scale.py`` divides these counts by rates it
measures in the same process (:func:`seconds`).

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

KINDS = ("gemm", "add", "draw", "gather", "gather_null")
PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"
"""The project's parameters: the defaults of :class:`Shape`'s analysis settings."""


def settings(analysis: AnalysisParams) -> dict[str, Any]:
    """The fields of :class:`Shape` that the ``analysis`` section of params.yaml sets."""
    return {"bins_k": tuple(analysis.bins.k), "bins_partitions": analysis.bins.partitions,
            "ci_k": analysis.bins.ci_k, "null_partitions": analysis.robustness.null_partitions,
            "resamples": analysis.bootstrap_resamples, "permutations": analysis.permutations,
            "lexical_seeds": analysis.robustness.lexical_seeds,
            "aniso_resamples": analysis.robustness.anisotropy_bootstrap, "abtt_k": analysis.abtt_k}


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
    gather: float = 0.0
    gather_null: float = 0.0

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
    gather: float
    """Gram entries per second gathered at the pairs inside the groups of the random bins' partitions."""
    gather_null: float
    """The same for partitions into groups of the categories' sizes (the size-matched null)."""


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
    aniso_prompts: int = 0
    """P: the anisotropy prompts, which the L* bootstrap draws with replacement (0: every token counted
    in every resample)."""
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
    pair_model_metrics: int = 5
    """The pair-level models' metrics (the five of the original Option B)."""
    pair_covariates: int = 2
    """The pair-level models' length covariates besides the intercept (n_content of A and of B)."""
    left_out_pairs: int | None = None
    """Pairs of the category ``analysis.primary.left_out`` (the incremental family without it tests
    the others); None: the largest category's (the fewest pairs left: a floor)."""
    abtt_k: int = _from_params("abtt_k")
    representations: int = 3
    """raw, zscore, abtt: the representation sweep and the specification curve run over all three."""
    top_pcs: int = 10
    """The largest k of the sweep's variance shares (``dimensions.TOPS``): eigenpairs of its eigensolution."""
    nll_kinds: int = 2
    """The specification curve's preferences (mean and sum NLL)."""

    @property
    def views(self) -> int:
        """Views of the resampling analyses: L + 1 layers and the prenorm state."""
        return self.n_layers + 2

    @property
    def layers(self) -> int:
        return self.n_layers + 1

    @classmethod
    def of(cls, *, n_pairs: int, dim: int, n_layers: int, category_sizes: Sequence[int],
           tokens_per_statement: float, aniso_tokens: int, vocabulary: int, params,
           aniso_prompts: int = 0) -> "Shape":
        """From the extraction's shapes and ``params.analysis`` (:class:`~uaprobe.config.AnalysisParams`)."""
        return cls(n_pairs=n_pairs, dim=dim, n_layers=n_layers, category_sizes=tuple(int(s) for s in category_sizes),
                   tokens_per_statement=float(tokens_per_statement), aniso_tokens=int(aniso_tokens),
                   vocabulary=int(vocabulary), aniso_prompts=int(aniso_prompts), **settings(params))

    @property
    def aniso_drawn_tokens(self) -> float:
        """The token states of one L* bootstrap resample's eigenvalue problems: those of the prompts it
        draws at least once (a prompt drawn twice is a weight, not a row), on average ``1 - (1 - 1/P)^P``
        of them; the cube of that mean is at most the mean cube (Jensen), so the count stays a floor."""
        p = self.aniso_prompts
        return self.aniso_tokens * (1.0 - (1.0 - 1.0 / p) ** p if p > 0 else 1.0)


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
    """Operations of one partition and view on side ``diff`` in each exact form: the Gram form (one
    entry gathered per pair inside a group from the table ``G_A - G_B``, the ``gather`` kind) and the
    unit-vector form (additions: every member's D coordinates of both sides added to its group, then
    each group's two squared norms, D each)."""
    return pairs, 2.0 * n * dim + 2.0 * groups * dim


def bootstrap_ops(*, n: int, rows: int, resamples: int, permutations: int) -> Ops:
    """Bootstrap r and permutation r of ``rows`` series against one y over n points: the count-weighted
    moments (three (B, n) x (n, M) products and two vector products), the permuted products
    ((M, n) x (n, P)), the sorts of the percentile intervals and the permutation hits."""
    gemm = 3.0 * resamples * n * rows + 2.0 * resamples * n + float(rows) * n * permutations
    sort = rows * resamples * math.log2(max(resamples, 2))
    return Ops(gemm=gemm, add=sort + rows * permutations)


def tridiagonal_macs(m: int) -> float:
    """Multiply-adds of the Householder reduction of a symmetric m x m matrix to tridiagonal form
    (LAPACK's ``sytrd``): at the step whose trailing block has r rows, its product with the
    reflector (``r^2``) and the rank-2 update of its symmetric half (``r^2``, to lower order):
    ``sum 2 r^2`` over r < m, about ``(2/3) m^3``."""
    return (m - 1) * m * (2 * m - 1) / 3.0


def sweep_ops(*, statements: int, dim: int, k: int, top: int, categories: int, representations: int = 3) -> Ops:
    """One (policy, pooling, layer) of the representation sweep (:func:`uaprobe.analysis.dimensions.sweep`)
    on N ``statements`` of D coordinates.

    ABTT's eigensolution (:func:`uaprobe.analysis.representation.abtt_and_shares`): the centred Gram
    matrix of the smaller side, m = min(N, D) (its symmetric half, ``m (m + 1) / 2 * max(N, D)``
    multiply-adds); the ``top`` largest eigenpairs by the dense symmetric route, counted as the
    tridiagonal reduction's (:func:`tridiagonal_macs`, about ``(2/3) m^3``) at the GEMM rate
    (optimistic: half of them are matrix-vector products, which run at memory speed; the
    tridiagonal eigenpairs themselves, ``O(m top)``, left out) and the back-transformation of the
    ``top`` vectors (``m^2 top``); the projection on the top ``k`` directions and back (``2 N D k``),
    its subtraction folded into that product. The elementwise passes, at the add rate, in units of
    ``N D``: ABTT's mean, centring and sum of squares (3); the z-score's mean, range (the check for
    constant dimensions), variance and scaling (4); under each representation the unit rows (the
    squared norms and the scaling, 2) and each category's sum of each side's unit rows (1), from
    which the whole set's sums follow (``2 C D``) and every uniformity is a squared norm (``2 C D +
    D``: the sums of the unit rows' squares are their counts); the raw states' squares per dimension
    for the contributions ``c_d`` (1) and the sort of those D contributions (``D log2 D``)."""
    n, d = statements, dim
    m, big = min(n, d), max(n, d)
    top, k = min(top, m), min(k, m)  # the eigensolver returns at most m pairs
    gemm = m * (m + 1) / 2.0 * big + tridiagonal_macs(m) + m * m * top + 2.0 * n * d * k
    elements = (3 + 4 + 3 * representations + 1) * n * d
    small = representations * (4 * categories + 1) * d + d * math.log2(max(d, 2))
    return Ops(gemm=gemm, add=elements + small)


def permutation_r_ops(*, n: int, rows: int, permutations: int, columns: int) -> Ops:
    """Freedman-Lane permutation r of ``rows`` metrics over n pairs, one policy of the pair-level
    models (:class:`uaprobe.analysis.pairmodels.PermutedProjections`), ``columns`` = 1 + covariates:
    every row's residuals on the covariate basis (two products, ``2 rows n columns``); the products
    of the residuals with the inversely permuted residual preference and basis columns but the
    constant (``rows n columns B``: ``columns`` per draw); those ``columns B`` columns gathered (one
    read each) and the observed r (two dot products per row); per row and draw, the squared
    projections taken from the residual norm, the ratio and the comparison of the p (``columns + 1``)."""
    gemm = rows * n * columns * float(permutations) + 2.0 * rows * n * columns
    add = columns * float(permutations) * n + 2.0 * rows * n + rows * float(permutations) * (columns + 1)
    return Ops(gemm=gemm, add=add)


def curve_ops(*, specs: int, nll: int, categories: int) -> Ops:
    """The specification curve (:func:`uaprobe.analysis.speccurve.curve_results`) of ``specs`` base
    rows (pooling x policy x representation x layer), ``nll`` preferences and C ``categories``.

    The r of every specification under each of the C! relabellings, with no category left out (C
    products) and with each one left out (C - 1 each): ``specs nll C! C^2`` multiply-adds. Each
    specification's own test enumerates the orders of its kept categories, which are the
    relabellings that fix its left-out category: those r are among these (shared). Additions and
    comparisons: the normalisations of the relabelled preferences and of the rows (3 per entry),
    each test's hits (``C!``, and ``(C - 1)!`` per left-out option), the joint tests' median (a
    selection) and share over every relabelling, over all specifications and over those without a
    left-out category, and the sort of the curve."""
    p = float(math.factorial(categories))
    entries = categories + categories * (categories - 1)  # of one row over its C + 1 left-out options
    gemm = specs * nll * p * entries
    count = specs * nll * (categories + 1)  # specifications
    hits = specs * nll * (p + categories * math.factorial(categories - 1))
    joint = 2.0 * p * (count + specs * nll)
    add = 3.0 * (nll * p + specs) * entries + hits + joint + count * math.log2(max(count, 2))
    return Ops(gemm=gemm, add=add)


def cheapest_forms(*, bins_gram: float, bins_vec: float, null_gram: float, null_vec: float, table: float,
                   gram: Ops, null: bool, rates: Rates) -> tuple[Ops, Ops, Ops]:
    """(Gram products, bins, null) of one view and side ``diff`` in the cheapest combination of
    forms, by their seconds at ``rates``. The Gram form gathers one entry per pair inside a group
    (``*_gram``) from the table ``G_A - G_B`` (its ``table`` subtractions, to the bins where they use
    it, else to the null); the unit-vector form adds (``*_vec``). ``gram``: the view's Gram products
    where no other component pays them (none for the layer views: the kNN density needs them)."""
    best: tuple[float, Ops, Ops, Ops] | None = None
    for b_gram in (True, False):
        for n_gram in ((True, False) if null else (False,)):
            b = Ops(gather=bins_gram, add=table) if b_gram else Ops(add=bins_vec)
            z = Ops()
            if null:
                z = Ops(gather_null=null_gram, add=0.0 if b_gram else table) if n_gram else Ops(add=null_vec)
            g = gram if (b_gram or (null and n_gram)) else Ops()
            cost = (g + b + z).seconds(rates)
            if best is None or cost < best[0]:
                best = (cost, g, b, z)
    assert best is not None
    return best[1], best[2], best[3]


def components(shape: Shape, rates: Rates) -> dict[str, Ops]:
    """The operations of every component of the analyze computation in its cheapest exact form.

    ``rates`` decide between the forms of the random bins and the null (:func:`cheapest_forms`)."""
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
    forms = dict(bins_gram=bins_gram, bins_vec=bins_vec, null_gram=null_gram, null_vec=null_vec,
                 table=n * (n - 1) / 2.0, rates=rates)  # G_A - G_B of one view: its subtractions
    # layer views: their Gram matrices are paid by the kNN density; the prenorm view's only where the
    # forms that use them are the cheaper. The null runs on the mean pooling only.
    layer_mean, layer_other = (cheapest_forms(gram=Ops(), null=null, **forms) for null in (True, False))
    pre_mean, pre_other = (cheapest_forms(gram=Ops(gemm=2 * gram_macs(n, d)), null=null, **forms)
                           for null in (True, False))
    mean_runs = s.policies
    other_runs = runs - mean_runs
    knn_views = runs * s.layers + s.policies * s.lexical_seeds  # + the pair-level models' lexical seeds
    out: dict[str, Ops] = {}
    out["Gram matrices (shared)"] = (Ops(gemm=knn_views * 2 * gram_macs(n, d))
                                     + mean_runs * pre_mean[0] + other_runs * pre_other[0])
    out["random bins"] = (mean_runs * (s.layers * layer_mean[1] + pre_mean[1])
                          + other_runs * (s.layers * layer_other[1] + pre_other[1]))
    out["size-matched null"] = mean_runs * (s.layers * layer_mean[2] + pre_mean[2])
    # categories (one partition, both sides, from the Gram matrices: with the rows in category order a
    # category's pairs are one block of the matrix, read streaming) and the pair scores (centroid
    # cosines: category sums of the unit vectors and one dot product per member, both sides)
    out["categories, pair scores"] = Ops(add=runs * s.views * (2 * cat_pairs + 2 * (2 * n * d)))
    # kNN: every entry of the distance matrix offered to its row's k nearest (n^2 per call), and
    # Option B's other metrics (centroids, cosines, margins; about 12 n D per view): every layer of
    # every pooling, and one view per lexical seed and policy in the pair-level models
    out["Option B kNN, metrics"] = Ops(add=knn_views * (2.0 * n * n + 12.0 * n * d))
    out.update(_resampling(s))
    out.update(_pair_level_and_sweep(s))
    t = s.aniso_tokens
    out["anisotropy"] = Ops(gemm=s.layers * t * t * d
                            + s.aniso_resamples * s.layers * (2.0 / 3.0) * s.aniso_drawn_tokens ** 3)
    return out


def _resampling(s: Shape) -> dict[str, Ops]:
    """The bootstrap and permutation tests, the shared draws and the lexical baseline."""
    n, d, c, runs = s.n_pairs, s.dim, len(s.category_sizes), s.policies * s.poolings
    # bootstrap and permutation tests over pairs: Option B (metrics x layers rows per pooling) and the
    # pair level (poolings x views rows per policy); over categories (layer-wise) and bins (ci_k)
    rs, ps = s.resamples, s.permutations
    perms_c = min(ps, math.factorial(c)) if c <= 12 else ps
    stats = (runs * bootstrap_ops(n=n, rows=s.optionb_metrics * s.layers, resamples=rs, permutations=ps)
             + s.policies * bootstrap_ops(n=n, rows=s.poolings * s.views, resamples=rs, permutations=ps)
             + s.policies * bootstrap_ops(n=c, rows=s.poolings * s.views, resamples=rs, permutations=perms_c)
             + runs * s.schemes * bootstrap_ops(n=s.ci_k, rows=s.views, resamples=rs, permutations=ps))
    # the draws, each once: every generator is seeded by name, the same in both policies and poolings
    bins_draws = s.schemes * (len(s.bins_k) * s.bins_partitions * n + n)
    draws = Ops(draw=bins_draws + s.null_partitions * n + 2 * (rs + ps) * n + 2 * s.schemes * (rs + ps) * s.ci_k,
                add=2 * rs * n)
    tokens = 2 * n * s.tokens_per_statement
    lexical = Ops(add=s.lexical_seeds * (tokens * d + 2 * (2 * n * d) + 2 * pairs_within(s.category_sizes)),
                  draw=s.lexical_seeds * s.vocabulary * d)
    return {"bootstrap, permutation tests": stats, "random draws (shared)": draws, "lexical baseline": lexical}


def _pair_level_and_sweep(s: Shape) -> dict[str, Ops]:
    """The pair-level models, the representation sweep and the specification curve."""
    n, d, c = s.n_pairs, s.dim, len(s.category_sizes)
    # pair-level models: per policy, the permutation r of the metrics of every pooling and layer (Option
    # B's values) and of the lexical seeds (their kNN and metrics are in Option B's row); the
    # within-category orders drawn once (B (n - C) draws of their generator) and inverted once (B n),
    # for both policies; the seeds' embeddings are the lexical baseline's (its Gaussian table and
    # pooled sums) but where a policy drops more tokens: each statement's sum less its position-0
    # token, then the division (2 N D per seed, for one policy)
    rows = s.pair_model_metrics * (s.poolings * s.layers + s.lexical_seeds)
    ps = s.permutations
    pair_level = (s.policies * permutation_r_ops(n=n, rows=rows, permutations=ps, columns=1 + s.pair_covariates)
                  + Ops(draw=ps * max(n - c, 0), add=ps * n + s.lexical_seeds * 2 * (2 * n * d)))
    # the incremental models: per policy, pooling and metric, every layer over all pairs and the
    # declared layer over the pairs of every category but the left-out one, with the lexical metric's
    # seeds among the covariates; counted at the length covariates' columns only (a lexical metric
    # constant over the pairs adds no column), and without the lexical states' metrics and the
    # projections' gathers: a floor
    out_pairs = max(s.category_sizes) if s.left_out_pairs is None else s.left_out_pairs
    columns = 1 + s.pair_covariates
    pair_level = pair_level + (s.policies * s.poolings * s.pair_model_metrics) * (
        permutation_r_ops(n=n, rows=s.layers, permutations=ps, columns=columns)
        + permutation_r_ops(n=n - out_pairs, rows=1, permutations=ps, columns=columns))
    # the representation sweep: every policy, pooling and layer, from the raw states of the 2n statements
    sweep = s.policies * s.poolings * s.layers * sweep_ops(statements=2 * n, dim=d, k=s.abtt_k,
                                                           top=max(s.abtt_k, s.top_pcs), categories=c,
                                                           representations=s.representations)
    curve = curve_ops(specs=s.poolings * s.policies * s.representations * s.layers, nll=s.nll_kinds, categories=c)
    return {"pair-level models": pair_level, "representation sweep": sweep, "specification curve": curve}


def seconds(ops: dict[str, Ops], rates: Rates) -> dict[str, float]:
    """Each component's floor in seconds at ``rates``."""
    return {name: o.seconds(rates) for name, o in ops.items()}


def as_dict(ops: Ops) -> dict[str, float]:
    return {f.name: getattr(ops, f.name) for f in fields(ops)}
