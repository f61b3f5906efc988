"""Figures: the right cells are plotted with their methods' styles and the published values; the rest refused."""

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from fdabench.report.figures import (
    draw_betas,
    draw_final,
    draw_rounds,
    final_frame,
    natural_order,
    plot_final,
    plot_rounds,
    plot_sweep,
    with_average,
)
from fdabench.report.style import method_styles
from fdabench.reproduction.lookups import published_mark


def _cell(
    tmp_path,
    method,
    algorithm,
    hparams,
    seed,
    final,
    target="cleveland",
    experiment="weak_ablation",
    published=None,
    rounds=3,
    betas=None,
):
    config = {
        "suite": "s",
        "experiment": experiment,
        "dataset": "fed_heart",
        "published": published,
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
        "family": {"auxinfo_gp": "weakly_supervised", "fedda": "fda", "fedgp": "fda"}.get(algorithm, "baseline"),
        "final": final,
        "rounds": [
            {"round": r, "phase": "fda", "accuracy": final * (r + 1) / 3, **({"betas": betas} if betas else {})}
            for r in range(rounds)
        ],
    }
    if betas:
        payload["sources"] = [f"{15 * (k + 1) % 90}" for k in range(len(betas))]
    path = tmp_path / f"{experiment}-{method}-{target}-{seed}.json"
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
    plot_sweep(paths, output, kind)
    assert output.stat().st_size > 1000


def test_no_fixed_value_is_refused(tmp_path):
    paths = [_cell(tmp_path, "source_only", "source_only", {}, 0, 0.4)]
    with pytest.raises(ValueError, match="no cells with a fixed alpha"):
        plot_sweep(paths, tmp_path / "x.png", "alpha")


def _lines_by_label(axis):
    return {line.get_label(): line for line in axis.get_lines() if not line.get_label().startswith("_")}


def test_rounds_figure_rows_are_families_with_the_suite_styles(tmp_path):
    paths = [
        _cell(tmp_path, method, method, {}, seed, final, target=target)
        for method, final in (("source_only", 0.4), ("target_only", 0.5), ("fedgp", 0.7))
        for target in ("a", "b")
        for seed in (0, 1)
    ]
    # the suite also has fedda, between target_only and fedgp: fedgp's style is the suite's, not this subset's
    suite = {"source_only": "baseline", "target_only": "baseline", "fedda": "fda", "fedgp": "fda"}
    figure = draw_rounds(paths, "t", suite)
    axes = figure.axes
    assert len(axes) == 4  # 2 families (baselines, FDA rules) x 2 targets
    styles = method_styles(suite)
    fda_panel = _lines_by_label(axes[2])
    assert matplotlib.colors.to_rgb(fda_panel["fedgp"].get_color()) == styles["fedgp"].colour
    assert styles["fedgp"].colour != method_styles({"fedgp": "fda"})["fedgp"].colour
    # the baselines repeat as thin grey references in the other family's panels, and nowhere else
    assert {"source_only", "target_only"} <= set(fda_panel) and matplotlib.colors.to_hex(
        fda_panel["source_only"].get_color()
    ) == matplotlib.colors.to_hex("0.72")
    # per-round mean over the two seeds of the cell's curve
    assert np.allclose(fda_panel["fedgp"].get_ydata(), [100 * 0.7 * (r + 1) / 3 for r in range(3)])
    legends = [axis.get_legend() for axis in axes if axis.get_legend()]
    assert [[text.get_text() for text in legend.get_texts()] for legend in legends] == [
        ["source_only", "target_only"],
        ["fedgp", "source_only / target_only"],
    ]
    plot_rounds(paths, tmp_path / "rounds.png")
    assert (tmp_path / "rounds.png").read_bytes()[:4] == b"\x89PNG"


def test_final_figure_shows_seeds_means_and_published_values(tmp_path):
    # fmnist_noise, target noise0.4: published FedDA (β = 0.5) 58.60 and Source Only 18.55
    # (fdabench.reproduction.papers.published)
    paths = [
        _cell(
            tmp_path,
            method,
            method,
            {"beta": 0.5} if method == "fedda" else {},
            seed,
            final + seed / 100,
            target=target,
            experiment="e",
            published="fmnist_noise",
        )
        for method, final in (("fedda", 0.6), ("source_only", 0.3))
        for target in ("noise0.4", "noise0.6")
        for seed in (0, 1)
    ]
    frame = with_average(final_frame(paths, published_mark))
    fedda = frame[(frame["method"] == "fedda")]
    published = dict(zip(fedda["target"], fedda["published"]))
    assert published["noise0.4"] == pytest.approx(58.6)
    average = fedda[fedda["target"] == "Avg"].sort_values("seed")["value"].tolist()
    assert average == pytest.approx([60.0, 61.0])
    figure = draw_final(paths, "t", published=published_mark)
    panels = [axis for axis in figure.axes if axis.get_visible()]
    assert [axis.get_title() for axis in panels] == ["target noise0.4", "target noise0.6", "target Avg"]
    ticks = [label.get_text() for label in panels[0].get_yticklabels()]
    assert ticks == ["fedda", "source_only"]
    # the published diamond sits at the published value on fedda's row
    diamonds = [c for c in panels[0].collections if c.get_gid() == "published"]
    assert diamonds[0].get_offsets().tolist() == [[pytest.approx(58.6), 0.0], [pytest.approx(18.55), 1.0]]
    # every seed is a dot
    dots = [c for c in panels[0].collections if c.get_gid() == "seeds"]
    assert sorted(dots[0].get_offsets()[:, 0].tolist()) == pytest.approx([30.0, 31.0, 60.0, 61.0])
    plot_final(paths, tmp_path / "final.png", published=published_mark)
    assert (tmp_path / "final.png").read_bytes()[:4] == b"\x89PNG"
    # the report knows no paper: without the reproduction package's values, nothing is marked
    bare = draw_final(paths, "t")
    marks = [c for axis in bare.axes for c in axis.collections if c.get_gid() == "published"]
    assert marks and not any(len(c.get_offsets()) for c in marks)
    assert with_average(final_frame(paths))["published"].isna().all()
    bare.clf()


def test_the_figure_command_marks_the_published_values(tmp_path, monkeypatch):
    """`fdabench figure final` passes the reproduction package's published values to the figure."""
    from fdabench.cli import main
    from fdabench.report import figures

    calls = []
    monkeypatch.setattr(figures, "plot_final", lambda *args: calls.append(args))
    path = _cell(tmp_path, "fedda", "fedda", {"beta": 0.5}, 0, 0.6, target="noise0.4", published="fmnist_noise")
    assert main(["figure", "final", path, "--output", str(tmp_path / "f.png")]) == 0
    assert calls[0][-1] is published_mark


def test_cells_without_a_family_are_refused_with_the_way_out(tmp_path):
    path = _cell(tmp_path, "fedgp", "fedgp", {"beta": 0.5}, 0, 0.6)
    cell = json.loads(Path(path).read_text())
    del cell["family"]  # a cell from before cells recorded families
    Path(path).write_text(json.dumps(cell))
    with pytest.raises(ValueError, match="methods fedgp record no method family.*fdabench figure --methods"):
        draw_rounds([path])
    draw_rounds([path], families={"fedgp": "fda"}).clf()  # the suite's families make it drawable


def _seed_lines(axis):
    return [line for line in axis.get_lines() if line.get_gid() == "seed"]


def test_rounds_panels_have_integer_rounds_their_own_range_and_bands_only_from_three_seeds(tmp_path):
    paths = [
        _cell(tmp_path, method, method, {}, seed, 0.5, target=target, rounds=rounds)
        for method, rounds, seeds in (
            ("source_only", 3, (0, 1)),
            ("fedgp", 3, (0, 1, 2)),
            ("finetune_offline", 9, (0, 1)),
        )
        for target in ("a", "b")
        for seed in seeds
    ]
    suite = {"source_only": "baseline", "fedgp": "fda", "finetune_offline": "federated"}
    figure = draw_rounds(paths, "t", suite)
    baseline, fda, federated = figure.axes[0], figure.axes[2], figure.axes[4]
    # rounds are whole numbers: no tick at 2.5
    for axis in figure.axes:
        low, high = axis.get_xlim()
        ticks = [tick for tick in axis.get_xticks() if low <= tick <= high]
        assert ticks and all(float(tick).is_integer() for tick in ticks)
    # finetune_offline's 9 rounds stretch its own panels only
    assert baseline.get_xlim()[1] < 4 and fda.get_xlim()[1] < 4 and federated.get_xlim()[1] > 8
    # a ±1 sd band from fedgp's 3 seeds; none from 2 seeds, whose runs are faint lines instead
    assert fda.collections and not baseline.collections and not federated.collections
    assert len(_seed_lines(baseline)) == 2 and len(_seed_lines(federated)) == 2 and not _seed_lines(fda)
    figure.clf()


def test_betas_legend_in_natural_order_with_integer_rounds(tmp_path):
    paths = [
        _cell(tmp_path, "fedgp_auto", "fedgp", {}, seed, 0.5, target="-90", betas=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
        for seed in (0, 1)
    ]
    figure = draw_betas(paths, "t")
    axis = figure.axes[0]
    legends = [axis.get_legend() for axis in figure.axes if axis.get_legend()] + (
        [figure.legends[0]] if figure.legends else []
    )
    assert [text.get_text() for text in legends[0].get_texts()] == ["0", "15", "30", "45", "60", "75"]
    low, high = axis.get_xlim()
    assert all(float(tick).is_integer() for tick in axis.get_xticks() if low <= tick <= high)
    assert not axis.collections and len(_seed_lines(axis)) == 12  # 2 seeds: no band, each seed a faint line
    figure.clf()


def test_one_target_has_no_average_panel(tmp_path):
    paths = [_cell(tmp_path, "fedgp", "fedgp", {"beta": 0.5}, seed, 0.6, target="a", experiment="e") for seed in (0, 1)]
    figure = draw_final(paths, "t")
    assert [axis.get_title() for axis in figure.axes if axis.get_visible()] == ["target a"]
    figure.clf()


def test_natural_order_compares_numbers_as_numbers():
    assert natural_order(["75", "0", "-90", "15"]) == ["-90", "0", "15", "75"]
    assert natural_order(["s10", "noise0.6", "s2", "noise0.4"]) == ["noise0.4", "noise0.6", "s2", "s10"]
