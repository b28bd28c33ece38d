"""The category-level analyses of r(UA, preference): layer-wise (:mod:`.layerwise`, seed 000), the validation table
(:mod:`.validation`, seed 003), random bins (:mod:`.bins`, seed 002), the NLL kind (:mod:`.preference`), the
specification curve (:mod:`.speccurve`) and its exact tests (:mod:`.curve_stats`), their power (:mod:`.power`) and the robustness view
(:mod:`.robustness`)."""
