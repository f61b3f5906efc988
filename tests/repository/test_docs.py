"""The documentation site: the generated reference pages cover what the code defines (every CLI subcommand,
every top-level params.yaml key, every import layer, every bad-input case), the reproduction status on the site
is the committed summary rendered, the README's links resolve, and `mkdocs build --strict` passes."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


reference = _load("fdabench_docs_reference", REPO / "docs" / "hooks" / "reference.py")


def _subcommand_lines(parser: argparse.ArgumentParser, prefix: str = "fdabench") -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                lines.append(f"{prefix} {name}")
                lines.extend(_subcommand_lines(subparser, f"{prefix} {name}"))
    return lines


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference.generate_pages()


def test_the_cli_reference_has_every_subcommand(pages):
    from fdabench.cli import build_parser

    commands = _subcommand_lines(build_parser())
    assert len(commands) >= 20
    headings = re.findall(r"^## (.+)$", pages["reference/cli.md"], re.MULTILINE)
    assert headings == commands


def test_the_params_reference_has_every_key(pages):
    from fdabench.config import params_schema

    schema = params_schema()
    page = pages["reference/params.md"]
    for key in schema["properties"]:
        assert f"\n## {key}\n" in page and f"| `{key}` |" in page, key
    for key in ("suites.<name>.experiments.<name>.dataset", "methods.<name>.algorithm", "data.mirror"):
        assert f"| `{key}` |" in page, key


def test_the_layer_table_has_every_layer_and_module(pages):
    layers = reference.entry_points.layers()
    page = pages["reference/layers.md"]
    for index, layer in enumerate(layers):
        for module in layer:
            assert f"| {index} | `{module}` |" in page, module


def test_the_bad_input_catalogue_lists_every_case_in_order(pages):
    cases = reference.entry_points.bad_input_cases()
    listed = re.findall(r"^\| ([^|]+?) \|", pages["reference/bad-input.md"], re.MULTILINE)[1:]  # skip the header
    assert listed == [case.name for case in cases]


def test_the_site_reproduction_status_is_the_committed_summary_rendered():
    import pandas as pd

    from fdabench.reproduction.paper_vs_ours import STATUS_BEGIN, STATUS_END, status_table

    summary = pd.read_csv(REPO / "docs" / "reproduction" / "paper_cpu.csv", keep_default_na=False)
    page = reference.fill_reproduction_status((REPO / "docs" / "reproduction.md").read_text(encoding="utf-8"))
    assert page.split(STATUS_BEGIN, 1)[1].split(STATUS_END, 1)[0].strip() == status_table(summary, "paper_cpu")


def test_the_readme_is_short_and_its_links_resolve():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local and all((REPO / link).exists() for link in local), [x for x in local if not (REPO / x).exists()]


def test_every_page_is_in_the_nav(pages):
    import yaml

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = re.findall(r"[\w/-]+\.md", str(config["nav"]))
    # docs/reproduction/<suite>/ (the archive and the pages regenerated from it) is left out of the site (exclude_docs)
    written = {
        str(p.relative_to(REPO / "docs"))
        for p in (REPO / "docs").rglob("*.md")
        if p.parent.parent != REPO / "docs" / "reproduction"
    }
    assert set(nav) == written | set(pages)


def test_mkdocs_build_strict_passes(tmp_path):
    pytest.importorskip("mkdocs")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def _first_commands(page: Path) -> list[str]:
    """The commands of a page's first bash block, comments dropped."""
    text = page.read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_quick_start_page_gives_the_readmes_commands():
    """One install line everywhere: the site's quick start is the README's (the lock included)."""
    assert _first_commands(REPO / "docs" / "quickstart.md") == _first_commands(REPO / "README.md")
