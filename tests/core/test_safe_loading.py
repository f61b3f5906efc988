"""Loading never executes data: tensor files load with weights_only=True, YAML with the safe loader, NumPy
arrays without pickles, and nothing imports pickle. Checked on every call in the package's source."""

import ast
from pathlib import Path

import fdabench

PACKAGE = Path(fdabench.__file__).resolve().parent
WORKFLOW = Path(__file__).resolve().parents[2] / "workflow"


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name):
                keywords = {k.arg: k.value for k in node.keywords}
                yield f"{owner.id}.{node.func.attr}", keywords, node


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")
    for path in sorted([*WORKFLOW.rglob("*.smk"), WORKFLOW.parent / "Snakefile"]):
        yield path, path.read_text(encoding="utf-8")


def _is_true(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def test_every_load_is_a_safe_load():
    unsafe, torch_loads = [], 0
    for path, text in _sources():
        if path.suffix != ".py":  # rule files: a textual check (they are not plain Python)
            if "yaml.load(" in text or "torch.load(" in text or "pickle" in text:
                unsafe.append(f"{path}: yaml.load/torch.load/pickle in a rule file")
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(name.split(".")[0] in ("pickle", "dill", "cloudpickle") for name in names):
                    unsafe.append(f"{path}:{node.lineno}: imports pickle")
        for name, keywords, node in _calls(tree):
            where = f"{path}:{node.lineno}: {name}"
            if name == "torch.load":
                torch_loads += 1
                if not _is_true(keywords.get("weights_only")):
                    unsafe.append(f"{where} without weights_only=True")
            elif name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load", "yaml.load_all"):
                unsafe.append(f"{where}: use yaml.safe_load")
            elif name == "np.load" and _is_true(keywords.get("allow_pickle")):
                unsafe.append(f"{where} with allow_pickle=True")
    assert not unsafe, "\n".join(unsafe)
    assert torch_loads >= 1  # the check sees the pretrained-weights load


def test_the_checker_would_catch_an_unsafe_load():
    tree = ast.parse("import torch, yaml\ntorch.load(p)\nyaml.load(f)\ntorch.load(p, weights_only=True)\n")
    found = [(name, _is_true(k.get("weights_only"))) for name, k, _ in _calls(tree)]
    assert found == [("torch.load", False), ("yaml.load", False), ("torch.load", True)]
