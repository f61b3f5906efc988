"""The settings a rule chose are the selected cells' own settings (draw 0: the configured ones), and the per-method
summary is their median and range."""

import copy

import numpy as np
import pytest

from fdabench.config import validate_params
from fdabench.report import sweep, sweep_settings
from workflows import SWEEP_PARAMS


def sweep_cells():
    """Cells of a real sweep's configurations (3 methods x 4 draws x 2 targets x 2 trials), with made-up metrics."""
    raw = copy.deepcopy(SWEEP_PARAMS)
    raw["suites"]["s"]["sweep"]["train"] = ["target_lr", "target_batch_size"]
    params = validate_params(raw)
    rng = np.random.default_rng(3)
    cells = []
    for c in params.cells():
        value, test = rng.uniform(0.2, 0.9, 2)
        rounds = [{"round": r, "phase": "fda", "accuracy": test, "target_val_accuracy": value} for r in range(3)]
        cells.append(
            {
                "config": c.config,
                "metric": "accuracy",
                "higher_is_better": True,
                "final": test,
                "final_rounds": 2,
                "rounds": rounds,
            }
        )
    return cells


@pytest.mark.parametrize("rule", ["target_val", "last", "oracle"])
def test_the_chosen_settings_are_the_selected_cells_settings(rule):
    cells = sweep_cells()
    selected = sweep.select(sweep.sweep_frame(cells, rule), rule)
    chosen = sweep_settings.chosen_settings(selected)
    by_key = {
        (c["config"]["sweep"]["method"], c["config"]["target"], c["config"]["seed"], c["config"]["sweep"]["draw"]): c
        for c in cells
    }
    assert len(chosen) and set(chosen["method"]) == {"source_only", "fedgp_half", "ditto"}
    for row in chosen.itertuples():
        config = by_key[(row.method, row.target, row.trial, row.draw)]["config"]
        group, name = row.setting.split(".", 1)
        assert row.value == config[group][name]
    fedgp = chosen[(chosen["method"] == "fedgp_half")]
    assert set(fedgp["setting"]) == {"hparams.beta", "train.target_lr", "train.target_batch_size"}
    if rule == "last":  # draw 0: the configured settings, not an empty draw
        assert set(fedgp.loc[fedgp["setting"] == "hparams.beta", "value"]) == {0.25}


def test_the_summary_is_the_median_and_range_of_the_chosen_values():
    selected = sweep.select(sweep.sweep_frame(sweep_cells(), "target_val"), "target_val")
    chosen = sweep_settings.chosen_settings(selected)
    summary = sweep_settings.settings_summary(chosen).set_index(["method", "setting"])
    betas = chosen.loc[(chosen["method"] == "fedgp_half") & (chosen["setting"] == "hparams.beta"), "value"]
    row = summary.loc[("fedgp_half", "hparams.beta")]
    assert row["median"] == pytest.approx(np.median(betas)) and (row["low"], row["high"]) == (min(betas), max(betas))
    assert row["chosen"] == 4  # 2 targets x 2 trials
    table = sweep_settings.chosen_table(selected)
    assert table.shape == (3 * 2, 2) and all("beta" in text for text in table.loc["fedgp_half, -90"])
