"""Shipped code read against its source (fdabench.cell.patches): nothing differs in fdabench as shipped, and each
kind of patch a plugin can make is found in the module where it was made, with the file that made it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from fdabench.cell.fingerprint import module_files
from fdabench.cell.patches import Patch, shipped_patches
from fdabench.core import devices
from fdabench.methods import Roles, fda
from fdabench.methods.fda import FedDA
from fdabench.tensor_math import aggregation

HERE = Path(__file__).resolve()


def stand_in(*args, **kwargs):
    """What a plugin puts where a shipped function was."""
    return None


def test_fdabench_as_shipped_has_no_patch():
    for module in module_files():
        if not module.endswith("__main__"):
            importlib.import_module(module)
    assert shipped_patches() == []


PATCHES = {
    "a module's function": (lambda mp: mp.setattr(aggregation, "fedda", stand_in), "tensor_math.aggregation", "fedda"),
    "a class's method": (lambda mp: mp.setattr(FedDA, "aggregate", stand_in), "methods.fda", "FedDA.aggregate"),
    "a function's code": (
        lambda mp: mp.setattr(aggregation.fedavg, "__code__", stand_in.__code__),
        "tensor_math.aggregation",
        "fedavg",
    ),
    "a name imported from fdabench": (lambda mp: mp.setattr(fda, "fedda", stand_in), "methods.fda", "fedda"),
}


@pytest.mark.parametrize("kind", PATCHES)
def test_a_replaced_function_is_found_where_it_was_made_with_the_file_that_made_it(kind, monkeypatch):
    patch, module, name = PATCHES[kind]
    patch(monkeypatch)
    assert shipped_patches() == [Patch(f"fdabench.{module}", name, HERE)]


def test_changed_defaults_and_constants_are_found(monkeypatch):
    monkeypatch.setattr(devices.decide, "__defaults__", (False,))  # strict=True in the source
    monkeypatch.setattr(devices, "UNPINNED", "all")
    monkeypatch.setattr(FedDA, "roles", Roles())
    found = {(patch.module, patch.name) for patch in shipped_patches()}
    assert found == {
        ("fdabench.core.devices", "decide"),
        ("fdabench.core.devices", "UNPINNED"),
        ("fdabench.methods.fda", "FedDA.roles"),
    }


def test_an_added_attribute_is_no_patch(monkeypatch):
    monkeypatch.setattr(FedDA, "plugin_note", "added", raising=False)
    monkeypatch.setattr(aggregation, "median_rule", stand_in, raising=False)
    assert shipped_patches() == []
