"""Pure tensor math of the server: the aggregation rules and Wasserstein dataset dictionaries."""
