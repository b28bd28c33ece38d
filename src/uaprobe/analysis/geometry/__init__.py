"""The geometry of the pooled states: uniformity and its Gram form (:mod:`.uniformity`, :mod:`.gram_pieces`), the
representation axis (:mod:`.representation`), the per-dimension sweep (:mod:`.dimensions`), the anisotropy profile
(:mod:`.anisotropy`), the kNN density (:mod:`.knn`) and the centroid and norm metrics of one view
(:mod:`.view_geometry`)."""
