"""Job-level plumbing: the fork server that starts training jobs, the one-run-per-directory lock, and which cells of
a suite are current."""
