"""Each fact has one owner in the source: one merge of settings, one home of the training defaults, one merge of a
method's defaults, one decision of the device, one enumeration of cells, the theory check in one package, and one
module per partitioner."""

import re
from pathlib import Path

import fdabench
from fdabench.core.plugins import is_shipped
from fdabench.data import PARTITIONERS

PACKAGE = Path(fdabench.__file__).resolve().parent


def _where(pattern: str) -> list[str]:
    """The modules (paths under the package) whose source matches `pattern`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if re.search(pattern, path.read_text(encoding="utf-8"), re.MULTILINE):
            found.append(str(path.relative_to(PACKAGE)))
    return found


def test_one_merge_of_settings():
    assert _where(r"^def deep_merge\(") == ["config/extends.py"]
    assert _where(r"def merge\(") == []


def test_one_home_of_the_training_defaults_and_one_merge_of_a_methods_defaults():
    assert _where(r"\bTRAIN_DEFAULTS\b") == ["federation/settings.py"]
    assert _where(r"\bdefault_hparams\b") == ["methods/base.py"]  # read by Method.with_defaults only
    assert _where(r"\.with_defaults\(") == ["config/resolve.py", "methods/base.py"]  # both call the one merge


def test_one_decision_of_the_device():
    # what params.yaml `device` means here is decided by fdabench.core.devices.decide; elsewhere only the GPU
    # benchmark asks whether CUDA is present (which devices to measure)
    assert set(_where(r"cuda_available\(\)")) <= {"core/devices.py", "speed/gpu/run.py", "cli/bench.py"}
    assert _where(r'device == "(auto|cuda)"|name == "(auto|cuda)"') == ["core/devices.py"]
    assert _where(r"def resolve_device|cell_device\b") == ["cell/setup.py"]  # its torch.device, from `decide`
    assert _where(r"\.is_available\(\)") == ["core/devices.py"]
    assert _where(r"def decide\(") == ["core/devices.py"]


def test_one_enumeration_of_cells():
    assert _where(r"for seed in self\.seeds\(") == ["config/params.py"]
    loops = (PACKAGE / "config/params.py").read_text(encoding="utf-8").count("for seed in self.seeds(")
    assert loops == 1


def test_the_theory_check_is_one_package():
    modules = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*theory*.py")]
    # the command line's stage and the params' side (which variant plays each rule); the check is fdabench/theory/
    assert sorted(modules) == ["cli/theory.py", "config/theory_roles.py"]
    assert sorted(path.name for path in (PACKAGE / "theory").glob("*.py")) == [
        "__init__.py",
        "init.py",
        "quantities.py",
        "report.py",
    ]
    for name in ("initial_quantities", "run_theory_init", "theory_frame"):
        assert [module.split("/")[0] for module in _where(rf"^def {name}\(")] == ["theory"], name
    assert _where(r"^def theory_roles\(") == ["config/theory_roles.py"]
    assert _where(r"^(FIXED_RULES|ROLES|DEFAULT_DRAWS) =") == ["config/theory_roles.py"]


def test_each_partitioner_in_a_module_of_its_own():
    modules = {name: member.__module__ for name, member in PARTITIONERS.items() if is_shipped(member)}
    assert len(set(modules.values())) == len(modules) >= 5
    assert all(module == f"fdabench.data.partitioners.{name}" for name, module in modules.items())
    assert _where(r"^class \w+\(Partitioner\)") == [f"data/partitioners/{name}.py" for name in sorted(modules)]
