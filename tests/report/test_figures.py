"""Figures of final metrics against a hyper-parameter: the right cells are plotted, the rest refused."""

import json

import pytest

from fdabench.report.figures import final_frame, plot_final


def _cell(tmp_path, method, algorithm, hparams, seed, final, target="cleveland"):
    config = {
        "suite": "s",
        "experiment": "weak_ablation",
        "dataset": "fed_heart",
        "method": method,
        "algorithm": algorithm,
        "hparams": hparams,
        "target": target,
        "seed": seed,
    }
    payload = {
        "format": "fdabench.cell/1",
        "status": "complete",
        "cell": {k: config[k] for k in ("suite", "experiment", "dataset", "method", "algorithm", "target", "seed")},
        "config": config,
        "metric": "accuracy",
        "final": final,
        "rounds": [],
    }
    path = tmp_path / f"{method}-{seed}.json"
    path.write_text(json.dumps(payload))
    return str(path)


@pytest.mark.parametrize("kind", ["alpha", "beta"])
def test_final_metric_against_a_hyper_parameter(tmp_path, kind):
    paths = [
        _cell(tmp_path, f"auxinfo_gp_{value}", "auxinfo_gp", {"alpha": value, "beta": value}, seed, 0.5 + value / 10)
        for value in (0.0, 0.5, 1.0)
        for seed in (0, 1)
    ]
    paths.append(_cell(tmp_path, "source_only", "source_only", {}, 0, 0.4))  # no α or β: not on the curve
    frame = final_frame(paths)
    assert frame[kind].notna().sum() == 6 and frame.loc[frame["method"] == "auxinfo_gp_1.0", "value"].tolist() == [
        60.0,
        60.0,
    ]
    output = tmp_path / f"{kind}.png"
    plot_final(paths, output, kind)
    assert output.stat().st_size > 1000


def test_no_fixed_value_is_refused(tmp_path):
    paths = [_cell(tmp_path, "source_only", "source_only", {}, 0, 0.4)]
    with pytest.raises(ValueError, match="no cells with a fixed alpha"):
        plot_final(paths, tmp_path / "x.png", "alpha")
