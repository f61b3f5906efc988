"""Search spaces and a sweep's cells: draws are pure functions of (experiment, method, draw, trial, setting) (or,
shared, of (experiment, method, draw, setting)), draw 0 is the configured setting, adding draws or trials adds
cells and changes none, and a sweep's settings are checked before any job."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdabench.config import ParamsError, validate_params
from fdabench.config import sweep as sweep_config
from fdabench.config.checks import _spec_errors
from fdabench.core import search
from fdabench.federation.settings import TRAIN_SCHEMA
from fdabench.methods import METHODS
from workflows import SWEEP_PARAMS


def params(**suite_changes):
    raw = copy.deepcopy(SWEEP_PARAMS)
    for key, value in suite_changes.items():
        if value is None:
            raw["suites"]["s"].pop(key, None)
        else:
            raw["suites"]["s"][key] = value
    return validate_params(raw)


def configs(p):
    return {cell.path: cell.config for cell in p.cells()}


# -- the search spaces -------------------------------------------------------------------------------------------


def test_every_declared_space_is_usable_and_inside_its_setting():
    declared = [
        (f"methods.{name}.{key}", spec) for name, cls in METHODS.items() for key, spec in cls.hparams_schema.items()
    ]
    declared += [(f"train.{key}", spec) for key, spec in TRAIN_SCHEMA.items()]
    spaces = [(where, spec) for where, spec in declared if "search" in spec]
    assert len(spaces) >= 10
    for where, spec in spaces:
        assert _spec_errors(where, spec["search"], spec) == [], where
    # the check refuses a space reaching outside its setting
    assert _spec_errors("beta", {"uniform": [0, 2]}, METHODS.get("fedda").hparams_schema["beta"])


@settings(max_examples=60, deadline=None)
@given(
    low=st.floats(1e-6, 10, allow_nan=False),
    factor=st.floats(1.01, 1e4, allow_nan=False),
    draw=st.integers(1, 10_000),
    experiment=st.text(min_size=1, max_size=8),
)
def test_random_draws_stay_in_their_space_and_repeat(low, factor, draw, experiment):
    spaces = {
        "a": {"log_uniform": [low, low * factor]},
        "b": {"uniform": [-low, low]},
        "c": {"int": [1, 7]},
        "d": {"choice": ["x", "y", 3]},
    }
    values = search.random_draw(experiment, "m", draw, spaces)
    assert values == search.random_draw(experiment, "m", draw, dict(reversed(spaces.items())))
    tolerance = 10 ** (1 - search.DIGITS)  # drawn reals keep DIGITS significant digits
    assert low * (1 - tolerance) <= values["a"] <= low * factor * (1 + tolerance)
    assert abs(values["b"]) <= low * (1 + tolerance)
    assert isinstance(values["c"], int) and 1 <= values["c"] <= 7
    assert values["d"] in ("x", "y", 3)


def test_a_draw_does_not_depend_on_what_else_is_swept_nor_on_the_order_of_draws():
    beta = {"hparams.beta": {"uniform": [0, 1]}}
    both = {**beta, "train.target_lr": {"log_uniform": [1e-4, 1e-1]}}
    alone = [search.random_draw("exp", "fedgp", k, beta)["hparams.beta"] for k in range(1, 6)]
    with_lr = [search.random_draw("exp", "fedgp", k, both)["hparams.beta"] for k in reversed(range(1, 6))]
    assert alone == list(reversed(with_lr))
    assert len(set(alone)) == 5  # draws differ
    other_experiment = [search.random_draw("exp2", "fedgp", k, beta)["hparams.beta"] for k in range(1, 6)]
    assert other_experiment != alone
    with pytest.raises(ValueError, match="draw 0"):
        search.random_draw("exp", "fedgp", 0, beta)


def test_grid_points_and_product():
    assert search.grid_points({"log_uniform": [1e-3, 1e-1]}, 3) == [0.001, 0.01, 0.1]
    assert search.grid_points({"uniform": [0, 1]}, 5) == [0, 0.25, 0.5, 0.75, 1]
    assert search.grid_points({"int": [1, 3]}, 5) == [1, 2, 3]
    assert search.grid_points({"int": [1, 100]}, 3) == [1, 50, 100]
    grid = search.grid({"b": {"choice": [1, 2]}, "a": {"uniform": [0, 1]}}, 2)
    assert grid == [{"a": 0, "b": 1}, {"a": 0, "b": 2}, {"a": 1, "b": 1}, {"a": 1, "b": 2}]


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"uniform": [1, 1]}, "low < high"),
        ({"log_uniform": [0, 1]}, "low > 0"),
        ({"int": [1.5, 3]}, "integer bounds"),
        ({"normal": [0, 1]}, "not a search distribution"),
        ({"uniform": [0, 1], "int": [0, 1]}, "not a search distribution"),
        ({"choice": []}, "at least one value"),
    ],
)
def test_unusable_spaces_are_named(spec, problem):
    assert problem in search.spec_problem(spec)


# -- a sweep's cells ---------------------------------------------------------------------------------------------


def test_a_sweep_expands_into_one_cell_per_draw_and_draw_0_is_the_configured_setting():
    swept, plain = params(), params(sweep=None)
    names = swept.methods("colored_digits")
    assert names == [f"{m}.draw{k}" for m in ("source_only", "fedgp_half", "ditto") for k in range(4)]
    for method in ("source_only", "fedgp_half", "ditto"):
        base = plain.cell("colored_digits", method, "-90", 1).config
        draw0 = swept.cell("colored_digits", f"{method}.draw0", "-90", 1).config
        assert draw0["hparams"] == base["hparams"] and draw0["train"] == base["train"]
        assert draw0["sweep"] == {"method": method, "draw": 0, "values": {}}
    drawn = swept.cell("colored_digits", "fedgp_half.draw2", "-90", 1).config
    assert drawn["algorithm"] == "fedgp" and set(drawn["sweep"]["values"]) == {"hparams.beta", "train.target_lr"}
    assert drawn["hparams"]["beta"] == drawn["sweep"]["values"]["hparams.beta"] != 0.25
    assert drawn["train"]["target_lr"] == drawn["sweep"]["values"]["train.target_lr"]
    assert drawn["validation"] == {"target_holdout": 8}
    # a trial's draw is the same for every target; another trial draws its own (trial-level search, the default)
    assert swept.cell("colored_digits", "fedgp_half.draw2", "+90", 1).config["sweep"] == drawn["sweep"]
    assert drawn["sweep"]["scope"] == "trial"
    other_trial = swept.cell("colored_digits", "fedgp_half.draw2", "-90", 0).config["sweep"]["values"]
    assert set(other_trial) == set(drawn["sweep"]["values"]) and other_trial != drawn["sweep"]["values"]


def test_each_trial_draws_its_own_settings_reproducibly():
    first, again = params(), params(seeds=[1, 0])

    def values(p, method, k, target, seed):
        return p.cell("colored_digits", f"{method}.draw{k}", target, seed).config["sweep"]["values"]

    for method in ("fedgp_half", "ditto"):
        per_trial = [[values(first, method, k, "-90", seed) for k in (1, 2, 3)] for seed in (0, 1)]
        assert per_trial[0] != per_trial[1]
        for seed in (0, 1):
            for k in (1, 2, 3):
                assert values(again, method, k, "+90", seed) == per_trial[seed][k - 1]
                for setting, value in per_trial[seed][k - 1].items():  # each setting its own stream: all differ
                    assert per_trial[1 - seed][k - 1][setting] != value


def test_shared_draws_reproduce_the_draws_every_trial_shared_before_trials_drew_their_own():
    shared = params(sweep={"draws": 4, "train": ["target_lr"], "draw_scope": "shared"})
    # the values and sweep blocks these cells had when every trial shared its draws (recorded from that code)
    recorded = {
        "fedgp_half.draw1": {"hparams.beta": 0.1529, "train.target_lr": 0.01468},
        "fedgp_half.draw3": {"hparams.beta": 0.4104, "train.target_lr": 0.06899},
        "ditto.draw2": {"hparams.penalty": 6.436, "train.target_lr": 0.0005877},
    }
    for name, values in recorded.items():
        method, draw = name.split(".draw")
        for target, seed in (("-90", 0), ("+90", 1)):
            config = shared.cell("colored_digits", name, target, seed).config
            assert config["sweep"] == {"method": method, "draw": int(draw), "values": values}
    drawn = {"hparams.beta": {"uniform": [0.0, 1.0]}, "train.local_epochs": {"int": [1, 5]}}
    assert search.random_draw("colored_digits", "fedda", 7, drawn) == {"hparams.beta": 0.6177, "train.local_epochs": 4}
    assert search.draw_seed("colored_digits", "fedda", 3, "hparams.beta") == 8389229683923940903


def test_adding_a_draw_or_a_trial_adds_cells_and_changes_none():
    before = configs(params())
    more_draws = configs(params(sweep={"draws": 5, "train": ["target_lr"]}))
    more_trials = configs(params(seeds=[0, 1, 2]))
    for grown in (more_draws, more_trials):
        assert set(before) < set(grown)
        assert all(grown[path] == config for path, config in before.items())
    new = sorted(set(more_draws) - set(before))
    assert len(new) == 3 * 2 * 2 and all(".draw4/" in path for path in new)  # methods x targets x seeds


def test_a_method_with_nothing_to_vary_runs_once_and_unswept_methods_keep_their_names():
    p = params(sweep={"draws": 3, "methods": ["fedgp_half"]})
    assert p.methods("colored_digits") == [
        "source_only",
        "fedgp_half.draw0",
        "fedgp_half.draw1",
        "fedgp_half.draw2",
        "ditto",
    ]
    assert params(sweep={"draws": 3}).methods("colored_digits")[0] == "source_only.draw0"  # no space: one draw


def test_grid_search_runs_every_combination():
    p = params(sweep={"search": "grid", "grid_points": 2, "methods": ["fedgp_half"], "train": ["target_lr"]})
    names = [m for m in p.methods("colored_digits") if m.startswith("fedgp_half")]
    assert len(names) == 1 + 2 * 2
    values = [p.cell("colored_digits", name, "-90", 0).config["sweep"]["values"] for name in names[1:]]
    assert {(v["hparams.beta"], v["train.target_lr"]) for v in values} == {(0, 1e-4), (0, 0.1), (1, 1e-4), (1, 0.1)}


def test_space_overrides_replace_or_drop_a_declared_space():
    p = params(sweep={"draws": 3, "methods": ["fedgp_half"], "spaces": {"fedgp_half": {"beta": {"choice": [0.9]}}}})
    assert p.cell("colored_digits", "fedgp_half.draw1", "-90", 0).config["hparams"]["beta"] == 0.9
    p = params(sweep={"draws": 3, "methods": ["fedgp_half"], "spaces": {"fedgp_half": {"beta": None}}})
    assert p.methods("colored_digits")[1] == "fedgp_half.draw0" and len(p.methods("colored_digits")) == 3


def test_k_fold_target_validation_gives_one_cell_per_fold():
    p = params(validation={"target_folds": 3}, sweep={"draws": 2, "methods": ["fedgp_half"]})
    names = p.methods("colored_digits")
    assert "fedgp_half.draw1.fold2" in names and "source_only.fold0" in names and len(names) == 3 + 2 * 3 + 3
    config = p.cell("colored_digits", "fedgp_half.draw1.fold2", "-90", 0).config
    assert config["validation"] == {"target_folds": 3, "target_fold": 2} and config["sweep"]["draw"] == 1


def test_parse_name_round_trips():
    for base in ("fedgp", "fedda_b0.2", "a.b"):
        for draw in (None, 0, 12):
            for fold in (None, 3):
                assert sweep_config.parse_name(sweep_config.sweep_name(base, draw, fold)) == (base, draw, fold)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"validation": {"target_holdout": 48}}, "leaves none to train on"),
        ({"validation": {"target_holdout": 4, "target_folds": 2}}, "exclude each other"),
        ({"validation": {"target_folds": 49}}, "leaves a fold empty"),
        ({"sweep": {"methods": ["fedda"]}}, "'fedda' is not a method of the suite"),
        ({"sweep": {"spaces": {"fedgp_half": {"gamma": {"uniform": [0, 1]}}}}}, "no hyper-parameter 'gamma'"),
        ({"sweep": {"spaces": {"fedgp_half": {"beta": {"uniform": [0.5, 2.0]}}}}}, "2.0 is not a valid setting"),
        ({"sweep": {"spaces": {"fedgp_half": {"beta": {"uniform": [0.5, 0.1]}}}}}, "low < high"),
        ({"sweep": {"train": ["target_lr"], "train_spaces": {"target_lr": {"log_uniform": [-1, 1]}}}}, "log_uniform"),
        ({"sweep": {"train_spaces": {"source_lr": {"log_uniform": [1e-3, 1e-2]}}}}, "not in sweep.train"),
        ({"sweep": {"reference": "fedavg"}}, "reference: 'fedavg' is not a method"),
        ({"sweep": {"search": "grid", "draws": 3}}, "a grid search runs every grid point"),
        ({"validation": None}, "target_val needs target validation"),
    ],
)
def test_contradictory_sweep_and_validation_settings_are_refused_before_any_job(change, message):
    with pytest.raises(ParamsError, match=message.replace("(", r"\(")):
        params(**change)


def test_source_val_needs_a_partitioner_that_holds_sources_out():
    raw = copy.deepcopy(SWEEP_PARAMS)
    raw["suites"]["s"]["experiments"] = {
        "noise": {"dataset": "synthetic_regression", "targets": ["s1-n49"], "methods": ["fedgp_half"]}
    }
    raw["suites"]["s"]["methods"] = ["fedgp_half"]
    raw["suites"]["s"]["sweep"] = {"rules": ["source_val"]}
    raw["suites"]["s"].pop("validation")
    with pytest.raises(ParamsError, match="source_val needs held-out source samples"):
        validate_params(raw)


def test_sweep_names_are_reserved_for_sweeps():
    raw = copy.deepcopy(SWEEP_PARAMS)
    raw["methods"]["fedgp.draw1"] = {"algorithm": "fedgp"}
    with pytest.raises(ParamsError, match="sweep's cells; rename the variant"):
        validate_params(raw)


def test_the_cell_limit_counts_every_draw():
    raw = copy.deepcopy(SWEEP_PARAMS)
    raw["limits"] = {"cells": 20}
    with pytest.raises(ParamsError, match="48 cells"):
        validate_params(raw)  # 3 methods x 4 draws x 2 targets x 2 seeds
    assert len(list(params().cells())) == 48


@pytest.mark.parametrize(
    "partition, message",
    [
        ({"clients_per_domain": 2, "label_skew": 1.0, "quantity_skew": 1.0}, "exclude each other"),
        ({"label_skew": 0.5}, "set clients_per_domain >= 2"),
    ],
)
def test_contradictory_client_splits_are_refused_before_any_job(partition, message):
    raw = copy.deepcopy(SWEEP_PARAMS)
    raw["suites"]["s"]["experiments"]["colored_digits"]["partition"].update(partition)
    with pytest.raises(ParamsError, match=message):
        validate_params(raw)


def test_the_sources_sweep_gives_every_target_several_source_domains_over_several_clients(repo_root, rotated_digits):
    from fdabench.config import load_params
    from fdabench.data import get_partitioner

    p = load_params(repo_root / "params.yaml", suite="sweep_sources")
    assert p.sweep() is not None and p.sweep()["draw_scope"] == "trial"
    (experiment,) = p.experiment_names()
    partitioner = get_partitioner(p.partitioner(experiment))
    for target in p.targets(experiment):
        partition = partitioner.split(rotated_digits, target, 0, p.partition_options(experiment))
        domains = {client.domain for client in partition.sources}
        assert target not in domains and len(domains) >= 3  # a median of the source updates is not their mean
        assert len(partition.sources) == 2 * len(domains)
