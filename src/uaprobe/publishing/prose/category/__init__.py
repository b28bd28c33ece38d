"""The category-level findings as phrases: short sourced phrases (:mod:`.phrases`), the specification curve
(:mod:`.curve`), the shared direction and the representations (:mod:`.direction`) and the main findings
(:mod:`.findings`)."""
