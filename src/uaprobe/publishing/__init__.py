"""Publishing: the figures, the manuscript's values, phrases and tables, and the renderer.

Reads the results files the analyses wrote and never the other way round: nothing under
:mod:`uaprobe.analysis` or the extraction modules imports from here.
"""
