"""The method: what its clients do (`roles`) and the server's step (`aggregate`)."""

from __future__ import annotations

from fdabench.methods import METHODS, Aggregate, Roles, RoundInputs, RoundLoopMethod
from fdabench_fedgp_nofilter.rule import fedgp_nofilter


@METHODS.register  # registered under `name`; the entry point (pyproject.toml) makes fdabench import this module
class FedGPNoFilter(RoundLoopMethod):
    """FedGP without the filter: θ += Σ_i w_i [(1 − β) g_T + β Proj(g_T | g_i)] per layer, after FedAvg warm-up."""

    name = "fedgp_nofilter"  # the entry point's name in pyproject.toml
    family = "fda"  # a key of fdabench.core.families.FAMILIES: colours and figure rows
    description = "FedGP with negative projections kept"
    roles = Roles(warmup=True)  # FedAvg rounds over the sources first (settings.warmup_rounds), as FedDA and FedGP
    hparams_schema = {
        "beta": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.5,
            "search": {"uniform": [0.0, 1.0]},  # what a sweep draws β from (docs/comparing.md)
            "description": "weight of the source term",
        }
    }

    def aggregate(self, inputs: RoundInputs) -> Aggregate:
        delta = fedgp_nofilter(
            inputs.target_update, inputs.source_updates, self.hparams["beta"], inputs.source_counts, inputs.layer_sizes
        )
        return Aggregate(delta)
