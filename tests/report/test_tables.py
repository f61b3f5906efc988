"""Tables from cells: tidy statistics, the Avg column, the paper layout, its HTML page."""

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from fdabench.report import tables
from fdabench.report.tables import (
    cells_html,
    format_value,
    html_page,
    html_table,
    markdown_table,
    paper_layout,
    settings_split,
    table_json,
    tidy_table,
)


@pytest.fixture
def cells():
    rows = []
    for method, offset in (("fedgp", 0.1), ("source_only", 0.0)):
        for target, base in (("a", 0.5), ("b", 0.7)):
            for seed, noise in ((0, 0.0), (1, 0.02)):
                rows.append(
                    {
                        "suite": "s",
                        "experiment": "exp",
                        "dataset": "d",
                        "method": method,
                        "algorithm": method,
                        "target": target,
                        "seed": seed,
                        "metric": "accuracy",
                        "final": base + offset + noise,
                    }
                )
    return pd.DataFrame(rows)


def test_tidy_statistics(cells):
    tidy = tidy_table(cells)
    row = tidy[(tidy.method == "fedgp") & (tidy.target == "a")].iloc[0]
    assert (
        row["mean"] == pytest.approx(0.61) and row["std"] == pytest.approx(0.02 / math.sqrt(2)) and row["n_seeds"] == 2
    )
    avg = tidy[(tidy.method == "fedgp") & (tidy.target == "Avg")].iloc[0]
    assert avg["mean"] == pytest.approx((0.6 + 0.8 + 0.62 + 0.82) / 4)
    assert list(tidy.method.unique()) == ["fedgp", "source_only"]  # order of first appearance
    assert list(tidy[tidy.method == "fedgp"].target) == ["a", "b", "Avg"]


def test_markdown_layout(cells):
    text = markdown_table(tidy_table(cells), title="T")
    lines = text.splitlines()
    assert lines[0] == "### T — each cell: mean (sample sd) over seeds"
    assert lines[2] == "| Method | exp a | exp b | exp Avg |"
    assert lines[4].startswith("| fedgp | 61.00 (1.41) | 81.00 (1.41) | 71.00 (1.41) |")


def test_json_metrics(cells):
    nested = table_json(tidy_table(cells))
    assert nested["exp"]["fedgp"]["a"]["mean"] == pytest.approx(0.61)


def test_format_value():
    assert format_value(0.5, float("nan"), "accuracy") == "50.00"
    assert format_value(0.123456, 0.01, "mse") == "0.1235 (0.01)"


def test_methods_on_unlabelled_target_data_are_marked(cells):
    cells = cells.assign(uses_unlabelled_target=cells["method"] == "fedgp")
    from fdabench.report.tables import unlabelled_target_methods

    marked = unlabelled_target_methods(cells)
    assert marked == ["fedgp"]
    text = markdown_table(tidy_table(cells), title="T", unlabelled_target=marked)
    assert "| fedgp † | 61.00 (1.41)" in text and "| source_only | " in text
    assert "† fedgp: trains on the target's unlabelled training data (100% of its training inputs" in text
    assert "†" not in markdown_table(tidy_table(cells))


def _cell_file(tmp_path, name, modules):
    import json

    from fdabench.cell.result import FORMAT

    identity = {"suite": "s", "experiment": "exp", "dataset": "d", "method": "fedgp", "algorithm": "fedgp"}
    payload = {
        "format": FORMAT,
        "status": "complete",
        "cell": {**identity, "target": "a", "seed": int(name[-1])},
        "metric": "accuracy",
        "final": 0.5,
        "code": {"fingerprint": "-".join(modules.values()), "modules": modules},
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(payload))
    return str(path)


def test_tables_refuse_cells_run_with_different_code_unless_asked(tmp_path, capsys):
    from fdabench.cli import main

    same = _cell_file(tmp_path, "seed0", {"fdabench.tensor_math.aggregation": "aaaa", "fdabench.methods.fda": "1111"})
    other = _cell_file(tmp_path, "seed1", {"fdabench.tensor_math.aggregation": "bbbb", "fdabench.methods.fda": "1111"})
    csv = tmp_path / "table.csv"
    assert main(["table", same, other, "--csv", str(csv)]) == 2
    message = capsys.readouterr().err
    assert f"{same} and {other} ran with different code of fdabench.tensor_math.aggregation (aaaa vs bbbb)" in message
    assert "--allow-mixed-code" in message and "fdabench status" in message
    assert not csv.exists()  # nothing written
    assert main(["table", same, other, "--csv", str(csv), "--allow-mixed-code"]) == 0
    assert csv.read_text().splitlines()[1].endswith(",2")
    # cells that share no module (or record none) are not compared
    unrelated = _cell_file(tmp_path, "seed2", {"fdabench.methods.dadil": "2222"})
    assert main(["table", same, unrelated, "--csv", str(csv)]) == 0


class _Rows(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.rows[-1].append(self.cell.strip())
            self.cell = None


def _table_rows(page: str) -> list[list[str]]:
    parser = _Rows()
    parser.feed(page)
    return [row for row in parser.rows if any(row)]


def test_html_table_has_the_markdown_cells(cells):
    """The report's HTML page shows exactly the Markdown table's cells, as a table, in UTF-8."""
    tidy = tidy_table(cells)
    page = html_table(tidy, "T", unlabelled_target=["fedgp"])
    rows = _table_rows(page)
    layout = paper_layout(tidy, ["fedgp"])
    assert rows[0][1:] == list(layout.columns)
    assert rows[-2:] == [
        [method, *cells] for method, cells in zip(layout.index, layout.to_numpy().tolist(), strict=True)
    ]
    assert [row[0] for row in rows[-2:]] == ["fedgp †", "source_only"]
    assert '<meta charset="utf-8">' in page and ">T — each cell: mean (sample sd) over seeds</caption>" in page
    assert "seeds per cell: 2." in page and "† fedgp: trains on the target" in page


def test_settings_split_shows_what_differs_per_cell_and_what_all_share():
    configs = [
        {"method": "fedgp", "seed": 0, "hparams": {"beta": 0.5, "mode": "projection"}, "train": {"rounds": 3}},
        {"method": "fedgp", "seed": 1, "hparams": {"beta": 0.5, "mode": "projection"}, "train": {"rounds": 3}},
        {"method": "source_only", "seed": 0, "hparams": {}, "train": {"rounds": 3}},
    ]
    rows, shared = settings_split(configs)
    assert rows == ['hparams.beta=0.5; hparams.mode="projection"'] * 2 + [""]
    assert shared == {"train.rounds": "3"}  # identity (method, seed) is in its own columns


HOSTILE = '<script>alert("x")</script>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"


def _no_markup_from(page: str) -> None:
    """No element the hostile text could start: the page's own tags only."""
    tags = set()

    class _Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.add(tag)

    _Tags().feed(page)
    assert "script" not in tags and "<script" not in page


def test_every_text_on_a_page_is_escaped():
    frame = pd.DataFrame(
        {f"{HOSTILE} column": [HOSTILE, "plain"]}, index=pd.Index([f"{HOSTILE} row", "b"], name=f"{HOSTILE} name")
    )
    frame.columns.name = f"{HOSTILE} columns"
    page = html_page([(frame, f"{HOSTILE} title", True)], [f"{HOSTILE} note"])
    _no_markup_from(page)
    for text in ("column", "row", "name", "columns", "title", "note"):
        assert f"{ESCAPED} {text}" in page, text
    assert f">{ESCAPED}</td>" in page


def test_a_hostile_method_and_title_are_escaped_on_the_table_and_cells_pages(cells, tmp_path):
    cells = cells.assign(method=cells["method"].replace({"fedgp": f"{HOSTILE} fedgp"}))
    page = html_table(tidy_table(cells), f"{HOSTILE} table", unlabelled_target=[f"{HOSTILE} fedgp"])
    _no_markup_from(page)
    assert f"{ESCAPED} table — each cell: mean (sample sd) over seeds</caption>" in page
    assert f"{ESCAPED} fedgp †</th>" in page
    paths = []
    for seed, method in enumerate((f"{HOSTILE} fedgp", "source_only")):
        identity = {"suite": "s", "experiment": "exp", "dataset": "d", "method": method, "algorithm": "fedgp"}
        identity |= {"target": "a", "seed": seed}
        cell = {"format": "fdabench.cell/1", "status": "complete", "cell": identity, "config": identity}
        cell |= {"metric": "accuracy", "final": 0.5, "notes": HOSTILE}
        path = tmp_path / f"seed{seed}.json"
        path.write_text(json.dumps(cell))
        paths.append(str(path))
    page = cells_html(paths, f"{HOSTILE} cells")
    _no_markup_from(page)
    assert f"{ESCAPED} cells</caption>" in page and f">{ESCAPED} fedgp</td>" in page


def test_every_html_page_is_written_by_the_one_autoescaping_template():
    """No module but report/tables.py writes HTML (a page, pandas' HTML, or an element of its own), and its template
    autoescapes: every page goes through `html_page`."""
    source = Path(tables.__file__).resolve().parents[1]
    writers = {
        path.relative_to(source).as_posix()
        for path in source.rglob("*.py")
        if re.search(r"<!DOCTYPE|</(?:html|body|table|tr|td|th|p)>|\.to_html\(", path.read_text(encoding="utf-8"))
    }
    assert writers == {"report/tables.py"}
    assert tables.PAGE.environment.autoescape is True


def test_methods_that_read_the_same_in_every_column_are_named_under_the_table(cells):
    chance = cells[cells.method == "source_only"].copy()
    chance["final"] = 0.1  # a constant prediction on ten balanced classes
    for method in ("kd3a", "fedprox"):
        rows = chance.assign(method=method, algorithm=method)
        cells = pd.concat([cells, rows], ignore_index=True)
    text = markdown_table(tidy_table(cells), "t")
    assert "kd3a, fedprox: the same value in every column (3), at this precision" in text
    assert "fedgp, " not in text and "source_only, " not in text  # rows that differ are not named
    assert "same value in every column" not in markdown_table(tidy_table(cells[cells.method != "kd3a"]), "t")
