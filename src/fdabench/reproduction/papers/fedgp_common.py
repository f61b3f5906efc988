"""What the FedGP paper's protocol records share (`fdabench.reproduction.papers.fedgp_records`): the reported statistic,
the local optimiser, the auto-weighting defaults of each code family, the train block and its sources, and the fixed-β
rows."""

from __future__ import annotations

from typing import Any

from fdabench.reproduction.papers.record import Row, Source, code, paper

STATISTIC = paper("Appendix C.2: the reported accuracy is the average of the last 5 epochs")
FRESH_ADAM = "a new Adam optimiser at every local training call, default weight decay"

# ---------------------------------------------------------------------------------------------- shared rows
NOISE_AUTO = {"scale_alignment": "noniid_code", "estimation": "local_steps", "recompute": "every_round"}
DOMAINBED_AUTO = {"scale_alignment": "domainbed_code", "estimation": "local_steps", "recompute": "every_round"}


def train_block(**values: Any) -> dict[str, Any]:
    base = {
        "local_epochs": 1,
        "target_local_epochs": 1,
        "optimizer": "adam",
        "momentum": 0.0,
        "weight_decay": 0.0,
        "rounds": 50,
        "warmup_rounds": 2,
        "final_rounds": 5,
        "server_momentum": 0.0,
        "server_lr": 1.0,
        "participation": 1.0,
        "source_dropout": 0.0,
    }
    return {**base, **values}


def train_block_sources(
    main: str, lines: dict[str, str], commit: str | None = None, model_options: tuple[str, ...] = (), **sources: Source
) -> dict[str, Source]:
    """Provenance of `train_block`'s settings for one script: `lines` maps a setting to 'file:line' in `main`'s
    repository at `commit` (`model_options`: the options that 'model_options' cites, when the record sets any);
    `sources` overrides whole sources."""
    cite = (lambda where: code(where, commit)) if commit else code
    provenance = {f"train.{key}": cite(where) for key, where in lines.items() if key != "server"}
    if model_options:
        where = provenance.pop("train.model_options")
        provenance.update({f"train.model_options.{option}": where for option in model_options})
    server = lines.get("server", f"{main}: the aggregated weights are loaded as the new global model")
    provenance.update(
        {
            "train.momentum": cite(f"{lines['optimizer']}: Adam takes no momentum (SGD's momentum is unused)"),
            "train.final_rounds": STATISTIC,
            "train.server_momentum": cite(f"{server} (no server momentum)"),
            "train.server_lr": cite(f"{server} (server lr 1)"),
            "train.participation": cite(f"{server} (every source trains every round)"),
            "train.source_dropout": cite(f"{server} (every source answers every round)"),
        }
    )
    provenance.update({f"train.{key}": source for key, source in sources.items()})
    return provenance


# every FedGP update of the authors' code adds a source term only where the cosine is positive
FILTER_SOURCE = code(
    "main_noniid.py:254, :272 (if cur_sim > 0); main_domain_bed.py:143-146 and the other drivers alike"
)


def fixed_rows(
    source: Source, betas: tuple[float, ...] = (0.5,), fedgp_betas: tuple[float, ...] = (0.5,)
) -> dict[str, Row]:
    rows = {f"fedda_{b:g}": Row("fedda", {"beta": b}, source) for b in betas}
    rows.update(
        {
            f"fedgp_{b:g}": Row(
                "fedgp",
                {"beta": b, "mode": "cosine_scaled", "scale_alignment": "steps_and_lr", "filter": True},
                source,
                provenance={"hparams.filter": FILTER_SOURCE},
            )
            for b in fedgp_betas
        }
    )
    return rows
