"""Client state over Flower: one method per transport feature (`flower_cases.transport_features`) that keeps state at
its sites (SCAFFOLD's control variates, FedBN's BatchNorm layers, personal models, heads, source models, barycentric
coordinates) or is plain runs as a Flower simulation whose records equal the in-process loop's. Apart from
tests/flower/test_flower.py so that pytest-xdist's `--dist loadfile` can run the two halves of the Flower simulations
on different workers."""

import json

import pytest

flwr = pytest.importorskip("flwr", reason='Flower is not installed (uv pip install -e ".[flower]")')

import flower_cases as cases  # noqa: E402

from fdabench.flower import simulation  # noqa: E402
from fdabench.methods import get_method  # noqa: E402
from tiny import TINY_DICTIONARY  # noqa: E402


def _with_client_state(params, method):
    """The tiny suite with `method`: SCAFFOLD and FedBN with plain SGD and a model with BatchNorm layers; KD3A with
    BatchNorm layers (the source models reach the target with their buffers) and sources confident enough to vote."""
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["methods"] = [method]
    if method in ("scaffold", "fedbn"):
        train = raw["suites"]["tiny"].setdefault("train", {})
        train.update({"optimizer": "sgd", "momentum": 0.0, "source_lr": 0.05, "target_lr": 0.05})
        train["model_options"] = {**train.get("model_options", {}), "norm": "batch"}
    if method == "kd3a":
        train = raw["suites"]["tiny"].setdefault("train", {})
        train.update({"source_lr": 1e-2, "target_batch_size": 4})  # the target's own settings unused: KD3A's are
        train["model_options"] = {**train.get("model_options", {}), "norm": "batch"}
    if method == "comda":  # the target's networks train from round 1 (after its queries' round), so every round differs
        raw["methods"]["comda"] = {"warm_target": 1}
    if method.startswith("dadil"):  # a small dictionary; the tiny images make the encoder FedAvg rounds first
        raw["methods"][method] = {**TINY_DICTIONARY, "rounds": 2}
    return validate_params(raw)


def test_every_transport_feature_has_a_flower_equivalence_case():
    """Each combination of transport features a registered round-loop method has (`flower_cases.transport_features`)
    has one equivalence case, and no two cases share one (the auxiliary-label case stands for a feature of the data,
    the labels a site file carries, with a method whose features another case has)."""
    from fdabench.methods import METHODS
    from fdabench.methods.base import RoundLoopMethod

    loop_methods = {
        name: METHODS.get(name) for name in METHODS.names() if issubclass(METHODS.get(name), RoundLoopMethod)
    }
    covered = [*cases.SIMULATED, *cases.CLIENT_STATE_AND_PLAIN]
    features = [cases.transport_features(loop_methods[name]) for name in covered]
    assert len(set(features)) == len(covered), "two cases exercise the same transport features"
    assert cases.transport_features(loop_methods[cases.WITH_AUXILIARY_LABELS[0]]) in features
    missing = {name for name, member in loop_methods.items() if cases.transport_features(member) not in features}
    assert not missing, f"no Flower case has the transport features of {sorted(missing)}"


@pytest.mark.parametrize("method", cases.CLIENT_STATE_AND_PLAIN)
def test_client_state_stays_at_the_sites_and_equals_the_in_process_loop(tiny_inputs, method, monkeypatch, tmp_path):
    """SCAFFOLD's control variates, FedBN's BatchNorm layers, Ditto's and APFL's personal models, FedRep's heads,
    Finetune_Offline's frozen features, Co-MDA's source models, target networks and ensembles and FedDaDiL's barycentric
    coordinates live in each site's node state between rounds: the simulation's records
    (metrics, bytes with c and Δc_i, the shared entries only, the fine-tuning epochs' none) equal the in-process loop's.
    A personalised method's predictor never leaves the target: over Flower no source scores it (no `source_val_*`)."""
    root, params = tiny_inputs
    params = _with_client_state(params, method)
    monkeypatch.chdir(root)
    simulation.export_cell(params, cases.EXPERIMENT, method, cases.TARGET, cases.SEED, tmp_path / "sites")
    expected, _ = cases._in_process(params, method)
    history = simulation.simulate(tmp_path / "sites", tmp_path / "result.json", timeout=120)
    if get_method(method).personalised:
        assert not [key for record in history["rounds"] for key in record if key.startswith("source_val_")]
        kept = lambda record: {key: value for key, value in record.items() if not key.startswith("source_val_")}
        expected = {**expected, "rounds": [kept(record) for record in expected["rounds"]]}
    cases._assert_same_rounds(history, expected)
    assert len({record["loss"] for record in history["rounds"]}) == len(history["rounds"])
    if method == "kd3a":  # the knowledge vote and the mixup ran at the target site
        assert any(record["knowledge_fraction"] > 0 for record in history["rounds"])
    if method == "comda":  # the sources answered the queries, and the target weighed them
        assert all(len(record["source_weights"]) == 2 for record in history["rounds"][1:])
