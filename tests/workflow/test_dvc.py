"""DVC on the project's own dvc.yaml, with a tiny suite: `dvc repro` builds it; a clone that pulls data and
results from a (local directory) remote reruns nothing; `dvc exp run -S methods.fedgp.beta=0.4` reruns only
the FedGP cells, `dvc exp show` lists the experiment with its metrics, each cell's final metrics among them (the
DVCLive folder), and `dvc plots diff` overlays its per-round curves on the baseline's."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from workflows import TINY_PARAMS, workflow_environment

pytestmark = [
    pytest.mark.pipeline,
    pytest.mark.skipif(shutil.which("git") is None, reason="DVC experiments need git"),
]

PARAMS = {  # every key dvc.yaml names must be present
    **TINY_PARAMS,
    "device": "cpu",
    "threads_per_cell": 1,
    "data": {"root": "data"},
    "datasets": {"colored_digits": {"seed": 0}},
    "dvc": {"suites": ["tiny"]},
}


def _run(workdir: Path, *command: str) -> subprocess.CompletedProcess:
    env = workflow_environment(workdir)
    result = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, " ".join(command) + "\n" + result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _project(root: Path, repo: Path, params: dict = PARAMS) -> Path:
    """A git repository holding the project's workflow, dvc.yaml and source, with the tiny suite's params."""
    root.mkdir()
    for name in ("Snakefile", "dvc.yaml", ".gitignore", ".dvcignore"):
        shutil.copy(repo / name, root / name)
    shutil.copytree(repo / "workflow", root / "workflow")
    shutil.copytree(repo / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (root / "profiles").symlink_to("workflow/profiles")
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    _run(root, "git", "init", "-q")
    _run(root, "git", "config", "user.email", "test@example.org")
    _run(root, "git", "config", "user.name", "test")
    _run(root, "dvc", "init", "-q")
    _run(root, "git", "add", "-A")
    _run(root, "git", "commit", "-qm", "project")
    return root


def _train_jobs(output: str) -> int:
    """Training jobs Snakemake ran, from its job statistics."""
    return sum(int(count) for count in re.findall(r"^train\s+(\d+)\s*$", output, re.MULTILINE))


def _cells(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "results/cells").rglob("*.json"))}


def _plots(project: Path, *revisions: str, x: str = "round", under: str = "results/plots/") -> dict[str, set]:
    """`dvc plots diff --json` of the revisions (none: the workspace): plot id -> (revision, x) pairs drawn, for the
    plots under `under`; fails on any error DVC reports (it exits 0 on them)."""
    shown = json.loads(_run(project, "dvc", "plots", "diff", *revisions, "--json").stdout)
    assert "errors" not in shown, shown["errors"]
    return {
        plot: {(value["rev"], int(value[x])) for entry in entries for value in entry["content"]["data"]["values"]}
        for plot, entries in shown["data"].items()
        if plot.startswith(under)
    }


def _named(shown, name: str) -> list[dict]:
    """The `data` of every revision named `name` in `dvc exp show --json`."""
    if isinstance(shown, list):
        return [data for item in shown for data in _named(item, name)]
    if not isinstance(shown, dict):
        return []
    found = [shown["data"]] if shown.get("name") == name and isinstance(shown.get("data"), dict) else []
    return found + [data for key, value in shown.items() if key != "data" for data in _named(value, name)]


def test_repro_remote_clone_and_experiment(tmp_path, repo_root):
    project = _project(tmp_path / "project", repo_root)
    built = _run(project, "dvc", "repro")
    assert _train_jobs(built.stdout + built.stderr) == 4
    assert {"cells@tiny", "report@tiny", "prepare"} <= set(re.findall(r"Running stage '([^']+)'", built.stdout))
    metrics = json.loads((project / "results/metrics/tiny.json").read_text())
    assert set(metrics["table1"]["colored_digits"]) == {"source_only", "fedgp"}
    assert "up to date" in _run(project, "dvc", "status").stdout
    rounds = "results/plots/tiny/rounds/colored_digits"
    plots = _plots(project)
    assert set(plots) == {f"{rounds}/source_only.csv", f"{rounds}/fedgp.csv"}
    assert plots[f"{rounds}/fedgp.csv"] == {("workspace", r) for r in (1, 2, 3, 4)}  # a warm-up round, 3 FDA rounds
    # DVCLive: every cell's curve, and its final metrics
    live = "results/dvclive/tiny/plots/metrics/colored_digits"
    curves = _plots(project, x="step", under=live)
    cells = [f"{method}/-90/seed{seed}" for method in ("source_only", "fedgp") for seed in (0, 1)]
    assert {f"{live}/{cell}/accuracy.tsv" for cell in cells} <= set(curves), sorted(curves)
    assert curves[f"{live}/fedgp/-90/seed1/accuracy.tsv"] == {("workspace", r) for r in (1, 2, 3, 4)}
    cell = json.loads((project / "results/cells/tiny/colored_digits/fedgp/-90/seed1.json").read_text())
    finals = json.loads((project / "results/dvclive/tiny/metrics.json").read_text())
    assert finals["colored_digits"]["fedgp"]["-90"]["seed1"]["final"] == cell["finals"]

    # data and results through a local-directory remote: the clone reruns nothing
    _run(project, "dvc", "remote", "add", "-d", "store", str(tmp_path / "store"))
    _run(project, "dvc", "push", "-q")
    _run(project, "git", "add", "-A")
    _run(project, "git", "commit", "-qm", "results")
    _run(tmp_path, "git", "clone", "-q", str(project), "clone")
    clone = tmp_path / "clone"
    _run(clone, "dvc", "pull", "-q")
    again = _run(clone, "dvc", "repro")
    assert "Running stage" not in again.stdout and _train_jobs(again.stdout + again.stderr) == 0, again.stdout
    assert _cells(clone) == _cells(project)
    assert (clone / "results/tiny/table1.csv").read_bytes() == (project / "results/tiny/table1.csv").read_bytes()

    # an experiment with another β: only the two FedGP cells rerun
    before = _cells(project)
    experiment = _run(project, "dvc", "exp", "run", "-S", "methods.fedgp.beta=0.4", "-n", "beta04")
    assert _train_jobs(experiment.stdout + experiment.stderr) == 2
    changed = {path for path, content in _cells(project).items() if before[path] != content}
    assert changed == {f"results/cells/tiny/colored_digits/fedgp/-90/seed{seed}.json" for seed in (0, 1)}
    shown = json.loads(_run(project, "dvc", "exp", "show", "--json").stdout)
    text = json.dumps(shown)
    assert "beta04" in text and "results/metrics/tiny.json" in text
    (data,) = _named(shown, "beta04")
    finals = data["metrics"]["results/dvclive/tiny/metrics.json"]["data"]["colored_digits"]
    assert set(finals) == {"source_only", "fedgp"} and "accuracy" in finals["fedgp"]["-90"]["seed0"]["final"]
    # the experiment's curves beside the baseline's, from the cache, in DVC's built-in template
    compared = _plots(project, "HEAD", "beta04")
    assert compared[f"{rounds}/fedgp.csv"] == {(rev, r) for rev in ("HEAD", "beta04") for r in (1, 2, 3, 4)}


def test_data_outputs_follow_the_data_root(tmp_path, repo_root):
    """With another `data.root`, DVC's data outputs are where Snakemake writes: `prepare` runs and DVC finds and
    caches its outputs there, and the cells stage expects the partitions there."""
    project = _project(tmp_path / "project", repo_root, {**PARAMS, "data": {"root": "store/fda"}})
    stages = _run(project, "dvc", "stage", "list").stdout
    assert "store/fda/prepared" in stages and "store/fda/partitions/tiny" in stages, stages
    assert "data/" not in stages.replace("store/fda/", ""), stages
    _run(project, "dvc", "repro", "prepare")
    assert any((project / "store/fda/prepared/colored_digits").iterdir())
    assert not (project / "data").exists()
    assert "prepare" not in _run(project, "dvc", "status", "prepare").stdout.replace("up to date", "")
