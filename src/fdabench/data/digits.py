"""Digits domains built from scikit-learn's bundled 8x8 digits (embedded: no download), DomainBed style.

Both sources deal the shuffled 1,797 images round-robin into their environments, as DomainBed's
ColoredMNIST and RotatedMNIST do (`images[i::len(environments)]`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset

_SEED_OPTION = {"type": "integer", "minimum": 0, "description": "seed of the shuffle and of the random flips"}

# Training defaults for the 8x8 digits domains (the demo; no published protocol): with ~50 labelled target
# samples and batch 16, a target lr around 1e-3 learns within the round budget while 2e-4 barely moves.
_DIGITS_TRAIN = {
    "model": "digits_cnn",
    "rounds": 50,  # the published FDA runs use 50 rounds
    "warmup_rounds": 2,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-3,
    "target_lr": 1e-3,
    "source_batch_size": 64,
    "target_batch_size": 16,
}


def _shuffled_digits(seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)  # pixel values 0..16 -> [0, 1]
    order = np.random.default_rng(seed).permutation(len(images))
    return images[order], digits.target[order].astype(np.int64)


@DATASETS.register
class ColoredDigits(DatasetSource):
    """ColoredMNIST's recipe on 8x8 digits: label = digit < 5 with label noise; a colour channel agrees
    with the label with probability 90%, 80% and 10% in the environments +90, +80 and -90."""

    name = "colored_digits"
    task = "classification"
    domains = ("+90", "+80", "-90")
    # probability of flipping the colour away from the (noisy) label, DomainBed ColoredMNIST [0.1, 0.2, 0.9]
    COLOUR_FLIP = {"+90": 0.1, "+80": 0.2, "-90": 0.9}
    options_schema = {
        # DomainBed ColoredMNIST: 25% label noise
        "label_noise": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "label flip probability",
            "default": 0.25,
        },
        "seed": {**_SEED_OPTION, "default": 0},
    }
    default_train = _DIGITS_TRAIN
    default_partition = {"holdout_fraction": 0.2, "target_labelled": 48}

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        images, digits = _shuffled_digits(options["seed"])
        rng = np.random.default_rng(options["seed"] + 1)
        domains = {}
        for index, name in enumerate(self.domains):
            env_images, env_digits = images[index :: len(self.domains)], digits[index :: len(self.domains)]
            labels = (env_digits < 5).astype(np.int64) ^ (rng.random(len(env_digits)) < options["label_noise"])
            colours = labels ^ (rng.random(len(labels)) < self.COLOUR_FLIP[name])
            x = np.repeat(env_images[:, None], 2, axis=1)  # (n, 2, 8, 8): one channel per colour
            x[np.arange(len(x)), 1 - colours] = 0.0  # keep only the channel of the sample's colour
            domains[name] = DomainArrays(x, labels.astype(np.int64))
        return PreparedDataset(self.name, self.task, 2, (2, 8, 8), domains, meta={"options": options})


@DATASETS.register
class RotatedDigits(DatasetSource):
    """RotatedMNIST's recipe on 8x8 digits: six environments rotated by 0..75 degrees, 10 classes."""

    name = "rotated_digits"
    task = "classification"
    domains = ("0", "15", "30", "45", "60", "75")  # degrees, as DomainBed's RotatedMNIST
    options_schema = {"seed": {**_SEED_OPTION, "default": 0}}
    default_train = _DIGITS_TRAIN
    default_partition = {"holdout_fraction": 0.2, "target_labelled": 48}

    def prepare(self, options: dict[str, Any], raw_root: str | None = None) -> PreparedDataset:
        from scipy.ndimage import rotate

        images, digits = _shuffled_digits(options["seed"])
        domains = {}
        for index, name in enumerate(self.domains):
            env_images = images[index :: len(self.domains)]
            rotated = rotate(env_images, float(name), axes=(1, 2), reshape=False, order=1, mode="constant")
            x = np.clip(rotated, 0.0, 1.0).astype(np.float32)[:, None]
            domains[name] = DomainArrays(x, digits[index :: len(self.domains)].copy())
        return PreparedDataset(self.name, self.task, 10, (1, 8, 8), domains, meta={"options": options})
