"""Flower apps that run one fdabench cell: the ServerApp runs fdabench's round loop (`run_rounds`) with the sites
behind Flower (`FlowerSites`); the ClientApp is a site (`fdabench.flower.site_worker`).

Configuration (Flower's run config, `flwr run --run-config`, or the defaults given to `make_server_app` and
`make_client_app` when the simulation engine runs them in this process):

- `cell-file`: the cell's resolved configuration (JSON; the server reads it and sends it to the sites in the hello);
- `result-file`: where the server writes the cell's result (the in-process loop's history, plus Flower's byte
  counts and the dropout events per round);
- `sites`: how many sites the server waits for (sources + target);
- `dropout`: `fail` | `wait` | `skip` (`fdabench.flower.transport`), `timeout` (s per message round trip),
  `wait-seconds`, `startup-seconds` (how long to wait for the sites to connect);
- `threads`: torch threads of the server and of each site (results are bit-identical for a given count);
- `site-files`: JSON list of site files by partition id, for engines that number nodes (simulation). A SuperNode
  started with `--node-config "site-data='<file>'"` reads that file instead: each site holds only its own."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fdabench.cell.setup import cell_rules
from fdabench.core.io import write_json_atomic
from fdabench.core.readers import read_json
from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.flower import DEFAULT_DROPOUT, DEFAULT_TIMEOUT_SECONDS, DEFAULT_WAIT_SECONDS, messages
from fdabench.flower.site_files import load_site, problem_shape
from fdabench.flower.site_worker import Site
from fdabench.flower.transport import FlowerSites, SiteFailure, SiteInfo, error_reason

DEFAULTS: dict[str, Any] = {
    "dropout": DEFAULT_DROPOUT,
    "timeout": DEFAULT_TIMEOUT_SECONDS,
    "wait-seconds": DEFAULT_WAIT_SECONDS,
    "startup-seconds": 120.0,
    "threads": 1,
}
STATE = "fdabench"  # the site's record in its node state: the cell and its random streams
CLIENT_STATE = "fdabench_client_state"  # the method's state on this client (`federation.client_state`)
#: sites built in this process, by (run, node): the simulation engine keeps a ClientApp process between messages
_SITES: dict[tuple[int, int], Site] = {}


def _setting(context: Context, defaults: dict[str, Any], key: str) -> Any:
    if key in context.run_config:
        return context.run_config[key]
    if key in defaults:
        return defaults[key]
    if key in DEFAULTS:
        return DEFAULTS[key]
    raise KeyError(f"fdabench flower: the run config has no {key!r}")


# -- the site (ClientApp) -----------------------------------------------------------------------------------
def site_file(context: Context, defaults: dict[str, Any]) -> str:
    """This SuperNode's site file: its node config's `site-data`, or the run's `site-files` at its partition id."""
    if "site-data" in context.node_config:
        return str(context.node_config["site-data"])
    files = json.loads(str(_setting(context, defaults, "site-files")))
    return files[int(context.node_config["partition-id"])]


def site_for(context: Context, defaults: dict[str, Any]) -> Site:
    torch.set_num_threads(int(_setting(context, defaults, "threads")))
    key = (context.run_id, context.node_id)
    if key not in _SITES:
        if STATE not in context.state.config_records:
            raise RuntimeError("this site has not had the server's hello yet: it does not know the cell")
        cell = json.loads(str(context.state.config_records[STATE]["cell"]))
        _SITES[key] = Site(cell, load_site(site_file(context, defaults)))
    return _SITES[key]


def _restore_streams(site: Site, context: Context, stream: int | None = None) -> None:
    """The site's random streams as its last call left them; the batch stream starts at `stream` on the first
    training request."""
    state = context.state.config_records[STATE]
    site.restore_streams({name: bytes(state[name]) for name in ("batches", "noise") if name in state})
    if site.batches is None and stream is not None:
        site.start_stream(stream)
    if CLIENT_STATE in context.state.array_records:
        site.restore_state(messages.tensors(context.state.array_records[CLIENT_STATE]))


def _save_streams(site: Site, context: Context) -> None:
    state = context.state.config_records[STATE]
    for name, raw in site.streams().items():
        state[name] = raw
    if site.state is not None:
        context.state[CLIENT_STATE] = ArrayRecord({name: value.detach().cpu() for name, value in site.state.items()})


def handle_hello(message: Message, context: Context, defaults: dict[str, Any]) -> Message:
    cell = str(message.content.config_records["config"]["cell"])
    known = context.state.config_records.get(STATE)
    if known is None or str(known["cell"]) != cell:  # a hello again (the server re-identifying) keeps the streams
        context.state[STATE] = ConfigRecord({"cell": cell})
        if CLIENT_STATE in context.state:  # another cell's client state
            del context.state[CLIENT_STATE]
        _SITES.pop((context.run_id, context.node_id), None)
    site = site_for(context, defaults)
    data = site.data
    identity = ConfigRecord({"name": data.name, "role": data.role, "shape": json.dumps(data.shape)})
    return Message(
        RecordDict(
            {
                "config": identity,
                "metrics": MetricRecord(
                    {"index": data.index, "samples": site.training_samples, "validation": data.validation_samples}
                ),
            }
        ),
        reply_to=message,
    )


def handle_train(message: Message, context: Context, defaults: dict[str, Any]) -> Message:
    site = site_for(context, defaults)
    config = message.content.config_records["config"]
    _restore_streams(site, context, int(config["stream"]))
    values = messages.tensors(message.content.array_records["arrays"])
    settings = messages.local_settings(config)
    buffers = messages.listed(values, "buffers")
    if site.data.role == "source":
        result, buffers, sent = site.train_source(values["params"], settings, buffers, values.get("broadcast"))
        record = messages.arrays(update=result.update, buffers=buffers, message=sent)
    else:
        inputs = RoundInputs(
            int(config["round"]),
            values.get("global", values["start"]),
            site.space.layer_sizes,
            TrainSettings.from_dict(json.loads(str(config["settings"]))),
            site.space.layer_names,
            source_updates=values.get("source_updates"),
            source_counts=values.get("source_counts"),
            source_steps=values.get("source_steps"),
            source_buffers=_per_source(messages.listed(values, "source_buffers"), len(site.space.buffers)),
            source_messages=values.get("source_messages"),
            source_names=tuple(json.loads(str(config["source_names"]))),
            broadcast=values.get("broadcast"),
        )
        reply = site.train_target(inputs, values["start"], settings, buffers)
        result = reply.result
        estimates = {f"estimates.{name}": value for name, value in reply.estimates.items()}
        record = messages.arrays(update=result.update, buffers=reply.buffers, message=reply.message, **estimates)
    _save_streams(site, context)
    counts = MetricRecord({"samples": result.samples, "steps": result.steps})
    return Message(RecordDict({"arrays": record, "metrics": counts}), reply_to=message)


def _per_source(buffers: list, per_source: int) -> list | None:
    """The forwarded sources' buffers, source by source (None: none forwarded)."""
    if not buffers or not per_source:
        return None
    return [buffers[index : index + per_source] for index in range(0, len(buffers), per_source)]


def handle_evaluate(message: Message, context: Context, defaults: dict[str, Any]) -> Message:
    site = site_for(context, defaults)
    _restore_streams(site, context)
    values = messages.tensors(message.content.array_records["arrays"])
    scores = site.evaluate(values["params"], messages.listed(values, "buffers"))
    _save_streams(site, context)  # the target's test and validation splits may redraw their feature noise
    return Message(messages.evaluation_reply(scores), reply_to=message)


def make_client_app(defaults: dict[str, Any] | None = None) -> ClientApp:
    """A ClientApp that is one site of the cell the server names in its hello."""
    defaults = dict(defaults or {})
    app = ClientApp()

    @app.query()
    def hello(message: Message, context: Context) -> Message:
        return handle_hello(message, context, defaults)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return handle_train(message, context, defaults)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return handle_evaluate(message, context, defaults)

    return app


# -- the server (ServerApp) ---------------------------------------------------------------------------------
def say_hello(grid: Grid, cell: dict[str, Any], timeout: float) -> tuple[dict[str, SiteInfo], list[str]]:
    """Send the cell to every connected SuperNode; each site's name, role, position, samples, node id and validation
    samples, and why the nodes that answered with an error did (e.g. a site file that is not there)."""
    nodes = list(grid.get_node_ids())
    content = RecordDict({"config": messages.cell_config(cell)})
    outgoing = [Message(content, dst_node_id=node, message_type=MessageType.QUERY) for node in nodes]
    sites, errors = {}, []
    for reply in grid.send_and_receive(outgoing, timeout=timeout):
        if reply.has_error():
            errors.append(f"node {reply.metadata.src_node_id}: {error_reason(reply.error.reason)}")
            continue
        identity, counts = reply.content.config_records["config"], reply.content.metric_records["metrics"]
        sites[str(identity["name"])] = SiteInfo(
            str(identity["name"]),
            str(identity["role"]),
            int(counts["index"]),
            int(counts["samples"]),
            reply.metadata.src_node_id,
            json.loads(str(identity["shape"])),
            int(counts.get("validation", 0)),
        )
    return sites, errors


def run_cell(grid: Grid, cell: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The cell's round loop with its sites behind `grid`; the history, as `run_rounds` returns it, each round with
    Flower's byte counts and the dropout events."""
    expected = int(options["sites"])
    deadline = time.monotonic() + float(options["startup-seconds"])
    while len(list(grid.get_node_ids())) < expected:
        if time.monotonic() > deadline:
            raise SiteFailure(
                f"{len(list(grid.get_node_ids()))} of {expected} sites connected within {options['startup-seconds']} s"
            )
        time.sleep(0.1)
    timeout = float(options["timeout"])
    sites, errors = say_hello(grid, cell, timeout)
    if len(sites) < expected:
        answered = f"{len(sites)} of {expected} sites answered the hello ({', '.join(sorted(sites)) or 'none'})"
        raise SiteFailure(answered + "".join(f"; {error}" for error in errors))
    shapes = {json.dumps(site.shape, sort_keys=True) for site in sites.values()}
    if len(shapes) != 1:
        raise SiteFailure(f"the sites disagree on the problem's shape: {sorted(shapes)}")
    problem = problem_shape(next(iter(sites.values())).shape)
    rules = cell_rules(cell)
    method, settings = rules.method, rules.settings
    device = torch.device("cpu")
    holder: dict[str, FlowerSites] = {}
    logs: list[dict[str, Any]] = []

    def make_sites(space) -> FlowerSites:
        holder["sites"] = FlowerSites(
            grid,
            method,
            list(sites.values()),
            space,
            device,
            policy=str(options["dropout"]),
            timeout=timeout,
            wait_seconds=float(options["wait-seconds"]),
            hello=lambda: say_hello(grid, cell, timeout)[0],
        )
        return holder["sites"]

    def on_round(record: dict[str, Any], total: int) -> None:
        logs.append(holder["sites"].take_round_log())

    history = run_rounds(method, problem, settings, cell["seed"], device, on_round=on_round, sites=make_sites)
    for record, log in zip(history["rounds"], logs, strict=True):
        record.update(log)
    return history


def make_server_app(defaults: dict[str, Any] | None = None) -> ServerApp:
    """A ServerApp that runs the cell in `cell-file` and writes its history to `result-file`."""
    defaults = dict(defaults or {})
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        options = {key: _setting(context, defaults, key) for key in (*DEFAULTS, "sites", "cell-file", "result-file")}
        cell = read_json(options["cell-file"], "an exported cell's configuration")
        torch.set_num_threads(int(options["threads"]))
        started = time.perf_counter()
        history = run_cell(grid, cell, options)
        history["flower_seconds"] = time.perf_counter() - started
        write_json_atomic(Path(options["result-file"]), history)

    return app


server_app = make_server_app()
client_app = make_client_app()
