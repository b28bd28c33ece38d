"""One model's run: the ``analyze`` stage's entry point (:mod:`.pipeline`) over one position-0 policy's analyses
(:mod:`.policy_run`) and the length-matched pairs (:mod:`.length_matched`); the checks before it (:mod:`.limits`,
:mod:`.fit`); the results documents' header (:mod:`.documents`) and the metrics and plot series read off them
(:mod:`.summary`)."""
