"""How a cell's sites hand their work to a `batching: stacked` group (`federation.sites.LocalSites`): plain sources go
as one request list per round, sources with a proximal term, a batch loss or client state train one by one (their
own training, never a plain one), and an `off` cell hands nothing over."""

import pytest
import torch

from fdabench.federation.client import join_group
from fdabench.federation.rounds import run_rounds
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method
from fdabench.speed.cells import RecordingSolo
from fdabench.testing.method_checks import SETTINGS, small_problem

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the stacked kernels compute on one CPU thread


def _calls(name, hparams=None, batching="stacked"):
    group = RecordingSolo()
    join_group(group)
    try:
        settings = TrainSettings.from_dict({**SETTINGS, "rounds": 2, "warmup_rounds": 0, "batching": batching})
        run_rounds(get_method(name, hparams or {}), small_problem(), settings, 0, torch.device("cpu"))
    finally:
        join_group(None)
    return group.calls


def test_plain_sources_go_as_one_request_list_per_round():
    calls = _calls("fedgp", {"beta": 0.5})
    assert [call for call in calls if call[0] == "train_all"] == [("train_all", ("a", "b"))] * 2
    assert ("train", "t") in calls  # the target: plain too
    assert not any(call == ("train", "a") or call == ("train", "b") for call in calls)


@pytest.mark.parametrize(("name", "hparams"), [("fedprox", {"mu": 1.0}), ("scaffold", {}), ("auxinfo", {})])
def test_sources_that_do_not_train_plainly_train_one_by_one(name, hparams):
    """A proximal term (FedProx), client state with a correction (SCAFFOLD), a multi-task loss (AuxInfo): their
    sources' own training, never a plain one in the group."""
    calls = _calls(name, hparams)
    assert not any(call[0] == "train_all" for call in calls)
    assert not any(call[0] == "train" and call[1] in ("a", "b") for call in calls)


def test_an_off_cell_hands_nothing_to_its_group():
    assert _calls("fedgp", {"beta": 0.5}, batching="off") == []
