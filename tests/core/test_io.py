"""Atomic outputs: a failing writer leaves nothing that looks finished."""

import os

import pytest

from fdabench.core.io import atomic_path, content_hash, write_json_atomic


def test_failed_write_leaves_no_file(tmp_path):
    target = tmp_path / "out" / "cell.json"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text('{"status": "compl')
        raise RuntimeError("killed mid-write")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_successful_write_replaces_atomically_with_normal_permissions(tmp_path):
    target = tmp_path / "cell.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2})
    assert target.read_text().strip().endswith("}")
    assert '"a": 2' in target.read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["cell.json"]


def test_content_hash_is_order_independent_for_keys():
    import numpy as np

    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"x": np.arange(3)}) != content_hash({"x": np.arange(4)})


def test_active_views_link_into_the_suite_folder():
    from fdabench.core import paths

    assert paths.active_view("results/demo/table1.csv", "demo") == ("results/table1.csv", "demo/table1.csv")
    assert paths.active_view("results/demo/figures/a_rounds.png", "demo") == (
        "results/figures/a_rounds.png",
        "../demo/figures/a_rounds.png",
    )
    with pytest.raises(ValueError, match="results/smoke/table1.csv is not a result of suite demo"):
        paths.active_view("results/smoke/table1.csv", "demo")
