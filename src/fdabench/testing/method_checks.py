"""Checks a round-loop method gets for free: the properties its kind declares, each on the inputs the server
really receives in a few rounds on a small random problem (two sources with auxiliary labels, so every
shipped family runs).

Every round-loop rule (`RoundLoopMethod`):
- `source_order`: the server's step does not depend on the order of the sources;
- `zero_updates`, `tiny_updates`: all-zero updates, and updates scaled by 1e-30, give a finite step of the
  model's size (no division by a zero norm);
- `privacy_boundary`: what `aggregate` receives holds updates, counts and documented scalars only (no tensor
  that shares memory with a client's data; shapes (N, m), (N,), (m,) or (), or those of the documented messages
  the method declares, `message_shapes`), and the target's observer sees the sources' updates only where the
  method says the server forwards them;
- `resume`: a run interrupted after a checkpoint and resumed equals an uninterrupted one, record by record.
β-weighted rules (a `beta` hyper-parameter), in addition:
- `beta0_is_target_update`: with β = 0 the step is the target's own update (FedDA, FedGP: Σ_i w_i g_T = g_T;
  a rule whose target starts elsewhere, `target_start`, moves there and by its update).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fdabench.config.checks import non_finite_errors
from fdabench.config.extends import deep_merge
from fdabench.config.schema import object_schema, schema_errors
from fdabench.federation.checkpoint import Checkpoints
from fdabench.federation.problem import ClientData, FederatedProblem
from fdabench.federation.rounds import run_rounds
from fdabench.federation.rule_interface import RoundInputs
from fdabench.federation.settings import TrainSettings
from fdabench.methods import METHODS, Method, RoundLoopMethod

SETTINGS = {
    "model": "mlp",
    "model_options": {"hidden": [8]},
    "rounds": 4,
    "warmup_rounds": 1,
    "local_epochs": 1,
    "optimizer": "adam",
    "source_lr": 1e-2,
    "target_lr": 1e-2,
    "source_batch_size": 16,
    "target_batch_size": 4,  # several target steps per round: the auto-weighted rules need them
}
RESUME_AFTER = 2  # the interrupted run stops after this round (0-based); a checkpoint was written after round 1
TOLERANCE = {"rtol": 1e-5, "atol": 1e-7}


@dataclass(frozen=True)
class CheckResult:
    check: str
    passed: bool
    detail: str = ""


def _client(name: str, n: int, seed: int) -> ClientData:
    generator = torch.Generator().manual_seed(seed)
    return ClientData(
        name,
        torch.randn(n, 5, generator=generator),
        torch.randint(0, 2, (n,), generator=generator),
        aux={
            "sex": torch.randint(0, 2, (n,), generator=generator),
            "age_decade": torch.randint(-1, 5, (n,), generator=generator),
        },
    )


def small_problem() -> FederatedProblem:
    """Two sources (40 and 30 samples, five features, two classes, auxiliary labels), a target with 24
    labelled and 10 unlabelled training samples, 20 test samples."""
    return FederatedProblem(
        "classification",
        2,
        (5,),
        [_client("a", 40, 0), _client("b", 30, 1)],
        _client("t", 24, 2),
        _client("u", 10, 3),
        _client("test", 20, 4),
        aux_classes={"sex": 2, "age_decade": 5},
    )


def _data_storages(problem: FederatedProblem) -> set[int]:
    clients = [*problem.sources, problem.target_labelled, problem.target_unlabelled, problem.target_test]
    tensors = [t for c in clients for t in (c.x, c.y, c.noise, *c.aux.values()) if t is not None]
    return {t.untyped_storage().data_ptr() for t in tensors}


def reachable_tensors(value: Any, seen: set[int] | None = None) -> list[torch.Tensor]:
    """Every tensor reachable from `value` through dataclass fields, attributes and containers."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list | tuple):
        children = list(value)
    elif hasattr(value, "__dict__"):
        children = list(vars(value).values())
    else:
        return []
    return [t for child in children for t in reachable_tensors(child, seen)]


class _Run:
    """A method's run on the small problem with what its server received in each FDA round."""

    def __init__(self, make: Callable[[], Method], problem: FederatedProblem, settings: TrainSettings):
        self.method = make()
        self.received: list[RoundInputs] = []
        aggregate, objective = self.method.aggregate, self.method.local_objective
        self.aggregate = aggregate  # the method's own (with the state the run left it in)

        def server(inputs: RoundInputs):
            self.received.append(inputs)
            return aggregate(inputs)

        def local_objective(context):  # at the target: the sources' updates only where the server forwards them
            if context.role == "target" and not self.method.delivery.source_updates:
                hidden = dataclasses.replace(context.inputs, source_updates=None, source_counts=None, source_steps=None)
                context = dataclasses.replace(context, inputs=hidden)
            return objective(context)

        self.method.aggregate, self.method.local_objective = server, local_objective
        self.history = run_rounds(self.method, problem, settings, 0, torch.device("cpu"))


def _with(run: _Run, **hparams: Any) -> Method:
    """The method as the run left it (its state, e.g. a β fixed once), with `hparams` changed, its own hooks."""
    method = copy.copy(run.method)
    vars(method).pop("aggregate", None)
    vars(method).pop("local_objective", None)
    method.hparams = {**method.hparams, **hparams}
    return method


def _step(run: _Run, inputs: RoundInputs, **hparams: Any) -> torch.Tensor:
    """The server's step on `inputs` (with `hparams` changed)."""
    return _with(run, **hparams).aggregate(inputs).delta


def _permuted(inputs: RoundInputs) -> RoundInputs:
    order = torch.arange(inputs.source_updates.shape[0] - 1, -1, -1)
    return dataclasses.replace(
        inputs,
        source_updates=inputs.source_updates[order],
        source_counts=inputs.source_counts[order],
        source_steps=None if inputs.source_steps is None else inputs.source_steps[order],
        source_names=tuple(inputs.source_names[i] for i in order.tolist()) if inputs.source_names else (),
    )


def _scaled(inputs: RoundInputs, factor: float) -> RoundInputs:
    scale = lambda update: None if update is None else update * factor
    return dataclasses.replace(
        inputs, source_updates=scale(inputs.source_updates), target_update=scale(inputs.target_update)
    )


def _check_source_order(make, run, problem, settings) -> str:
    for inputs in run.received:
        before, after = _step(run, inputs), _step(run, _permuted(inputs))
        if not torch.allclose(before, after, **TOLERANCE):
            gap = (before - after).abs().max().item()
            return f"round {inputs.round_index}: reversing the sources changes the step (max difference {gap:.3g})"
    return ""


def _finite_after(factor: float) -> Callable:
    def check(make, run, problem, settings) -> str:
        for inputs in run.received:
            delta = _step(run, _scaled(inputs, factor))
            if delta.shape != inputs.global_params.shape:
                size = inputs.global_params.numel()
                return f"round {inputs.round_index}: a step of shape {tuple(delta.shape)} for {size} parameters"
            if not torch.isfinite(delta).all():
                return f"round {inputs.round_index}: {int((~torch.isfinite(delta)).sum())} non-finite entries"
        return ""

    return check


def _check_beta0(make, run, problem, settings) -> str:
    """With β = 0 the step is the target's own move: from where it started (`target_start`, the global
    parameters in Algorithm 1) by its update. Coordinates the method keeps at the server's value
    (`auxiliary_mask`: the weakly-supervised auxiliary heads) are left out."""
    for inputs in run.received:
        method = _with(run, beta=0.0)
        expected = method.target_start(inputs) - inputs.global_params + inputs.target_update
        delta = method.aggregate(inputs).delta
        if hasattr(method, "auxiliary_mask"):
            kept = ~method.auxiliary_mask(inputs)
            expected, delta = expected[kept], delta[kept]
        if not torch.allclose(delta, expected, **TOLERANCE):
            ratio = (delta @ expected / expected.square().sum().clamp_min(1e-30)).item()
            return (
                f"round {inputs.round_index}: with β = 0 the step is not the target's own update (its component "
                f"along it is {ratio:.4g} times it; expected 1)"
            )
    return ""


def _check_privacy(make, run, problem, settings) -> str:
    data = _data_storages(problem)
    m = run.history["model_size"]
    sources = len(problem.sources)
    allowed = {(sources, m), (sources,), (m,), ()} | run.method.message_shapes()
    for inputs in run.received:
        for tensor in reachable_tensors(inputs):
            if tensor.untyped_storage().data_ptr() in data:
                return f"round {inputs.round_index}: a tensor sharing memory with a client's data reached the server"
            if tuple(tensor.shape) not in allowed:
                return f"round {inputs.round_index}: a tensor of shape {tuple(tensor.shape)} reached the server"
    return ""


class _Interrupted(Exception):
    pass


def _check_resume(make, run, problem, settings) -> str:
    def records(history):
        return [{key: value for key, value in record.items() if key != "seconds"} for record in history["rounds"]]

    def stop(record, _total):
        if record["round"] == RESUME_AFTER:
            raise _Interrupted

    with tempfile.TemporaryDirectory() as folder:
        checkpoints = Checkpoints(Path(folder) / "cell.ckpt", 2, {"config": "check", "code": "", "device": "cpu"})
        reference = run_rounds(make(), problem, settings, 0, torch.device("cpu"))
        with contextlib.suppress(_Interrupted):
            run_rounds(make(), problem, settings, 0, torch.device("cpu"), on_round=stop, checkpoints=checkpoints)
        if not checkpoints.path.is_file():
            return "no checkpoint was written before the interruption"
        resumed = run_rounds(make(), problem, settings, 0, torch.device("cpu"), checkpoints=checkpoints)
    if records(resumed) != records(reference):
        differing = [a["round"] for a, b in zip(records(resumed), records(reference)) if a != b]
        return f"the resumed run differs from an uninterrupted one (rounds {differing[:5]})"
    return ""


def _aggregates(cls: type, run: _Run) -> str:
    return "" if run.received else "its server never aggregates an FDA round (FedAvg rounds only)"


def _combines_sources(cls: type, run: _Run) -> str:
    if not run.received or run.received[0].source_updates is None:
        return "no source updates reach its server"
    if cls.delivery.source_updates:  # the target's statistics are computed in the sources' order
        return "the server forwards the source updates to the target, whose statistics follow their order"
    return ""


def _beta_weighted(cls: type, run: _Run) -> str:
    return _aggregates(cls, run) or ("" if "beta" in cls.hparams_schema else "no `beta` hyper-parameter")


def _always(cls: type, run: _Run) -> str:
    return ""


#: check -> (why it does not apply to a method, "" when it does; the check: "" when it passes, else what failed)
CHECKS: dict[str, tuple[Callable[[type, _Run], str], Callable]] = {
    "beta0_is_target_update": (_beta_weighted, _check_beta0),
    "source_order": (_combines_sources, _check_source_order),
    "zero_updates": (_aggregates, _finite_after(0.0)),
    "tiny_updates": (_aggregates, _finite_after(1e-30)),
    "privacy_boundary": (_always, _check_privacy),
    "resume": (_always, _check_resume),
}


def check_method(method: str | type[Method], hparams: dict[str, Any] | None = None) -> list[CheckResult]:
    """Run every check that applies to `method` (a registered name, or a class) with `hparams`; a check that
    does not apply passes with the reason as its detail."""
    cls = METHODS.get(method) if isinstance(method, str) else method
    if not issubclass(cls, RoundLoopMethod):
        raise ValueError(
            f"{cls.name} is not a RoundLoopMethod: the round loop runs every method, with the rules and hooks of "
            "fdabench.methods.RoundLoopMethod (docs/extending.md)"
        )
    problems = hparams_problems(cls, hparams)
    if problems:  # refused before any check runs: the checks would test a method no params file could configure
        raise ValueError(f"{cls.name}: invalid hyper-parameters: " + "; ".join(problems))
    make = lambda: cls(hparams)
    problem, settings = small_problem(), TrainSettings.from_dict(deep_merge(SETTINGS, cls.requires.train))
    try:
        run = _Run(make, problem, settings)
    except Exception as error:  # the method cannot even run: every check fails with the reason
        return [CheckResult(name, False, f"the run failed: {type(error).__name__}: {error}") for name in CHECKS]
    results = []
    for name, (not_applicable, check) in CHECKS.items():
        reason = not_applicable(cls, run)
        if reason:
            results.append(CheckResult(name, True, f"not applicable: {reason}"))
            continue
        try:
            problem_text = check(make, run, problem, settings)
        except Exception as error:
            problem_text = f"{type(error).__name__}: {error}"
        results.append(CheckResult(name, not problem_text, problem_text))
    return results


def hparams_problems(cls: type[Method], hparams: Any) -> list[str]:
    """What params.yaml's validation would refuse about `hparams` for `cls` (its own schema, with the bounds of
    `fdabench.config.schema`), one readable line each."""
    if hparams is None:
        return []
    if not isinstance(hparams, dict):
        return [f'{hparams!r} is not a mapping of hyper-parameters (JSON such as {{"beta": 0.5}})']
    return non_finite_errors(hparams) or schema_errors(hparams, object_schema(cls.hparams_schema))


def failures(results: list[CheckResult]) -> list[CheckResult]:
    return [result for result in results if not result.passed]


def format_results(name: str, results: list[CheckResult]) -> str:
    lines = [f"{name}: {len(results) - len(failures(results))} of {len(results)} checks pass"]
    for result in results:
        lines.append(
            f"  {'pass' if result.passed else 'FAIL'}  {result.check}" + (f": {result.detail}" if result.detail else "")
        )
    return "\n".join(lines)
