"""Job-level plumbing: the fork server that starts training jobs, the one-run-per-directory lock, which cells of
a suite are current, and params.yaml validated for a command or the workflow (`validation`)."""
