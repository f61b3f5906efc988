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
