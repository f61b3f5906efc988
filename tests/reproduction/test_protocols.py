"""The protocol records: every setting has a source, and the corrections read in the authors' code hold."""

from __future__ import annotations

import pytest

from fdabench.reproduction.papers.protocols import (
    PROTOCOLS,
    inferred_settings,
    missing_provenance,
    published_settings,
    settings_provenance,
    stale_provenance,
)
from fdabench.reproduction.papers.published import PUBLISHED
from fdabench.reproduction.papers.record import FED_HEART_COMMIT, Protocol, Row, Source, code, inferred, paper


@pytest.mark.parametrize("key", sorted(PROTOCOLS))
def test_every_recorded_setting_names_its_source(key):
    protocol = PROTOCOLS[key]
    for name, row in protocol.rows.items():
        assert missing_provenance(protocol, row) == [], (key, name)
    assert stale_provenance(protocol) == [], key


def test_a_record_entry_with_no_provenance_is_found():
    row = Row("fedda", {"beta": 0.5}, code("main.py:1"))
    protocol = Protocol(
        citation="t",
        dataset="d",
        dataset_options={"size": 3},
        partitioner="p",
        partition={"clients": 2},
        train={"rounds": 5, "source_lr": 0.1},
        rows={"fedda_0.5": row},
        provenance={"dataset": paper("Table 1"), "partitioner": paper("Table 1"), "partition.clients": paper("T")},
    )
    assert missing_provenance(protocol, row) == ["dataset_options.size", "train.rounds", "train.source_lr"]
    typo = Protocol(**{**protocol.__dict__, "provenance": {**protocol.provenance, "train.round": paper("T")}})
    assert stale_provenance(typo) == ["train.round"]


def test_sources_say_what_they_cite():
    with pytest.raises(ValueError, match="provenance kind"):
        Source("guess", "x")
    with pytest.raises(ValueError, match="needs the repository and the commit"):
        Source("code", "main.py:1")
    with pytest.raises(ValueError, match="needs its citation or reason"):
        inferred(" ")
    assert str(code("main.py:3", "abc1234")) == "code: jackyzyb/AutoFedGP main.py:3 @abc1234"


def test_inferred_settings_name_the_value_and_the_reason():
    ablation = PROTOCOLS["fmnist_filter_ablation"]
    assert inferred_settings(ablation, ablation.rows["fedgp_0.5"]) == []
    unfiltered = inferred_settings(ablation, ablation.rows["fedgp_0.5_unfiltered"])
    assert [entry.split(" (")[0] for entry in unfiltered] == [
        "hparams.mode = cosine_scaled",
        "hparams.scale_alignment = steps_and_lr",
    ]
    assert "no code for this row is public" in unfiltered[0]


# --- corrections read in the authors' code (each fails on the value the record held before) --------------


def test_fed_heart_is_the_authors_main_flamby_heart_protocol():
    heart = PROTOCOLS["fed_heart"]
    fedda = published_settings(heart, heart.rows["fedda_0.5"])
    assert {key: fedda["train"][key] for key in ("source_batch_size", "target_batch_size", "warmup_rounds")} == {
        "source_batch_size": 4,
        "target_batch_size": 4,
        "warmup_rounds": 5,
    }
    assert fedda["train"]["source_lr"] == fedda["train"]["target_lr"] == 1e-3
    assert fedda["partition"]["standardize"] == "per_domain"  # FLamby normalises each centre by its own training split
    for key in ("fedda_auto", "fedgp_auto"):
        auto = heart.rows[key]
        assert auto.algorithm == key  # the plain rule, not the thresholded one
        assert auto.hparams["target_batch_size"] == 1 and auto.hparams["lr_decay_after_warmup"] == 1.0
    sources = settings_provenance(heart, heart.rows["fedda_0.5"])
    assert sources["train.source_batch_size"].kind == "code" and sources["train.source_batch_size"].commit == (
        FED_HEART_COMMIT
    )
    # the code labels 20% of every centre (the paper's text says 100% for centre 2; the published column is 20%'s)
    assert fedda["partition"]["target_labelled"] == 0.2
    assert fedda["partition"]["target_labelled_overrides"] == {"switzerland": 0.2}
    assert sources["partition.target_labelled_overrides.switzerland"].kind == "code"


def test_vlcs_printed_s_column_is_voc2007_and_v_is_sun09():
    vlcs = PUBLISHED["vlcs"]
    assert (vlcs["SUN09"]["source_only"], vlcs["VOC2007"]["source_only"]) == (70.24, 69.10)
    assert (vlcs["SUN09"]["oracle"], vlcs["VOC2007"]["oracle"]) == (78.65, 82.71)
    assert vlcs["VOC2007"]["kd3a"] == 80.5 and "kd3a" not in vlcs["SUN09"]  # Table 1 prints C and S only


@pytest.mark.parametrize("key", ["vlcs", "terra_incognita"])
def test_domainbed_oracle_runs_lr_over_4_and_the_hparams_batch(key):
    protocol = PROTOCOLS[key]
    train = published_settings(protocol, protocol.rows["oracle"])["train"]
    assert (train["target_lr"], train["target_batch_size"], train["warmup_rounds"]) == (1.25e-5, 32, 0)


def test_colored_mnist_beta_0_rows_skip_the_warm_up():
    sweep = PROTOCOLS["colored_mnist_beta"]
    for key in ("fedda_0", "fedgp_0"):
        assert published_settings(sweep, sweep.rows[key])["train"]["warmup_rounds"] == 0
    assert published_settings(sweep, sweep.rows["fedgp_0.2"])["train"]["warmup_rounds"] == 2


def test_terra_incognita_warm_up_and_the_domainbed_auto_factor_are_documented():
    terra = PROTOCOLS["terra_incognita"]
    fixed, auto = terra.rows["fedgp_0.5"], terra.rows["fedgp_auto"]
    assert published_settings(terra, fixed)["train"]["warmup_rounds"] == 2
    assert published_settings(terra, auto)["train"]["warmup_rounds"] == 5
    assert "main_domain_bed.py:358-365" in settings_provenance(terra, fixed)["train.warmup_rounds"].where
    assert any("Appendix C.2 says 5" in note for note in terra.notes)
    factor = settings_provenance(terra, auto)["hparams.lr_decay_after_warmup"]
    assert factor.kind == "inferred" and "0.25" in factor.where and "6e900e6" in factor.where


def test_table_14_and_the_filter_ablation_are_recorded():
    labels = PROTOCOLS["fmnist_source_labels"]
    assert labels.partition["target_share"] == "all"
    assert set(PUBLISHED["fmnist_source_labels"]) == {f"noise0.4-label{k}" for k in (9, 7, 3, 5)}
    assert PUBLISHED["fmnist_source_labels"]["noise0.4-label3"]["fedgp_0.5"] == 64.43
    ablation = PROTOCOLS["fmnist_filter_ablation"]
    assert ablation.rows["fedgp_0.5_unfiltered"].hparams["filter"] is False
    assert ablation.rows["fedgp_0.5"].hparams["filter"] is True
    assert PUBLISHED["fmnist_filter_ablation"]["noise0.4"] == {
        "fedda_0.5": 58.60,
        "fedgp_0.5_unfiltered": 69.51,
        "fedgp_0.5": 71.09,
    }


@pytest.mark.parametrize("key", ["fmnist_noise", "cifar10_noise", "fmnist_source_labels"])
def test_which_layers_finetune_offline_trains_is_inferred(key):
    # run_finetune_offline.sh runs every column with and without --freeze; the tables print one row
    protocol = PROTOCOLS[key]
    source = settings_provenance(protocol, protocol.rows["finetune_offline"])["hparams.head_only"]
    assert source.kind == "inferred" and "--freeze" in source.where
    inferred = inferred_settings(protocol, protocol.rows["finetune_offline"])
    assert any(setting.startswith("hparams.head_only = False (") for setting in inferred)


def test_table_14s_finetune_offline_target_is_inferred_the_fine_tuning_code_cannot_run_it():
    # main_noniid_finetune_offline.py's target is always the split's last party; main_noniid_source.py's target,
    # drawn from all of train, is the other rows' (whose provenance stays the code's)
    labels = PROTOCOLS["fmnist_source_labels"]
    finetune = settings_provenance(labels, labels.rows["finetune_offline"])
    for key in ("partition.target_share", "partition.target_labelled", "partition.target_test"):
        assert finetune[key].kind == "inferred" and "fmnist_source_labels_finetune_party" in finetune[key].where
        assert settings_provenance(labels, labels.rows["fedgp_0.5"])[key].kind == "code"
    assert published_settings(labels, labels.rows["finetune_offline"])["partition"]["target_share"] == "all"
    inferred = inferred_settings(labels, labels.rows["finetune_offline"])
    assert any(setting.startswith("partition.target_share = all (") for setting in inferred)


def test_table_14s_oracle_row_is_the_homo_partition_run_of_run_oracle_sh():
    labels, noise = PROTOCOLS["fmnist_source_labels"], PROTOCOLS["fmnist_noise"]
    assert published_settings(labels, labels.rows["oracle"])["partition"] == {
        **noise.partition,
        "label_assignment": None,
    }
    provenance = settings_provenance(labels, labels.rows["oracle"])
    assert provenance["partition.target_share"].kind == "code"
    assert "run_oracle.sh" in provenance["partition.target_share"].where
