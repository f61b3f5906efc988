"""Method families: each registered method names one (`Method.family`); tables' readers know them by these
labels, and figures group and colour methods by family, in this order."""

FAMILIES = {
    "baseline": "baselines",
    "fda": "FDA rules (fixed β)",
    "auto": "auto-weighted FDA rules",
    "federated": "federated and personalised FL",
    "unsupervised": "unsupervised FDA",
    "weakly_supervised": "weakly-supervised FDA",
}

#: the families whose methods choose β per source and round themselves: their rounds log `betas` (plotted per source),
#: estimated from the target's batches (checked before any job)
CHOOSES_BETAS = frozenset({"auto"})


def logs_betas(family: str) -> bool:
    """Whether a method of `family` chooses β per source and round itself (its rounds log `betas`)."""
    return family in CHOOSES_BETAS
