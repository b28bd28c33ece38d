"""The words and tables of the paper that depend on its numbers, by family, each importing only those before it:
:mod:`.primitives`, :mod:`.tables`, :mod:`.category`, :mod:`.pairs`, :mod:`.panel`."""

FAMILIES = ("primitives", "tables", "category", "pairs", "panel")
"""The families in the order of their imports."""
