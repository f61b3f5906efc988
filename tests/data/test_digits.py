"""The embedded digits domains follow DomainBed's recipes."""

import numpy as np
import pytest

from fdabench.data import PreparedDataset, get_dataset


def test_colored_digits_environments(colored_digits):
    assert list(colored_digits.domains) == ["+90", "+80", "-90"]
    assert colored_digits.input_shape == (2, 8, 8) and colored_digits.num_outputs == 2
    sizes = [len(d.y) for d in colored_digits.domains.values()]
    assert sum(sizes) == 1797 and max(sizes) - min(sizes) <= 1  # dealt round robin


@pytest.mark.parametrize("domain, agreement", [("+90", 0.9), ("+80", 0.8), ("-90", 0.1)])
def test_colour_agrees_with_label_at_the_environment_rate(colored_digits, domain, agreement):
    arrays = colored_digits.domains[domain]
    active = arrays.x.reshape(len(arrays.x), 2, -1).sum(axis=2)
    assert ((active > 0).sum(axis=1) <= 1).all()  # one colour channel per image
    colour = active.argmax(axis=1)
    rate = (colour == arrays.y).mean()
    assert abs(rate - agreement) < 0.05  # binomial sd ~0.016 at n=599


def test_label_noise_is_25_percent(colored_digits):
    from sklearn.datasets import load_digits

    # the digit identity is recoverable from the image; compare labels with "digit < 5"
    digits = load_digits()
    lookup = {digits.images[i].astype(np.float32).tobytes(): digits.target[i] for i in range(len(digits.target))}
    flips, total = 0, 0
    for arrays in colored_digits.domains.values():
        images = (arrays.x.sum(axis=1) * 16).round().astype(np.float32)
        for image, label in zip(images, arrays.y):
            digit = lookup.get(image.tobytes())
            if digit is not None:
                flips += int((digit < 5) != label)
                total += 1
    assert total > 1500
    assert abs(flips / total - 0.25) < 0.04


def test_rotated_digits(rotated_digits):
    assert list(rotated_digits.domains) == ["0", "15", "30", "45", "60", "75"]
    assert rotated_digits.num_outputs == 10 and rotated_digits.input_shape == (1, 8, 8)
    first = rotated_digits.domains["0"]
    assert first.x.min() >= 0 and first.x.max() <= 1
    # rotation by 0 degrees leaves the images unchanged: pixel values are multiples of 1/16
    assert np.allclose(first.x * 16, np.round(first.x * 16), atol=1e-5)
    # larger angles move more mass away from the unrotated images' typical pixels
    mean_image = first.x.mean(axis=0)
    distances = [np.abs(rotated_digits.domains[d].x.mean(axis=0) - mean_image).sum() for d in ["15", "45", "75"]]
    assert distances[0] < distances[1] < distances[2]


def test_prepare_is_deterministic_and_seeded(colored_digits):
    source = get_dataset("colored_digits")
    again = source.prepare(source.default_options)
    other = source.prepare({**source.default_options, "seed": 1})
    for name in colored_digits.domains:
        assert np.array_equal(again.domains[name].x, colored_digits.domains[name].x)
        assert np.array_equal(again.domains[name].y, colored_digits.domains[name].y)
    assert not np.array_equal(other.domains["+90"].y, colored_digits.domains["+90"].y)


def test_save_and_load_round_trip(tmp_path, rotated_digits):
    path = tmp_path / "prepared" / "rotated"
    rotated_digits.save(path)
    loaded = PreparedDataset.load(path)
    assert loaded.name == rotated_digits.name and loaded.input_shape == rotated_digits.input_shape
    for name, arrays in rotated_digits.domains.items():
        assert np.array_equal(loaded.domains[name].x, arrays.x)
        assert np.array_equal(loaded.domains[name].y, arrays.y)


def test_missing_prepared_file_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="fdabench prepare"):
        PreparedDataset.load(tmp_path / "nope")
