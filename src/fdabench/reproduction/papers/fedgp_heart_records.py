"""Protocol record of the FedGP paper's Table 17 (Fed-Heart), read in main_flamby_heart*.py (AutoFedGP 9b74449,
deleted in d66a42f)."""

from __future__ import annotations

from dataclasses import replace

from fdabench.reproduction.papers.fedgp_common import (
    FRESH_ADAM,
    fixed_rows,
    train_block,
    train_block_sources,
)
from fdabench.reproduction.papers.fedgp_domainbed_records import PERSONALISED_HYPER, personalised_rows
from fdabench.reproduction.papers.record import FED_HEART_COMMIT, Protocol, Row, Source, code, inferred, paper


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
    "the model is FLamby's Baseline, Linear(13, 1) + sigmoid under BCELoss (FLamby fed_heart_disease/model.py:8-11, "
    "loss.py:8-11; main_flamby_heart.py:319-326), run as the model logistic: one output, the binary "
    "cross-entropy of its sigmoid (taken on the logit: the same loss and gradient), predicted positive above "
    "probability 0.5 (FLamby metric.py:12). fdabench's earlier two-output cross-entropy model is the same model "
    "class but not the same training: under Adam the two rows move by opposite amounts, so their difference (the "
    "log-odds) moves as the one-logit model's at twice the lr (2e-3, not 1e-3), from a triangular initial law "
    "on ±2/√13 in place of U(±1/√13); it is kept as the variant fed_heart_two_outputs (mlp, hidden: [])",
    "the labelled target patients: the code labels int(0.2 n) (a floor: Cleveland 39 of 199, not round's 40), "
    "DomainBed's misc.split_dataset with RandomState(seed).shuffle over the centre's FLamby training rows in "
    "file order (main_flamby_heart.py:260-265, domainbed/lib/misc.py:147-152), and trains them in that fixed "
    "shuffled order every round (DataLoader shuffle=False, main_flamby_heart.py:266-269); sources are reshuffled "
    "(:281-286): partition.target_selection split_dataset with train.target_order fixed",
    "the fixed-β rules' source weights and FedGP factor: clients_size = len(loader) x BATCH_SIZE, so sources "
    "weigh 200/172/32/88 (batches x 4), not their sizes 199/172/30/85 (main_flamby_heart.py:312-313), and "
    "FedGP's factor takes n_T/bs_T without a ceil (6/4 = 1.5 for Switzerland, not 2 steps; :158): "
    "hparams.source_weights padded_batches and hparams.target_steps samples_over_batch. Not expressed: the "
    "FedAvg warm-up, the Source-only FedAvg rounds (:369, :408) and the auto rules "
    "(main_flamby_heart_auto_beta.py:251-252, :267-268) weigh sources by the same padded sizes; fdabench's warm-up, "
    "FedAvg and auto rules weigh them by their sample counts (at most 2/30 apart per source here)",
    "the statistic: the code appends the target test accuracy of every one of the 50 rounds and dumps all 50 "
    "(main_flamby_heart.py:419-422, :443-444); it averages none and picks no best round, and no script or "
    "post-processing is public. The table uses the mean of the last 5 rounds (train.final_rounds 5) because the "
    "paper's Appendix C.2 says that is what it reports and nothing in the code contradicts it; each cell also "
    "keeps every round, so the last round alone or the best round can be read off the same runs",
    "no script is public: the seeds and the target centres run are not known; the code's default seed is 0 and "
    "--test_envs 0 (Cleveland) (main_flamby_heart.py:217, :219)",
    "centre 2 (switzerland): the paper's Appendix C.11 labels all 30 training patients, the code 20% "
    "(--uda_holdout_fraction default 0.2, applied to every centre: int(30 x 0.2) = 6; main_flamby_heart.py:220-221, "
    ":261-265); all 30 is what --uda_holdout_fraction 1.0 gives (int(30 x 1.0) = 30), run as the variant "
    "fed_heart_switzerland_100pct. Measured before issue 38's corrections (two outputs, seeded selection, 5 seeds): "
    "with 20% the published centre-2 row is reproduced (FedDA 68.75 vs 67.50, FedDA_Auto 68.00 vs 68.75, "
    "FedGP_Auto 67.75 vs 68.75, Source only 62.50 vs 62.50), with 100% it is 75.0-81.3, so the code's 20% is "
    "recorded. Measured again with the corrections (one-logit model, split_dataset, fixed target order, padded "
    "weights, n_T/bs_T; 5 seeds, last-5 mean): with 20% FedDA 68.75 vs 67.50, FedGP 66.00 vs 68.75, FedDA_Auto "
    "and FedGP_Auto 68.75 vs 68.75, Source only 65.25 vs 62.50; with 100% the FDA rows are 70.25-85.00",
)
_PADDED_WEIGHTS = code(
    "main_flamby_heart.py:312-313 (clients_size = len(loader) x BATCH_SIZE: 200/172/32/88), used at :158 and :174"
)
_UNROUNDED_TARGET_STEPS = code(
    "main_flamby_heart.py:158 ((n_target_samples/target_batch_size) / (clients_size/BATCH_SIZE): a float, no ceil; "
    "n_target_samples = len(uda), :265)"
)
_TWO_OUTPUTS_FOR_BASELINES = inferred(
    "no code for these rows is public (the paper ran Marfoq et al.'s benchmark on 'a one-layer network'); "
    "fdabench's FedRep and kNN-Per need one output per class, so these rows run the one-layer network with two "
    "outputs under cross-entropy, mlp with hidden: [] (experiment fed_heart_personalised)"
)
_HEART_TRAIN_SOURCES: dict[str, Source] = train_block_sources(
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
        "model": "main_flamby_heart.py:319-326 (FLamby's Baseline: Linear(13, 1) + sigmoid, model.py:8-11; "
        "BaselineLoss = BCELoss, loss.py:8-11; metric at 0.5, metric.py:12)",
        "model_options": "main_flamby_heart.py:319 (Baseline() with FLamby's defaults: input_dim 13, output_dim 1)",
        "server": "main_flamby_heart.py:395-415 (the aggregated weights loaded as the new global model)",
    },
    commit=FED_HEART_COMMIT,
    target_order=code(
        "main_flamby_heart.py:266-269 (the labelled target DataLoader: shuffle = False, over split_dataset's "
        "shuffled keys; sources shuffle = True, :281-286); main_flamby_heart_auto_beta.py:360-369 alike"
    ),
    final_rounds=paper(
        "Appendix C.2: 'the average of the last 5 epochs'. The Fed-Heart code averages nothing: it stores all 50 "
        "per-round test accuracies (main_flamby_heart.py:419-422, :443-444), so the paper's statement is what fixes "
        "the statistic"
    ),
)


def _heart_fixed_rows(source: Source) -> dict[str, Row]:
    """The fixed-β rows with the code's padded source weights (and FedGP's unrounded n_T/bs_T)."""
    rows = fixed_rows(source)
    fedda, fedgp = rows["fedda_0.5"], rows["fedgp_0.5"]
    rows["fedda_0.5"] = replace(
        fedda,
        hparams={**fedda.hparams, "source_weights": "padded_batches"},
        provenance={**fedda.provenance, "hparams.source_weights": _PADDED_WEIGHTS},
    )
    rows["fedgp_0.5"] = replace(
        fedgp,
        hparams={**fedgp.hparams, "source_weights": "padded_batches", "target_steps": "samples_over_batch"},
        provenance={
            **fedgp.provenance,
            "hparams.source_weights": _PADDED_WEIGHTS,
            "hparams.target_steps": _UNROUNDED_TARGET_STEPS,
        },
    )
    return rows


def _two_output_rows(rows: dict[str, Row]) -> dict[str, Row]:
    """The personalised rows on the two-output one-layer network (`_TWO_OUTPUTS_FOR_BASELINES`)."""
    two_outputs = {"model": "mlp", "model_options": {"hidden": [], "norm": "none"}}
    sources = dict.fromkeys(
        ("train.model", "train.model_options.hidden", "train.model_options.norm"), _TWO_OUTPUTS_FOR_BASELINES
    )
    return {
        key: replace(row, train={**row.train, **two_outputs}, provenance={**row.provenance, **sources})
        for key, row in rows.items()
    }


def _heart_rows() -> dict[str, Row]:
    fixed = _heart("main_flamby_heart.py:147-164 (FedGP, cosine-scaled per tensor), :166-180 (FedDA); --proj_w 0.5")
    rows = {
        "source_only": Row(
            "source_only", {}, _heart("main_flamby_heart.py:360-370, :407-415: 5 warm-up + 50 FedAvg rounds")
        ),
        **_heart_fixed_rows(fixed),
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
        **_two_output_rows(personalised_rows(PERSONALISED_HYPER)),
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
        "target_selection": "split_dataset",
        "standardize": "per_domain",
    },
    train=train_block(
        model="logistic",
        model_options={},
        target_order="fixed",
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
            "Appendix C.11 says 100% for centre 2, but the published centre-2 column is what 20% gives, measured; "
            "100% is --uda_holdout_fraction 1.0)"
        ),
        "partition.target_selection": _heart(
            "main_flamby_heart.py:260-265 (misc.split_dataset(target_train, int(len(target_train) x 0.2), seed): "
            "a floor), domainbed/lib/misc.py:147-152 (keys = range(n), np.random.RandomState(seed).shuffle(keys), "
            "keys[:n] labelled, in that order); the keys index the centre's FLamby training rows in file order "
            "(FLamby dataset.py:121-125, :278-286)"
        ),
        "partition.standardize": _heart(
            "main_flamby_heart.py:260, :283 (FedHeartDisease with FLamby's defaults: each centre normalised with its "
            "own training mean and std)"
        ),
        **_HEART_TRAIN_SOURCES,
    },
    notes=_HEART_NOTES,
)
