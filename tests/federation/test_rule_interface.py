"""The method interface: what a method may define, and which side of the federation reads which part of it.

The round loop reads a method's server part (`ServerRule`), the sites its clients' part (`ClientRule`); both read the
basics (`RuleBasics`: name, roles, delivery, the model). The members a method may define are listed here by name, so
that adding one is a decision this file records."""

from __future__ import annotations

import ast
from pathlib import Path

from fdabench.federation.client_state import StatefulRules
from fdabench.federation.rule_interface import ClientRule, RuleBasics, ServerRule
from fdabench.methods.base import Method, RoundLoopMethod

SOURCE = Path(__file__).resolve().parents[2] / "src" / "fdabench"

#: the members of the method interface before the split (12 flags and 20 hooks of `RoundRules`, 7 attributes of
#: `Method`), counted as the issue that asked for the split counted them
MEMBERS_BEFORE = 39
#: what a method may define now, by part
DEFINABLE = {
    "basics": {"name", "roles", "delivery", "prepare_model"},
    "server": {"phases", "target_start", "broadcast", "aggregate", "update_bytes", "round_state"},
    "client": {"local_objective", "client_state", "local_round", "local_rounds", "evaluation_view"},
    "record": {"description", "family", "hparams_schema", "requires"},  # what a cell records and validates of it
    # counted here, though the count of 39 left them out: the check of the training settings beyond `requires`, and
    # the shapes of its messages for the privacy checks
    "checks": {"check", "message_shapes"},
}


def _protocol_members(protocol: type) -> set[str]:
    return {name for name in [*vars(protocol), *protocol.__annotations__] if not name.startswith("_")}


def _definable() -> set[str]:
    """Every public member of the base classes a method derives from, but the derived defaults and the merge helper."""
    names = set()
    for cls in (Method, StatefulRules, RoundLoopMethod):
        names |= {name for name in [*vars(cls), *cls.__annotations__] if not name.startswith("_")}
    return names - {"default_hparams", "with_defaults"}


def test_the_members_a_method_may_define_are_the_listed_ones_at_most_half_of_before():
    assert _definable() == set().union(*DEFINABLE.values())
    counted_as_before = set().union(*DEFINABLE.values()) - DEFINABLE["checks"]
    assert len(counted_as_before) <= MEMBERS_BEFORE // 2, sorted(counted_as_before)


def test_the_protocols_split_the_rules_into_basics_a_server_part_and_a_clients_part():
    basics, server, client = (_protocol_members(p) for p in (RuleBasics, ServerRule, ClientRule))
    assert basics == DEFINABLE["basics"]
    assert server == DEFINABLE["server"] and client == DEFINABLE["client"]


def _method_members_read(path: Path) -> set[str]:
    """The attributes a module reads off a variable or attribute named `method`."""
    read = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute):
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name == "method":
                read.add(node.attr)
    return read


def test_the_round_loop_reads_a_methods_server_part_and_the_sites_its_clients_part():
    basics = _protocol_members(RuleBasics)
    server, client = basics | _protocol_members(ServerRule), basics | _protocol_members(ClientRule)
    loop = _method_members_read(SOURCE / "federation" / "rounds.py")
    assert loop and loop <= server, sorted(loop - server)
    for module in ("federation/sites.py", "federation/client_state.py", "flower/site_worker.py"):
        read = _method_members_read(SOURCE / module)
        assert read and read <= client, (module, sorted(read - client))
