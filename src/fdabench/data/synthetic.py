"""Synthetic regression of the FedGP paper's appendix B (its theory check, Figure 5).

Inputs x in R^50 come from a mixture of 10 Gaussians (identity covariance, centres ~ U(-0.5, 0.5)^50).
The ground truth maps to R^10 through a sum of 100 radial basis functions,
    f(x) = A φ(x) + b,  φ_j(x) = exp(-‖x - μ_j‖² / σ_j²),
with μ_j, A, b ~ U(-0.5, 0.5) entrywise and σ_j² = 100 U(0, 1) (the published generator's draws).
Domain "target" uses these parameters; source domain "s<k>" shifts the basis functions by level s_k:
μ'_j = μ_j + s_k U(0, 1)^50 and σ'_j² = σ_j² + 100 s_k U(0, 1), so the input distribution is the
same everywhere and the shift grows with k. Every domain draws its own inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset

# The nine target training-set sizes of the published generator: int(5000 r) for
# r = exp(arange(log .003, log .5, (log .4 - log .001) / 10)).
PUBLISHED_TARGET_SIZES = (14, 27, 49, 90, 164, 299, 546, 994, 1810)
DEFAULT_SHIFT_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def _rbf_outputs(x: np.ndarray, centres: np.ndarray, widths: np.ndarray, mixing: np.ndarray, bias: np.ndarray):
    """A φ(x) + b with φ_j(x) = exp(-‖x - μ_j‖² / σ_j²), vectorised over samples and basis functions."""
    squared_distances = (x * x).sum(1)[:, None] - 2.0 * x @ centres.T + (centres * centres).sum(1)[None, :]
    return np.exp(-np.maximum(squared_distances, 0.0) / widths[None, :]) @ mixing.T + bias


@DATASETS.register
class SyntheticRegression(DatasetSource):
    name = "synthetic_regression"
    task = "regression"
    domains = ("target",) + tuple(f"s{k}" for k in range(len(DEFAULT_SHIFT_LEVELS)))
    partitioner = "shift_and_subsample"
    options_schema = {
        "samples_per_domain": {
            "type": "integer",
            "minimum": 100,
            "default": 5000,
        },  # appendix B: each dataset has 5000 points
        "input_dim": {"type": "integer", "minimum": 1, "default": 50},
        "output_dim": {"type": "integer", "minimum": 1, "default": 10},
        "mixture_components": {"type": "integer", "minimum": 1, "default": 10},
        "basis_functions": {"type": "integer", "minimum": 1, "default": 100},
        "shift_levels": {
            "type": "array",
            "items": {"type": "number", "minimum": 0},
            "minItems": len(DEFAULT_SHIFT_LEVELS),
            "maxItems": len(DEFAULT_SHIFT_LEVELS),
            "description": "shift s_k of source domain s<k> (one per source domain)",
            "default": list(DEFAULT_SHIFT_LEVELS),
        },
        "seed": {"type": "integer", "minimum": 0, "default": 0},
    }
    # Full-batch gradient steps, one per round, per-tensor rules, 300 rounds, as the published theory check.
    # Its server applies momentum 0.9 to the aggregate with the step size applied twice (0.2 x 0.2): with
    # local SGD at 0.04 and server momentum 0.9 the recursion is identical (u ← 0.9 u + 0.04 g, θ ← θ − u).
    default_train = {
        "model": "sigmoid_mlp",
        "rounds": 300,
        "warmup_rounds": 0,
        "local_epochs": 1,
        "optimizer": "sgd",
        "source_lr": 0.04,
        "target_lr": 0.04,
        "source_batch_size": 0,
        "target_batch_size": 0,
        "server_momentum": 0.9,
    }
    default_partition = {"test_fraction": 0.2, "target_sizes": list(PUBLISHED_TARGET_SIZES)}

    def generation_bytes(self, options: dict[str, Any]) -> int:
        """Every domain's float32 inputs and outputs, plus one domain's float64 temporaries: its draw (components,
        centres, noise: 3 input-sized arrays) and `_rbf_outputs`' (products, distances, their exponentials: 3
        basis-sized arrays, and the outputs twice)."""
        samples, dim = options["samples_per_domain"], options["input_dim"]
        outputs, basis = options["output_dim"], options["basis_functions"]
        kept = (1 + len(options["shift_levels"])) * samples * (dim + outputs) * 4
        return kept + samples * (3 * dim + 3 * basis + 2 * outputs + 1) * 8 + basis * dim * 8

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        rng = np.random.default_rng(options["seed"])
        dim, outputs, basis = options["input_dim"], options["output_dim"], options["basis_functions"]
        mixture_centres = rng.uniform(-0.5, 0.5, size=(options["mixture_components"], dim))
        centres = rng.uniform(-0.5, 0.5, size=(basis, dim))
        widths = 100.0 * rng.uniform(0.0, 1.0, size=basis)
        mixing = rng.uniform(-0.5, 0.5, size=(outputs, basis))
        bias = rng.uniform(-0.5, 0.5, size=outputs)

        def draw_inputs() -> np.ndarray:
            components = rng.integers(0, len(mixture_centres), size=options["samples_per_domain"])
            return mixture_centres[components] + rng.standard_normal((options["samples_per_domain"], dim))

        domains = {}
        x = draw_inputs()
        domains["target"] = DomainArrays(
            x.astype(np.float32), _rbf_outputs(x, centres, widths, mixing, bias).astype(np.float32)
        )
        for level_index, level in enumerate(options["shift_levels"]):
            shifted_centres = centres + level * rng.uniform(0.0, 1.0, size=centres.shape)
            shifted_widths = widths + 100.0 * level * rng.uniform(0.0, 1.0, size=basis)
            x = draw_inputs()
            y = _rbf_outputs(x, shifted_centres, shifted_widths, mixing, bias)
            domains[f"s{level_index}"] = DomainArrays(x.astype(np.float32), y.astype(np.float32))
        return PreparedDataset(self.name, self.task, outputs, (dim,), domains, meta={"options": options})

    def target_names(
        self, partition_options: dict[str, Any], dataset_options: dict[str, Any] | None = None
    ) -> list[str]:
        sources = [name for name in self.domains if name != "target"]
        return [f"{source}-n{size}" for source in sources for size in partition_options["target_sizes"]]
