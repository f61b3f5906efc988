"""Client state over Flower: the cases of the transport features' cover (`flower_cases`) that keep state at their
sites (source models, queries and networks, barycentric coordinates) or are plain run as a Flower simulation whose
records equal the in-process loop's. Apart from
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
    """The tiny suite with `method`: KD3A with BatchNorm layers (the source models reach the target with their
    buffers) and sources confident enough to vote."""
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["methods"] = [method]
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
    """Every transport feature of every registered method (`flower_cases.transport_features`: a flag's value, an
    overridden client hook) is exercised by at least one equivalence case, and every case exercises one that no
    other case does or is kept for a path the features cannot tell apart (`flower_cases.KEPT_FOR`; the auxiliary-label
    case stands for a feature of the data, the labels a site file carries)."""
    from fdabench.methods import METHODS

    features = {name: cases.transport_features(METHODS.get(name)) for name in METHODS.names()}
    covered = [*cases.SIMULATED, *cases.CLIENT_STATE_AND_PLAIN]
    exercised = set().union(*(features[name] for name in covered))
    missing = {name: sorted(map(str, found - exercised)) for name, found in features.items() if found - exercised}
    assert not missing, f"no Flower case exercises these transport features: {missing}"
    for case in covered:
        others = set().union(*(features[name] for name in covered if name != case))
        assert bool(features[case] - others) != (case in cases.KEPT_FOR), (
            f"{case} exercises no transport feature the other cases do not, or is kept for one while it has its own"
        )


@pytest.mark.parametrize("method", cases.CLIENT_STATE_AND_PLAIN)
def test_client_state_stays_at_the_sites_and_equals_the_in_process_loop(tiny_inputs, method, monkeypatch, tmp_path):
    """KD3A's forwarded source models, Co-MDA's source models, target networks and ensembles and FedDaDiL's barycentric
    coordinates live in each site's node state between rounds: the simulation's records
    (metrics, bytes with c and Δc_i, the shared entries only, the fine-tuning epochs' none) equal the in-process loop's.
    A personalised method's predictor never leaves the target: over Flower no source scores it (no `source_val_*`)."""
    root, params = tiny_inputs
    params = _with_client_state(params, method)
    monkeypatch.chdir(root)
    simulation.export_cell(params, cases.EXPERIMENT, method, cases.TARGET, cases.SEED, tmp_path / "sites")
    expected, _ = cases._in_process(params, method)
    history = cases.simulate(tmp_path / "sites", tmp_path / "result.json", timeout=120)
    if get_method(method).roles.personalised:
        assert not [key for record in history["rounds"] for key in record if key.startswith("source_val_")]
        kept = lambda record: {key: value for key, value in record.items() if not key.startswith("source_val_")}
        expected = {**expected, "rounds": [kept(record) for record in expected["rounds"]]}
    cases._assert_same_rounds(history, expected)
    assert len({record["loss"] for record in history["rounds"]}) == len(history["rounds"])
    if method == "kd3a":  # the knowledge vote and the mixup ran at the target site
        assert any(record["knowledge_fraction"] > 0 for record in history["rounds"])
    if method == "comda":  # the sources answered the queries, and the target weighed them
        assert all(len(record["source_weights"]) == 2 for record in history["rounds"][1:])
