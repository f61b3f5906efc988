"""A cell's or archive record's digest (`fdabench.cell.digest`): what its writer seals verifies when read back from
its file, any edit to it is named, and a payload written before digests is unsealed, never taken as checked."""

import json
import math

import numpy as np
import pytest

from fdabench.cell.digest import DIGEST_KEY, EditedError, digest_matches, payload_digest, seal, verify
from fdabench.core.io import read_json, write_json_atomic


def _cell() -> dict:
    return {
        "format": "fdabench.cell/1",
        "status": "complete",
        "final": 0.8123456789012345,
        "finals": {"accuracy": 0.8123456789012345, "loss": float("nan")},
        "rounds": [{"round": 0, "accuracy": np.float32(0.8), "betas": (0.25, 0.75)}, {"round": 1, "accuracy": 0.81}],
        "model_size": np.int64(1234),
    }


def test_a_sealed_cell_verifies_once_written_and_read_back(tmp_path):
    path = tmp_path / "seed0.json"
    write_json_atomic(path, seal(_cell()))  # numpy numbers and tuples as the training job's result holds them
    read = read_json(path)
    assert read[DIGEST_KEY].startswith("sha256:") and len(read[DIGEST_KEY]) == len("sha256:") + 64
    assert verify(read, str(path)) is True
    assert seal(read) == read  # sealing again gives the same digest


@pytest.mark.parametrize(
    "edit",
    [
        lambda cell: cell.update(final=math.nextafter(cell["final"], 1)),  # the next float up
        lambda cell: cell["rounds"][1].update(accuracy=0.91),
        lambda cell: cell["rounds"][0]["betas"].reverse(),
        lambda cell: cell.update(extra=1),
        lambda cell: cell.pop("finals"),
        lambda cell: cell.update(digest="sha256:" + "0" * 64),
    ],
    ids=["final", "a round", "betas order", "a key added", "a key removed", "the digest"],
)
def test_any_edit_after_writing_is_named(tmp_path, edit):
    path = tmp_path / "seed0.json"
    write_json_atomic(path, seal(_cell()))
    cell = read_json(path)
    edit(cell)
    path.write_text(json.dumps(cell, indent=1))  # valid JSON, edited by hand
    with pytest.raises(EditedError, match=f"^{path}: edited after it was written"):
        verify(read_json(path), str(path))
    assert not digest_matches(read_json(path))


def test_a_payload_without_a_digest_is_unsealed_not_verified_nor_edited():
    cell = json.loads(json.dumps(_cell(), default=lambda value: value.tolist()))
    assert verify(cell, "old.json") is False and digest_matches(cell)


def test_the_digest_is_the_sha256_of_the_canonical_json_without_it():
    import hashlib

    payload = {"b": [1, 2.5], "a": "x", DIGEST_KEY: "anything"}
    expected = hashlib.sha256(b'{"a":"x","b":[1,2.5]}').hexdigest()
    assert payload_digest(payload) == f"sha256:{expected}"
