"""The model-selection rules a sweep is read with (`fdabench.report.sweep`): each picks one draw per
(method, target, trial) from what its cells recorded, and reports that draw's target test metric."""

#: rule -> what it reads to pick a draw
SELECTION_RULES = {
    "source_val": "the sources' held-out validation metric (DomainBed's training-domain validation)",
    "target_val": "the target validation metric, on labelled target samples kept out of training (hold-out or k-fold)",
    "last": "no selection: draw 0, the configured (default or published) setting",
    "oracle": "the target test metric itself: an upper bound, never a result",
}
RULES = tuple(SELECTION_RULES)
#: the rule that reads the test split: always marked as an upper bound
ORACLE = "oracle"
