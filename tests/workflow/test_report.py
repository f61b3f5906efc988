"""The Snakemake report of a tiny suite: `snakemake --report` (HTML and zip) holds every table, figure and cell
with its caption and category; headless Chromium renders it offline, and the table and the figures are on the
page (skipped where Debian's chromium is not installed)."""

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from browser import CHROMIUM, colours, render, show_item
from fdabench.core.device_identity import planned_config
from fdabench.jobs.cell_plan import plan_digest
from workflows import TINY_PARAMS, workflow_environment

pytestmark = pytest.mark.pipeline

TABLE = "results/tiny/table1.html"
TABLE_FIGURE = "results/tiny/figures/table1_final.png"
ROUNDS_FIGURE = "results/tiny/figures/colored_digits_rounds.png"
CELLS_TABLE = "results/tiny/cells/colored_digits.html"


def _run(workdir: Path, *command: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        command, cwd=workdir, env=workflow_environment(workdir), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, " ".join(command) + "\n" + result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def report(tmp_path_factory, repo_root) -> Path:
    """The tiny suite built, and its report: results/report.html and results/report.zip."""
    root = tmp_path_factory.mktemp("report")
    shutil.copy(repo_root / "Snakefile", root / "Snakefile")
    shutil.copytree(repo_root / "workflow", root / "workflow")
    (root / "profiles").symlink_to("workflow/profiles")
    (root / "params.yaml").write_text(yaml.safe_dump({**TINY_PARAMS, "device": "cpu"}))
    _run(root, "snakemake", "--cores", "2")
    _run(root, "snakemake", "--report", "results/report.html")
    _run(root, "snakemake", "--report", "results/report.zip")
    return root


def _embedded(html: str, name: str) -> dict:
    """A JSON global the report's page is rendered from (`var results = {...};`)."""
    match = re.search(rf"var {name} = (\{{.*?\}});\n", html, re.DOTALL)
    assert match, f"no {name} in the report"
    return json.loads(match[1])


def test_report_holds_every_table_figure_and_cell(report):
    html = (report / "results/report.html").read_text(encoding="utf-8")
    results, categories = _embedded(html, "results"), _embedded(html, "categories")
    assert categories["Tables"]["table1"] == [TABLE, TABLE_FIGURE]
    assert categories["Figures"]["Per round"] == [ROUNDS_FIGURE]
    cells = categories["Cells"]["colored_digits"]
    assert len(cells) == 4 and categories["Cells"]["colored_digits · table"] == [CELLS_TABLE]
    assert results[TABLE]["mime_type"] == "text/html" and results[TABLE_FIGURE]["mime_type"] == "image/png"
    # captions say what is plotted, filled in for the item
    assert "one row per method family" in results[ROUNDS_FIGURE]["caption"]
    assert "published value a black diamond" in results[TABLE_FIGURE]["caption"]
    assert "table1: one row per method" in results[TABLE]["caption"]
    # each cell: its entry, and as its job's parameters the cell's name and the digest of the plan it ran with
    # (configuration and code fingerprint), never the configuration itself (no escaped JSON)
    labels = sorted(results[path]["labels"]["cell"] for path in cells)
    assert labels == [f"{m} · -90 · seed {s}" for m in ("fedgp", "source_only") for s in (0, 1)]
    cell = json.loads((report / cells[0]).read_text())
    parameters = results[cells[0]]["job_properties"]["params"]
    name = "{suite}/{experiment}/{method}/{target}/seed{seed}".format(**cell["cell"])
    assert name in parameters and plan_digest(planned_config(cell["config"]), cell["code"]) in parameters
    assert "{" not in parameters and "\\" not in parameters and "algorithm" not in parameters, parameters
    # the cells table lists each cell's device, seconds, code fingerprint and versions
    table = (report / CELLS_TABLE).read_text(encoding="utf-8")
    assert cell["code"]["fingerprint"][:12] in table and f"torch {cell['versions']['torch']}" in table
    assert "hparams.beta=0.5" in table and "train.rounds=3" in table  # differing, then shared settings
    # the workflow description names the suite; nothing is loaded from the network
    assert "fdabench suite <strong>tiny</strong>" in html
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?://", html)


def test_report_zip_for_big_suites(report):
    with zipfile.ZipFile(report / "results/report.zip") as archive:
        names = archive.namelist()
        assert "report/report.html" in names
        data = [name for name in names if name.startswith("report/data/raw/")]
        assert {Path(name).name for name in data} >= {"table1.html", "table1_final.png", "colored_digits_rounds.png"}
        assert len([name for name in data if name.endswith(".json")]) == 4


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_report_renders_in_chromium(report, tmp_path):
    html = report / "results/report.html"
    landing, screenshot = render(html, "", tmp_path)
    assert all(name in landing for name in ("Tables", "Figures", "Cells", "fdabench suite"))
    assert screenshot[:4] == b"\x89PNG" and colours(screenshot) > 50  # drawn, not a blank page

    table, screenshot = render(html, show_item(TABLE, "Tables", "table1", "html"), tmp_path)
    assert '<iframe src="data:text/html' in table and "table1: one row per method" in table
    assert colours(screenshot) > 50

    figure, screenshot = render(html, show_item(ROUNDS_FIGURE, "Figures", "Per round", "img"), tmp_path)
    assert '<img src="data:image/png' in figure and "one row per method family" in figure
    assert colours(screenshot) > 50

    cells, _ = render(
        html, "app.setView({navbarMode: 'subcategory', category: 'Cells', subcategory: 'colored_digits'})", tmp_path
    )
    assert all(f"fedgp · -90 · seed {seed}" in cells for seed in (0, 1))
