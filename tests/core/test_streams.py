"""Every derived random stream of a cell comes from `fdabench.core.streams.stream`, and no two of one cell meet."""

import re
from pathlib import Path

import pytest

from fdabench.core.streams import CHECKED_CLIENTS, CHECKED_ROUNDS, PURPOSES, stream

SOURCE = Path(__file__).resolve().parents[2] / "src" / "fdabench"
#: the indices each purpose is used with in a cell of up to CHECKED_CLIENTS clients and CHECKED_ROUNDS rounds
INDICES = {
    "batches": range(CHECKED_CLIENTS + 1),
    "auto_estimation": range(1, CHECKED_ROUNDS + 1),
    "participation": range(CHECKED_ROUNDS),
    "dropout": range(CHECKED_ROUNDS),
}


@pytest.mark.parametrize("seed", [0, 1, 2, 7, 123, 9999])
def test_no_two_streams_of_a_cell_share_a_seed(seed):
    seen: dict[int, tuple[str, int]] = {}
    for purpose in PURPOSES:
        for index in INDICES.get(purpose, [0]):
            value = stream(seed, purpose, index)
            assert value not in seen, f"{purpose}[{index}] meets {seen[value]} at seed {seed}"
            seen[value] = (purpose, index)


def test_the_formulas_the_results_were_made_with_are_kept():
    assert stream(3, "batches", 2) == 3 * 1_000_003 + 2
    assert stream(3, "target_noise") == 3 * 1_000_003 + 104_729
    assert stream(3, "auto_estimation", 5) == 3 * 1_000_003 + 7919 * 5
    with pytest.raises(ValueError, match="unknown random stream"):
        stream(0, "nope")


def test_no_module_derives_a_stream_by_hand():
    by_hand = re.compile(r"seed\s*\*\s*1_?000_?003|manual_seed\(\s*seed\s*[+*]")
    offenders = [
        str(path.relative_to(SOURCE))
        for path in SOURCE.rglob("*.py")
        if path.name != "streams.py" and by_hand.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
