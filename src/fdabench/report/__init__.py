"""Tables (pandas) and figures (seaborn) built from cell result files only."""
