"""`fdabench bench gpu`: its CPU dry run end to end, on a stand-in for a bare GPU machine (snakemake, dvc, POT and
Flower not importable); its output format; the time budget; a failing stage; the forecast's arithmetic; and
`cohort: auto` decided from a committed measurement. The GPU run itself needs a GPU (docs/benchmarks.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fdabench.cli import main
from fdabench.config import load_params
from fdabench.core.io import read_json, write_json_atomic
from fdabench.federation import cohort
from fdabench.federation.cohort import auto_cohort, use_cohort
from fdabench.federation.problem import ClientData
from fdabench.models import build_model, model_name
from fdabench.speed.cell import bench_cell
from fdabench.speed.gpu import forecast, packing, report, run, stages
from fdabench.speed.gpu.budget import Stage, allotment, run_stages

REPO = Path(__file__).resolve().parents[2]
COMMITTED_RUN = REPO / "docs" / "benchmarks" / "gpu.json"
#: fdabench requirements (and dev tools) a lent GPU machine's image lacks and the bench must not import
BARE_MACHINE_LACKS = ("snakemake", "dvc", "ot", "flwr", "mkdocs", "mutmut", "ruff")
BLOCKER = f"""
import importlib.abc
import sys


class _BareMachine(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BARE_MACHINE_LACKS!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the bare GPU machine)", name=name)
        return None


sys.meta_path.insert(0, _BareMachine())
"""


@pytest.fixture(scope="module")
def bare_environment(tmp_path_factory) -> dict[str, str]:
    """This environment with a sitecustomize that refuses the packages a bare GPU machine lacks (in every child
    process too: they inherit PYTHONPATH)."""
    site = tmp_path_factory.mktemp("bare_site")
    (site / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, bare_environment):
    """`fdabench bench gpu --dry-run` run once, as a bare GPU machine would run it: (process, output folder)."""
    output = tmp_path_factory.mktemp("bench_gpu")
    command = [sys.executable, "-m", "fdabench", "bench", "gpu", "--dry-run", "--output-dir", str(output)]
    done = subprocess.run(command, cwd=REPO, env=bare_environment, capture_output=True, text=True, timeout=600)
    return done, output


def test_the_stand_in_for_a_bare_machine_refuses_what_it_lacks(bare_environment):
    probe = "import snakemake"
    done = subprocess.run([sys.executable, "-c", probe], env=bare_environment, capture_output=True, text=True)
    assert done.returncode != 0 and "not on the bare GPU machine" in done.stderr


def test_the_dry_run_writes_a_valid_json_and_its_markdown(dry_run):
    done, output = dry_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = report.validate_result(read_json(output / run.JSON_NAME))
    assert result["format"] == "fdabench.bench_gpu/1" and result["dry_run"] is True
    assert {name: stage["status"] for name, stage in result["stages"].items()} == dict.fromkeys(report.STAGES, "ok")
    assert 0 < result["wall_seconds"] <= result["budget_seconds"] == run.DEFAULT_BUDGET
    markdown = (output / run.MARKDOWN_NAME).read_text()
    assert markdown == report.render_markdown(result)
    environment = result["environment"]
    assert environment["device_type"] == "cpu" and environment["torch"] == torch.__version__
    # the header facts: device, driver, torch, commit
    for row in ("| device | ", "| driver | ", f"| torch | {torch.__version__} ", "| commit | "):
        assert row in markdown, row
    assert "CPU dry run" in markdown and environment["source_hash"] in markdown
    for title, columns in report.COLUMNS.items():
        assert f"## {title}\n" in markdown and "| " + " | ".join(columns) + " |" in markdown, title


def test_the_dry_run_exercised_every_stage(dry_run):
    _, output = dry_run
    stage = {name: record["result"] for name, record in read_json(output / run.JSON_NAME)["stages"].items()}
    assert stage["pytest"]["collect_only"] and stage["pytest"]["counts"]["collected"] >= 1
    assert "tests/core/test_cuda.py" in stage["pytest"]["command"]
    cells = stage["cells"]["cells"]
    assert set(cells) == set(stages.CELL_METHODS)
    for summary in cells.values():
        assert summary["model"] == "fmnist_cnn" and summary["cohort"]["on"]["cohorts_trained"] > 0
        assert summary["cohort"]["off"]["cohorts_trained"] == 0 and summary["auto_picks"] == "off"
    levels = stage["packing"]["levels"]
    assert [level["K"] for level in levels] == list(stages.DRY_RUN.pack_counts)
    for level in levels:
        assert level["failed"] == 0 and level["cells_per_hour"] == pytest.approx(
            level["K"] * 3600 / level["wall_seconds"]
        )
        assert len(level["peak_memory_bytes"]) == level["K"] and min(level["peak_memory_bytes"]) > 0
        assert len(level["finals"]) == 1  # K copies of one cell on the CPU: one final
    timed = {(timing["model"], tuple(timing["input_shape"])) for timing in stage["steps"]["timings"]}
    assert timed == {("mnist_cnn", (2, 14, 14)), ("resnet18", (3, 16, 16)), ("resnet50", (3, 16, 16))}
    tables = {row["table"]: row for row in stage["steps"]["forecast"]["tables"]}
    assert set(tables) == {"table1", "table_extended"} and all(row["gpu_hours"] > 0 for row in tables.values())
    assert all(row["gpu_hours_alternative"] > 0 for row in tables.values())  # ResNet-50 in ResNet-18's place
    assert "table_noise" in stage["steps"]["forecast"]["left_out"]
    agreement = stage["agreement"]
    assert (
        agreement["agree"]
        and agreement["difference"] == 0
        and agreement["rounds"] == stages.DRY_RUN.agreement_rounds + 2
    )


def test_the_json_schema_refuses_a_broken_result(dry_run):
    _, output = dry_run
    result = read_json(output / run.JSON_NAME)
    report.validate_result(result)
    broken = json.loads(json.dumps(result))
    broken["format"] = "fdabench.bench_gpu/0"
    del broken["stages"]["packing"]["result"]["levels"]
    broken["stages"]["steps"]["status"] = "done"
    problems = report.schema_problems(broken)
    assert len(problems) == 3, problems
    assert any(problem.startswith("format:") for problem in problems)
    assert any("stages/packing" in problem and "levels" in problem for problem in problems)
    assert any(problem.startswith("stages/steps/status") for problem in problems)
    with pytest.raises(ValueError, match="not a fdabench.bench_gpu/1 result"):
        report.validate_result(broken)


def test_from_renders_a_result_and_fills_the_docs_block(dry_run, tmp_path, capsys):
    _, output = dry_run
    page = tmp_path / "page.md"
    page.write_text(f"# Benchmarks\n\n{report.DOCS_BEGIN}\nOLD BLOCK\n{report.DOCS_END}\n\nafter\n")
    arguments = ["bench", "gpu", "--from", str(output / run.JSON_NAME), "--output-dir", str(tmp_path / "out")]
    assert main([*arguments, "--docs", str(page)]) == 0
    result = read_json(output / run.JSON_NAME)
    assert (tmp_path / "out" / run.MARKDOWN_NAME).read_text() == report.render_markdown(result)
    text = page.read_text()
    assert "OLD BLOCK" not in text and text.endswith(f"{report.DOCS_END}\n\nafter\n")
    assert f"{report.DOCS_BEGIN}\n{report.render_markdown(result, 4)}{report.DOCS_END}" in text
    assert "stages: pytest ok" in capsys.readouterr().out
    write_json_atomic(tmp_path / "bad.json", {"format": "something else"})
    assert main(["bench", "gpu", "--from", str(tmp_path / "bad.json"), "--output-dir", str(tmp_path / "out")]) == 2


def test_without_cuda_the_gpu_run_is_refused_with_the_dry_run_named(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "cuda_available", lambda: False)
    with pytest.raises(ValueError, match="--dry-run"):
        run.run_gpu_bench(load_params(REPO / "params.yaml"), tmp_path)


# -- the budget and failing stages -----------------------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _taking(clock: FakeClock, seconds: float, seen: list, outcome=None):
    def stage(deadline, result):
        seen.append(deadline.left())
        result["took"] = seconds
        clock.now += seconds
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return stage


def test_each_stage_gets_what_is_left_less_the_later_stages_shares_and_is_skipped_below_its_minimum():
    clock, seen = FakeClock(), []
    plan = [
        Stage("a", 0.5, 10, _taking(clock, 60, seen)),  # allotted 100 - (0.3 + 0.2) * 100 = 50; overruns to 60
        Stage("b", 0.3, 20, _taking(clock, 5, seen)),  # 40 left, 20 reserved for c: allotted 20, its minimum
        Stage("c", 0.2, 40, _taking(clock, 1, seen)),  # 35 left: under its minimum of 40
    ]
    records = run_stages(plan, 100, clock)
    assert seen == [50, 20]
    assert [records[name]["status"] for name in "abc"] == ["ok", "ok", "skipped"]
    assert [records[name]["allotted_seconds"] for name in "abc"] == [50, 20, 35]
    assert records["a"]["seconds"] == 60 and records["a"]["result"] == {"took": 60}
    assert records["c"]["reason"] == (
        "time budget: 35 s of 100 s left, 0 s of it reserved for the later stages; this stage needs 40 s"
    )
    assert allotment(remaining=80, later_shares=0.25, budget=200) == 30


def test_a_failing_stage_keeps_what_it_measured_and_the_stages_after_it_run():
    clock, seen, snapshots = FakeClock(), [], []
    plan = [
        Stage("a", 0.2, 0, _taking(clock, 3, seen, RuntimeError("the GPU fell off the bus"))),
        Stage("b", 0.2, 0, _taking(clock, 2, seen, "finals differ by 0.5")),
        Stage("c", 0.2, 0, _taking(clock, 1, seen)),
    ]
    records = run_stages(plan, 100, clock, on_stage=lambda r: snapshots.append(list(r)))
    assert records["a"]["status"] == "error" and records["a"]["error"] == "RuntimeError: the GPU fell off the bus"
    assert "the GPU fell off the bus" in records["a"]["traceback"] and records["a"]["result"] == {"took": 3}
    assert records["b"]["status"] == "failed" and records["b"]["reason"] == "finals differ by 0.5"
    assert records["c"]["status"] == "ok"
    assert snapshots == [["a"], ["a", "b"], ["a", "b", "c"]]  # the outputs are written after every stage


def test_a_run_writes_its_outputs_after_every_stage_and_records_a_stage_error(tmp_path):
    clock = FakeClock()
    on_disk = []

    def agreement(deadline, result):
        on_disk.append(read_json(tmp_path / run.JSON_NAME)["stages"]["steps"]["status"])  # written after steps
        clock.now += 2
        cell = dict(zip(("suite", "experiment", "method", "target", "seed"), stages.AGREEMENT_CELL))
        result.update(cell=cell, rounds=5, metric="accuracy", device="cpu", device_final=0.5, cpu_final=0.5)
        result.update(difference=0.0, tolerance=0.02, agree=True)

    def steps(deadline, result):
        result["timings"] = [{"model": "resnet18"}]
        raise MemoryError("CUDA out of memory")

    def fake_stages(ctx, dry_run):
        assert dry_run and ctx.device.type == "cpu" and ctx.sizes == stages.DRY_RUN
        skipped = [Stage(name, 0.1, 1e9, lambda d, r: None) for name in ("pytest", "cells", "packing")]
        return [*skipped, Stage("steps", 0.1, 0, steps), Stage("agreement", 0.1, 0, agreement)]

    params = load_params(REPO / "params.yaml")
    result = run.run_gpu_bench(params, tmp_path, dry_run=True, budget=60, make_stages=fake_stages, clock=clock)
    assert on_disk == ["error"]
    written = report.validate_result(read_json(tmp_path / run.JSON_NAME))
    assert written == json.loads(json.dumps(result))
    statuses = [written["stages"][name]["status"] for name in report.STAGES]
    assert statuses == ["skipped", "skipped", "skipped", "error", "ok"]
    assert written["stages"]["steps"]["error"] == "MemoryError: CUDA out of memory"
    assert written["stages"]["steps"]["result"] == {"timings": [{"model": "resnet18"}]}
    assert written["wall_seconds"] == 2 and written["cohort_auto"]["families"] == {}
    markdown = (tmp_path / run.MARKDOWN_NAME).read_text()
    assert "| steps | error | 0.0 | MemoryError: CUDA out of memory |" in markdown
    assert "| pytest | skipped | 0.0 | time budget: " in markdown
    assert "## GPU vs CPU: one small cell end to end" in markdown


# -- the forecast ----------------------------------------------------------------------------------------------------


def test_cell_steps_by_hand():
    # PACS: 9,991 images in 4 domains (mean 2,497.75): 500 held out and 1,998 'in' per domain; 15% of the target's
    # 'in' split labelled (300); 2 warm-up + 50 FDA rounds; 3 sources x ceil(1,998 / 32) = 63 steps each round
    assert forecast.cell_steps(9_991, 4, 0.2, 0.15, 2, 50, 1, 1, 32, 16) == (52 * 3 * 63, 50 * 19, 52 * 500)
    # a count of labelled samples (an int) is taken as it is; two local epochs double the sources' steps
    assert forecast.cell_steps(9_991, 4, 0.2, 40, 0, 10, 2, 1, 32, 16) == (10 * 2 * 3 * 63, 10 * 3, 10 * 500)


def _timing(model: str, step_seconds: dict[str, float], eval_rate: float) -> dict:
    return {
        "model": model,
        "input_shape": [3, 8, 8],
        "train_step_seconds": step_seconds,
        "eval_images_per_second": eval_rate,
    }


def test_the_forecast_multiplies_cells_steps_and_measured_times():
    def workload(name, cells, model):
        return forecast.Workload(name, "pacs", cells, model, {}, (3, 8, 8), 32, 16, 1024, 1000, 100, 5000)

    workloads = {"a": workload("a", 10, "resnet18"), "b": workload("b", 4, "mnist_cnn")}
    timings = [
        _timing("resnet18", {"32": 0.1, "16": 0.05}, 1000.0),
        _timing("resnet50", {"32": 0.3, "16": 0.2}, 500.0),
        _timing("mnist_cnn", {"32": 0.01, "16": 0.01}, 10_000.0),
    ]
    tables = {"t": {"experiments": ["a", "b"]}, "u": {"experiments": ["a", "c"]}}
    found = forecast.table_forecast(tables, workloads, timings)
    # a: 1000 x 0.1 + 100 x 0.05 + 5000 / 1000 = 110 s (ResNet-50: 300 + 20 + 10 = 330 s); b: 10 + 1 + 0.5 = 11.5 s
    (row,) = found["tables"]
    assert row["cells"] == 14 and row["models"] == ["mnist_cnn", "resnet18"]
    assert row["gpu_hours"] == pytest.approx((10 * 110 + 4 * 11.5) / 3600)
    assert row["gpu_hours_alternative"] == pytest.approx((10 * 330 + 4 * 11.5) / 3600)
    assert found["left_out"] == {"u": "c: not leave-one-domain-out on a DomainBed dataset"}
    # a model not timed (the budget ran out): no number rather than a partial one
    assert forecast.table_forecast(tables, workloads, timings[:2])["tables"][0]["gpu_hours"] is None


def test_the_forecast_counts_the_paper_suites_cells_and_settings():
    paper = load_params(REPO / "params.yaml").for_suite("paper")
    workloads = forecast.suite_workloads(paper)
    table1 = paper.tables()["table1"]["experiments"]
    assert sum(workloads[e].cells for e in table1) == sum(1 for _ in paper.cells(table1))
    vlcs = workloads["vlcs"]
    train = paper.train_settings("vlcs")
    assert (vlcs.model, vlcs.input_shape, vlcs.source_batch) == ("resnet18", (3, 224, 224), train["source_batch_size"])
    per_domain = 10_729 / 4
    in_split = round(per_domain) - round(0.2 * per_domain)
    assert vlcs.source_steps == (train["warmup_rounds"] + train["rounds"]) * 3 * math.ceil(in_split / 32)
    specs = forecast.timing_specs(workloads)
    assert [(spec["model"], spec["batches"]) for spec in specs if spec["input_shape"] == [3, 224, 224]] == [
        ("resnet18", [32, 16]),
        ("resnet50", [32, 16]),
    ]
    assert forecast.suite_workloads(paper, image_size=16)["pacs"].input_shape == (3, 16, 16)


# -- helpers of the stages --------------------------------------------------------------------------------------------


def test_pytest_summaries_and_nvidia_smi_output_are_read():
    assert stages.pytest_counts("4 passed, 2 skipped, 310 deselected in 41.2s") == {
        "passed": 4,
        "skipped": 2,
        "deselected": 310,
    }
    assert stages.pytest_counts("6/316 tests collected (310 deselected) in 3.1s") == {"deselected": 310, "collected": 6}
    assert stages.pytest_counts("1 failed, 1 error in 2s") == {"failed": 1, "errors": 1}
    assert packing.parse_used_mib("4021\n") == 4021 and packing.parse_used_mib("") is None
    assert packing.parse_process_mib("123, 500\n456, [N/A]\n789, 20\n") == {"123": 500, "789": 20}


def test_the_gpu_tests_are_found_by_their_mark():
    found = stages.gpu_test_files(REPO / "tests")
    assert {"tests/core/test_cuda.py", "tests/speed/test_bench_gpu.py"} <= set(found)
    assert "tests/speed/test_bench.py" not in found


def test_the_fmnist_stand_in_has_fashion_mnists_layout():
    dataset = stages.inputs.fmnist_stand_in((30, 5))
    train, test = dataset.domains["train"], dataset.domains["test"]
    assert dataset.name == "fashion_mnist" and dataset.input_shape == (1, 28, 28) and dataset.num_outputs == 10
    assert train.x.shape == (300, 1, 28, 28) and train.x.dtype.name == "uint8" and test.x.shape == (50, 1, 28, 28)
    assert sorted(set(train.y.tolist())) == list(range(10)) and (train.y == 3).sum() == 30


# -- cohort: auto ----------------------------------------------------------------------------------------------------


def _cells_stage(speedups: dict[str, float], model: str = "fmnist_cnn") -> dict:
    cells = {method: {"model": model, "device": "cuda:0", "speedup": speedup} for method, speedup in speedups.items()}
    return {"cells": {"status": "ok", "result": {"cells": cells}}}


def test_cohort_auto_is_decided_per_model_family_from_the_cells_measured():
    on = report.cohort_decisions(_cells_stage({"fedgp": 1.6, "fedgp_auto_threshold": 1.3}))
    assert on["device_type"] == "cuda"
    family = on["families"]["fmnist_cnn"]
    assert family["decision"] == "on" and family["speedups"] == [1.6, 1.3]
    assert family["table_entry"] == '("cuda", "fmnist_cnn"): True,'
    assert family["auto_now"] is auto_cohort("cuda", "fmnist_cnn")  # what the table says today
    # one cell within the noise margin: the family stays one by one
    off = report.cohort_decisions(_cells_stage({"fedgp": 1.6, "fedgp_auto_threshold": 1.02}))
    assert off["families"]["fmnist_cnn"]["decision"] == "off"
    assert report.cohort_decisions({})["families"] == {}


def test_cohort_auto_must_follow_a_committed_gpu_run_and_stays_off_on_cuda_without_one():
    # no GPU run (or only a dry run): auto may not turn cohorts on for CUDA
    assert report.auto_table_mismatches(None, {}, {"cpu": False, "cuda": False}) == []
    assert report.auto_table_mismatches(None, {("cuda", "fmnist_cnn"): True}, {"cuda": False}) == [
        "('cuda', 'fmnist_cnn'): on without a committed GPU measurement"
    ]
    measured_on = {"dry_run": False, "cohort_auto": report.cohort_decisions(_cells_stage({"fedgp": 1.6}))}
    assert report.auto_table_mismatches(measured_on, {}, {"cuda": False}) == [
        "('cuda', 'fmnist_cnn'): auto is False, the measurement decided on"
    ]
    assert report.auto_table_mismatches(measured_on, {("cuda", "fmnist_cnn"): True}, {"cuda": False}) == []
    measured_off = {"dry_run": False, "cohort_auto": report.cohort_decisions(_cells_stage({"fedgp": 0.9}))}
    assert report.auto_table_mismatches(measured_off, {}, {"cuda": False}) == []


def test_cohort_auto_agrees_with_the_committed_measurement():
    committed = report.validate_result(read_json(COMMITTED_RUN)) if COMMITTED_RUN.exists() else None
    assert committed is None or not committed["dry_run"], "docs/benchmarks/gpu.json must be a GPU run, not a dry run"
    assert report.auto_table_mismatches(committed, cohort.AUTO_COHORT_BY_MODEL, cohort.AUTO_COHORT) == []
    if committed is None:  # today: no GPU measurement, so auto trains one by one on a GPU
        assert not cohort.auto_cohort("cuda", "fmnist_cnn") and not cohort.auto_cohort("cpu", "fmnist_cnn")


def test_use_cohort_follows_the_entry_of_the_models_family(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    clients = [ClientData(f"s{i}", torch.randn(8, 5, generator=generator), torch.arange(8) % 2) for i in range(3)]
    mlp = build_model("mlp", (5,), 2)
    by_hand = torch.nn.Sequential(torch.nn.Linear(5, 2))
    assert model_name(mlp) == "mlp" and model_name(by_hand) is None
    cuda = torch.device("cuda")  # the decision only; nothing runs on CUDA
    assert not use_cohort("auto", cuda, mlp, clients)
    monkeypatch.setitem(cohort.AUTO_COHORT_BY_MODEL, ("cuda", "mlp"), True)
    assert use_cohort("auto", cuda, mlp, clients)
    assert not use_cohort("auto", cuda, by_hand, clients)  # another family: the device type's default
    assert not use_cohort("auto", torch.device("cpu"), mlp, clients)
    assert not use_cohort("off", cuda, mlp, clients)


def test_a_measured_family_reaches_the_round_loop(tmp_path, monkeypatch):
    demo = load_params(REPO / "params.yaml").for_suite("demo")
    config = demo.cell("colored_digits", "fedgp", "-90", 0).config
    inputs = stages.inputs.embedded_inputs(tmp_path, config)
    bench = lambda: bench_cell(demo, "colored_digits", "fedgp", "-90", 0, 1, device="cpu", cohort="auto", inputs=inputs)
    assert bench()["cohorts_trained"] == 0  # auto on a CPU: one by one
    monkeypatch.setitem(cohort.AUTO_COHORT_BY_MODEL, ("cpu", "mlp"), True)
    measured = bench()
    assert measured["model"] == "mlp" and measured["cohorts_trained"] == 2  # the warm-up and the FDA round


def test_the_docs_show_the_committed_gpu_run_or_that_there_is_none():
    committed = report.validate_result(read_json(COMMITTED_RUN)) if COMMITTED_RUN.exists() else None
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    block = page.split(report.DOCS_BEGIN, 1)[1].split(report.DOCS_END, 1)[0]
    assert block.strip() == report.docs_block(committed).strip()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_one_resnet18_step_is_timed_on_the_gpu():
    spec = {"model": "resnet18", "model_options": {"weights": "imagenet"}, "input_shape": [3, 64, 64], "batches": [8]}
    timing = stages.steps.time_model(spec, torch.device("cuda"), steps=2, repeats=1, eval_batch=8)
    assert timing["model_options"]["weights"] == "none" and timing["train_step_seconds"]["8"] > 0
    assert timing["peak_memory_bytes"] > 0 and timing["eval_images_per_second"] > 0
