"""FedGP without the filter, as an fdabench plugin (entry-point group `fdabench.methods`)."""
