"""What the Flower tests share: the cell they run, the round-loop methods each equivalence case covers, the
in-process loop they compare with (and every update its server received), and the comparison of two histories."""

import pytest
import torch

from fdabench.cell.lookup import cell_inputs
from fdabench.cell.setup import load_problem
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method

EXPERIMENT, TARGET, SEED = "colored_digits", "-90", 0
#: the round-loop methods each Flower-equivalence test runs (every registered one, `test_every_round_loop_method_...`)
SIMULATED = ["fedgp", "fedgp_auto", "fdann", "fwdgrl", "oracle"]
CLIENT_STATE_AND_PLAIN = [
    "scaffold",
    "fedbn",
    "ditto",
    "fedrep",
    "apfl",
    "knn_per",
    "finetune_offline",
    "source_only",
    "target_only",
    "warmup_target_only",
    "fedda",
    "fedda_auto",
    "fedgp_auto_threshold",
    "fedprox",
    "fedavg_finetune",
    "gp",
    "kd3a",
    "comda",
    "dadil_e",
    "dadil_r",
]
WITH_AUXILIARY_LABELS = ["auxinfo", "auxinfo_gp"]  # need a dataset with auxiliary labels: Fed-Heart (the mirror)
TIMINGS = ("seconds", "flower_bytes_uplink", "flower_bytes_downlink", "flower_events")


def _problem(params, method, experiment=EXPERIMENT, target=TARGET):
    cell = params.cell(experiment, method, target, SEED)
    problem, _ = load_problem(cell.config, *cell_inputs(params, experiment, target, SEED), torch.device("cpu"))
    return cell, problem


def _in_process(params, method, experiment=EXPERIMENT, target=TARGET):
    """The cell's rounds in this process (one thread, as the Flower runs), and every update the server received."""
    torch.set_num_threads(1)
    cell, problem = _problem(params, method, experiment, target)
    received = []
    from fdabench.federation import rounds

    class Recorded(rounds.LocalSites):
        def train_sources(self, start, settings, round_index=0, asked=None, broadcast=None):
            replies = super().train_sources(start, settings, round_index, asked, broadcast)
            received.append([r.update.clone() for r in replies.results])
            return replies

        def train_target(self, inputs, start, settings):
            reply = super().train_target(inputs, start, settings)
            received.append([reply.result.update.clone()])
            return reply

    settings = TrainSettings.from_dict(cell.config["train"])

    def make(space):
        return Recorded(
            method_object,
            problem,
            space,
            rounds.loss_function(problem.task),
            SEED,
            "off",
            torch.device("cpu"),
            settings.eval_batch_size,
        )

    method_object = get_method(cell.config["algorithm"], cell.config["hparams"])
    history = rounds.run_rounds(method_object, problem, settings, SEED, torch.device("cpu"), sites=make)
    return history, received


def _without_timings(history):
    return [{key: value for key, value in record.items() if key not in TIMINGS} for record in history["rounds"]]


def _assert_same_rounds(history, expected):
    """The same records, round by round, but for timings and Flower's own entries; numbers to float tolerance."""
    ours, theirs = _without_timings(history), _without_timings(expected)
    assert [sorted(record) for record in ours] == [sorted(record) for record in theirs]
    for mine, reference in zip(ours, theirs, strict=True):
        for key, value in reference.items():
            if isinstance(value, float | list):
                # NaN where a metric is undefined (AUC on a split of one class) on both paths
                assert mine[key] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), (mine["round"], key)
            else:
                assert mine[key] == value, (mine["round"], key)
