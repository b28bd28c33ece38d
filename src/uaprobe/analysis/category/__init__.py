"""The category-level analyses of r(UA, preference): layer-wise (:mod:`.layerwise`, seed 000), the validation table
(:mod:`.validation`, seed 003), random bins (:mod:`.bins`, seed 002), the NLL kind (:mod:`.preference`), the
specification curve and its exact test (:mod:`.speccurve`), its power (:mod:`.power`) and the robustness view
(:mod:`.robustness`)."""
