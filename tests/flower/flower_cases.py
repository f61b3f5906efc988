"""What the Flower tests share: the cell they run, the round-loop methods each equivalence case covers, the
in-process loop they compare with (and every update its server received), and the comparison of two histories."""

from dataclasses import fields

import pytest
import torch

from fdabench.cell.setup import load_problem
from fdabench.config.lookup import cell_inputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import get_method

EXPERIMENT, TARGET, SEED = "colored_digits", "-90", 0
#: One Flower-equivalence case per transport feature, not per method: what crosses between the server and the sites,
#: and what runs at a site, is decided by the round-loop flags and client hooks a method sets (`transport_features`:
#: each flag's value and each overridden hook is one feature), never by what its aggregate or batch loss computes,
#: which the in-process method tests check for every method. The cases below are a cover: every feature of every
#: registered method is exercised by at least one case, and each case exercises a feature no other case does
#: (`test_every_transport_feature_has_a_flower_equivalence_case` fails when a method brings a feature no case has,
#: or when a case adds nothing).
#: The round-loop methods that run with the exported tiny suite (test_flower.py: updates compared site by site)
SIMULATED = [
    "fedgp_auto",  # messages beyond updates (the estimates), a target observer
    "fdann",  # the target trains on all its inputs, a source batch loss
    "oracle",  # the target's labelled and unlabelled samples
]
#: exported beside SIMULATED for the transport's own tests (site files, faults, policies): FedGP, the plain aggregate
EXPORTED = ["fedgp", *SIMULATED]
CLIENT_STATE_AND_PLAIN = [
    "kd3a",  # source models with their buffers forwarded to the target, its own local rounds
    "comda",  # queries to the sources only, their predictions forwarded to the target, client state
    "fedprox",  # a proximal term at every site
    "dadil_e",  # an encoder phase, then dictionary rounds with barycentric coordinates kept at the sites
    "warmup_target_only",  # sources in the warm-up only
    "gp",  # the target starts from the sources' average, a source batch loss
]
#: cases whose transport features other cases have too, kept for what the feature set cannot tell apart (one hook,
#: `local_objective`, holds the batch losses, the proximal term and the observer)
KEPT_FOR = {
    "fedgp_auto": "the target's estimates filled by an observer of its steps at its site, compared update by update",
    "fdann": "a broadcast that reaches the target, read by the batch losses of every site, compared update by update",
}
WITH_AUXILIARY_LABELS = ["auxinfo"]  # auxiliary labels in the site files: Fed-Heart (the mirror)
#: what a method declares that the transport or a site acts on: each field of each is a feature of its own
TRANSPORT_VALUES = ("roles", "delivery")
TRANSPORT_HOOKS = (
    "phases",
    "prepare_model",
    "local_objective",
    "target_start",
    "update_bytes",
    "message_shapes",
    "client_state",
    "broadcast",
    "local_round",
)


def transport_features(method: type) -> frozenset:
    """The transport features of a round-loop method: each field of its roles and of who receives what, with its value
    (a method forwarding updates and buffers, another only updates), and each hook it overrides. A feature decides
    what crosses between the server and the sites, or what runs at a site, whatever the method's arithmetic."""
    from fdabench.methods.base import RoundLoopMethod

    overridden = {hook for hook in TRANSPORT_HOOKS if getattr(method, hook) is not getattr(RoundLoopMethod, hook)}
    declared = {
        (f"{value}.{field.name}", getattr(getattr(method, value), field.name))
        for value in TRANSPORT_VALUES
        for field in fields(getattr(method, value))
    }
    return frozenset(declared | overridden)


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


def simulate(folder, result, *args, **kwargs):
    """`simulation.simulate` with one site process at a time (`sites_at_once=1`): what these tests compare does not
    depend on how many processes train the sites, and each process costs seconds of CPU importing torch and
    fdabench. test_flower.py runs one cell on the default (a process per CPU) against the in-process loop."""
    from fdabench.flower import simulation

    return simulation.simulate(folder, result, *args, sites_at_once=1, **kwargs)


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
