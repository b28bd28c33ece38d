"""The reproducibility toolkit: the numeric pins and the MKL binding, the machine fingerprint, the lock
file, verify (hashes, stores), the review, and the number-by-number diff of the outputs and
of the paper."""
