"""Protocol records of the FedGP paper's DomainBed tables (ColoredMNIST, VLCS, TerraIncognita; citations as in
`fdabench.reproduction.papers.fedgp_records`)."""

from __future__ import annotations

from typing import Any

from fdabench.reproduction.papers.fedgp_common import (
    DOMAINBED_AUTO,
    FRESH_ADAM,
    fixed_rows,
    train_block,
    train_block_sources,
)
from fdabench.reproduction.papers.record import Protocol, Row, Source, code, inferred, paper, same

# ------------------------------------------------------------------------------------------------ DomainBed
_PERSONALISED = paper(
    "Appendix C.2: the personalised-FL benchmark of Marfoq et al. (2022), 150 epochs at the methods' learning rate"
)
_PERSONALISED_TRAINING = inferred(
    "Marfoq et al.'s benchmark trained these rows; its batch sizes, learning rates and warm-up are not given, so the "
    "table's are used"
)
_PERSONALISED_KEYS = (
    "train.source_lr",
    "train.target_lr",
    "train.source_batch_size",
    "train.target_batch_size",
    "train.warmup_rounds",
)


def personalised_rows(hyper_source: Source) -> dict[str, Row]:
    training = same(_PERSONALISED_TRAINING, *_PERSONALISED_KEYS)
    return {
        "ditto": Row(
            "ditto",
            {"penalty": 1.0},
            _PERSONALISED,
            train={"rounds": 150},
            provenance={**training, "hparams.penalty": hyper_source},
        ),
        "fedrep": Row(
            "fedrep",
            {"head_epochs": 10, "body_epochs": 1},
            _PERSONALISED,
            train={"rounds": 150},
            provenance={**training, **same(hyper_source, "hparams.head_epochs", "hparams.body_epochs")},
        ),
        "apfl": Row(
            "apfl",
            {"alpha": 0.5},
            _PERSONALISED,
            train={"rounds": 150},
            provenance={**training, "hparams.alpha": hyper_source},
        ),
        "knn_per": Row(
            "knn_per",
            {"neighbours": 10, "interpolation": 0.5, "temperature": 1.0},
            _PERSONALISED,
            train={"rounds": 150},
            provenance={
                **training,
                **same(
                    inferred(
                        "the paper reports the best of a grid of weights and capacities without naming the winner: "
                        "the kNN-Per paper's defaults"
                    ),
                    "hparams.neighbours",
                    "hparams.interpolation",
                    "hparams.temperature",
                ),
            },
        ),
    }


PERSONALISED_HYPER = inferred(
    "the paper names the benchmark, not these methods' hyper-parameters: their papers' defaults"
)


def kd3a_row(source: Source) -> Row:
    """A published KD3A row: the paper names the method, not its settings, so they are the KD3A paper's defaults."""
    hparams = {"gate_start": 0.8, "gate_end": 0.95, "mixup_alpha": 0.2, "consensus_focus": True}
    reason = inferred("the paper names KD3A, not its settings: the KD3A paper's defaults")
    return Row("kd3a", hparams, source, provenance=same(reason, *(f"hparams.{key}" for key in hparams)))


def _domainbed_rows(auto_target_batch: int, auto_warmup: int = 2) -> dict[str, Row]:
    """Rows of main_domain_bed.py / main_domain_bed_auto_beta.py (scripts/domainbed_exp)."""
    auto = {**DOMAINBED_AUTO, "lr_decay_after_warmup": 0.1, "target_batch_size": auto_target_batch}
    auto_train = {"warmup_rounds": auto_warmup} if auto_warmup != 2 else {}
    auto_provenance = {
        "hparams.lr_decay_after_warmup": inferred(
            "main_domain_bed_auto_beta.py:488 multiplies by 0.1 at HEAD (since 6e900e6, 2023-09-27) and by 0.25 from "
            "ed2f39e (2023-05-23), as the paper's Appendix C.4 says: which produced the tables cannot be told; "
            "fdabench follows HEAD"
        ),
        "hparams.target_batch_size": code("scripts/domainbed_exp/run_fedgp_auto_beta.sh, run_fedda_auto.sh"),
        "hparams.scale_alignment": code("main_domain_bed_auto_beta.py:161-162 (the target's updates x lr_T/lr_S)"),
        "hparams.estimation": code("main_domain_bed_auto_beta.py:90-170 (the target's per-batch local steps)"),
        "hparams.recompute": code("main_domain_bed_auto_beta.py:505-540 (β estimated inside the round loop)"),
        "train.warmup_rounds": code("main_domain_bed_auto_beta.py:474-479 (5 for TerraIncognita, else 2)"),
    }
    return {
        "source_only": Row(
            "source_only", {}, code("main_domain_bed.py:358-365,398-400: 2 warm-up + 50 FedAvg rounds (run_fedavg.sh)")
        ),
        "target_only": Row(
            "target_only", {}, code("main_domain_bed.py:358,386-387: --proj_w 0, no warm-up (run_target_only.sh)")
        ),
        **fixed_rows(code("main_domain_bed.py:135-152 (FedGP, cosine-scaled), :154-168 (FedDA)")),
        "fedda_auto": Row(
            "fedda_auto",
            auto,
            code("main_domain_bed_auto_beta.py:538 (FedDA auto); run_fedda_auto.sh"),
            train=auto_train,
            provenance=auto_provenance,
        ),
        "fedgp_auto": Row(
            "fedgp_auto",
            {**auto, "mode": "cosine_scaled"},
            code("main_domain_bed_auto_beta.py:230-247, :520 (plain β); run_fedgp_auto_beta.sh"),
            train=auto_train,
            provenance=auto_provenance,
        ),
        "oracle": Row(
            "oracle",
            {},
            code(
                "oracle_domain_bed.py:30-31 (target lr = lr/4), :273-282 (target batch = hparams batch_size), "
                "no warm-up"
            ),
            train={"target_lr": 1.25e-5, "target_batch_size": 32, "warmup_rounds": 0},
        ),
        "finetune_offline": Row(
            "finetune_offline",
            {"finetune_epochs": None, "head_only": False},
            code("main_domain_bed_offline.py:318-329: 50 target epochs from the FedAvg checkpoint"),
        ),
        **personalised_rows(PERSONALISED_HYPER),
        "kd3a": kd3a_row(paper("Table 1: KD3A with 100% of the target's unlabelled data")),
    }


_DOMAINBED_NOTES = (
    "the sources' images are augmented (DomainBed's data_augmentation = True); fdabench does not augment",
    "the auto runs draw their labelled target set from the whole environment and test on 20% of the rest "
    "(main_domain_bed_auto_beta.py:371-393), the other rows label a fraction of the 80% 'in' split: different target "
    "samples for the same seed; fdabench uses one split for every row",
    "the paper's text (Appendix C.4) gives per-domain auto lr factors (ColoredMNIST 0.1/0.5/0.25, VLCS and "
    "TerraIncognita 0.25) and auto target batches 2/4/8; main_domain_bed_auto_beta.py multiplied by 0.25 from ed2f39e "
    "(2023-05-23) and by 0.1 from 6e900e6 (2023-09-27) to HEAD, and the ColoredMNIST script passes batch 1: which "
    "factor produced the tables cannot be told from the repository, so the factor is recorded as inferred (HEAD's)",
)
_DOMAINBED_LINES = {
    "local_epochs": "main_domain_bed.py:193",
    "target_local_epochs": "main_domain_bed.py:194",
    "rounds": "main_domain_bed.py:195",
    "warmup_rounds": "main_domain_bed.py:358-365 (2 FedAvg epochs when proj_w > 0)",
    "optimizer": f"main_domain_bed.py:31 ({FRESH_ADAM})",
    "source_lr": "domainbed/hparams_registry.py:144-146 (lr: 1e-3 small images, 5e-5 ResNet)",
    "target_lr": "main_domain_bed.py:30, :192 (source lr x lr_ratio 0.2)",
    "source_batch_size": "domainbed/hparams_registry.py:154-160 (batch_size: 64 small images, 32 ResNet)",
    "target_batch_size": "main_domain_bed.py:286-289 (the labelled target loader: batch 16)",
    "server": "main_domain_bed.py:385-386 (update_global's weights loaded as the new global model)",
}
_RESNET_TRAIN = train_block(
    model="resnet18",
    model_options={"weights": "imagenet", "freeze_batchnorm": True},
    source_lr=5e-5,
    target_lr=1e-5,
    source_batch_size=32,
    target_batch_size=16,
)
_RESNET_SOURCES = train_block_sources(
    "main_domain_bed.py",
    {
        **_DOMAINBED_LINES,
        "weight_decay": "domainbed/hparams_registry.py:151 (default hparams: 0)",
        "model": "domainbed/hparams_registry.py:31 (resnet18: True), domainbed/networks.py",
        "model_options": "domainbed/networks.py ResNet (ImageNet weights, frozen BatchNorm statistics)",
    },
    model_options=("weights", "freeze_batchnorm"),
)
_IMAGE_OPTIONS = {"image_size": 224, "max_per_domain": None, "seed": 0}
_IMAGE_OPTION_SOURCES = {
    "dataset_options.image_size": code("domainbed/datasets.py (MultipleEnvironmentImageFolder: 224 x 224)"),
    "dataset_options.max_per_domain": code("domainbed/datasets.py (every image of every environment)"),
    "dataset_options.seed": code(
        "domainbed/datasets.py (every image is kept: no sampling seed, so it selects nothing)"
    ),
}


def _leave_one_out(target_labelled: float) -> dict[str, Any]:
    return {"holdout_fraction": 0.2, "holdout_split": "seeded", "target_labelled": target_labelled}


def _leave_one_out_sources(script: str) -> dict[str, Source]:
    return {
        "partitioner": code("main_domain_bed.py:213, :270-300 (--test_envs: the target environment, the rest sources)"),
        "partition.holdout_fraction": code("main_domain_bed.py:214 (--holdout_fraction 0.2)"),
        "partition.holdout_split": code("main_domain_bed.py:274-278 (misc.split_dataset seeded by trial_seed)"),
        "partition.target_labelled": code(f"main_domain_bed.py:215, :281-284 (--uda_holdout_fraction; {script})"),
    }


_COLORED_NOTES = (
    "images are 2x28x28 (the authors' DomainBed copy leaves the 14x14 subsampling commented out); fdabench uses 14x14",
    *_DOMAINBED_NOTES,
)


def _colored_mnist(citation: str, rows: dict[str, Row]) -> Protocol:
    return Protocol(
        citation=citation,
        dataset="colored_mnist",
        dataset_options={"label_noise": 0.25, "seed": 0, "samples_per_environment": None},
        partitioner="leave_one_domain_out",
        partition=_leave_one_out(0.001),
        train=train_block(
            model="mnist_cnn",
            model_options={"width": 64},
            source_lr=1e-3,
            target_lr=2e-4,
            source_batch_size=64,
            target_batch_size=16,
        ),
        rows=rows,
        provenance={
            "dataset": code("scripts/domainbed_exp/run_fedgp_0.5.sh:5 (--dataset ColoredMNIST)"),
            "dataset_options.label_noise": code("domainbed/datasets.py:117-150 (ColoredMNIST: 25% label noise)"),
            "dataset_options.seed": code("domainbed/datasets.py:117-150 (one fixed shuffle of MNIST)"),
            "dataset_options.samples_per_environment": code("domainbed/datasets.py:117-150 (every MNIST image)"),
            **_leave_one_out_sources("run_fedgp_0.5.sh: 0.001"),
            **train_block_sources(
                "main_domain_bed.py",
                {
                    **_DOMAINBED_LINES,
                    "weight_decay": "domainbed/hparams_registry.py:149 (0 for small images)",
                    "model": "domainbed/networks.py MNIST_CNN",
                    "model_options": "domainbed/networks.py MNIST_CNN (64 channels)",
                },
                model_options=("width",),
            ),
        },
        notes=_COLORED_NOTES,
    )


_COLORED_ORACLE = Row(
    "oracle",
    {},
    code("oracle_domain_bed.py:30-31 (target lr = lr/4), :273-282 (target batch = hparams batch_size 64), no warm-up"),
    train={"target_lr": 2.5e-4, "target_batch_size": 64, "warmup_rounds": 0},
)
_NO_WARMUP = code("main_domain_bed.py:358 (the FedAvg warm-up runs only when proj_w > 0)")
_BETA_SWEEP_SOURCE = paper("Tables 9-11: --proj_w β of main_domain_bed.py (no β-sweep script is public)")


def _colored_beta_rows() -> dict[str, Row]:
    rows = fixed_rows(
        _BETA_SWEEP_SOURCE, betas=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), fedgp_betas=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    )
    for name in ("fedda_0", "fedgp_0"):  # β = 0 runs main_domain_bed.py's --proj_w 0 path: no warm-up
        row = rows[name]
        rows[name] = Row(
            row.algorithm,
            row.hparams,
            row.source,
            train={"warmup_rounds": 0},
            provenance={"train.warmup_rounds": _NO_WARMUP},
        )
    return rows


DOMAINBED_PROTOCOLS: dict[str, Protocol] = {
    "colored_mnist": _colored_mnist(
        "FedGP paper Table 2 / Appendix C.2; main_domain_bed.py, main_domain_bed_auto_beta.py, scripts/domainbed_exp",
        {**_domainbed_rows(auto_target_batch=1), "oracle": _COLORED_ORACLE},
    ),
    "colored_mnist_beta": _colored_mnist(
        "FedGP paper Tables 9-11 (no β-sweep script in the authors' repository: --proj_w of main_domain_bed.py)",
        _colored_beta_rows(),
    ),
    "vlcs": Protocol(
        citation="FedGP paper Table 3 / Appendix C.2; scripts/domainbed_exp",
        dataset="vlcs",
        dataset_options=_IMAGE_OPTIONS,
        partitioner="leave_one_domain_out",
        partition=_leave_one_out(0.05),
        train=_RESNET_TRAIN,
        rows=_domainbed_rows(auto_target_batch=4),
        provenance={
            "dataset": code("scripts/domainbed_exp/run_fedgp_0.5.sh (--dataset VLCS)"),
            **_IMAGE_OPTION_SOURCES,
            **_leave_one_out_sources("run_fedgp_0.5.sh: 0.05"),
            **_RESNET_SOURCES,
        },
        notes=_DOMAINBED_NOTES,
    ),
    "terra_incognita": Protocol(
        citation="FedGP paper Table 4 / Appendix C.2; scripts/domainbed_exp; auto warm-up 5 "
        "(main_domain_bed_auto_beta.py:474-478)",
        dataset="terra_incognita",
        dataset_options=_IMAGE_OPTIONS,
        partitioner="leave_one_domain_out",
        partition=_leave_one_out(0.05),
        train=_RESNET_TRAIN,
        rows=_domainbed_rows(auto_target_batch=8, auto_warmup=5),
        provenance={
            "dataset": code("scripts/domainbed_exp/run_fedgp_0.5.sh (--dataset TerraIncognita)"),
            **_IMAGE_OPTION_SOURCES,
            **_leave_one_out_sources("run_fedgp_0.5.sh: 0.05"),
            **_RESNET_SOURCES,
        },
        notes=(
            *_DOMAINBED_NOTES,
            "initialisation: the paper's Appendix C.2 says 5 FedAvg epochs for TerraIncognita; the fixed-β code runs "
            "2 (main_domain_bed.py:358-365) and the auto code 5 (main_domain_bed_auto_beta.py:474-479): each row "
            "records its own code",
        ),
    ),
}
