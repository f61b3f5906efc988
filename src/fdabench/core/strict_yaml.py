"""Strict YAML for params files: a key repeated in one mapping is refused with both line numbers (plain YAML keeps
the last value without a word), and aliases may not expand a document beyond `MAX_EXPANDED_NODES` values (nested
aliases, "a billion laughs", would otherwise be expanded by every later step for minutes). Loading stays safe
(the safe loader: plain data only) and imports nothing of the library, so the Snakefile checks its config files
with it before anything else."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from fdabench.core.errors import ParamsError
from fdabench.core.formats import describe, kind_of
from fdabench.core.readers import FileReadError, MissingFileError, read_text

#: values (mappings, lists, scalars) a params document may hold once its aliases are expanded; params.yaml holds
#: about 2,600
MAX_EXPANDED_NODES = 100_000
MERGE_TAG = "tag:yaml.org,2002:merge"
#: libyaml's parser where PyYAML has it (about 6 times faster), with the safe constructor either way
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str, where: str) -> Any:
    """The data of YAML `text`, read strictly (`node_problem`); ParamsError naming `where` and the problem otherwise."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problem = node_problem(node)
        if problem:
            raise ParamsError(f"{where}: {problem}")
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        message = " ".join(str(error).replace('in "<unicode string>", ', "").replace('in "<string>", ', "").split())
        raise ParamsError(f"{where} is not valid YAML: {message}") from None
    finally:
        loader.dispose()


def read_params_file(path: str | os.PathLike) -> Any:
    """A params (or suite) file's mapping, read strictly (`load_yaml_text`); a missing path, a folder, a file that is
    not text, an empty one, one that holds no mapping or a file of another fdabench kind is a FileReadError."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(path, "does not exist; pass the params file (--params params.yaml)")
    if not path.is_file():
        raise FileReadError(path, "is not a file; pass the params file (--params params.yaml)")
    data = load_yaml_text(read_text(path, "a params file (YAML text)"), str(path))
    if data is None:
        raise FileReadError(path, "is empty; a params file is a YAML mapping (keys suite, suites, ...)")
    if not isinstance(data, dict):
        raise FileReadError(path, f"holds a YAML {type(data).__name__}, not a mapping (keys suite, suites, ...)")
    if kind_of(data) is not None:
        raise FileReadError(path, f"is {describe(kind_of(data))}, not a params file; pass a params file (params.yaml)")
    return data


def check_params_files(paths: Iterable[str | os.PathLike]) -> None:
    """Read each file strictly, for the problems only (the Snakefile's config files, which Snakemake reads without
    these checks)."""
    for path in paths:
        read_params_file(path)


def node_problem(root: yaml.Node) -> str | None:
    """A repeated key in a mapping of the document (the first, in document order), or aliases that expand it beyond
    `MAX_EXPANDED_NODES` values; None when there is neither. Each node object is visited once, so the time is
    linear in the document as written."""
    if expanded_size(root, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
        return (
            f"aliases expand the document beyond {MAX_EXPANDED_NODES} values (nested or recursive aliases); write the "
            "settings out, or use fewer levels of aliases"
        )
    repeats = [repeat for node in _distinct_nodes(root) for repeat in _repeated_keys(node)]
    if not repeats:
        return None
    line, key, first = min(repeats)
    return (
        f"line {line} repeats key {key!r} of the mapping that gives it at line {first} (YAML would keep the last "
        "value); remove one of them"
    )


def _repeated_keys(node: yaml.Node) -> list[tuple[int, str, int]]:
    """(line, key, line of its first occurrence) of each key a mapping node repeats (`<<` merges are overridden on
    purpose, so they are not repeats)."""
    if not isinstance(node, yaml.MappingNode):
        return []
    first: dict[tuple[str, str], int] = {}
    repeats = []
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:
            continue
        line = key.start_mark.line + 1
        if (key.tag, key.value) in first:
            repeats.append((line, key.value, first[key.tag, key.value]))
        else:
            first[key.tag, key.value] = line
    return repeats


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _distinct_nodes(root: yaml.Node) -> list[yaml.Node]:
    seen: dict[int, yaml.Node] = {}
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            pending += _children(node)
    return list(seen.values())


def expanded_size(root: yaml.Node, limit: int) -> int:
    """How many values `root` holds with every alias expanded, capped at limit + 1 (a recursive alias: limit + 1).
    Depth first without recursion; a node reached again while its own children are open is a recursive alias."""
    OPEN = -1
    sizes: dict[int, int] = {}
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, children_done = pending.pop()
        if children_done:
            sizes[id(node)] = min(1 + sum(sizes[id(child)] for child in _children(node)), limit + 1)
        elif sizes.get(id(node)) == OPEN:
            return limit + 1
        elif id(node) not in sizes:
            sizes[id(node)] = OPEN
            pending.append((node, True))
            pending += [(child, False) for child in _children(node) if sizes.get(id(child), OPEN) == OPEN]
    return sizes[id(root)]
