"""Protocol records of the FedGP paper's tables (Jiang, Zhang, Koyejo, ICLR 2024), read in the authors' code.

Code citations are file:line in jackyzyb/AutoFedGP at 7b10ca9 unless a commit is named (Fed-Heart: 9b74449,
where main_flamby_heart*.py were added; d66a42f deleted them). Paper citations name the ICLR version's table
or appendix. Where the text and the code differ, the code that produced the tables is recorded and the text
named in the setting's source or in the table's notes.
"""

from __future__ import annotations

from typing import Any

from fdabench.paper.record import FED_HEART_COMMIT, Protocol, Row, Source, code, inferred, paper, same

STATISTIC = paper("Appendix C.2: the reported accuracy is the average of the last 5 epochs")
FRESH_ADAM = "a new Adam optimiser at every local training call, default weight decay"

# ---------------------------------------------------------------------------------------------- shared rows
_NOISE_AUTO = {"scale_alignment": "noniid_code", "estimation": "local_steps", "recompute": "every_round"}
_DOMAINBED_AUTO = {"scale_alignment": "domainbed_code", "estimation": "local_steps", "recompute": "every_round"}


def _train(**values: Any) -> dict[str, Any]:
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
    }
    return {**base, **values}


def _train_sources(
    main: str, lines: dict[str, str], commit: str | None = None, model_options: tuple[str, ...] = (), **sources: Source
) -> dict[str, Source]:
    """Provenance of `_train`'s settings for one script: `lines` maps a setting to 'file:line' in `main`'s
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
        }
    )
    provenance.update({f"train.{key}": source for key, source in sources.items()})
    return provenance


# every FedGP update of the authors' code adds a source term only where the cosine is positive
_FILTER = code("main_noniid.py:254, :272 (if cur_sim > 0); main_domain_bed.py:143-146 and the other drivers alike")


def _fixed_rows(
    source: Source, betas: tuple[float, ...] = (0.5,), fedgp_betas: tuple[float, ...] = (0.5,)
) -> dict[str, Row]:
    rows = {f"fedda_{b:g}": Row("fedda", {"beta": b}, source) for b in betas}
    rows.update(
        {
            f"fedgp_{b:g}": Row(
                "fedgp",
                {"beta": b, "mode": "cosine_scaled", "scale_alignment": "steps_and_lr", "filter": True},
                source,
                provenance={"hparams.filter": _FILTER},
            )
            for b in fedgp_betas
        }
    )
    return rows


# -------------------------------------------------------------------------------- Fashion-MNIST and CIFAR-10
def _noniid_rows(auto_decay: float, auto_target_batch: int | None, fmnist: bool, decay_line: str) -> dict[str, Row]:
    """Rows of main_noniid.py / main_noniid_auto_beta.py (scripts/noniid_exp)."""
    auto = {**_NOISE_AUTO, "lr_decay_after_warmup": auto_decay, "target_batch_size": auto_target_batch}
    auto_provenance = {
        "hparams.lr_decay_after_warmup": code(decay_line),
        "hparams.target_batch_size": code(
            "scripts/noniid_exp/run_fedgp_auto_beta.sh:10 (--target_batch_size 4, FMNIST noise)"
            if auto_target_batch
            else "main_noniid_auto_beta.py:350 (--target_batch_size default 16: no override, the table's batch)"
        ),
        "hparams.scale_alignment": code("main_noniid_auto_beta.py:189 (both sides x lr_T/lr_S)"),
        "hparams.estimation": code("main_noniid_auto_beta.py:98-179 (the target's per-batch local steps)"),
        "hparams.recompute": code("main_noniid_auto_beta.py:544-557 (β estimated inside the round loop)"),
    }
    oracle_lr = {"target_lr": 0.003} if fmnist else {"source_lr": 0.001, "target_lr": 0.0005}
    return {
        "source_only": Row(
            "source_only", {}, code("main_noniid.py:472-477,516-518: 2 warm-up + 50 FedAvg rounds (run_fedavg.sh)")
        ),
        "target_only": Row(
            "warmup_target_only",
            {},
            code(
                "main_noniid.py:472-477,504-505: --use_sim --proj_w 0 after the 2 warm-up epochs (run_target_only.sh)"
            ),
        ),
        **_fixed_rows(
            code("main_noniid.py:244-259 (FedGP, cosine-scaled), :282-295 (FedDA); run_fedda_0.5.sh, run_fedgp_0.5.sh"),
            fedgp_betas=(0.5, 1.0),
        ),
        "fedda_auto": Row(
            "fedda_auto",
            auto,
            code("main_noniid_auto_beta.py:556-557 (FedDA auto); run_fedda_auto.sh"),
            provenance=auto_provenance,
        ),
        "fedgp_auto": Row(
            "fedgp_auto_threshold",
            {**auto, "mode": "cosine_scaled"},
            code("main_noniid_auto_beta.py:259-277, :544-545 (thresholded β); run_fedgp_auto_beta.sh"),
            provenance=auto_provenance,
        ),
        "oracle": Row(
            "oracle",
            {},
            code("oracle_noniid.py:288-291,366-376 (its own learning rates, batch 64, no warm-up)"),
            train={**oracle_lr, "target_batch_size": 64, "warmup_rounds": 0},
            provenance=(
                {}
                if fmnist
                else {"train.source_lr": paper("Appendix C.7: CIFAR-10 oracle lr 1e-3 / 5e-4 (no script sets them)")}
            ),
        ),
        "finetune_offline": Row(
            "finetune_offline",
            {"finetune_epochs": None, "head_only": False},
            code(
                "main_noniid_finetune_offline.py: 50 target epochs from the FedAvg checkpoint (run_finetune_offline.sh)"
            ),
        ),
    }


_NOISE_NOTES = (
    "sources train 93 steps of 64 per epoch (drop_last: 5,952 of 6,000 samples), fdabench 94 steps over all 6,000; "
    "the cosine factor counts n_T/bs_T = 6.25 target steps, fdabench the 7 it takes",
    "the test set is scored in batches of 32 with drop_last (9,984 of 10,000 images), fdabench scores all",
    "one run at train seed 8 (scripts pass no seed); the code keeps the per-round accuracies only, so the reported "
    "statistic is the paper's 'average of the last 5 epochs' (Appendix C.2)",
)

_FMNIST_TRAIN = _train(
    model="fmnist_cnn", model_options={}, source_lr=0.01, target_lr=0.005, source_batch_size=64, target_batch_size=16
)
_CIFAR_TRAIN = _train(
    model="cifar_cnn", model_options={}, source_lr=0.005, target_lr=0.0025, source_batch_size=64, target_batch_size=16
)
_NONIID_LINES = {
    "local_epochs": "main_noniid.py:320",
    "target_local_epochs": "main_noniid.py:321",
    "rounds": "main_noniid.py:322",
    "warmup_rounds": "main_noniid.py:472 (for _ in range(2))",
    "optimizer": f"main_noniid.py:133 ({FRESH_ADAM})",
    "weight_decay": "main_noniid.py:133 (Adam's default: none passed)",
    "source_lr": "main_noniid.py:323",
    "target_lr": "main_noniid.py:324 (the paper's Appendix C.7 says 0.05 for FMNIST)",
    "source_batch_size": "main_noniid.py:325",
    "target_batch_size": "main_noniid.py:326",
    "model": "main_noniid.py:343 (simple-cnn: models/noniid_models.py:119-140)",
    "model_options": "models/noniid_models.py:119-140 (one fixed architecture)",
    "server": "main_noniid.py:502-503 (update_global's weights loaded as the new global model)",
}
_FMNIST_TRAIN_SOURCES = _train_sources("main_noniid.py", _NONIID_LINES)
_CIFAR_TRAIN_SOURCES = _train_sources(
    "main_noniid.py",
    {
        **_NONIID_LINES,
        "source_lr": "scripts/noniid_exp/run_fedgp_0.5.sh:22 (--source_lr 0.005)",
        "target_lr": "scripts/noniid_exp/run_fedgp_0.5.sh:22 (--target_lr 0.0025)",
    },
)
_NOISE_PARTITION = {
    "clients": 10,
    "split": "iid",
    "target_share": "split",
    "target_labelled": 100,
    "target_test": "test_domain",
    "noise_mode": "redraw",
}
_NOISE_DATA_SOURCES = {
    "dataset": code("scripts/noniid_exp/run_fedgp_0.5.sh:14 (--dataset fmnist)"),
    "dataset_options": code("noniid_utils.py:62-77 (the standard 60,000/10,000 split, no options)"),
    "partitioner": code("main_noniid.py:349 (--noise on the target party), noniid_utils.py:728-760"),
    "partition.clients": code("scripts/noniid_exp/run_fedgp_0.5.sh:14 (--n_parties 10: 9 sources + the target)"),
    "partition.split": code("noniid_utils.py:302-306 (partition homo: iid)"),
    "partition.target_share": code("main_noniid.py:382-386 (the target is party n_parties - 1 of the split)"),
    "partition.target_labelled": code("main_noniid.py:330, :412-414 (--n_target_samples 100)"),
    "partition.target_test": code("main_noniid.py:405 (the noisy 10,000-image test set)"),
    "partition.noise_mode": code("noniid_utils.py:702-725 (AddGaussianNoise draws at every read)"),
}


def _noise_protocol(citation: str) -> Protocol:
    return Protocol(
        citation=citation,
        dataset="fashion_mnist",
        dataset_options={},
        partitioner="feature_noise",
        partition=_NOISE_PARTITION,
        train=_FMNIST_TRAIN,
        rows=_noniid_rows(0.1, 4, fmnist=True, decay_line="main_noniid_auto_beta.py:508-510 (lr x 0.1)"),
        provenance={**_NOISE_DATA_SOURCES, **_FMNIST_TRAIN_SOURCES},
        notes=_NOISE_NOTES,
    )


_CIFAR_PARTITION = {
    "clients": 10,
    "split": "label4",
    "target_share": "split",
    "target_labelled": 0.1,
    "target_test": "rest",
    "noise_mode": "redraw",
}
_CIFAR_DATA_SOURCES = {
    **_NOISE_DATA_SOURCES,
    "dataset": code("scripts/noniid_exp/run_fedgp_0.5.sh:22 (--dataset cifar10)"),
    "dataset_options": code("noniid_utils.py:97-110 (the standard 50,000/10,000 split, no options)"),
    "partition.split": code("scripts/noniid_exp/run_fedgp_0.5.sh:22 (--partition noniid-#label4), noniid_utils.py:351"),
    "partition.target_labelled": code("main_noniid.py:401-403 (10% of the target's partition)"),
    "partition.target_test": paper("Appendix C.7: the target is tested on the rest of its partition"),
}
_CIFAR_NOTES = (
    "main_noniid.py cannot build the '#label4' partition as released (an indentation bug leaves train_ds "
    "undefined), so the fixed-β CIFAR-10 rows came from another version of the code",
    *_NOISE_NOTES,
)

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


def _personalised_rows(hyper_source: Source) -> dict[str, Row]:
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


_PERSONALISED_HYPER = inferred(
    "the paper names the benchmark, not these methods' hyper-parameters: their papers' defaults"
)


def kd3a_row(source: Source) -> Row:
    """A published KD3A row: the paper names the method, not its settings, so they are the KD3A paper's defaults."""
    hparams = {"gate_start": 0.8, "gate_end": 0.95, "mixup_alpha": 0.2, "consensus_focus": True}
    reason = inferred("the paper names KD3A, not its settings: the KD3A paper's defaults")
    return Row("kd3a", hparams, source, provenance=same(reason, *(f"hparams.{key}" for key in hparams)))


def _domainbed_rows(auto_target_batch: int, auto_warmup: int = 2) -> dict[str, Row]:
    """Rows of main_domain_bed.py / main_domain_bed_auto_beta.py (scripts/domainbed_exp)."""
    auto = {**_DOMAINBED_AUTO, "lr_decay_after_warmup": 0.1, "target_batch_size": auto_target_batch}
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
        **_fixed_rows(code("main_domain_bed.py:135-152 (FedGP, cosine-scaled), :154-168 (FedDA)")),
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
        **_personalised_rows(_PERSONALISED_HYPER),
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
_RESNET_TRAIN = _train(
    model="resnet18",
    model_options={"weights": "imagenet", "freeze_batchnorm": True},
    source_lr=5e-5,
    target_lr=1e-5,
    source_batch_size=32,
    target_batch_size=16,
)
_RESNET_SOURCES = _train_sources(
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
        train=_train(
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
            **_train_sources(
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
    rows = _fixed_rows(
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


# ------------------------------------------------------------------------------------------------ Fed-Heart
def _heart(where: str) -> Source:
    return code(where, FED_HEART_COMMIT)


_HEART_AUTO = {
    "scale_alignment": "steps_and_lr",
    "estimation": "local_steps",
    "recompute": "every_round",
    "lr_decay_after_warmup": 1.0,
    "target_batch_size": 1,
}
_HEART_AUTO_SOURCES = {
    "hparams.scale_alignment": _heart(
        "main_flamby_heart_auto_beta.py:240-257 (lr_ratio x epochs x step ratio; lr_ratio 1, so steps only)"
    ),
    "hparams.estimation": _heart("main_flamby_heart_auto_beta.py:98-179 (the target's per-batch local steps)"),
    "hparams.recompute": _heart("main_flamby_heart_auto_beta.py:502-530 (β estimated inside the round loop)"),
    "hparams.lr_decay_after_warmup": _heart("main_flamby_heart_auto_beta.py:311 (--auto_lr_ratio parsed, never used)"),
    "hparams.target_batch_size": _heart("main_flamby_heart_auto_beta.py:302 (--target_batch_size default 1)"),
}
_HEART_NOTES = (
    "FLamby's Baseline is one linear layer with a sigmoid and BCE loss on one output; fdabench's one-layer network has "
    "two outputs under cross-entropy (the same model class: softmax over two logits is a sigmoid of their difference)",
    "the code keeps the 50 per-round accuracies and selects none (main_flamby_heart.py:419-444); the reported "
    "statistic is the paper's 'average of the last 5 epochs' (Appendix C.2)",
    "no script is public: the seeds and the target centres run are not known; the code's default seed is 0",
    "centre 2 (switzerland): the paper's Appendix C.11 labels all 30 training patients, the code 20% (6); with 20% "
    "the published centre-2 row is reproduced (measured, 5 seeds: FedDA 68.75 vs 67.50, FedDA_Auto 68.00 vs 68.75, "
    "FedGP_Auto 67.75 vs 68.75, Source only 62.50 vs 62.50), with 100% it is 75.0-81.3, so the code is recorded",
)
_HEART_TRAIN_SOURCES = _train_sources(
    "main_flamby_heart.py",
    {
        "local_epochs": "main_flamby_heart.py:205",
        "target_local_epochs": "main_flamby_heart.py:206",
        "rounds": "main_flamby_heart.py:207",
        "warmup_rounds": "main_flamby_heart.py:360-370 (5 FedAvg rounds when proj_w > 0)",
        "optimizer": f"main_flamby_heart.py:40-41 ({FRESH_ADAM})",
        "weight_decay": "main_flamby_heart.py:41 (Adam's default: none passed)",
        "source_lr": "main_flamby_heart.py:22-32, :40 (FLamby's LR = 0.001)",
        "target_lr": "main_flamby_heart.py:40, :204 (LR x --lr_ratio 1.0)",
        "source_batch_size": "main_flamby_heart.py:281-287 (FLamby's BATCH_SIZE = 4)",
        "target_batch_size": "main_flamby_heart.py:214, :266-270 (--target_batch_size default BATCH_SIZE = 4)",
        "model": "main_flamby_heart.py:319-326 (FLamby's Baseline: one linear layer)",
        "model_options": "main_flamby_heart.py:319 (FLamby's Baseline: no hidden layer)",
        "server": "main_flamby_heart.py:395-415 (the aggregated weights loaded as the new global model)",
    },
    commit=FED_HEART_COMMIT,
    model_options=("hidden",),
)


def _heart_rows() -> dict[str, Row]:
    fixed = _heart("main_flamby_heart.py:147-164 (FedGP, cosine-scaled per tensor), :166-180 (FedDA); --proj_w 0.5")
    rows = {
        "source_only": Row(
            "source_only", {}, _heart("main_flamby_heart.py:360-370, :407-415: 5 warm-up + 50 FedAvg rounds")
        ),
        **_fixed_rows(fixed),
        "fedda_auto": Row(
            "fedda_auto",
            _HEART_AUTO,
            _heart("main_flamby_heart_auto_beta.py:529 (return_fedda_beta), :259-273"),
            provenance=_HEART_AUTO_SOURCES,
        ),
        "fedgp_auto": Row(
            "fedgp_auto",
            {**_HEART_AUTO, "mode": "cosine_scaled"},
            _heart("main_flamby_heart_auto_beta.py:509 (return_fedgp_beta: the plain rule), :240-257"),
            provenance=_HEART_AUTO_SOURCES,
        ),
        **_personalised_rows(_PERSONALISED_HYPER),
    }
    return rows


_FED_HEART = Protocol(
    citation="FedGP paper Table 17 / Appendix C.11 (FLamby's Fed-Heart-Disease, one-layer network); training as in "
    "the authors' main_flamby_heart.py and main_flamby_heart_auto_beta.py (AutoFedGP 9b74449, deleted in d66a42f)",
    dataset="fed_heart",
    dataset_options={"rows": "flamby", "auxiliary": []},
    partitioner="leave_one_domain_out",
    partition={
        "holdout_fraction": 0.34,
        "holdout_split": "flamby",
        "target_labelled": 0.2,
        "target_labelled_overrides": {"switzerland": 0.2},
        "standardize": "per_domain",
    },
    train=_train(
        model="mlp",
        model_options={"hidden": []},
        source_lr=1e-3,
        target_lr=1e-3,
        source_batch_size=4,
        target_batch_size=4,
        warmup_rounds=5,
    ),
    rows=_heart_rows(),
    provenance={
        "dataset": _heart("main_flamby_heart.py:22-32, :283 (FLamby's FedHeartDisease)"),
        "dataset_options.rows": _heart(
            "main_flamby_heart.py:283 (FLamby's rows: complete rows, slope/ca/thal dropped)"
        ),
        "dataset_options.auxiliary": _heart("main_flamby_heart.py:326 (BaselineLoss on the label only)"),
        "partitioner": _heart(
            "main_flamby_heart.py:219, :258-288 (--test_envs: the target centre, the others sources)"
        ),
        "partition.holdout_fraction": _heart("main_flamby_heart.py:260, :273 (FLamby's fixed train/test split)"),
        "partition.holdout_split": _heart("main_flamby_heart.py:260, :273 (FLamby's fixed train/test split)"),
        "partition.target_labelled": _heart("main_flamby_heart.py:220-221, :261-265 (--uda_holdout_fraction 0.2)"),
        "partition.target_labelled_overrides.switzerland": _heart(
            "main_flamby_heart.py:220-221, :261-265 (20% for every centre: no per-centre override; the paper's "
            "Appendix C.11 says 100% for centre 2, but the published centre-2 column is what 20% gives, measured)"
        ),
        "partition.standardize": _heart(
            "main_flamby_heart.py:260, :283 (FedHeartDisease with FLamby's defaults: each centre normalised with its "
            "own training mean and std)"
        ),
        **_HEART_TRAIN_SOURCES,
    },
    notes=_HEART_NOTES,
)

# ------------------------------------------------------------------------------- label-subset sources, Table 14
_SOURCE_LABELS_CODE = "ed2f39e"  # main_noniid_source.py, unchanged from ed2f39e until 9b74449 deleted it


def _source_labels(where: str) -> Source:
    return code(where, _SOURCE_LABELS_CODE)


def _source_labels_protocol() -> Protocol:
    rows = _noniid_rows(0.1, 4, fmnist=True, decay_line="main_noniid_auto_beta.py:508-510 (lr x 0.1)")
    fixed = _source_labels("main_noniid_source.py:298-321 (FedGP, cosine-scaled), FedDA alike; --proj_w")
    table = {
        "source_only": Row("source_only", {}, _source_labels("main_noniid_source.py:582-595: 2 warm-up + 50 FedAvg")),
        "target_only": Row(
            "warmup_target_only",
            {},
            _source_labels("main_noniid_source.py:582-595 (the warm-up runs unconditionally), --proj_w 0"),
        ),
        **_fixed_rows(fixed, fedgp_betas=(0.5, 1.0)),
        "finetune_offline": rows["finetune_offline"],
        # Table 14's Oracle (81.2 in every column) is Table 12's noise-0.4 Oracle: the target trains alone
        "oracle": rows["oracle"],
    }
    return Protocol(
        citation="FedGP paper Table 14 / Appendix C.7 (sources with 9, 7, 3 or 5 labels each, target noise 0.4, 100 "
        "labelled target samples); main_noniid_source.py (ed2f39e, deleted in 9b74449) with --partition "
        "noniid-#label<k>; no script is public",
        dataset="fashion_mnist",
        dataset_options={},
        partitioner="feature_noise",
        partition={**_NOISE_PARTITION, "target_share": "all"},
        train=_FMNIST_TRAIN,
        rows=table,
        provenance={
            **_NOISE_DATA_SOURCES,
            "partition.clients": paper("Appendix C.7: 10 clients, 1 target and 9 sources (the code's default is 5)"),
            "partition.split": _source_labels(
                "noniid_utils.py:351-394 (noniid-#label<k>); the target name's -label<k> sets k per column"
            ),
            "partition.target_share": _source_labels(
                "main_noniid_source.py:453-454 (the sources split all of train), :498-507 (the target draws its "
                "labelled samples from all of train)"
            ),
            "partition.target_labelled": _source_labels("main_noniid_source.py:410, :498-507 (--n_target_samples 100)"),
            "partition.target_test": _source_labels("main_noniid_source.py:515 (the noisy test set)"),
            **_train_sources(
                "main_noniid_source.py",
                {
                    **_NONIID_LINES,
                    "local_epochs": "main_noniid_source.py:402-408 (defaults as main_noniid.py)",
                    "target_local_epochs": "main_noniid_source.py:402-408",
                    "rounds": "main_noniid_source.py:402-408",
                    "warmup_rounds": "main_noniid_source.py:582-595 (for _ in range(2))",
                    "source_lr": "main_noniid_source.py:402-408 (source lr 0.01)",
                    "target_lr": "main_noniid_source.py:402-408 (target lr 0.005; the paper's C.7 says 0.05)",
                    "source_batch_size": "main_noniid_source.py:402-408 (64)",
                    "target_batch_size": "main_noniid_source.py:402-408 (16)",
                    "server": "main_noniid_source.py:600-640 (update_global's weights loaded as the global model)",
                },
                commit=_SOURCE_LABELS_CODE,
            ),
        },
        notes=(
            "NIID-Bench's noniid-#label<k> gives party i class i mod 10 and k - 1 random others; fdabench's label<k> "
            "deals the classes cyclically after a seeded relabelling, so every class is held by the same number of "
            "sources: both give every source k classes",
            "the target draws from the whole training set, which the sources also split: its 100 labelled images are "
            "noisy copies of images some source holds (as in the code)",
            *_NOISE_NOTES,
        ),
    )


# --------------------------------------------------------------------- "projection without filtering" ablation
_UNFILTERED = paper("Section 5.3 / Figure 4 ('w proj': projection without filtering)")


def _filter_ablation(base: Protocol, citation: str) -> Protocol:
    """The ablation's rows: FedDA (no projection, no filter), FedGP, and FedGP without its filter ('w proj')."""
    rows = {key: base.rows[key] for key in ("fedda_0.5", "fedgp_0.5")}
    fedgp = rows["fedgp_0.5"]
    rows["fedgp_0.5_unfiltered"] = Row(
        "fedgp",
        {**fedgp.hparams, "filter": False},
        _UNFILTERED,
        provenance={
            **same(
                inferred(
                    "no code for this row is public (every FedGP update of the authors' code filters): the table's "
                    "FedGP code, cosine-scaled, without its cos > 0 condition"
                ),
                "hparams.mode",
                "hparams.scale_alignment",
            ),
            "hparams.filter": _UNFILTERED,
        },
    )
    return Protocol(**{**base.__dict__, "citation": citation, "rows": rows})


# ------------------------------------------------------------------------------------------------ the records
PROTOCOLS: dict[str, Protocol] = {
    "fmnist_noise": _noise_protocol(
        "FedGP paper Table 12 / Appendix C.7; main_noniid.py, main_noniid_auto_beta.py, scripts/noniid_exp (the text's "
        "FMNIST target lr 0.05 is 0.005 in the code)"
    ),
    "fmnist_sample_size": _noise_protocol(
        "FedGP paper Tables 15-16 (no script in the authors' repository: --n_target_samples of the Table 12 runs)"
    ),
    "fmnist_label_shift": Protocol(
        citation="FedGP paper Table 13; noniid_utils.py:395-449 (imbalance-class-η), scripts/noniid_exp",
        dataset="fashion_mnist",
        dataset_options={},
        partitioner="label_shift",
        partition={"clients": 10, "minority_classes": [8, 6, 9], "target_labelled": 0.15},
        train=_FMNIST_TRAIN,
        rows=_noniid_rows(0.1, None, fmnist=True, decay_line="main_noniid_auto_beta.py:508-510 (lr x 0.1)"),
        provenance={
            "dataset": code("scripts/noniid_exp/run_fedgp_0.5.sh:9 (--dataset fmnist)"),
            "dataset_options": code("noniid_utils.py:62-77 (the standard 60,000/10,000 split, no options)"),
            "partitioner": code("noniid_utils.py:395-449 (imbalance-class-η)"),
            "partition.clients": code("scripts/noniid_exp/run_fedgp_0.5.sh:9 (--n_parties 10)"),
            "partition.minority_classes": code("noniid_utils.py:395-449 (classes 8, 6, 9)"),
            "partition.target_labelled": code("main_noniid.py:408-411 (15% of the target's partition)"),
            **_FMNIST_TRAIN_SOURCES,
        },
        notes=_NOISE_NOTES[:1] + _NOISE_NOTES[2:],
    ),
    "cifar10_noise": Protocol(
        citation="FedGP paper Table 12 (CIFAR-10); scripts/noniid_exp (--source_lr 0.005 --target_lr 0.0025); auto lr "
        "x 0.35 (main_noniid_auto_beta.py:511-513)",
        dataset="cifar10",
        dataset_options={},
        partitioner="feature_noise",
        partition=_CIFAR_PARTITION,
        train=_CIFAR_TRAIN,
        rows=_noniid_rows(0.35, None, fmnist=False, decay_line="main_noniid_auto_beta.py:511-513 (lr x 0.35)"),
        provenance={**_CIFAR_DATA_SOURCES, **_CIFAR_TRAIN_SOURCES},
        notes=_CIFAR_NOTES,
    ),
    "cifar10_beta": Protocol(
        citation="FedGP paper Table 8 (no β-sweep script in the authors' repository: --proj_w of the Table 12 runs)",
        dataset="cifar10",
        dataset_options={},
        partitioner="feature_noise",
        partition=_CIFAR_PARTITION,
        train=_CIFAR_TRAIN,
        rows=_fixed_rows(
            paper("Table 8: --proj_w β of main_noniid.py (no β-sweep script is public)"),
            betas=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
            fedgp_betas=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        ),
        provenance={**_CIFAR_DATA_SOURCES, **_CIFAR_TRAIN_SOURCES},
        notes=_CIFAR_NOTES,
    ),
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
    "fed_heart": _FED_HEART,
    "fmnist_source_labels": _source_labels_protocol(),
}
PROTOCOLS["fmnist_filter_ablation"] = _filter_ablation(
    PROTOCOLS["fmnist_noise"],
    "FedGP paper Section 5.3 / Figure 4 (Fashion-MNIST): FedDA, FedGP with and without filter",
)
PROTOCOLS["cifar10_filter_ablation"] = _filter_ablation(
    PROTOCOLS["cifar10_noise"], "FedGP paper Section 5.3 / Figure 4 (CIFAR-10): FedDA, FedGP with and without filter"
)
