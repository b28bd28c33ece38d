"""The words and tables of the paper that depend on its numbers."""
