"""Nothing under src/fdabench writes a file except through the atomic writer (`fdabench.core.io`: atomic_path,
write_text_atomic, write_json_atomic; `fdabench.core.staging.atomic_folder` for a folder written as a whole): a
write call is allowed only where its path is the temporary path or staging folder the writer handed out (a name
bound by `with atomic_path(...) as name`, or assigned from one), or in the short list below, each with its reason.
Every write, these included, is refused over the running command's inputs (`fdabench.core.guard`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "fdabench"
WRITERS = (PACKAGE / "core" / "io.py", PACKAGE / "core" / "staging.py")

# calls that write a file at a path given as their first argument (or `path` keyword)
WRITING_FUNCTIONS = {"torch.save", "np.save", "numpy.save", "np.savez", "np.savez_compressed", "pickle.dump",
                     "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move", "os.replace",
                     "os.rename", "os.link", "os.symlink"}  # fmt: skip
WRITING_METHODS = {"write_text", "write_bytes", "savefig", "to_csv", "to_parquet", "rename", "replace"}
STAGING_WRITERS = {"atomic_path", "atomic_folder"}

# (module, function, call): writes that are not a command's outputs, or write inside a staging folder handed in
ALLOWED = {
    ("jobs/forkserver.py", "_connect", "open"): "the fork server's start lock and log, in its private runtime folder",
    ("jobs/forkserver.py", "serve", "os.replace"): "the server's socket appears when it listens",
    ("jobs/runlock.py", "hold_run_lock", "open"): "the workflow's run lock (flock), never a result",
    ("jobs/heal.py", "move_aside", "rename"): "a directory where a cell file belongs, moved aside, nothing deleted",
    ("speed/aggregation.py", "reset_peak_rss", "open"): "/proc/self/clear_refs resets the kernel's peak RSS counter",
    ("speed/gpu/packing.py", "run_level", "open"): "a packed worker's log, written by the process as it runs",
    ("flower/deploy.py", "_start", "open"): "a SuperLink's or SuperNode's log, written by the process as it runs",
    ("cli/train.py", "_appending", "open"): "a grouped cell's log, appended to as its train-group job runs",
    # every cell's code fingerprint reaches these two modules, so they keep their own staging folder (the steps of
    # core.staging.atomic_folder: a temporary folder beside the final one, renamed into place when complete)
    ("data/base.py", "save", "np.save"): "a prepared dataset's arrays, into its staging folder",
    ("data/base.py", "save", "write_text"): "a prepared dataset's header, into its staging folder",
    ("data/base.py", "save", "os.replace"): "the complete staging folder renamed into place",
    ("data/raw.py", "acquire", "write_text"): "an acquired dataset's manifest, into its staging folder",
    ("data/raw.py", "acquire", "os.replace"): "the complete staging folder renamed into place",
    # acquire (fdabench.data.raw) hands its staging folder to these
    ("data/raw.py", "_copy_tree", "shutil.copytree"): "copies the mirror into the staging folder",
    ("data/raw.py", "link_or_copy", "shutil.copy2"): "copies a mirror file into the staging folder",
    ("data/raw.py", "link_or_copy", "os.link"): "links a mirror file into the staging folder",
    ("data/raw.py", "download", "shutil.move"): "moves a download into the staging folder",
    ("data/raw.py", "_gunzip_all", "open"): "decompresses inside the staging folder (a raw dataset's finalize)",
}


def _name(node: ast.expr) -> str:
    return ast.unparse(node)


def _writes(call: ast.Call) -> ast.expr | None:
    """The path expression a call writes to, or None if the call writes no file."""
    function = call.func
    name = _name(function)
    if isinstance(function, ast.Name) and function.id == "open" or name.endswith(("gzip.open", "tarfile.open")):
        mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
        if (
            isinstance(mode, ast.Constant)
            and isinstance(mode.value, str)
            and set(mode.value.split(":")[0]) & set("wax+")
        ):
            return call.args[0]
        return None
    if name in WRITING_FUNCTIONS:
        return call.args[1] if name in ("torch.save", "pickle.dump") else call.args[0 if "save" in name else -1]
    if isinstance(function, ast.Attribute) and function.attr in WRITING_METHODS:
        if function.attr in ("to_csv", "to_parquet", "to_json", "savefig", "replace", "rename"):
            if function.attr in ("replace", "rename") and not (call.args and _looks_like_path(call.func.value)):
                return None  # str.replace, DataFrame.rename(columns=...)
            return call.args[0] if call.args else None  # to_csv() with no path returns the text
        return function.value
    if isinstance(function, ast.Attribute) and function.attr == "save" and "Image" in _name(function.value):
        return call.args[0]
    return None


def _looks_like_path(node: ast.expr) -> bool:
    text = _name(node)
    return any(word in text.lower() for word in ("path", "file", "folder", "result", "partial", "staging", "tmp"))


def _names(node: ast.AST) -> set[str]:
    return {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}


def _staged_names(function: ast.AST) -> set[str]:
    """Names bound by `with atomic_path(...) as name` / `atomic_folder(...)` in `function`, and the names assigned
    from them (`path = staging / "x.csv"`)."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and _name(call.func) in STAGING_WRITERS and item.optional_vars:
                    names.add(_name(item.optional_vars))
    assignments = [node for node in ast.walk(function) if isinstance(node, ast.Assign)]
    while True:
        derived = {_name(t) for node in assignments if _names(node.value) & names for t in node.targets} - names
        if not derived:
            return names
        names |= derived


def unguarded_writes(source: str, module: str) -> list[str]:
    """'module:line function call' for every write in `source` that does not go through the one writer."""
    found = []

    def visit(node: ast.AST, function: str, staged: set[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):  # its writes are its own
                visit(child, child.name, staged | _staged_names(child))
                continue
            target = _writes(child) if isinstance(child, ast.Call) else None
            if target is not None:
                name = _name(child.func)
                call = name if name in WRITING_FUNCTIONS or "." not in name else name.split(".")[-1]
                if not (_names(target) & staged or (module, function, call) in ALLOWED):
                    found.append((child.lineno, f"{module}:{child.lineno} {function} {name}"))
            visit(child, function, staged)

    visit(ast.parse(source), "<module>", set())
    return [line for _, line in sorted(set(found))]


def test_nothing_under_src_writes_a_file_except_through_the_one_writer():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path not in WRITERS:
            found += unguarded_writes(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    assert not found, "write through fdabench.core.io (atomic_path, write_*_atomic) or core.staging:\n" + (
        "\n".join(found)
    )


def test_every_allowed_exception_is_still_there():
    """An exception whose code moved or went would silently allow a new write of the same name."""
    present = set()
    for module, function, call in ALLOWED:
        tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
                calls = [_name(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)]
                if any(name == call or name.endswith(f".{call}") for name in calls):
                    present.add((module, function, call))
    assert present == set(ALLOWED), set(ALLOWED) - present


def test_the_check_finds_each_kind_of_write_outside_the_writer():
    source = """
def bad(path, frame, figure, tensor, image):
    open(path, "w").write("x")
    Path(path).write_text("x")
    frame.to_csv(path)
    figure.savefig(path)
    torch.save(tensor, path)
    np.save(path, tensor)
    Image.fromarray(image).save(path)
    with gzip.open(path, "wb") as handle:
        pass

def good(path, frame):
    with atomic_path(path) as tmp:
        frame.to_csv(tmp)
        open(tmp, "w")
    with atomic_folder(path) as staging:
        np.save(staging / "x.npy", frame)
    frame.to_csv(index=False)
    open(path).read()
    "a-b".replace("-", "_")
"""
    found = unguarded_writes(source, "m.py")
    assert [line.split()[-1] for line in found] == [
        "open", "Path(path).write_text", "frame.to_csv", "figure.savefig", "torch.save", "np.save",
        "Image.fromarray(image).save", "gzip.open",
    ]  # fmt: skip
