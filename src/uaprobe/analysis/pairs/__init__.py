"""The pair-level analyses: statements to pairs (:mod:`.pair_table`), the within-category centroid score
(:mod:`.centroid_score`), the original study's Option B metrics (:mod:`.option_b`), their models with the
Freedman-Lane permutation within categories (:mod:`.freedman_lane`, :mod:`.pairmodels`, :mod:`.incremental`) and
the mixed models with the categories as groups (:mod:`.mixed`)."""
