"""A recorded code fingerprint against today's (fdabench.reproduction.staleness.code_changes): an archived cell is
current while every module today's fingerprint reaches has its recorded hash; a recorded module that is no longer
reached (a bookkeeping one) changes nothing; plugins count both ways."""

from fdabench.reproduction.staleness import code_changes

NOW = {"fingerprint": "new", "modules": {"fdabench.cell.run": "a1", "fdabench.federation.rounds": "b2"}}


def _recorded(**modules):
    return {"fingerprint": "old", "modules": {**NOW["modules"], **modules}}


def test_the_same_fingerprint_is_current():
    assert code_changes(dict(NOW), NOW) == []


def test_a_recorded_module_no_longer_reached_is_no_change():
    assert code_changes(_recorded(**{"fdabench.core.io": "c3"}), NOW) == []


def test_a_changed_or_new_module_is_named():
    assert code_changes(_recorded(**{"fdabench.federation.rounds": "zz"}), NOW) == ["fdabench.federation.rounds"]
    before = {"fingerprint": "old", "modules": {"fdabench.cell.run": "a1"}}
    assert code_changes(before, NOW) == ["fdabench.federation.rounds"]


def test_plugins_must_agree_both_ways():
    assert code_changes(_recorded(**{"plugin:patcher": "p1"}), NOW) == ["plugin:patcher"]  # removed since
    now = {"fingerprint": "new", "modules": {**NOW["modules"], "plugin:patcher": "p2"}}
    assert code_changes(_recorded(**{"plugin:patcher": "p1"}), now) == ["plugin:patcher"]  # changed
    assert code_changes(_recorded(), now) == ["plugin:patcher"]  # added


def test_nothing_usable_recorded_is_none():
    for recorded in (None, "abc", {"fingerprint": "old"}, {"fingerprint": "old", "modules": []}):
        assert code_changes(recorded, NOW) is None
