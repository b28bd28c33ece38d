"""The compiled loops of the resampling work (:mod:`.kernels`) and the threads that run independent units of it
(:mod:`.workers`): the same bytes on any number of threads."""
