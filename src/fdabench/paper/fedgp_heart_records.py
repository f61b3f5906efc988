"""Protocol record of the FedGP paper's Table 17 (Fed-Heart), read in main_flamby_heart*.py (AutoFedGP 9b74449,
deleted in d66a42f)."""

from __future__ import annotations

from fdabench.paper.fedgp_common import (
    FRESH_ADAM,
    fixed_rows,
    train_block,
    train_block_sources,
)
from fdabench.paper.fedgp_domainbed_records import PERSONALISED_HYPER, personalised_rows
from fdabench.paper.record import FED_HEART_COMMIT, Protocol, Row, Source, code


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
_HEART_TRAIN_SOURCES = train_block_sources(
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
        **fixed_rows(fixed),
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
        **personalised_rows(PERSONALISED_HYPER),
    }
    return rows


FED_HEART = Protocol(
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
    train=train_block(
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
