#!/usr/bin/env python3
"""Every registered method's round histories on the tests' small problem with auxiliary labels, in a few settings,
for a before/after check of a refactor that must move no number, where neither the suites nor the archives reach a
method (SCAFFOLD and FedBN are in neither). Run it with the code to test first on PYTHONPATH, then compare:

    PYTHONPATH=<old checkout>/src scripts/every_method_histories.py run before.pt
    scripts/every_method_histories.py run after.pt
    scripts/every_method_histories.py compare before.pt after.pt

Timings are left out of the histories; a run a method refuses is kept as its error line, compared as well.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny import AUX_TRAIN, aux_problem

#: FedDaDiL with a small dictionary and few rounds (its defaults take minutes)
DICTIONARY = {"atoms": 3, "support_size": 6, "batch_size": 4, "local_steps": 2, "rounds": 2, "classifier_steps": 5}
SMALL_HPARAMS = {"dadil_e": DICTIONARY, "dadil_r": DICTIONARY}
SETTINGS = {
    "plain": {"rounds": 4, "warmup_rounds": 1},
    "momentum_participation": {"rounds": 4, "warmup_rounds": 2, "server_momentum": 0.5, "participation": 0.5},
    "sgd_batchnorm": {
        "rounds": 3,
        "warmup_rounds": 1,
        "optimizer": "sgd",
        "momentum": 0.0,
        "model_options": {"norm": "batch", "hidden": [16]},
    },
}


def _timeless(value):
    if isinstance(value, dict):
        return {key: _timeless(item) for key, item in value.items() if "seconds" not in key}
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


def run(output: Path) -> None:
    from fdabench.config.extends import deep_merge
    from fdabench.federation.rounds import run_rounds
    from fdabench.federation.settings import TrainSettings
    from fdabench.methods import METHODS, get_method

    torch.set_num_threads(1)
    histories = {}
    for name in METHODS.names():
        for setting, train in SETTINGS.items():
            method = get_method(name, SMALL_HPARAMS.get(name, {}))
            requires = getattr(method, "requires", None)  # older checkouts name it requires_train
            required = requires.train if hasattr(requires, "train") else getattr(method, "requires_train", {})
            settings = TrainSettings.from_dict(deep_merge(deep_merge(AUX_TRAIN, train), required))
            try:
                history = run_rounds(method, aux_problem(), settings, 0, torch.device("cpu"))
                histories[(name, setting)] = _timeless(history)
            except Exception as error:  # a refusal is part of what is compared
                histories[(name, setting)] = f"{type(error).__name__}: {error}"
    torch.save(histories, output)
    print(f"{len(histories)} runs, {sum(isinstance(h, str) for h in histories.values())} refused: {output}")


def compare(before_path: Path, after_path: Path) -> int:
    before, after = (torch.load(path, weights_only=False) for path in (before_path, after_path))
    if before.keys() != after.keys():
        print(f"different runs: {sorted(before.keys() ^ after.keys())}")
        return 1
    differ = [key for key in before if before[key] != after[key]]
    for key in differ:
        print(f"differs: {key}")
    refused = sorted(key for key in before if isinstance(before[key], str))
    print(f"{len(before)} runs, {len(differ)} differ; refused alike: {refused}")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run").add_argument("output", type=Path)
    both = commands.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.output)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
