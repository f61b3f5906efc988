"""An experiment's `published:` key names a published table, which only the reproduction package knows
(`fdabench.reproduction.lookups.published_errors`): the library's validation leaves it alone, and every command and
the workflow, which validate through `fdabench.jobs.validation`, refuse a typo with the message they always gave."""

import copy
import io
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml

from fdabench.cli import main
from fdabench.config import ParamsError, validate_params
from fdabench.jobs.validation import load_checked_params, validated_params
from fdabench.report.tables import AVERAGE
from fdabench.reproduction.lookups import published_mark
from fdabench.reproduction.papers.published import PUBLISHED, PUBLISHED_AVERAGES
from workflows import TINY_PARAMS, snakemake_in

TYPO = "colored_mnist_bta"
MESSAGE = (
    f"suites.tiny.experiments.colored_digits.published: unknown key {TYPO!r}; allowed values: "
    f"{', '.join(sorted(PUBLISHED))}; did you mean 'colored_mnist_beta' or 'colored_mnist'?"
)


def _with_typo() -> dict:
    raw = copy.deepcopy(TINY_PARAMS)
    raw["suites"]["tiny"]["experiments"]["colored_digits"]["published"] = TYPO
    return raw


def test_the_library_leaves_the_key_to_the_reproduction_package():
    assert validate_params(_with_typo()).experiment("colored_digits")["published"] == TYPO
    with pytest.raises(ParamsError) as caught:
        validated_params(_with_typo())
    assert str(caught.value) == f"invalid params:\n  - {MESSAGE}"
    good = copy.deepcopy(TINY_PARAMS)
    good["suites"]["tiny"]["experiments"]["colored_digits"]["published"] = "colored_mnist_beta"
    assert validated_params(good).published_experiments() == ["colored_digits"]


def test_a_typo_is_listed_with_the_library_s_problems():
    raw = _with_typo()
    raw["suites"]["tiny"]["methods"].append("fedgpp")
    with pytest.raises(ParamsError) as caught:
        validated_params(raw)
    assert "did you mean 'fedgp'" in str(caught.value) and MESSAGE in str(caught.value)


def test_fdabench_validate_refuses_a_typo(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(_with_typo()))
    with pytest.raises(ParamsError, match="did you mean 'colored_mnist_beta'"):
        load_checked_params(path)
    stderr = io.StringIO()
    with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
        code = main(["validate", "--params", str(path)])
    assert code != 0 and MESSAGE in stderr.getvalue()


@pytest.mark.pipeline
def test_the_workflow_refuses_a_typo_before_it_plans(tmp_path, repo_root):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**_with_typo(), "device": "cpu"}))
    result = snakemake_in(tmp_path, repo_root, "--dry-run")
    assert result.returncode != 0 and MESSAGE in result.stdout + result.stderr, result.stderr[-3000:]


def test_a_figure_marks_the_published_value_and_average_of_a_cell_s_row():
    fedda = {"algorithm": "fedda", "hparams": {"beta": 0.5}, "published": "fed_heart"}
    assert published_mark(fedda, AVERAGE) == PUBLISHED_AVERAGES["fed_heart"]["fedda_0.5"] == 72.05
    assert published_mark(fedda, next(iter(PUBLISHED["fed_heart"]))) == 79.81
    assert published_mark({**fedda, "published": None}, AVERAGE) is None
    assert published_mark({"algorithm": "fedda", "hparams": {"beta": 0.5}}, "noise0.4") is None
