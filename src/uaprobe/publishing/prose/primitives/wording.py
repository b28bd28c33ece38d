"""The thresholds that choose the paper's words: where a number becomes "near zero", "most",
"stands out" or "comparable". One place, so that a reader finds what each word means and a change of
wording is one reviewed edit; every sentence that uses one names it in its docstring."""

from __future__ import annotations

NEAR_ZERO = 0.05
"""A mean cosine within this of zero at every layer counts as "near zero": no shared direction left."""

DOMINATES = 0.5
"""A share above this counts as carrying "most" of the uniformity or variance."""

STANDS_OUT = 2.0
"""A category's length difference "stands out" when it is at least this many times any other's in size."""

MATCH_TOLERANCE = 0.05
"""Two correlations closer than this count as "comparable" in the text."""
