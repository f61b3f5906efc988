"""The synthetic theory check of the FedGP paper (appendix B, Figure 5): does the rule with the smallest Delta
error at initialisation test best? All of it is here, each module at the layer of what it uses:

- `roles`: the rules it compares and which method variant plays each (params.yaml's `theory_checks`, validated by
  `fdabench.config`);
- `quantities`: d², σ², τ²d² and the rules' Delta errors at a model's initial parameters;
- `init`: the `fdabench theory init` job, one per target and seed, on the cell's problem;
- `report`: the predicted winners against the rules' trained results (`fdabench theory report`).
"""
