"""Text for the Snakemake report's captions, which are reStructuredText that docutils renders to HTML: a title from
params.yaml is shown as written and never read as markup (a `.. raw:: html` directive, a link, a role)."""

from __future__ import annotations


def rst_text(text: str) -> str:
    """`text` as literal inline reStructuredText: runs of whitespace (newlines included) as one space, and every
    character but letters, digits and spaces escaped with a backslash, which reStructuredText shows as the character
    itself; docutils then escapes it for HTML."""
    return "".join(
        character if character.isalnum() or character == " " else "\\" + character
        for character in " ".join(text.split())
    )
