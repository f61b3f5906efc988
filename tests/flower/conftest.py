"""The Flower tests' exported cells (a module's fixture: each test file exports its own)."""

import json
import os

import pytest
from flower_cases import EXPERIMENT, EXPORTED, SEED, TARGET


@pytest.fixture(scope="module")
def exported(tiny_inputs, tmp_path_factory):
    """The tiny suite's EXPORTED cells as site files (all but fedgp added to the suite for this test; fdann
    trains the target on all its inputs, the oracle on all its labelled and unlabelled samples, so a target's hello
    must report the samples its method's `roles.target` trains on)."""
    from fdabench.flower import simulation

    root, params = tiny_inputs
    folders = {}
    here = os.getcwd()
    os.chdir(root)
    try:
        for method in EXPORTED:
            folder = tmp_path_factory.mktemp(method)
            simulation.export_cell(_with_auto(params), EXPERIMENT, method, TARGET, SEED, folder)
            folders[method] = folder
    finally:
        os.chdir(here)
    return root, _with_auto(params), folders


def _with_auto(params):
    from fdabench.config import validate_params

    raw = json.loads(json.dumps(params.raw))
    raw["suites"]["tiny"]["methods"] = ["source_only", *EXPORTED]
    raw["suites"]["tiny"]["train"]["target_batch_size"] = 4  # several target steps: auto-weighting's estimates
    return validate_params(raw)
