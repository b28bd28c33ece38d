"""Extraction: the dataset, the models, one batched forward pass per model, and the HDF5 file it writes.

Imports nothing from :mod:`uaprobe.analysis` or :mod:`uaprobe.publishing`; the analyses read its
files through :mod:`uaprobe.extraction.store`.
"""
