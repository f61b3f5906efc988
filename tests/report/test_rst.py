"""A title in the Snakemake report's captions (`fdabench.report.rst`) shows as written: docutils renders it as one
paragraph of text, escaped, whatever markup it holds."""

import html

import pytest
from docutils.core import publish_parts

from fdabench.report.rst import rst_text

HOSTILE = [
    '<script>alert("x")</script> table',
    "`x <javascript:alert(1)>`_ table",
    "a\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\nb",
    ".. image:: http://example.org/x.png",
    "**bold** *emphasis* ``literal`` :math:`x` |substitution| [1]_ _`target`",
    "Table 1 (Fashion-MNIST, β = 0.5) — 100% \\ back\\slash",
]


def _body(text: str) -> str:
    return publish_parts(text, writer="html", settings_overrides={"report_level": 5})["body"]


@pytest.mark.parametrize("title", HOSTILE)
def test_a_title_is_one_paragraph_of_its_own_text(title):
    body = _body(f"{rst_text(title)}: one row per method")
    shown = " ".join(title.split())
    escaped = html.escape(shown, quote=False).replace('"', "&quot;")  # as docutils escapes text
    assert body == f"<p>{escaped}: one row per method</p>\n", body


def test_a_plain_title_is_unchanged():
    assert rst_text("table1") == "table1" and rst_text("Table 1 of 2") == "Table 1 of 2"
