"""Round-loop checkpoints: an interrupted cell resumes from its last checkpoint with results identical, bit
for bit, to an uninterrupted run; a checkpoint of another run is never used."""

import dataclasses

import pytest
import torch
from torch import nn

from fdabench.federation.checkpoint import Checkpoints, checkpoint_path
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from tiny import TINY_TRAIN

SETTINGS = TrainSettings.from_dict({**TINY_TRAIN, "rounds": 5, "warmup_rounds": 2, "server_momentum": 0.5})
LONG = dataclasses.replace(SETTINGS, rounds=7)  # methods without warm-up: round 4 is still mid-run
IDENTITY = {"config": "cell", "code": "abc", "device": "cpu", "threads": 1}


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def problem(digits_problem):
    return digits_problem("-90")


def _model(problem):
    """Buffers (BatchNorm statistics) and draws from torch's global random state (dropout) in every step."""
    torch.manual_seed(0)
    width = int(torch.tensor(problem.input_shape).prod())
    return nn.Sequential(
        nn.Flatten(), nn.Linear(width, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 10)
    )


def _run(problem, name, hparams, checkpoints=None, stop_after=None, settings=SETTINGS):
    seen = []

    def on_round(record, _total):
        seen.append(record["round"])
        if stop_after is not None and record["round"] == stop_after:
            raise Interrupted

    method = get_method(name, hparams)
    history = run_rounds(
        method, problem, settings, 0, torch.device("cpu"), on_round, model=_model(problem), checkpoints=checkpoints
    )
    return history, seen


def _without_seconds(rounds):
    return [{key: value for key, value in record.items() if key != "seconds"} for record in rounds]


@pytest.mark.parametrize(
    ("name", "hparams", "momentum"),
    [
        ("fedgp", {"beta": 0.5}, 0.5),
        ("fedgp_auto", {"recompute": "once"}, 0.5),  # state carried across rounds: β fixed in the first FDA round
        ("fedgp_auto", {}, 0.5),  # no state carried
        ("fedda", {"beta": 0.5}, 0.0),  # no server momentum: no velocity to save
        ("source_only", {}, 0.5),
        ("scaffold", {}, 0.0),  # client state: each source's c_i, and the server's c
        ("fedbn", {}, 0.0),  # client state: each client's BatchNorm layers and statistics
    ],
)
def test_resumed_run_equals_an_uninterrupted_one(problem, tmp_path, name, hparams, momentum):
    base = SETTINGS if get_method(name).roles.warmup else LONG  # 7 rounds either way: round 4 is mid-run
    settings = dataclasses.replace(base, server_momentum=momentum)
    reference, _ = _run(problem, name, hparams, settings=settings)
    checkpoints = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        _run(problem, name, hparams, checkpoints, stop_after=4, settings=settings)
    assert checkpoints.path.is_file()  # written after rounds 1 and 3 (0-based)
    resumed, seen = _run(problem, name, hparams, checkpoints, settings=settings)
    assert seen == [4, 5, 6]  # rounds 0-3 came from the checkpoint
    assert _without_seconds(resumed["rounds"]) == _without_seconds(reference["rounds"])
    assert [r["round"] for r in resumed["rounds"]] == list(range(7))


@pytest.mark.parametrize("name", ["source_only", "fedgp"])
def test_resumed_run_redraws_the_same_feature_noise(problem, tmp_path, name):
    """Feature noise redrawn at every read (noise_mode redraw) comes from the problem's own generator: the
    checkpoint saves it, so evaluation and target steps after the resume see the uninterrupted run's noise."""

    def noisy(seed=7):
        shared = torch.Generator().manual_seed(seed)
        target = {
            split: dataclasses.replace(getattr(problem, split), noise_std=0.5, generator=shared)
            for split in ("target_labelled", "target_unlabelled", "target_test")
        }
        return dataclasses.replace(problem, **target)

    reference, _ = _run(noisy(), name, {}, settings=LONG)
    checkpoints = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        _run(noisy(), name, {}, checkpoints, stop_after=4, settings=LONG)
    resumed, seen = _run(noisy(), name, {}, checkpoints, settings=LONG)
    assert seen[0] == 4 and len(noisy().noise_generators()) == 1
    assert _without_seconds(resumed["rounds"]) == _without_seconds(reference["rounds"])


def test_checkpoint_of_another_run_is_ignored(problem, tmp_path, capsys):
    ran = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        _run(problem, "fedgp", {"beta": 0.5}, ran, stop_after=2)
    other = Checkpoints(ran.path, 2, {**IDENTITY, "code": "changed"})
    history, seen = _run(problem, "fedgp", {"beta": 0.5}, other)
    assert seen == list(range(7)) and "starting over" in capsys.readouterr().out
    reference, _ = _run(problem, "fedgp", {"beta": 0.5})
    assert _without_seconds(history["rounds"]) == _without_seconds(reference["rounds"])


@pytest.mark.parametrize("damage", ["truncated", "not a checkpoint"])
def test_an_unreadable_checkpoint_is_discarded_with_one_line_and_the_cell_starts_over(
    problem, tmp_path, capsys, damage
):
    ran = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        _run(problem, "fedgp", {"beta": 0.5}, ran, stop_after=2)
    if damage == "truncated":
        ran.path.write_bytes(ran.path.read_bytes()[:200])  # a disk filled up, or a copy cut short
    else:
        torch.save({"something": "else"}, ran.path)
    capsys.readouterr()
    history, seen = _run(problem, "fedgp", {"beta": 0.5}, Checkpoints(ran.path, 2, IDENTITY))
    warning = [line for line in capsys.readouterr().out.splitlines() if "unreadable" in line]
    assert seen == list(range(7)) and len(warning) == 1 and "discarded, the cell starts over" in warning[0]
    reference, _ = _run(problem, "fedgp", {"beta": 0.5})
    assert _without_seconds(history["rounds"]) == _without_seconds(reference["rounds"])


def test_no_checkpoint_after_the_last_round_or_when_off(tmp_path):
    every_two = Checkpoints(tmp_path / "a", 2, IDENTITY)
    assert [r for r in range(6) if every_two.due(r, 6)] == [1, 3]  # not after round 5: the cell is done
    assert not any(Checkpoints(tmp_path / "b", 0, IDENTITY).due(r, 6) for r in range(6))
    assert Checkpoints(tmp_path / "missing", 2, IDENTITY).load() is None


def test_checkpoint_is_a_hidden_file_beside_the_result():
    assert checkpoint_path("results/cells/demo/x/fedgp/-90/seed0.json").as_posix() == (
        "results/cells/demo/x/fedgp/-90/.seed0.json.checkpoint.pt"
    )


@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        ("finetune_offline", {"finetune_epochs": 2}),  # interrupted in its FedAvg rounds
        ("dadil_e", {"encoder_rounds": 6, "rounds": 2, "atoms": 2, "support_size": 6, "classifier_steps": 5}),
        ("kd3a", {}),  # the round loop: the target's mixup generator is its client state
        ("ditto", {}),  # personalised: the target's personal model
        ("apfl", {}),
        ("fedrep", {}),  # every client's head
        ("knn_per", {}),
    ],
)
def test_methods_with_phases_or_client_state_of_their_own_resume(problem, tmp_path, name, hparams):
    def run(checkpoints=None, stop_after=None):
        def on_round(record, _total):
            if record["round"] == stop_after:
                raise Interrupted

        return run_rounds(
            get_method(name, hparams), problem, LONG, 0, torch.device("cpu"), on_round, checkpoints=checkpoints
        )

    reference = run()
    checkpoints = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        run(checkpoints, stop_after=4)
    assert checkpoints.path.is_file()
    assert _without_seconds(run(checkpoints)["rounds"]) == _without_seconds(reference["rounds"])


@pytest.mark.parametrize(
    ("name", "hparams", "stop_after"),
    [
        ("ditto", {}, 4),  # the target's personal model: its client state
        ("apfl", {}, 4),
        ("fedrep", {}, 4),  # every client's head
        ("knn_per", {}, 4),
        ("finetune_offline", {"finetune_epochs": 3}, 6),  # in the FedAvg rounds
        ("finetune_offline", {"finetune_epochs": 4, "head_only": True}, 10),  # fine-tuning: the frozen features saved
        # in the dictionary rounds: every client's α (and its round count) saved
        ("dadil_r", {"encoder_rounds": 2, "rounds": 6, "atoms": 2, "support_size": 6, "classifier_steps": 5}, 4),
    ],
)
def test_personalised_and_fine_tuning_rounds_resume_with_their_client_state(
    problem, tmp_path, name, hparams, stop_after
):
    """Round-loop methods whose clients keep a personal model, a head or frozen features resume bit for bit, with the
    target's feature noise redrawn at every read (its generator saved with the clients' streams)."""

    def noisy():
        shared = torch.Generator().manual_seed(7)
        target = {
            split: dataclasses.replace(getattr(problem, split), noise_std=0.5, generator=shared)
            for split in ("target_labelled", "target_unlabelled", "target_test")
        }
        return dataclasses.replace(problem, **target)

    def run(checkpoints=None, interrupt=False):
        seen = []

        def on_round(record, _total):
            seen.append(record["round"])
            if interrupt and record["round"] == stop_after:
                raise Interrupted

        history = run_rounds(
            get_method(name, hparams), noisy(), LONG, 0, torch.device("cpu"), on_round, checkpoints=checkpoints
        )
        return history, seen

    reference, _ = run()
    checkpoints = Checkpoints(tmp_path / "cell.ckpt", 2, IDENTITY)
    with pytest.raises(Interrupted):
        run(checkpoints, interrupt=True)
    resumed, seen = run(checkpoints)
    assert seen[0] == stop_after  # the rounds before came from the checkpoint written after round stop_after - 1
    assert _without_seconds(resumed["rounds"]) == _without_seconds(reference["rounds"])
