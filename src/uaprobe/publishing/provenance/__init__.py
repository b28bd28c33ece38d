"""Where every number of the paper comes from: sourced values, the outputs they are read from, and the supplementary provenance files."""
