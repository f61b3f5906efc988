"""fdabench.core.readers: one error type for every file read, naming the file; and, over the source, no file read
anywhere but in the reader module or inside `with reading(path, what)`."""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest

from fdabench.core.readers import (
    FileReadError,
    MissingFileError,
    read_gzip,
    read_json,
    read_json_object,
    read_text,
    reading,
)

SOURCE = Path(__file__).resolve().parents[2] / "src" / "fdabench"
READER_MODULE = SOURCE / "core" / "readers.py"

#: calls that read a file, by the last part of their dotted name: (module or object, attribute)
_READ_FUNCTIONS = {
    ("json", "load"),
    ("pickle", "load"),
    ("np", "load"),
    ("numpy", "load"),
    ("torch", "load"),
    ("gzip", "open"),
    ("gzip", "decompress"),
    ("tarfile", "open"),
    ("zipfile", "ZipFile"),
    ("Image", "open"),
    ("io", "loadmat"),
    ("scipy.io", "loadmat"),
}
#: methods that read whatever object they are called on (a Path)
_READ_METHODS = {"read_text", "read_bytes"}
#: pandas readers: any `pd.read_*`
_PANDAS = {"pd", "pandas"}

#: reads that are not of an input file, each with its reason: (module path under src/fdabench, function)
ALLOWED = {
    ("core/io.py", "atomic_path"): "opens the file it has just written, to fsync it",
    ("speed/aggregation.py", "peak_rss_bytes"): "reads /proc/self/status, which the kernel writes",
    ("speed/gpu/stages.py", "cpu_name"): "reads /proc/cpuinfo, which the kernel writes",
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _mode(call: ast.Call, position: int) -> str | None:
    """The constant `mode` of an open call (None when it is not a constant); "r" when it is not given."""
    given = call.args[position] if len(call.args) > position else None
    given = next((k.value for k in call.keywords if k.arg == "mode"), given)
    if given is None:
        return "r"
    return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None


def _reads(call: ast.Call) -> bool:
    function = call.func
    if isinstance(function, ast.Name) and function.id == "open":
        mode = _mode(call, 1)
        return mode is None or not set(mode) & set("wax+")
    if not isinstance(function, ast.Attribute):
        return False
    owner = _dotted(function.value)
    if function.attr in _READ_METHODS:
        return True
    if function.attr == "open" and not isinstance(function.value, ast.Name):  # Path(...).open, path.open
        mode = _mode(call, 0)
        return mode is None or not set(mode) & set("wax+")
    if function.attr.startswith("read_") and owner in _PANDAS:
        return True
    return (owner, function.attr) in _READ_FUNCTIONS or (owner.rsplit(".", 1)[-1], function.attr) in _READ_FUNCTIONS


def _names_a_reader(node: ast.AST) -> bool:
    """`open`, `gzip.open`, `np.load`, ... named other than as the function of a call."""
    if isinstance(node, ast.Name):
        return node.id == "open" and isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return (owner, node.attr) in _READ_FUNCTIONS or (owner.rsplit(".", 1)[-1], node.attr) in _READ_FUNCTIONS
    return False


def _guarded(with_node: ast.With | ast.AsyncWith) -> bool:
    return any(
        isinstance(item.context_expr, ast.Call) and _dotted(item.context_expr.func).endswith("reading")
        for item in with_node.items
    )


def unguarded_reads(source: str, relative: str) -> list[tuple[str, str, int, str]]:
    """(`relative`, function, line, call) for each file read in the module `source` outside `with reading(...)`."""
    tree = ast.parse(source)
    found: list[tuple[str, str, int, str]] = []

    def visit(node: ast.AST, function: str, guarded: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, (ast.With, ast.AsyncWith)) and _guarded(node):
            guarded = True
        if isinstance(node, ast.Call) and _reads(node) and not guarded:
            found.append((relative, function, node.lineno, ast.unparse(node.func)))
        elif _names_a_reader(node) and not guarded:  # passed on as a value: `opener = gzip.open if ... else open`
            found.append((relative, function, node.lineno, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.Call) and child is node.func:  # the called function: judged above, by the call
                for grandchild in ast.iter_child_nodes(child):
                    visit(grandchild, function, guarded)
            else:
                visit(child, function, guarded)

    visit(tree, "<module>", False)
    return found


def test_every_file_read_goes_through_the_reader_module():
    """grep, by syntax: a read outside fdabench.core.readers and `with reading(...)` would fail with its own error
    type and, often, without the file's name. An exception that no longer reads anything unguarded must go too."""
    modules = [path for path in sorted(SOURCE.rglob("*.py")) if path != READER_MODULE]
    reads = [
        read
        for path in modules
        for read in unguarded_reads(path.read_text(encoding="utf-8"), path.relative_to(SOURCE).as_posix())
    ]
    excepted = set(ALLOWED)
    offenders = [
        f"{module}:{line} {function}: {call}"
        for module, function, line, call in reads
        if (module, function) not in excepted
    ]
    assert offenders == [], "file reads outside fdabench.core.readers:\n" + "\n".join(offenders)
    assert excepted - {(module, function) for module, function, _, _ in reads} == set(), "exceptions to remove"


def test_the_source_check_sees_each_kind_of_read():
    """The check above catches each kind of read it claims to (a check that sees nothing passes trivially)."""
    reads = [
        "open(p)",
        "open(p, 'rb')",
        "Path(p).read_text()",
        "p.read_bytes()",
        "json.load(h)",
        "np.load(p)",
        "torch.load(p)",
        "gzip.open(p)",
        "pd.read_csv(p)",
        "Image.open(p)",
        "scipy.io.loadmat(p)",
        "tarfile.open(p)",
        "opener = gzip.open if p else open",  # two readers passed on as values
    ]
    body = "\n".join(f"    {call}" for call in reads)
    not_reads = "    open(p, 'w')\n    gzip.GzipFile\n    with reading(p, 'x'):\n        open(p)\n"
    found = unguarded_reads(f"def probe(p, h):\n{body}\n{not_reads}", "probe.py")
    assert [line for _, _, line, _ in found] == [*range(2, len(reads) + 2), len(reads) + 1], found  # one line each


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file"),
        (b"", "is empty"),
        (b'{"format": "fdabench.cell/1", "metr', "not valid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not text"),
    ],
    ids=["missing", "empty", "truncated", "binary"],
)
def test_read_json_names_the_file_and_the_problem(tmp_path, content, problem):
    path = tmp_path / "cell.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(FileReadError) as caught:
        read_json(path, "a cell result")
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_a_missing_file_is_still_a_file_not_found_error(tmp_path):
    with pytest.raises(MissingFileError) as caught:
        read_text(tmp_path / "absent.yaml", "a params file")
    assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, FileReadError)


def test_a_directory_is_refused_as_one(tmp_path):
    with pytest.raises(FileReadError, match="is a directory, not a params file") as caught:
        read_text(tmp_path, "a params file")
    assert not isinstance(caught.value, FileNotFoundError)


def test_read_json_object_refuses_a_list(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(FileReadError, match=r"x\.json: holds a JSON list, not a table"):
        read_json_object(path, "a table")


def test_a_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(b"\x00" * 5000)[:-20])
    with pytest.raises(FileReadError, match=r"idx3-ubyte\.gz: is truncated") as caught:
        read_gzip(path, "an idx file")
    assert isinstance(caught.value.__cause__, EOFError)


def test_reading_leaves_an_interrupt_alone(tmp_path):
    with pytest.raises(KeyboardInterrupt), reading(tmp_path / "x", "a file"):
        raise KeyboardInterrupt


def test_a_message_is_one_line_whatever_the_library_said(tmp_path):
    with pytest.raises(FileReadError) as caught, reading(tmp_path / "m.csv", "a manifest"):
        raise ValueError("line one\nline two\n\tline three")
    assert "\n" not in str(caught.value) and "line one line two line three" in str(caught.value)


def test_json_of_the_wrong_shape_is_named(tmp_path):
    path = tmp_path / "sites.json"
    path.write_text(json.dumps({"format": "fdabench.cell/1"}))
    expected = r"sites\.json: is not a Flower export .*'sites'"
    with pytest.raises(FileReadError, match=expected), reading(path, "a Flower export"):
        read_json(path)["sites"]
