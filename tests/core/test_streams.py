"""Every derived random stream of a cell comes from `fdabench.core.streams.stream`, and no two of one cell meet: the
shipped purposes (the loop's, and those the method modules register) and any a plugin registers."""

import re
from pathlib import Path

import pytest

import fdabench.methods  # noqa: F401  (the shipped methods register their purposes)
from fdabench.core import streams
from fdabench.core.streams import CHECKED_SEEDS, PURPOSES, SEED_STRIDE, Purpose, register_purpose, stream

SOURCE = Path(__file__).resolve().parents[2] / "src" / "fdabench"
#: every purpose fdabench registers, loop and methods (a purpose that disappears, or a new one, shows here)
SHIPPED = {
    "model_init",
    "theory_draws",
    "batches",
    "target_noise",
    "client_split",
    "participation",
    "dropout",
    "auto_estimation",
    "kd3a_mixup",
    "comda_mixup",
    "dadil_classifier",
    "dadil_atoms",
}


@pytest.fixture
def table(monkeypatch):
    """The purposes' table, restored after the test (what a plugin registers in it stays in the test)."""
    monkeypatch.setattr(streams, "PURPOSES", dict(PURPOSES))
    return streams.PURPOSES


@pytest.mark.parametrize("seed", CHECKED_SEEDS)
def test_no_two_streams_of_a_cell_share_a_seed(seed):
    assert set(PURPOSES) >= SHIPPED
    seen: dict[int, tuple[str, int]] = {}
    for purpose, rule in PURPOSES.items():
        for index in rule.indices:
            value = stream(seed, purpose, index)
            assert value not in seen, f"{purpose}[{index}] meets {seen[value]} at seed {seed}"
            seen[value] = (purpose, index)


def test_the_formulas_the_results_were_made_with_are_kept():
    assert stream(3, "batches", 2) == 3 * 1_000_003 + 2
    assert stream(3, "target_noise") == 3 * 1_000_003 + 104_729
    assert stream(3, "auto_estimation", 5) == 3 * 1_000_003 + 7919 * 5
    offsets = {
        "model_init": 700_001,
        "theory_draws": 700_003,
        "kd3a_mixup": 199_999,
        "comda_mixup": 399_989,
        "dadil_classifier": 299_993,
        "dadil_atoms": 999_983,
        "client_split": 900_001,
    }
    assert {name: stream(3, name) - 3 * 1_000_003 for name in offsets} == offsets
    assert stream(3, "participation", 4) == 3 * 1_000_003 + 600_011 + 4
    assert stream(3, "dropout", 4) == 3 * 1_000_003 + 800_011 + 4
    with pytest.raises(ValueError, match="unknown random stream"):
        stream(0, "nope")


def test_a_plugin_registers_a_stream_of_its_own(table):
    mine = Purpose(SEED_STRIDE, 500_009, 0, "a plugin's draws")
    assert register_purpose("plugin_draws", mine) == "plugin_draws"
    assert register_purpose("plugin_draws", mine) == "plugin_draws"  # again, the same meaning: nothing happens
    assert stream(2, "plugin_draws") == 2 * SEED_STRIDE + 500_009


@pytest.mark.parametrize(
    ("name", "purpose", "refusal"),
    [
        # a shipped name with another formula
        ("kd3a_mixup", Purpose(SEED_STRIDE, 500_009, 0, "mine"), "'kd3a_mixup' is registered already"),
        # a name of its own whose seed is a shipped stream's: KD3A's mixup, and source 3's batches
        ("mine", Purpose(SEED_STRIDE, 199_999, 0, "mine"), r"mine\[0\] meets kd3a_mixup\[0\] at seed 0"),
        ("mine", Purpose(SEED_STRIDE, 3, 0, "mine"), r"mine\[0\] meets batches\[3\] at seed 0"),
        # indexed by the round: one of its indices reaches auto-weighting's estimation batches
        ("mine", Purpose(SEED_STRIDE, 7919 * 2 - 50, 1, "mine", range(120)), r"mine\[50\] meets auto_estimation\[2\]"),
    ],
)
def test_a_plugin_stream_that_meets_a_shipped_one_is_refused(table, name, purpose, refusal):
    before = dict(table)
    with pytest.raises(ValueError, match=refusal):
        register_purpose(name, purpose)
    assert table == before


def test_no_module_derives_a_stream_by_hand():
    by_hand = re.compile(r"seed\s*\*\s*1_?000_?003|manual_seed\(\s*seed\s*[+*]")
    offenders = [
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if path.name != "streams.py" and by_hand.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
