"""The synthetic theory check of the FedGP paper (appendix B, Figure 5): does the rule with the smallest Delta
error at initialisation test best? It sits on one layer, above the cells and beside the reports; the rules it
compares and which method variant plays each are params.yaml's `theory_checks` (`fdabench.config.theory_roles`):

- `quantities`: d², σ², τ²d² and the rules' Delta errors at a model's initial parameters;
- `init`: the `fdabench theory init` job, one per target and seed, on the cell's problem;
- `report`: the predicted winners against the rules' trained results (`fdabench theory report`).
"""
