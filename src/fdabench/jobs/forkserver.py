"""A per-user fork server for the workflow's jobs: torch is imported once, each job runs in a fresh fork.

Every training cell is its own Snakemake job. A fresh process spends about 3 s of CPU importing torch and
fdabench and 1.7 s more on torch.optim's first optimiser (it imports torch's compiler stack): more than a
demo cell's training, and more than most table and figure jobs' work. Every job command of the workflow
(`SERVED`: `fdabench train`, `prepare`, `table`, `figure`, ...) therefore hands its command line, working
directory, environment and stdout/stderr file descriptors to a server process that has paid these costs once;
the server forks one child per job, the child runs the command exactly as the CLI would and reports its exit
status. Jobs stay isolated processes and results are identical to running in-process (a test checks it).

* Messages use `multiprocessing.connection` over a Unix socket in a private (0700) directory; the stdout
  and stderr descriptors travel with `multiprocessing.reduction.sendfds`.
* The server is keyed by the Python executable, fdabench's and installed plugins' files and every installed
  distribution (name and version): any code change or package upgrade starts a new server. It exits after
  FDABENCH_FORKSERVER_IDLE seconds (default 120) without a new job.
* The server never runs a torch operation and never initialises CUDA, so forked children may.
* A client that is interrupted (e.g. Snakemake cancels the job) kills its child; a client killed with
  SIGKILL closes the connection, and the child ends itself.
* Off where a scheduler runs the jobs (SLURM, Kubernetes, PBS, LSF: each job may land on another node, and
  a server would outlive its allocation) and with FDABENCH_FORKSERVER=0; if the server cannot be reached
  the command runs in-process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Client, Connection
from multiprocessing.reduction import recvfds, sendfds
from pathlib import Path

from fdabench.core.devices import SCHEDULER_VARIABLES
from fdabench.core.readers import FileReadError, read_json

# The client (`fdabench train` in every Snakemake job) imports only what it needs to hand its job over: a few
# standard modules. What only the server or a server's start needs (subprocess, importlib.metadata through
# fdabench.core.plugins, torch) is imported where it is used.

ENABLE_VARIABLE = "FDABENCH_FORKSERVER"
IDLE_VARIABLE = "FDABENCH_FORKSERVER_IDLE"
IN_CHILD_VARIABLE = "FDABENCH_FORKSERVER_CHILD"
#: the commands the workflow's rules run as jobs (workflow/rules/*.smk), each handed to the server (a test checks
#: that this is every `fdabench` command a rule runs); a person's commands (status, validate, ...) run in-process
SERVED = frozenset(
    {
        "acquire",
        "cells-table",
        "compare",
        "export",
        "figure",
        "metrics",
        "partition",
        "plots",
        "prepare",
        "sweep",
        "table",
        "theory",
        "train",
        "train-group",
    }
)
#: what the server imports before it accepts jobs (torch._dynamo: what torch.optim's first optimiser imports)
PRELOAD = ("torch", "torch._dynamo", "numpy", "ot", "fdabench.cell.run")
START_TIMEOUT_SECONDS = 120
SOCKET_PATH_LIMIT = 104  # sun_path holds 108 bytes on Linux, 104 on macOS

Handler = Callable[[list[str]], int]


def enabled() -> bool:
    """Whether the workflow's jobs (`SERVED`) go through the fork server here."""
    if os.environ.get(ENABLE_VARIABLE, "1") == "0" or os.environ.get(IN_CHILD_VARIABLE) is not None:
        return False
    return hasattr(socket, "AF_UNIX") and not any(os.environ.get(name) for name in SCHEDULER_VARIABLES)


def _runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base:
        import tempfile

        base = tempfile.gettempdir()
    directory = Path(base) / f"fdabench-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{directory} must be owned by you with mode 0700")
    return directory


def installed_distributions() -> list[str]:
    """Every distribution on sys.path as its metadata folder name ('torch-2.9.0.dist-info'): name and version."""
    return sorted({name for _, name in _distribution_folders()})


def _distribution_folders() -> list[tuple[str, str]]:
    """(sys.path entry, metadata folder name) of every distribution on sys.path."""
    found = []
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found += [(entry or ".", name) for name in names if name.endswith((".dist-info", ".egg-info"))]
    return found


def _plugin_files(directory: Path) -> list[Path]:
    """`fdabench.core.plugins.plugin_source_files()`, with the scan of entry points (importlib.metadata: about 0.1 s,
    in every job's client) done once per set of installed distributions: the plugins' package folders are
    kept in `directory` under a key of every distribution's metadata folder and its modification time (an
    install, upgrade or removal changes it); their .py files are listed anew each time."""
    import json

    stamp = hashlib.sha256()
    for entry, name in _distribution_folders():
        with contextlib.suppress(OSError):
            stamp.update(f"{entry}/{name}:{os.stat(os.path.join(entry, name)).st_mtime_ns}\0".encode())
    cache = directory / f"plugins-{stamp.hexdigest()[:20]}.json"
    try:
        roots = [Path(root) for root in read_json(cache, "the plugin roots' cache")]
    except (FileReadError, TypeError):
        from fdabench.core.plugins import plugin_source_roots

        roots = plugin_source_roots()
        from fdabench.core.io import write_text_atomic

        write_text_atomic(cache, json.dumps([str(root) for root in roots]))
    # as fdabench.core.plugins.source_files, without importing it (it imports importlib.metadata)
    return sorted({path for root in roots for path in ([root] if root.suffix == ".py" else root.rglob("*.py"))})


def server_key(directory: Path | None = None) -> str:
    """Changes whenever the interpreter, fdabench's files, a plugin's files (`fdabench.core.plugins`) or any installed
    distribution change. `directory`: where the plugin scan is kept (the runtime folder; none: scanned anew)."""
    digest = hashlib.sha256(sys.executable.encode())
    for name in installed_distributions():
        digest.update(name.encode() + b"\0")
    package = Path(__file__).parents[1]  # src/fdabench
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        digest.update(f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}".encode())
    if directory is None:
        from fdabench.core.plugins import plugin_source_files

        plugin_files = plugin_source_files()
    else:
        plugin_files = _plugin_files(directory)
    for path in plugin_files:  # an edited plugin (installed with -e) gets a fresh server too
        info = path.stat()
        digest.update(f"{path}:{info.st_size}:{info.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


# -- client ----------------------------------------------------------------------------------------
def run(argv: Sequence[str]) -> int | None:
    """Run `fdabench <argv>` in a fork of the server; None if the server cannot be used."""
    try:
        connection = _connect()
    except (OSError, TimeoutError) as error:
        print(f"fdabench: fork server unavailable ({error}); running in-process", file=sys.stderr)
        return None
    with connection:
        sys.stdout.flush()
        sys.stderr.flush()
        connection.send({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)})
        with socket.socket(fileno=os.dup(connection.fileno())) as raw:
            sendfds(raw, [sys.stdout.fileno(), sys.stderr.fileno()])
        child = connection.recv()["pid"]

        def forward(signum, _frame):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signum)

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            finished = connection.recv()
        except (EOFError, OSError):
            print("fdabench: the job's process ended without reporting a status", file=sys.stderr)
            return 1
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        return int(finished["exit"])


def _connect() -> Connection:
    directory = _runtime_dir()
    key = server_key(directory)
    path = directory / f"{key}.sock"
    if len(os.fsencode(path)) >= SOCKET_PATH_LIMIT:
        raise OSError(f"socket path {path} is too long for a Unix socket; set XDG_RUNTIME_DIR to a shorter directory")
    connection = _try_connect(path)
    if connection is not None:
        return connection
    import subprocess

    with open(directory / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = _try_connect(path)
        if connection is not None:
            return connection
        log_path = directory / f"{key}.log"
        with open(log_path, "ab") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "fdabench", "forkserver", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            connection = _try_connect(path)
            if connection is not None:
                return connection
            if server.poll() is not None:
                raise OSError(f"the fork server exited with status {server.returncode} (log: {log_path})")
            time.sleep(0.05)
    raise TimeoutError(f"fork server did not start within {START_TIMEOUT_SECONDS}s (log: {directory / (key + '.log')})")


def _try_connect(path: Path) -> Connection | None:
    if not path.exists():
        return None
    try:
        return Client(str(path), family="AF_UNIX")
    except (ConnectionRefusedError, FileNotFoundError):
        return None


# -- server ----------------------------------------------------------------------------------------
def serve(path: str, handler: Handler) -> None:
    """Preload, then fork a child per connection that runs `handler(argv)`; exit when idle."""
    import importlib

    from fdabench.cell.plugin_fingerprint import warm_cache

    for module in PRELOAD:
        importlib.import_module(module)
    # Every child records its cell's code fingerprint: the modules are hashed once here, not in each child.
    # The server's key covers these files, so a changed file is only ever seen by a new server.
    warm_cache()
    idle_seconds = float(os.environ.get(IDLE_VARIABLE, "120"))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    temporary = f"{path}.{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(temporary)
    os.chmod(temporary, 0o600)
    listener.listen(64)
    os.replace(temporary, path)  # appear only when ready
    listener.settimeout(idle_seconds)
    try:
        while True:
            try:
                accepted, _ = listener.accept()
            except TimeoutError:
                break
            accepted.setblocking(True)
            if os.fork() == 0:
                listener.close()
                _child(Connection(accepted.detach()), handler)  # never returns
            accepted.close()
    finally:
        try:
            if os.stat(path).st_ino == os.fstat(listener.fileno()).st_ino:
                os.unlink(path)
        except OSError:
            pass
        listener.close()


def _exit_when_client_ends(connection: Connection) -> None:
    """The client holds the connection open until the child reports its exit status and sends nothing
    after the request. If the client goes away first (its job was killed, even with SIGKILL, which it
    cannot forward), the connection reaches end-of-file: end the child too, so that no orphan keeps
    computing a cell nobody waits for."""

    import threading

    def watch() -> None:
        with socket.socket(fileno=os.dup(connection.fileno())) as raw:
            try:
                while raw.recv(4096):
                    pass
            except OSError:
                pass
        os._exit(143)

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


def _child(connection: Connection, handler: Handler) -> None:
    import traceback

    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        request = connection.recv()
        with socket.socket(fileno=os.dup(connection.fileno())) as raw:
            stdout, stderr = recvfds(raw, 2)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.close(stdout)
        os.close(stderr)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[IN_CHILD_VARIABLE] = "1"
        sys.argv = ["fdabench", *request["argv"]]
        connection.send({"pid": os.getpid()})
        _exit_when_client_ends(connection)
        try:
            code = handler(request["argv"]) or 0
        except SystemExit as exit_request:
            code = exit_request.code if isinstance(exit_request.code, int) else (0 if exit_request.code is None else 1)
            if not isinstance(exit_request.code, int) and exit_request.code is not None:
                print(exit_request.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            connection.send({"exit": code})
        except Exception:
            pass
        os._exit(code)
