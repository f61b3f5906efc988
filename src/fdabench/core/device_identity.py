"""Which device settings name the same cell: params.yaml `device` is part of a cell's identity only through the
device the cell ran on.

A cell records `device` in its configuration as params.yaml gave it, and, beside it, the torch device it ran on
(`cuda:0`, `cpu`). When the setting changes, the cell stays current where it ran on what the new setting asks for
(`ran_as`): `auto` takes whatever device a cell ran on (as on every machine before), `cuda` a cell that ran on a
CUDA device, `cpu` one that ran on the CPU. So moving `device: auto` to `device: cuda` reruns no cell that auto ran
on a GPU, and the cells auto ran on the CPU rerun on the GPU.

Snakemake reruns a job whose parameters changed, so the train rule's configuration parameter carries `device` as
`PLANNED_DEVICE` whatever the setting (`planned_config`), and the setting reaches the job apart from it; a changed
setting reruns a cell through its rerun marker (`fdabench.jobs.heal`), where `changed_settings` says so."""

from __future__ import annotations

from typing import Any

#: what the train rule's configuration parameter says of `device`, whatever params.yaml sets
PLANNED_DEVICE = "auto"


def planned_config(config: dict[str, Any]) -> dict[str, Any]:
    """A cell's configuration as Snakemake's parameter carries it (`device`: `PLANNED_DEVICE`)."""
    return {**config, "device": PLANNED_DEVICE} if "device" in config else dict(config)


def ran_as(setting: Any, ran_on: Any) -> bool:
    """Whether a cell that ran on torch device `ran_on` (its result's `device`) is what params.yaml `device`
    `setting` asks for: any device for auto, a device of that type for cpu and cuda."""
    if setting == "auto":
        return True
    return isinstance(ran_on, str) and ran_on.split(":")[0] == setting


def changed_settings(recorded: dict[str, Any], ran_on: Any, config: dict[str, Any]) -> list[str]:
    """The settings in which a cell's recorded configuration differs from today's `config`, sorted; `device` only
    where the cell did not run on what today's setting asks for (`ran_as`)."""
    changed = sorted(key for key in set(config) | set(recorded) if recorded.get(key) != config.get(key))
    if "device" in changed and ran_as(config.get("device"), ran_on):
        changed.remove("device")
    return changed
