"""The manuscript's tables: the main text's (:mod:`.manuscript`) and those of the original study's later analyses
(:mod:`.original`), every number a sourced value."""
