"""Flower's deployment engine for an exported cell: the Flower app folder, and a whole deployment on this machine
(one SuperLink, one SuperNode process per site reading only its own file, `flwr run`), for rehearsal and tests.

Across machines the same pieces run where they belong (docs/flower.md): the SuperLink and
`flwr run` at the server, one `flower-supernode --node-config "site-data='<its file>'"` at each site."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from fdabench.core.io import write_text_atomic
from fdabench.core.readers import read_json
from fdabench.flower import DEFAULT_DROPOUT, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WAIT_SECONDS
from fdabench.flower.simulation import QUIET, run_options, site_files

APP_NAME = "fdabench-cell"


def write_app(folder: str | os.PathLike, options: dict[str, Any] | None = None) -> Path:
    """A Flower app folder whose components are fdabench's apps (`fdabench.flower.apps`), with `options` as the
    run config's defaults. fdabench must be installed where the SuperLink and SuperNodes run."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = "\n".join(f"{key} = {json.dumps(value)}" for key, value in sorted((options or {}).items()))
    write_text_atomic(
        folder / "pyproject.toml",
        f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{APP_NAME}"
version = "1.0.0"
description = "one fdabench cell, run by fdabench's round loop with its sites as Flower SuperNodes"
license = "MIT"
dependencies = ["fdabench"]

[tool.flwr.app]
publisher = "fdabench"

[tool.flwr.app.components]
serverapp = "fdabench.flower.apps:server_app"
clientapp = "fdabench.flower.apps:client_app"

[tool.flwr.app.config]
{config}
""",
    )
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _executable(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        raise FileNotFoundError(f"{name} not found: install the flower extra (uv pip install -e '.[flower]')")
    return found


def _wait_until_healthy(port: int, seconds: float, process: subprocess.Popen, log: Path) -> None:
    """Until the SuperLink answers on its health endpoint (this machine only)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the SuperLink exited with {process.returncode}; its log: {log}")
        with suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
            return
        time.sleep(0.2)
    raise TimeoutError(f"the SuperLink did not answer within {seconds:g} s; its log: {log}")


class LocalDeployment:
    """A SuperLink and one SuperNode per site on this machine, each its own process; `stop_site` ends one
    (a site dropping out)."""

    def __init__(self, folder: str | os.PathLike, work: Path):
        self.folder = Path(folder).resolve()
        self.work = work
        self.env = {**os.environ, **QUIET, "FLWR_HOME": str(work / "flwr-home")}
        self.env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + self.env.get("PATH", "")
        self.link_port = free_port()
        self.processes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.work / f"{name}.log", "w", encoding="utf-8")  # noqa: SIM115 (the process writes it)
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.work, start_new_session=True
        )
        log.close()
        self.processes[name] = process
        return process

    def start(self, startup_seconds: float = 60.0) -> None:
        link = self._start(
            "superlink",
            [
                _executable("flower-superlink"),
                "--insecure",
                "--disable-runtime-dependency-installation",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.link_port),
            ],
        )
        _wait_until_healthy(self.link_port, startup_seconds, link, self.work / "superlink.log")
        for file in site_files(self.folder):
            site = Path(file).stem
            self._start(
                f"supernode-{site}",
                [
                    _executable("flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{self.link_port}",
                    "--port",
                    str(free_port()),
                    "--node-config",
                    f"site-data={json.dumps(file)}",
                ],
            )
        (Path(self.env["FLWR_HOME"])).mkdir(parents=True, exist_ok=True)
        write_text_atomic(
            Path(self.env["FLWR_HOME"]) / "config.toml",
            f'[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = "127.0.0.1:{self.link_port}"\n'
            "insecure = true\n",
        )

    def stop_site(self, site: str) -> None:
        """End one site's SuperNode (SIGTERM: it leaves the federation at once)."""
        process = self.processes[f"supernode-{site}"]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)

    def run(self, options: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Submit the cell with `flwr run`, wait for it to finish; its status from `flwr ls`."""
        app = write_app(self.work / "app", options)  # Flower takes only run-config keys the app declares
        submitted = subprocess.run(
            [_executable("flwr"), "run", str(app), "local", "--format", "json"],
            env=self.env,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=120,
        )
        reply = json.loads(submitted.stdout) if submitted.stdout.strip().startswith("{") else {}
        if submitted.returncode != 0 or "run-id" not in reply:
            detail = reply.get("error-message") or submitted.stdout[-2000:] + submitted.stderr[-2000:]
            raise RuntimeError(f"flwr run failed: {detail}")
        run_id = str(reply["run-id"])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            listed = subprocess.run(
                [_executable("flwr"), "ls", "local", "--run-id", run_id, "--format", "json"],
                env=self.env,
                cwd=self.work,
                capture_output=True,
                text=True,
                timeout=60,
            )
            if listed.returncode == 0:
                run = json.loads(listed.stdout)["runs"][0]
                if str(run["status"]).startswith("finished"):
                    return run
            time.sleep(1.0)
        raise TimeoutError(f"Flower run {run_id} did not finish within {seconds:g} s")

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            if process.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


@contextmanager
def local_deployment(folder: str | os.PathLike, work: str | os.PathLike | None = None) -> Iterator[LocalDeployment]:
    """A running LocalDeployment of the exported cell in `folder`, stopped on exit (logs in `work`)."""
    with tempfile.TemporaryDirectory(prefix="fdabench-flower-") as scratch:
        place = Path(work) if work is not None else Path(scratch)
        place.mkdir(parents=True, exist_ok=True)
        deployment = LocalDeployment(folder, place)
        try:
            deployment.start()
            yield deployment
        finally:
            deployment.stop()


def deploy_locally(
    folder: str | os.PathLike,
    result: str | os.PathLike,
    dropout: str = DEFAULT_DROPOUT,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    threads: int = 1,
    seconds: float = 3600.0,
    work: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Run the exported cell on Flower's deployment engine on this machine; the history, as written to `result`."""
    options = run_options(folder, result, dropout, timeout, wait_seconds, threads)
    options.pop("site-files")  # each SuperNode reads its own file (its node config)
    Path(options["result-file"]).unlink(missing_ok=True)
    with local_deployment(folder, work) as deployment:
        run = deployment.run(options, seconds)
    if run["status"] != "finished:completed":
        raise RuntimeError(f"the Flower run ended {run['status']}: {run.get('status-details', '')}")
    history = read_json(options["result-file"], "the Flower server's result")
    history["flower_network_traffic"] = run.get("network-traffic")
    return history
