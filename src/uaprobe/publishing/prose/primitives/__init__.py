"""The words every phrase is made of: markdown tables, lists and :class:`~.markdown.Prose` (:mod:`.markdown`), how
a stored value becomes text (:mod:`.formats`), the thresholds that choose the words (:mod:`.wording`), and the
study's own words, the dataset and the panel (:mod:`.study`)."""
