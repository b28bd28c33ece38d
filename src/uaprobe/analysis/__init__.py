"""Pure numpy/scipy analyses of the extraction files, one subpackage per family (the resampling loops compiled with
numba), each importing only the families before it:

- :mod:`~uaprobe.analysis.compute`: the compiled kernels and their threads;
- :mod:`~uaprobe.analysis.inference`: statistics shared by every family;
- :mod:`~uaprobe.analysis.geometry`: uniformity, representations, dimensions, anisotropy, kNN;
- :mod:`~uaprobe.analysis.pairs`: the pair table and the pair-level analyses;
- :mod:`~uaprobe.analysis.category`: the category-level analyses, their exact test and power;
- :mod:`~uaprobe.analysis.run`: one model's run, the ``analyze`` stage's entry point;
- :mod:`~uaprobe.analysis.panel`: across the panel, the ``compare`` stage's entry point.

An undefined value is a :class:`~uaprobe.schema.missing.Missing` carrying its reason, in the place it will have
in its file; the file's ``nan_reasons`` are read off the finished document.
"""

FAMILIES = ("compute", "inference", "geometry", "pairs", "category", "run", "panel")
"""The families in the order of their imports: each imports only those before it."""
