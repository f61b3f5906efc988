"""Readings of measured gaps between published rows and fdabench's runs of their recorded protocol.

Keys: (published table, target, method key). `paper_vs_ours` computes, beside each of the largest gaps, what the
suite's runs measured about it (the seeds' spread, the best round, every marked variant of the same published
row and whether any comes within 3 points), all from the cells. An entry here adds the reading of those
measurements: the experiments that vary the suspected setting, and what their effect says about the gap. It
holds no run's number, so it cannot go stale when cells rerun; a named variant that has not run is reported as
such, and a gap with neither a variant nor a reading reads "no setting varied yet". The variants are marked
experiments of the `paper_cpu` suite (a test checks that each one named here exists there).
"""

from __future__ import annotations

from typing import NamedTuple

from fdabench.reproduction.papers.published import PUBLISHED, SOURCE_LABELS


class Reading(NamedTuple):
    """The experiments that vary a gap's suspected setting (marked variants of its published row), and what
    their effect says; `paper_vs_ours` reports each variant's measured mean, or that it has not run."""

    variants: tuple[str, ...]
    text: str


_HEART_STATISTIC = (
    "the authors' Fed-Heart code keeps the 50 per-round accuracies and selects none, and no script gives the seeds, "
    "so the statistic behind Table 17 is not known (the best round is one candidate)"
)
_HEART_VARIANTS = ("fed_heart_pooled_scaler", "fed_heart_fdabench")
_HEART_READING = (
    "the variants put one scaler on the pooled rows in place of FLamby's per-centre scaling, and fdabench's "
    f"earlier batches 32/8 with 2 warm-up rounds in place of FLamby's; {_HEART_STATISTIC}"
)
_FMNIST_TARGET_STEP = Reading(
    ("fmnist_noise_target_lr_half",),
    "the variant halves the target lr. The code's cosine-scaled source term is about lr_T/bs_T·cos·g_i here, so "
    "the row follows the target's own steps at the released lr_T = 0.005; no script sets a learning rate, so the "
    "effective target step of the published runs is not known",
)

_WARMUP_KEPT = (
    "with β = 1 FedGP keeps only the filtered, cosine-scaled source term (about lr_T/bs_T·cos·g_i), so the model "
    "stays near its 2-round FedAvg warm-up (compare the cell's round-2 accuracy): the row measures the warm-up model "
    "on the label-subset sources, which NIID-Bench's random draw of each source's classes moves from seed to seed"
)

_FEDAVG_DECAYS = (
    "FedAvg on these sources peaks in its first rounds and then decays on the noisy target (compare the best round "
    "and the same runs 10 rounds shorter with the final rounds), so the row is where that decay stands at the last "
    "round, which the round budget and the seed move"
)
_SOURCE_ONLY_LONGER = Reading(
    ("fmnist_noise_rounds70",),
    f"{_FEDAVG_DECAYS}; the variant goes on 20 rounds past the published budget (its first 52 rounds are the "
    "50-round run's, bit for bit), so the rounds are varied both ways",
)
_SOURCE_ONLY_FALLS = Reading(
    (),
    "Source Only is FedAvg over the label-shifted sources alone: it peaks well above the row within its first 20-30 "
    "rounds (compare the best round) and then falls for the rest of the 50 rounds in every seed (compare 10 rounds "
    "fewer, and which of these comes within 3 points), and the seeds agree on the level (their range above), so "
    "the row is where that fall stands at the last round, set by its pace over the code's round budget; the "
    "published value is one run's",
)
_FEDDA_DECAYS = (
    "FedDA at β = 0.5 keeps half of FedAvg's source step, and decays with it on the noisy target (see Source "
    "Only): the row is where that decay stands at the last round"
)

_FINETUNE_FROM_DECAYED = (
    "fine-tuning starts from the final FedAvg model, which has decayed on the noisy target (see Source Only), "
    "and 50 fresh-Adam epochs on 100 images move it further"
)
_FINETUNE_EITHER_LAYERS = (
    f"{_FINETUNE_FROM_DECAYED}; the authors' script also runs the row with only the last layer trained (--freeze), "
    "which the variant runs, and the table prints one of the two"
)

_FINETUNE_TABLE_14 = Reading(
    ("fmnist_source_labels_finetune_frozen", "fmnist_source_labels_finetune_party"),
    f"{_FINETUNE_EITHER_LAYERS} (the first variant). The row's target is inferred too (its inferred settings say "
    "why): the second variant runs the fine-tuning code's own target, the deal's last party, 15% of it labelled",
)

_WARMUP_THEN_CLIMBS = Reading(
    (),
    "with β = 1 FedGP moves the model after its 2-round FedAvg warm-up by the filtered, cosine-scaled source "
    "term alone (about lr_T/bs_T·cos·g_i a target step; the target's own update has weight 0). Where the published "
    "value is within 3 points of the warm-up model these runs start their FDA rounds from (the measurement above), "
    "the authors' model barely moved after it, while here it climbs from it over the 50 rounds (compare the best "
    "round with the warm-up model): the gap is made after the warm-up, by that term's effect over the rounds, and "
    "no recorded setting has yet been found that changes its size",
)

_FEDDA_DECAYS_ONE_RUN = Reading(
    (),
    f"{_FEDDA_DECAYS} (compare the best round and 10 rounds fewer with the final); the published row is one run per "
    "column, at the code's train seed 8, and is not monotone in the number of labels",
)
_FINETUNE_TABLE_13 = Reading(
    (),
    f"{_FINETUNE_EITHER_LAYERS}; Tables 12 and 14 run that variant (fmnist_noise_finetune_frozen, "
    "fmnist_source_labels_finetune_frozen), this table not yet",
)
_DITTO_GLOBAL = Reading(
    (),
    "Ditto's personal model is pulled towards the global FedAvg model by (λ/2)‖v − w‖². Where the published row is "
    "within 3 points of the global model (the measurement above), the published runs' personal model had not moved "
    "from the global one, as a large λ (or scoring the global model) gives; the published Ditto also equals the "
    "published Source Only to the hundredth on three centres (76.92, 62.50, 55.56). fdabench runs the Ditto paper's "
    "λ = 1 (the benchmark's λ is not given, and no code of these runs is public), whose personal models gain over "
    "the global one where it is weakest",
)
_APFL_UNDER_BOTH_ENDS = Reading(
    ("fed_heart_apfl_local",),
    "the published APFL is under the majority-class rate of every centre's test patients (FLamby's test split: "
    "predicting the commoner label scores 53.85, 62.92, 93.75 and 77.78 on cleveland, hungarian, switzerland and va; "
    "72.08 on average), and, compare the measurements above, under both ends of APFL's mixture here: the global "
    "model (α = 0) and the target's local model alone (α = 1, the variant). A model below a constant prediction on "
    "every centre points to a failure of the published runs (their training or their evaluation) that no recorded "
    "setting expresses; no code of these runs is public",
)
_FEDREP_ONE_RUN = Reading(
    (),
    "the published FedRep is one run of a benchmark whose learning rates, batches and head epochs are not given (no "
    "code is public), scored on few test patients: one patient is 0.96, 1.12, 6.25 and 2.22 points on cleveland, "
    "hungarian, switzerland and va. The gaps change sign from centre to centre, and the seeds' range above says "
    "where the published value falls among fdabench's runs",
)

_UNFILTERED_FOLLOWS_TARGET = Reading(
    (),
    "FedGP without its filter also keeps the cosine-scaled source terms with cos ≤ 0, each as small as those FedGP "
    "keeps, so this row follows the target's own steps, filtered or not, and the filtered FedGP_0.5's reading at "
    "the same noise level (its target lr) holds for it too; it drifts down after an early peak (compare the best "
    "round and 10 rounds fewer), and no code for this row is public",
)

_AMAZON_SHARED_INPUT = Reading(
    (),
    "every row of this table sits under its published value, FedAvg included (the column's source_only row, "
    "which trains on the sources alone), so most of the gap is in what the rows share rather than in a rule. "
    "No Amazon driver is public, and the shared settings the paper does not give are fdabench's: the features "
    "(binary uni- and bigrams of the sources' text; the paper names none) and the 8 rounds, by which every method "
    "has plateaued (compare the best round); the rows that also train on the target gain less over FedAvg here "
    "than the published rows do",
)

MEASURED_CAUSES: dict[tuple[str, str, str], Reading] = {
    # Table 12, noise 0.4
    ("fmnist_noise", "noise0.4", "fedgp_0.5"): _FMNIST_TARGET_STEP,
    ("fmnist_noise", "noise0.4", "target_only"): _FMNIST_TARGET_STEP,
    ("fmnist_noise", "noise0.6", "fedgp_0.5"): Reading(
        ("fmnist_noise_target_lr_half_levels",),
        "the variant halves the target lr at this noise level, as fmnist_noise_target_lr_half does at 0.4: the "
        "code's cosine-scaled source term is about lr_T/bs_T·cos·g_i, so the row follows the target's own steps, "
        "and no script sets the learning rate the published runs used",
    ),
    ("fmnist_noise", "noise0.8", "fedgp_0.5"): Reading(
        (),
        "no setting was varied at this noise level; at noise 0.4 and 0.6 the same row was run at half the target "
        "lr (fmnist_noise_target_lr_half, fmnist_noise_target_lr_half_levels), the setting no script fixes",
    ),
    ("fmnist_noise", "noise0.8", "fedda_0.5"): Reading((), _FEDDA_DECAYS),
    ("fmnist_noise", "noise0.4", "source_only"): _SOURCE_ONLY_LONGER,
    ("fmnist_noise", "noise0.4", "finetune_offline"): Reading(
        ("fmnist_noise_finetune_frozen",), _FINETUNE_EITHER_LAYERS
    ),
    # Section 5.3: FedGP without its filter (inferred: no code for the row is public)
    **{
        ("fmnist_filter_ablation", level, "fedgp_0.5_unfiltered"): _UNFILTERED_FOLLOWS_TARGET
        for level in PUBLISHED["fmnist_filter_ablation"]
    },
    # Table 14: FedGP with β = 1 is the warm-up model; the 3-label column also runs fdabench's cyclic deal
    ("fmnist_source_labels", "noise0.4-label3", "fedgp_1"): Reading(
        ("fmnist_source_labels_cyclic",), f"{_WARMUP_KEPT}; the variant deals the classes cyclically"
    ),
    **{
        ("fmnist_source_labels", column, "fedgp_1"): Reading((), _WARMUP_KEPT)
        for column in SOURCE_LABELS
        if column != "noise0.4-label3"
    },
    **{
        ("fmnist_source_labels", column, "source_only"): Reading(
            (), f"{_FEDAVG_DECAYS}; Table 12's Source Only runs the same decay 20 rounds longer (fmnist_noise_rounds70)"
        )
        for column in SOURCE_LABELS
    },
    **{("fmnist_source_labels", column, "finetune_offline"): _FINETUNE_TABLE_14 for column in SOURCE_LABELS},
    **{
        ("fmnist_source_labels", column, "fedda_0.5"): _FEDDA_DECAYS_ONE_RUN
        for column in SOURCE_LABELS
        if column != "noise0.4-label9"
    },
    ("fmnist_source_labels", "noise0.4-label9", "fedda_0.5"): Reading(
        (),
        f"{_FEDDA_DECAYS}. With 9 of 10 classes per source the code's deal is nearly IID, so the row is expected "
        "near Table 12's FedDA at noise 0.4 (the same rule on IID sources, which reproduces); the published FedDA "
        "row is one run per column and is not monotone in the number of labels",
    ),
    # Table 13: Finetune_Offline's layers are inferred (as in Tables 12 and 14, whose frozen variants measure them)
    **{("fmnist_label_shift", eta, "finetune_offline"): _FINETUNE_TABLE_13 for eta in PUBLISHED["fmnist_label_shift"]},
    # Table 13: FedDA where no source holds a target class; Target Only's drift after its peak
    ("fmnist_label_shift", "eta0", "fedda_0.5"): Reading(
        (),
        "at η = 0 no source holds a target class (Source Only and FedGP_1 score 0, as published), so FedDA's source "
        "half (β = 0.5) pulls the model off the target's classes every round and its target half pulls it back: the "
        "per-round accuracy swings by 30-40 points over the last 20 rounds of each run, and the mean of one run's "
        "last 5 rounds lands anywhere in that band (compare the seeds' range and the best round); the published "
        "value is one run's",
    ),
    ("fmnist_label_shift", "eta0.05", "fedda_0.5"): Reading(
        (),
        "the row reproduces at the larger shifts (the rows above); at η = 0.05 the warm-up leaves the model far below "
        "(compare the model after the warm-up) and FedDA climbs from it for the whole 50 rounds, so the row is the "
        "level the climb has reached at the last round, and the published value is one run's level; the seeds' "
        "range above measures how much that level moves with the seed",
    ),
    **{("fmnist_label_shift", eta, "source_only"): _SOURCE_ONLY_FALLS for eta in ("eta0.05", "eta0.15")},
    ("fmnist_label_shift", "eta0.45", "target_only"): Reading(
        (),
        "Target Only trains on the target's labelled samples alone after the 2-round FedAvg warm-up: it peaks within "
        "about 15 rounds (compare the best round) and then drifts down with single-round dips at the code's fixed "
        "lr, so the row is where that drift stands at the last round (compare 10 rounds fewer). The seeds agree on "
        "it (their sd above), so the round budget and the pace of the drift set the gap, not the seed",
    ),
    # Table 13: FedGP with β = 1 after its warm-up
    **{("fmnist_label_shift", eta, "fedgp_1"): _WARMUP_THEN_CLIMBS for eta in PUBLISHED["fmnist_label_shift"]},
    # Table 17, cleveland: neither the scaler, fdabench's earlier batches, nor the statistic closes the gap.
    **{
        ("fed_heart", centre, key): Reading(_HEART_VARIANTS, _HEART_READING)
        for centre in ("cleveland", "va")
        for key in ("fedda_0.5", "fedgp_0.5", "fedda_auto", "fedgp_auto")
    },
    # Table 17's personalised rows (no code; inferred settings, counted apart)
    **{("fed_heart", centre, "ditto"): _DITTO_GLOBAL for centre in PUBLISHED["fed_heart"]},
    **{("fed_heart", centre, "apfl"): _APFL_UNDER_BOTH_ENDS for centre in PUBLISHED["fed_heart"]},
    **{("fed_heart", centre, "fedrep"): _FEDREP_ONE_RUN for centre in PUBLISHED["fed_heart"]},
    # Weakly-supervised Table 5 (inferred features and rounds: no Amazon driver is public)
    **{
        ("amazon_reviews", column, key): _AMAZON_SHARED_INPUT
        for column in PUBLISHED["amazon_reviews"]
        for key in ("source_only", "fedavg_finetune", "gp", "kd3a")
    },
    ("fed_heart", "switzerland", "fedgp_0.5"): Reading(
        ("fed_heart_switzerland_100pct",),
        "the variant labels centre 2 in full, as the paper's text says; the code labels 20%, at which the column's "
        "other rows match. Centre 2 has 16 test patients: one patient is 6.25 points, so a row moves by whole "
        "patients",
    ),
}
