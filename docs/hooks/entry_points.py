"""The project's entry points that the generated reference pages read, in one place.

When a module moves, only this file changes. Each function returns plain data; `reference.py` renders it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load_by_path(name: str, path: Path):
    """A test module loaded from its file (tests/ is no package; its own imports resolve through tests/)."""
    tests = str(REPO / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def cli_parser():
    """The `fdabench` command line's argparse parser."""
    from fdabench.cli import build_parser

    return build_parser()


def params_schema() -> dict:
    """The JSON schema of params.yaml, as `fdabench schema` writes it."""
    from fdabench.config import params_schema

    return params_schema()


def package_dir() -> Path:
    """The folder of the fdabench package (to read module docstrings for the layer table)."""
    import fdabench

    return Path(fdabench.__file__).resolve().parent


def layers() -> tuple[tuple[str, ...], ...]:
    """The import layers, bottom to top, as tests/repository/test_architecture.py checks them."""
    return _load_by_path("fdabench_docs_architecture", REPO / "tests" / "repository" / "test_architecture.py").LAYERS


def bad_input_cases() -> list:
    """The bad-input catalogue of tests/cli/test_bad_input.py: objects with `name`, `message` (a pattern), `run(tmp)`."""
    return _load_by_path("fdabench_docs_bad_input", REPO / "tests" / "cli" / "test_bad_input.py").CASES


def reproduction_summary_csv() -> Path:
    """The committed summary of paper-vs-ours on the `paper_cpu` suite."""
    return REPO / "docs" / "reproduction" / "paper_cpu.csv"


def reproduction_status(summary_csv: Path, suite: str) -> tuple[str, str, str]:
    """The status block rendered from the summary, with its begin and end markers."""
    import pandas as pd

    from fdabench.reproduction.paper_vs_ours import STATUS_BEGIN, STATUS_END, status_table

    summary = pd.read_csv(summary_csv, keep_default_na=False)
    return status_table(summary, suite), STATUS_BEGIN, STATUS_END
