"""The Snakemake report's landing page (workflow/report/workflow.rst) as Snakemake renders it (Jinja2, its section
links, then docutils): it links only the sections the suite's report has, and names every configuration file the
run merged."""

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes
from docutils.core import publish_doctree, publish_parts
from jinja2 import Environment

from fdabench.report.rst import built_from

LANDING = Path(__file__).resolve().parents[2] / "workflow/report/workflow.rst"
#: the link targets Snakemake appends to the page (snakemake.report.auto_report), one per category and file
LINKS = textwrap.dedent("""

.. _Workflow: javascript:show_panel('workflow')
.. _Statistics: javascript:show_panel('statistics')
{% for cat, catresults in categories|dictsort %}
.. _{{ cat.name }}: javascript:app.showCategory('{{ cat.name|urlencode }}')
{% endfor %}
{% for res in files %}
.. _{{ res.target }}: javascript:app.showResultInfo('{{ res.path|urlencode }}')
{% endfor %}
""")


class Category(SimpleNamespace):
    def __lt__(self, other):
        return self.name < other.name

    def __hash__(self):
        return hash(self.name)


def _rendered(names: list[str], built: str = "params.yaml") -> str:
    globals_ = {"REPORT_BUILT_FROM": built}
    files = [
        SimpleNamespace(
            target="t.html", path="results/s/t.html", job=SimpleNamespace(rule=SimpleNamespace(module_globals=globals_))
        )
    ]
    text = Environment(trim_blocks=True, lstrip_blocks=True).from_string(LANDING.read_text() + LINKS)
    return text.render(
        snakemake=SimpleNamespace(config={"suite": "s"}),
        categories={Category(name=name): {} for name in names},
        files=files,
    )


def _messages(rst: str) -> list[str]:
    """docutils' complaints about the page: the system messages Snakemake's page would show under "Docutils System
    Messages", and the text they mark as problematic."""
    html = publish_parts(rst, writer="html", settings_overrides={"halt_level": 5, "warning_stream": False})
    tree = publish_doctree(rst, settings_overrides={"halt_level": 5, "warning_stream": False})
    problems = [
        node.astext() for node in tree.findall(lambda node: isinstance(node, nodes.problematic | nodes.system_message))
    ]
    return problems + (["System Messages"] if "System Message" in html["html_body"] else [])


@pytest.mark.parametrize(
    "names",
    [
        ["Tables", "Figures", "Cells"],
        ["Sweep", "Cells"],
        ["Tables", "Figures", "Paper vs ours", "Theory checks", "Cells"],
    ],
)
def test_the_landing_page_links_only_the_sections_there_are(names):
    rst = _rendered(names)
    assert _messages(rst) == []
    html = publish_parts(rst, writer="html", settings_overrides={"report_level": 5})["body"]
    for section in ("Tables", "Figures", "Sweep", "Cells"):
        assert (f"showCategory(&#x27;{section}&#x27;)" in html or f"showCategory('{section}')" in html) == (
            section in names
        ), section


def test_the_landing_page_names_every_file_the_configuration_was_merged_from(tmp_path):
    built = built_from(["/elsewhere/mine.yaml", "params.yaml"], ["/elsewhere/mine.yaml"], {"suite": "tiny"}, tmp_path)
    assert built == (
        "params\\.yaml, \\/elsewhere\\/mine\\.yaml and the command line's --config suite\\=tiny (merged in this order)"
    )
    assert built_from(["params.yaml"], [], {}, tmp_path) == "params\\.yaml"
    html = publish_parts(_rendered(["Tables"], built), writer="html")["body"]
    assert "Built from params.yaml, /elsewhere/mine.yaml and the command line's --config suite=tiny" in html
