"""The shipped partitioners, one module each, registered in `fdabench.data.partition.PARTITIONERS` when this package
is imported (by `fdabench.data`): `leave_one_domain_out`, `labelled_target`, `shift_and_subsample` (the synthetic
theory check), `feature_noise` and `label_shift`. A cell's code fingerprint reaches its own partitioner's module
only."""

from fdabench.data.partitioners import (  # noqa: F401  (register the partitioners)
    feature_noise,
    label_shift,
    labelled_target,
    leave_one_domain_out,
    shift_and_subsample,
)
