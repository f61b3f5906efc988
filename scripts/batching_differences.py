#!/usr/bin/env python3
"""How far batched cells (train setting `batching: stacked`) are from the same cells computed one by one, against
the spread between seeds: the largest |Δ final| of a cell, beside the seed-to-seed standard deviation of the same
(experiment, method, target) one by one, and the largest |Δ| of any number in the cells' per-round records.

REFERENCE and BATCHED are folders of cell files (results/cells/<suite>, searched recursively) or reproduction
archives (cells.jsonl.gz). Cells are paired by (experiment, method, target, seed); only the cells both hold are
compared, and each side's configuration must differ in `train.batching` alone.

Usage: scripts/batching_differences.py REFERENCE BATCHED [--json FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def read_cells(source: Path) -> dict[tuple, dict]:
    """(experiment, method, target, seed) -> the cell (a result file's or an archive record's fields)."""
    if source.is_dir():
        records = [json.loads(path.read_text()) for path in sorted(source.rglob("*.json"))]
    else:
        from fdabench.reproduction.archive import cell_from_record

        with gzip.open(source, "rt", encoding="utf-8") as archive:
            records = [cell_from_record(json.loads(line)) for line in archive]
    cells = {}
    for record in records:
        config = record.get("config")
        if isinstance(config, dict) and "final" in record:
            cells[(config["experiment"], config["method"], str(config["target"]), int(config["seed"]))] = record
    return cells


def largest_round_difference(one: dict, other: dict) -> float:
    """The largest |Δ| over every number the two cells' per-round records hold (losses, metrics, betas), timings
    aside."""
    largest = 0.0
    for mine, theirs in zip(one.get("rounds", []), other.get("rounds", []), strict=True):
        for key, value in mine.items():
            if key != "seconds" and isinstance(value, int | float) and isinstance(theirs.get(key), int | float):
                largest = max(largest, abs(value - theirs[key]))
    return largest


def without_batching(config: dict) -> dict:
    return {**config, "train": {k: v for k, v in config["train"].items() if k != "batching"}, "device": None}


def differences(reference: dict[tuple, dict], batched: dict[tuple, dict]) -> dict:
    shared = sorted(set(reference) & set(batched))
    if not shared:
        raise SystemExit("batching_differences: the two sides hold no cell in common")
    for key in shared:
        if without_batching(reference[key]["config"]) != without_batching(batched[key]["config"]):
            raise SystemExit(f"batching_differences: {'/'.join(map(str, key))} differs in more than train.batching")
    deltas = {key: abs(batched[key]["final"] - reference[key]["final"]) for key in shared}
    seeds = defaultdict(list)
    for (experiment, method, target, _), cell in reference.items():
        seeds[(experiment, method, target)].append(cell["final"])
    spread = {key: statistics.stdev(values) for key, values in seeds.items() if len(values) >= 2}
    worst = max(shared, key=deltas.__getitem__)
    above = [key for key in shared if key[:3] in spread and deltas[key] > spread[key[:3]]]
    batched_modes = {json.dumps(batched[key]["config"]["train"].get("batching", "off")) for key in shared}
    return {
        "cells": len(shared),
        "batching": sorted(json.loads(mode) for mode in batched_modes),
        "identical": sum(deltas[key] == 0 for key in shared),
        "max_abs_final_difference": deltas[worst],
        "worst_cell": "/".join(map(str, worst)),
        "median_abs_final_difference": statistics.median(deltas.values()),
        "max_abs_round_record_difference": max(largest_round_difference(reference[k], batched[k]) for k in shared),
        "seed_sd_median": statistics.median(spread.values()) if spread else None,
        "seed_sd_of_worst_cell": spread.get(worst[:3]),
        "cells_above_their_seed_sd": len(above),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path)
    parser.add_argument("batched", type=Path)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    found = differences(read_cells(args.reference), read_cells(args.batched))
    for key, value in found.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
