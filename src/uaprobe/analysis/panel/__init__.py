"""Across the model panel: the layer curves in absolute and normalised depth (:mod:`.scaling`, seed 001) and the
``compare`` stage's entry point (:mod:`.compare`)."""
