"""The pair-level findings as phrases: the pair-level models (:mod:`.pair_findings`) and their one family at the
pre-declared layer (:mod:`.pair_family`)."""
