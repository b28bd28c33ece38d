"""Statistics shared by every family: correlation, bootstrap, permutation and Fisher-z (:mod:`.stats`), the
statistics of a correlation across groups (:mod:`.groupstats`), the controls a correlation must survive
(:mod:`.controls`), a family's corrections (:mod:`.multiplicity`), the two-stage cluster bootstrap
(:mod:`.clusterboot`) and the summaries of a layer curve (:mod:`.curves`, :mod:`.phases`)."""
