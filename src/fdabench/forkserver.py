"""A per-user fork server for training jobs: torch is imported once, each job runs in a fresh fork.

Every training cell is its own Snakemake job, and importing torch costs about 3 s of CPU per process,
more than a demo cell's training. `fdabench train` therefore hands its command line, working directory,
environment and stdout/stderr file descriptors to a server process that has already imported torch and
fdabench; the server forks one child per job, the child runs the command exactly as the CLI would and
reports its exit status. Jobs stay isolated processes and results are identical to running in-process.

* The server is keyed by the Python executable and the versions and files of fdabench and torch: any
  code change starts a new server. It listens on a Unix socket in a private (0700) directory and exits
  after FDABENCH_FORKSERVER_IDLE seconds (default 120) without a new job.
* The server never runs a torch operation and never initialises CUDA, so forked children may.
* A client that is interrupted (e.g. Snakemake cancels the job) kills its child.
* FDABENCH_FORKSERVER=0 disables it; if the server cannot be reached the command runs in-process.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import threading
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Sequence

ENABLE_VARIABLE = "FDABENCH_FORKSERVER"
IDLE_VARIABLE = "FDABENCH_FORKSERVER_IDLE"
IN_CHILD_VARIABLE = "FDABENCH_FORKSERVER_CHILD"
PRELOAD = ("torch", "numpy", "ot", "fdabench.methods", "fdabench.data", "fdabench.federation.rounds", "fdabench.cli")
START_TIMEOUT_SECONDS = 120


def enabled() -> bool:
    return os.environ.get(ENABLE_VARIABLE, "1") != "0" and os.environ.get(IN_CHILD_VARIABLE) is None and hasattr(socket, "AF_UNIX")


def _runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    directory = Path(base) / f"fdabench-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    info = directory.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{directory} must be owned by you with mode 0700")
    return directory


def server_key() -> str:
    """Changes whenever the interpreter, fdabench's files or the installed torch change."""
    from importlib.metadata import PackageNotFoundError, version

    import fdabench

    digest = hashlib.sha256(sys.executable.encode())
    for name in ("torch", "numpy"):
        try:
            digest.update(f"{name}={version(name)}".encode())
        except PackageNotFoundError:
            pass
    package = Path(fdabench.__file__).parent
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        digest.update(f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


# -- messages: 4-byte length + JSON --------------------------------------------------------------
def _send(connection: socket.socket, payload: dict, fds: Sequence[int] = ()) -> None:
    data = json.dumps(payload).encode()
    message = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(connection, [message], list(fds))
    else:
        connection.sendall(message)


def _receive_exact(connection: socket.socket, size: int) -> bytes:
    chunks = b""
    while len(chunks) < size:
        chunk = connection.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed")
        chunks += chunk
    return chunks


def _receive(connection: socket.socket, with_fds: int = 0) -> tuple[dict, list[int]]:
    fds: list[int] = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(connection, 4, with_fds)
        if len(data) < 4:
            data += _receive_exact(connection, 4 - len(data))
        header = data
    else:
        header = _receive_exact(connection, 4)
    (size,) = struct.unpack("!I", header[:4])
    return json.loads(_receive_exact(connection, size)), fds


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
        request = {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ)}
        _send(connection, request, fds=[sys.stdout.fileno(), sys.stderr.fileno()])
        started, _ = _receive(connection)
        child = started["pid"]

        def forward(signum, _frame):
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

        previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            finished, _ = _receive(connection)
        except ConnectionError:
            print("fdabench: the job's process ended without reporting a status", file=sys.stderr)
            return 1
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        return int(finished["exit"])


def _connect() -> socket.socket:
    directory = _runtime_dir()
    key = server_key()
    path = directory / f"{key}.sock"
    connection = _try_connect(path)
    if connection is not None:
        return connection
    with open(directory / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = _try_connect(path)
        if connection is not None:
            return connection
        log = open(directory / f"{key}.log", "ab")
        subprocess.Popen(
            [sys.executable, "-m", "fdabench.forkserver", str(path)],
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
            time.sleep(0.05)
    raise TimeoutError(f"fork server did not start within {START_TIMEOUT_SECONDS}s (log: {directory / (key + '.log')})")


def _try_connect(path: Path) -> socket.socket | None:
    if not path.exists():
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        connection.close()
        return None
    return connection


# -- server ----------------------------------------------------------------------------------------
def serve(path: str) -> None:
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
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
                connection, _ = listener.accept()
            except socket.timeout:
                break
            if os.fork() == 0:
                listener.close()
                _child(connection)  # never returns
            connection.close()
    finally:
        try:
            if os.stat(path).st_ino == os.fstat(listener.fileno()).st_ino:
                os.unlink(path)
        except OSError:
            pass
        listener.close()


def _exit_when_client_ends(connection: socket.socket) -> None:
    """The client holds the connection open until the child reports its exit status and sends nothing
    after the request. If the client goes away first (its job was killed, even with SIGKILL, which it
    cannot forward), the connection reaches end-of-file: end the child too, so that no orphan keeps
    computing a cell nobody waits for."""

    def watch() -> None:
        try:
            while connection.recv(4096):
                pass
        except OSError:
            pass
        os._exit(143)

    threading.Thread(target=watch, name="client-watch", daemon=True).start()


def _child(connection: socket.socket) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        connection.settimeout(None)
        request, fds = _receive(connection, with_fds=2)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[IN_CHILD_VARIABLE] = "1"
        sys.argv = ["fdabench", *request["argv"]]
        _send(connection, {"pid": os.getpid()})
        _exit_when_client_ends(connection)
        from fdabench.cli import main

        try:
            code = main(request["argv"]) or 0
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
            _send(connection, {"exit": code})
        except Exception:
            pass
        os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
