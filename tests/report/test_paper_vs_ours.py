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


def _published_cells(raw, suite):
    from fdabench.config import validate_params

    params = validate_params({**raw, "suite": suite})
    return [params.cell(exp, method, target, 0) for exp in params.published_experiments()
            for method in params.methods(exp) for target in params.targets(exp)]


def test_the_paper_suite_runs_the_published_settings(repo_root):
    """The `paper` suite's compared experiments run the registry defaults, so no row is marked changed."""
    import yaml

    from fdabench.report.published import changes_from_published

    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    cells = _published_cells(raw, "paper")
    assert {cell.config["experiment"] for cell in cells} >= {"colored_mnist", "fmnist_noise", "fed_heart"}
    assert all(changes_from_published(cell.config) == [] for cell in cells)
    reduced = {"; ".join(changes_from_published(cell.config)) for cell in _published_cells(raw, "paper_cpu")
               if cell.config["experiment"] == "colored_mnist"}
    assert reduced == {"dataset_options.samples_per_environment = 5000 (published unset); partition.target_labelled = 0.01 "
                       "(published 0.001); train.model_options.width = 32 (published 64); train.rounds = 20 (published 50)"}


def test_changed_settings_are_marked_with_what_changed(tmp_path, repo_root):
    import yaml

    raw = yaml.safe_load((repo_root / "params.yaml").read_text())
    cell = next(c for c in _published_cells(raw, "paper") if c.config["experiment"] == "fmnist_noise" and c.config["method"] == "fedgp")
    paths = []
    for seed, rounds, final in ((0, 50, 0.70), (1, 50, 0.72), (0, 10, 0.50)):
        config = {**cell.config, "seed": seed, "target": "noise0.4", "train": {**cell.config["train"], "rounds": rounds}}
        payload = {"format": "fdabench.cell/1", "status": "complete", "cell": {k: config[k] for k in ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")},
                   "config": config, "metric": "accuracy", "final": final, "rounds": []}
        paths.append(tmp_path / f"{seed}-{rounds}.json")
        paths[-1].write_text(json.dumps(payload))
    table = paper_vs_ours(paths)
    assert list(table["changes"]) == ["", "train.rounds = 10 (published 50)"] and list(table["n_seeds"]) == [2, 1]
    markdown = paper_vs_ours_markdown(table)
    assert "| fmnist_noise | noise0.4 | fedgp | 71.09 | 71.00 ± 1.41 | 2 | -0.09 |" in markdown
    assert "| fmnist_noise | noise0.4 | fedgp [1] | 71.09 | 50.00 | 1 | -21.09 |" in markdown
    assert "[1] train.rounds = 10 (published 50)." in markdown
