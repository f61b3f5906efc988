"""The arguments that name files a command reads, declared where each argument is added (`reads`), so that every one
of them can be found from the parser (`file_inputs`) and given the same bad files (tests/cli/test_file_arguments.py:
missing, empty, binary, truncated, a directory, another kind of fdabench file)."""

from __future__ import annotations

import argparse

#: what an input argument names -> what it is, as a message says it
INPUT_KINDS = {
    "params": "a params file (YAML)",
    "cell": "a cell result (JSON)",
    "cell_plan": "a cell's plan (JSON)",
    "table": "a table's metrics (JSON)",
    "archive": "a reproduction archive (.jsonl.gz)",
    "equivalences": "a code-equivalence record (JSON)",
    "lock": "a lock file (requirements.lock)",
    "partition": "a partition (JSON)",
    "theory_init": "a theory check's initial quantities (JSON)",
    "bench_gpu": "a GPU bench result (JSON)",
    "markdown": "a Markdown page with a block fdabench fills in",
    "prepared": "a prepared data folder",
    "flower_export": "the folder `fdabench flower export` writes",
}
#: the kinds that name a folder rather than a file
FOLDER_KINDS = {"prepared", "flower_export"}

_ATTRIBUTE = "fdabench_reads"


def reads(action: argparse.Action, kind: str) -> argparse.Action:
    """Declare that the argument `action` names input(s) of `kind` (a key of INPUT_KINDS); returns `action`."""
    if kind not in INPUT_KINDS:
        raise ValueError(f"unknown input kind {kind!r}; one of {', '.join(INPUT_KINDS)}")
    setattr(action, _ATTRIBUTE, kind)
    return action


def input_kind(action: argparse.Action) -> str | None:
    """The kind of input `action` names, or None when it names none."""
    return getattr(action, _ATTRIBUTE, None)


def file_inputs(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], dict]:
    """{sub-command words: {argument (its first option string, or its name): kind}} for every sub-command of
    `parser` with at least one declared input."""
    found: dict[tuple[str, ...], dict] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.update(file_inputs(child, (*prefix, name)))
    inputs = {
        (action.option_strings[0] if action.option_strings else action.dest): input_kind(action)
        for action in parser._actions
        if input_kind(action) is not None
    }
    if inputs:
        found[prefix] = inputs
    return found
