import json

import pytest

from fdabench.report.published import PUBLISHED, method_key
from fdabench.report.tables import paper_vs_ours, paper_vs_ours_markdown


def _cell(tmp_path, method, algorithm, beta, seed, final, target="noise0.4"):
    hparams = {"beta": beta} if beta is not None else {}
    config = {"suite": "s", "experiment": "fmnist_noise", "dataset": "fashion_mnist", "method": method, "algorithm": algorithm,
              "hparams": hparams, "target": target, "seed": seed, "published": "fmnist_noise"}
    payload = {"format": "fdabench.cell/1", "status": "complete", "cell": {k: config[k] for k in ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")},
               "config": config, "metric": "accuracy", "final": final, "rounds": []}
    path = tmp_path / f"{method}{seed}.json"
    path.write_text(json.dumps(payload))
    return str(path)


def test_method_keys():
    assert method_key({"algorithm": "fedgp", "hparams": {"beta": 0.5}}) == "fedgp_0.5"
    assert method_key({"algorithm": "fedda_auto", "hparams": {}}) == "fedda_auto"
    assert PUBLISHED["fmnist_noise"]["noise0.4"]["fedgp_0.5"] == 71.09


def test_paper_vs_ours(tmp_path):
    paths = [_cell(tmp_path, "fedgp", "fedgp", 0.5, s, f) for s, f in ((0, 0.70), (1, 0.72))]
    paths.append(_cell(tmp_path, "fedgp_b0.3", "fedgp", 0.3, 0, 0.6))  # no published number: left out
    table = paper_vs_ours(paths)
    assert len(table) == 1
    row = table.iloc[0]
    assert row["published"] == 71.09 and row["ours_mean"] == pytest.approx(71.0) and row["n_seeds"] == 2
    assert row["difference"] == pytest.approx(-0.09)
    assert "| fmnist_noise | noise0.4 | fedgp | 71.09 | 71.00 ± 1.41 | 2 | -0.09 |" in paper_vs_ours_markdown(table)
