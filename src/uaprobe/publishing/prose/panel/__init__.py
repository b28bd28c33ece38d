"""What the whole panel's design can show (:mod:`.design`: power, the original study faced) and the abstract
(:mod:`.abstract`), from every family's phrases."""
