"""Pure numpy/scipy analyses of the extraction files, one module per analysis family (the resampling
loops compiled with numba).

- :mod:`~uaprobe.analysis.stats`: vectorised correlation, bootstrap, permutation, Fisher-z,
  multiple-comparison and curve statistics shared by all families.
- :mod:`~uaprobe.analysis.uniformity`: uniformity (mean pairwise cosine) of groups, the one resampling
  kernel (:class:`~uaprobe.analysis.uniformity.Cosines`), which picks Gram entries or sums of unit
  vectors per call by cost; :mod:`~uaprobe.analysis.kernels`: its compiled loops;
  :mod:`~uaprobe.analysis.workers`: independent units of work (Option B's layers, Gram matrices,
  bootstrap products) on the kernels' threads, the same bytes on any number.
- :mod:`~uaprobe.analysis.pair_table`: statements -> pairs, preferences, the cosines of each pooling.
- :mod:`~uaprobe.analysis.layerwise` (seed 000), :mod:`~uaprobe.analysis.validation` (seed 003),
  :mod:`~uaprobe.analysis.bins` (seed 002), :mod:`~uaprobe.analysis.centroid_score`,
  :mod:`~uaprobe.analysis.preference`, :mod:`~uaprobe.analysis.anisotropy` (seed 004),
  :mod:`~uaprobe.analysis.option_b` (the original study's pair-level metrics with global centroids)
  and :mod:`~uaprobe.analysis.phases` (its follow-up paper's phase means),
  :mod:`~uaprobe.analysis.scaling` (seed 001, across models).
- :mod:`~uaprobe.analysis.nan_reasons`: strict JSON / CSV serialisation with recorded NaN reasons.
- :mod:`~uaprobe.analysis.pipeline`: the ``analyze`` stage's entry point, over
  :mod:`~uaprobe.analysis.policy_run` (one position-0 policy's analyses),
  :mod:`~uaprobe.analysis.documents` (the results documents' header and reasons) and
  :mod:`~uaprobe.analysis.summary` (metrics and plot series); :mod:`~uaprobe.analysis.compare`: the
  ``compare`` stage's.
"""
