"""Benchmarks: aggregation and auto-weighting time against the memory-bandwidth floor, the extra memory
of streaming vs stored auto-weighting, and the start-up cost of a training job with and without the fork
server. Run with `fdabench bench aggregation` / `bench memory` / `bench startup`.

The floor is the time to read the N + 1 updates once (a plain sum over them): no aggregation rule that
looks at every coordinate of every update can be faster. Layer boundaries follow ResNet-18's 62
parameter tensors, scaled to m.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fdabench.config import validate_params
from fdabench.core.readers import read_json
from fdabench.tensor_math.aggregation import StreamingAutoWeights, auto_weights, fedgp

RESNET18_PARAMETERS = 11_689_512


def resnet18_layer_sizes(total: int) -> list[int]:
    """ResNet-18's parameter-tensor sizes, scaled to sum to `total` (every layer at least 1)."""
    from torchvision.models import resnet18

    sizes = [p.numel() for p in resnet18(weights=None).parameters()]
    scaled = [max(1, round(size * total / sum(sizes))) for size in sizes]
    scaled[scaled.index(max(scaled))] += total - sum(scaled)
    return scaled


def _time(function: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Median wall time of `function` over `repeats` runs after one warm-up run."""
    function()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        function()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def _read_once(target: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """The floor: every coordinate of every update read once."""
    return sources.sum(0).add_(target)


def _stream_auto_weights(sources: torch.Tensor, batch_updates: torch.Tensor):
    statistics = StreamingAutoWeights(sources)
    for update in batch_updates:
        statistics.add(update)
    return statistics.result("fedgp")


def aggregation_rows(sources_counts, sizes, device: torch.device, repeats: int, batches: int) -> list[dict[str, Any]]:
    rows = []
    for m in sizes:
        layer_sizes = resnet18_layer_sizes(m)
        for count in sources_counts:
            generator = torch.Generator(device=device).manual_seed(0)
            sources = torch.empty(count, m, device=device).normal_(generator=generator)
            target = torch.empty(m, device=device).normal_(generator=generator)
            weights = torch.ones(count, device=device)
            batch_updates = torch.empty(batches, m, device=device).normal_(generator=generator)

            floor = _time(partial(_read_once, target, sources), device, repeats)
            projection = _time(partial(fedgp, target, sources, 0.5, weights, layer_sizes=layer_sizes), device, repeats)
            cosine = _time(
                partial(fedgp, target, sources, 0.5, weights, mode="cosine_scaled", layer_sizes=layer_sizes),
                device,
                repeats,
            )
            streamed = _time(partial(_stream_auto_weights, sources, batch_updates), device, repeats)
            bytes_read = sources.element_size() * sources.numel() + target.element_size() * target.numel()
            rows.append(
                {
                    "device": device.type,
                    "N": count,
                    "m": m,
                    "layers": len(layer_sizes),
                    "floor_s": floor,
                    "floor_bytes": bytes_read,
                    "floor_GBps": bytes_read / floor / 1e9,
                    "fedgp_s": projection,
                    "fedgp_ratio": projection / floor,
                    "fedgp_cosine_s": cosine,
                    "auto_streaming_B": batches,
                    "auto_streaming_s": streamed,
                    "auto_streaming_per_batch_ratio": streamed / batches / floor,
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            del sources, target, batch_updates
    return rows


def reset_peak_rss() -> bool:
    """Reset the kernel's high-water mark (VmHWM) to the current RSS; False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident set since the last reset (VmHWM), else the lifetime peak from getrusage."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class LiveTensorPeak(TorchDispatchMode):
    """Peak bytes of tensor storage allocated inside this mode and alive at once.

    Exact and independent of the allocator and the kernel: every op's output storage is counted from its
    first appearance until the last Python tensor referring to it is gone. Storages of the tensors in
    `existing` (the inputs) are never counted. Kernel-internal scratch buffers are not seen.
    """

    def __init__(self, existing: Iterable[torch.Tensor] = ()):
        super().__init__()
        self._existing = {tensor.untyped_storage().data_ptr() for tensor in existing}
        self._references: dict[int, int] = {}
        self._sizes: dict[int, int] = {}
        self.live = 0
        self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(output):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf)
        return output

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self._existing or storage.nbytes() == 0:
            return
        if key not in self._references:
            self._references[key] = 0
            self._sizes[key] = storage.nbytes()
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
        self._references[key] += 1
        weakref.finalize(tensor, self._release, key)

    def _release(self, key: int) -> None:
        self._references[key] -= 1
        if self._references[key] == 0:
            del self._references[key]
            self.live -= self._sizes.pop(key)


def _auto_weighting_workload(mode: str, sources: torch.Tensor, m: int, batches: int, generator) -> None:
    if mode == "streaming":
        statistics = StreamingAutoWeights(sources)
        for _ in range(batches):
            update = torch.empty(m).normal_(generator=generator)
            statistics.add(update)
            del update
        statistics.result("fedgp")
    elif mode == "stored":
        matrix = torch.empty(batches, m).normal_(generator=generator)
        auto_weights(matrix, sources, rule="fedgp")
    else:
        raise ValueError(mode)


def memory_probe(mode: str, count: int, m: int, batches: int) -> dict[str, Any]:
    """Peak memory added by auto-weighting beyond its inputs (the N source updates), in this process.

    streaming: per-batch updates are produced one at a time (as during training) and folded in;
    stored: the B x m matrix of per-batch updates is built, then `auto_weights` runs on it.
    Two measures: `live_tensor_bytes`, the exact peak of tensor storage alive at once (`LiveTensorPeak`),
    and `extra_bytes`, the growth of the process's peak resident set, which also shows allocator and
    kernel effects (freed buffers kept for reuse, huge pages) and so varies between machines.
    """
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    sources = torch.empty(count, m).normal_(generator=generator)
    probe = torch.empty(m)  # touch the allocator once so the baseline includes its first arena
    del probe
    # Without a reset, a transient peak from importing torch can hide the probe entirely.
    reset_peak_rss()
    baseline = peak_rss_bytes()
    _auto_weighting_workload(mode, sources, m, batches, generator)
    extra = peak_rss_bytes() - baseline
    with LiveTensorPeak(existing=[sources]) as tracker:  # a second pass: the mode's own overhead stays out of the RSS
        _auto_weighting_workload(mode, sources, m, batches, generator)
    return {
        "mode": mode,
        "N": count,
        "m": m,
        "B": batches,
        "live_tensor_bytes": tracker.peak,
        "live_in_m_floats": tracker.peak / (4 * m),
        "extra_bytes": extra,
        "extra_in_m_floats": extra / (4 * m),
    }


def memory_rows(count: int, m: int, batches: int) -> list[dict[str, Any]]:
    """Run each probe in a fresh process (peak RSS is per process)."""
    rows = []
    for mode in ("streaming", "stored"):
        command = [sys.executable, "-m", "fdabench.speed.aggregation", mode, str(count), str(m), str(batches)]
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        rows.append(json.loads(result.stdout))
    return rows


AGGREGATION_COLUMNS = [
    "device",
    "N",
    "m",
    "floor_s",
    "floor_GBps",
    "fedgp_s",
    "fedgp_ratio",
    "fedgp_cosine_s",
    "auto_streaming_s",
    "auto_streaming_per_batch_ratio",
]


def aggregation_frame(counts: list[int], sizes: list[int], devices: list[str], repeats: int, batches: int):
    """The aggregation benchmark on every device, as the table `fdabench bench aggregation` prints."""
    import pandas as pd

    rows = []
    for device in devices:
        rows += aggregation_rows(counts, sizes, torch.device(device), repeats, batches)
    return pd.DataFrame(rows)[AGGREGATION_COLUMNS]


def memory_frame(count: int, m: int, batches: int):
    """The memory probes with the bounds they are read against: the (N + 3)·m float budget, the stored B x m
    matrix, and each measure plus the N source updates it excludes."""
    import pandas as pd

    frame = pd.DataFrame(memory_rows(count, m, batches))
    frame["budget_(N+3)m4"] = (frame["N"] + 3) * frame["m"] * 4
    frame["stored_matrix_Bm4"] = frame["B"] * frame["m"] * 4
    frame["live_plus_sources"] = frame["live_tensor_bytes"] + frame["N"] * frame["m"] * 4
    frame["extra_plus_sources"] = frame["extra_bytes"] + frame["N"] * frame["m"] * 4
    return frame


def _startup_cell(directory: str, rounds: int) -> tuple[dict[str, Any], str, str]:
    """A small embedded cell (colored digits, MLP, FedGP) prepared and partitioned in `directory`."""
    raw = {
        "suite": "bench",
        "data": {"root": directory},
        "suites": {
            "bench": {
                "experiments": {
                    "digits": {
                        "dataset": "colored_digits",
                        "methods": ["fedgp"],
                        "targets": ["+90"],
                        "seeds": [0],
                        "partition": {"holdout_fraction": 0.2, "target_labelled": 48},
                        "train": {
                            "model": "mlp",
                            "model_options": {"hidden": [128]},
                            "rounds": rounds,
                            "warmup_rounds": 1,
                        },
                    }
                }
            }
        },
    }
    params = validate_params(raw)
    cell = next(params.cells())
    prepared, partition = params.prepared_path("digits"), os.path.join(directory, "partition.json")
    options = json.dumps(params.dataset_options("colored_digits", "digits"))
    subprocess.run(
        ["fdabench", "prepare", "--dataset", "colored_digits", "--options", options, "--output", prepared],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "fdabench",
            "partition",
            "--prepared",
            prepared,
            "--target=+90",
            "--seed",
            "0",
            "--options",
            json.dumps(params.partition_options("digits")),
            "--output",
            partition,
        ],
        check=True,
        capture_output=True,
    )
    return cell.config, prepared, partition


def train_command(config: dict[str, Any], prepared: str, partition: str, output: str) -> list[str]:
    """The `fdabench train` command line of a cell (as the Snakemake rule runs it)."""
    return [
        "fdabench",
        "train",
        "--cell",
        json.dumps(config),
        "--prepared",
        prepared,
        "--partition",
        partition,
        "--output",
        output,
    ]


def startup_rows(repeats: int, rounds: int = 2) -> list[dict[str, Any]]:
    """Wall seconds of `fdabench train` on one small cell: in a fresh process each time (FDABENCH_FORKSERVER=0),
    and through the fork server (its first job starts the server; the others find it warm)."""
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        config, prepared, partition = _startup_cell(directory, rounds)
        command = train_command(config, prepared, partition, os.path.join(directory, "cell.json"))
        runtime = os.path.join(directory, "runtime")  # a private server for this benchmark
        os.mkdir(runtime, 0o700)
        for mode, server in (("fresh process", "0"), ("fork server", "1")):
            environment = {
                **os.environ,
                "FDABENCH_FORKSERVER": server,
                "XDG_RUNTIME_DIR": runtime,
                "FDABENCH_FORKSERVER_IDLE": "30",
            }
            for repeat in range(repeats + (server == "1")):
                started = time.perf_counter()
                subprocess.run(command, check=True, capture_output=True, env=environment)
                seconds = time.perf_counter() - started
                result = read_json(os.path.join(directory, "cell.json"), "the bench cell's result")
                phase = "server start" if server == "1" and repeat == 0 else "job"
                rows.append(
                    {
                        "mode": mode,
                        "run": phase,
                        "wall_s": seconds,
                        "train_s": result["train_seconds"],
                        "overhead_s": seconds - result["train_seconds"],
                        "final": result["final"],
                    }
                )
    return rows


if __name__ == "__main__":
    mode, count, m, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(memory_probe(mode, count, m, batches)))
