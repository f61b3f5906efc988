"""One training step and one evaluation pass of a model on generated images, through the cells' own local
training (`train_locally`: the sources' batches, a fresh Adam, the flat update) and evaluation (`evaluate`).
Models are built without pretrained weights: the step costs the same, and nothing is downloaded."""

from __future__ import annotations

from statistics import median
from typing import Any

import torch

from fdabench.federation.client import LocalSettings, evaluate, loss_function, train_locally
from fdabench.federation.parameters import ParameterSpace
from fdabench.federation.problem import ClientData
from fdabench.models import build_model, resolved_model_options
from fdabench.speed.cell import clock
from fdabench.speed.gpu.forecast import STEP_CLASSES


def untrained_options(model: str, options: dict[str, Any]) -> dict[str, Any]:
    """The model's options with `weights: none` where its factory takes weights (no file, no download)."""
    return {**options, "weights": "none"} if "weights" in resolved_model_options(model, options) else dict(options)


def generated_images(count: int, shape: tuple[int, ...], device: torch.device, seed: int = 0) -> ClientData:
    """`count` uint8 images of `shape` (read as value / 255, as prepared images are) with STEP_CLASSES labels."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (count, *shape), dtype=torch.uint8, generator=generator)
    y = torch.randint(0, STEP_CLASSES, (count,), generator=generator)
    return ClientData("generated", x.to(device), y.to(device))


def time_model(spec: dict[str, Any], device: torch.device, steps: int, repeats: int, eval_batch: int) -> dict[str, Any]:
    """Seconds per training step at each of `spec`'s batch sizes (median of `repeats` epochs of `steps` steps,
    after one untimed epoch), evaluation images per second at `eval_batch` (at most the spec's), and the peak
    CUDA memory of the largest batch's training."""
    shape = tuple(spec["input_shape"])
    options = untrained_options(spec["model"], spec.get("model_options") or {})
    torch.manual_seed(0)
    model = build_model(spec["model"], shape, STEP_CLASSES, **options).to(device)
    space = ParameterSpace(model)
    start = space.get()
    loss_fn = loss_function("classification")
    step_seconds, peak = {}, None
    for batch in spec["batches"]:
        data = generated_images(batch * steps, shape, device)
        settings = LocalSettings(lr=1e-5, batch_size=batch, epochs=1)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        epochs = []
        for index in range(repeats + 1):
            began = clock(device)
            train_locally(space, start, data, settings, loss_fn, torch.Generator().manual_seed(index))
            epochs.append(clock(device) - began)
        step_seconds[str(batch)] = median(epochs[1:]) / steps
        if device.type == "cuda" and peak is None:
            peak = int(torch.cuda.max_memory_allocated(device))
    batch = min(eval_batch, spec.get("eval_batch") or eval_batch)
    images = generated_images(batch, shape, device, seed=1)
    passes = []
    for _ in range(repeats + 1):
        began = clock(device)
        evaluate(model, images, "classification", batch)
        passes.append(clock(device) - began)
    return {
        "model": spec["model"],
        "model_options": options,
        "input_shape": list(shape),
        "parameters": space.size,
        "train_step_seconds": step_seconds,
        "steps_timed": steps,
        "repeats": repeats,
        "eval_batch": batch,
        "eval_images_per_second": batch / median(passes[1:]),
        "peak_memory_bytes": peak,
    }
