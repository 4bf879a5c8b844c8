"""Re-check a submission: re-evaluate every placement with the cost model, task by task.

A generalisation-track submission is also checked against its suite's split (`generalisation`): it must
not have trained on a held-out graph (a file-level problem) and may list results for held-out tasks only
(a per-task reason)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from placement_gym.cost_model import simulate
from placement_gym.leaderboard.generalisation import SPLITS, result_problems, trained_on_problems
from placement_gym.leaderboard.submission import (
    REQUIRED_RESULT_FIELDS,
    SubmissionError,
    check_schema,
    load_submission,
)
from placement_gym.leaderboard.suite import SUITES, fingerprint_problems

# A claimed runtime may differ from the re-evaluated one by float printing only.
RUNTIME_RTOL = 1e-6


@dataclass(frozen=True)
class TaskCheck:
    """The verdict on one task of a submission: ``ok`` or the reasons it is rejected."""

    task_id: str
    ok: bool
    reasons: tuple[str, ...] = ()
    runtime: float | None = None


@dataclass
class SubmissionCheck:
    """The verdict on a whole submission: file-level problems plus one `TaskCheck` per task."""

    source: str
    problems: list[str] = field(default_factory=list)
    tasks: list[TaskCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(t.ok for t in self.tasks)


def _placement_array(task, mapping: dict) -> tuple[np.ndarray | None, list[str]]:
    """The placement of an {op: device} mapping, or the reasons it is not one of ``task``."""
    reasons = []
    ops = task.graph.op_names
    unknown = sorted(set(mapping) - set(ops))
    if unknown:
        reasons.append(f"unknown op names: {', '.join(unknown[:3])}" + (" ..." if len(unknown) > 3 else ""))
    missing = [op for op in ops if op not in mapping]
    if missing:
        reasons.append(f"{len(missing)} ops missing, such as {', '.join(missing[:3])}")
    devices = task.cluster.device_names
    bad_devices = sorted({str(d) for d in mapping.values() if d not in devices})
    if bad_devices:
        reasons.append(
            f"devices not in cluster {task.cluster.name!r}: {', '.join(bad_devices[:3])} "
            f"(devices are {', '.join(devices)})"
        )
    if reasons:
        return None, reasons
    return np.array([devices.index(mapping[op]) for op in ops], dtype=np.int64), []


def check_task_result(suite_version: str, task_id: str, result: dict) -> TaskCheck:
    """Check one task's entry of a submission against the suite and a fresh simulation."""
    suite = SUITES[suite_version]
    if task_id not in suite.task_ids:
        return TaskCheck(task_id, False, (f"unknown task: not in suite {suite_version}",))
    if not isinstance(result, dict):
        return TaskCheck(task_id, False, ("a task's result must be a JSON object",))
    try:
        check_schema_fields(result)
    except SubmissionError as error:
        return TaskCheck(task_id, False, (str(error),))
    suite_task = suite.get(task_id)
    reasons = []
    if result["graph_sha256"] != suite_task.graph_sha256:
        reasons.append(
            f"graph sha256 mismatch: submitted {result['graph_sha256'][:12]}..., "
            f"suite {suite_version} has {suite_task.graph_sha256[:12]}..."
        )
    drift = fingerprint_problems(suite_task)
    if drift:
        reasons.append(f"cost model or graph changed since suite {suite_version} ({'; '.join(drift)}); "
                       "the suite version must be bumped")
    task = suite_task.task()
    placement, placement_reasons = _placement_array(task, result["placement"])
    reasons += placement_reasons
    if placement is None:
        return TaskCheck(task_id, False, tuple(reasons))
    simulated = simulate(task, placement)
    runtime = float(simulated.runtime)
    claimed = float(result["runtime"])
    if not math.isclose(claimed, runtime, rel_tol=RUNTIME_RTOL, abs_tol=0.0):
        reasons.append(f"claimed runtime {claimed!r} s, re-evaluated {runtime!r} s "
                       f"(allowed relative difference {RUNTIME_RTOL:g})")
    if result["feasible"] and not simulated.feasible:
        reasons.append("placement claimed feasible but it is infeasible (out of device memory)")
    return TaskCheck(task_id, not reasons, tuple(reasons), runtime)


def check_schema_fields(result: dict) -> None:
    """Raise `SubmissionError` when a task's result lacks a field or has one of the wrong type."""
    for name, kind in REQUIRED_RESULT_FIELDS.items():
        if name not in result:
            raise SubmissionError(f"missing field {name!r}")
        value = result[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SubmissionError(f"field {name!r} has the wrong type ({type(value).__name__})")


def validate_submission(data: dict, source: str = "submission") -> SubmissionCheck:
    """Check a submission (already parsed JSON): schema, known suite, then every task."""
    check = SubmissionCheck(source)
    try:
        check_schema(data, source)
    except SubmissionError as error:
        check.problems.append(str(error))
        return check
    if data["suite"] not in SUITES:
        check.problems.append(f"unknown suite version {data['suite']!r}; known: {', '.join(SUITES)}")
        return check
    generalisation = data.get("track", "cost_model") == "generalisation"
    if generalisation:
        check.problems += trained_on_problems(data)
    for task_id in sorted(data["results"]):
        task_check = check_task_result(data["suite"], task_id, data["results"][task_id])
        if generalisation and data["suite"] in SPLITS and task_id in SUITES[data["suite"]].task_ids:
            extra = result_problems(data["suite"], task_id, data["results"][task_id])
            if extra:
                task_check = TaskCheck(task_id, False, (*extra, *task_check.reasons), task_check.runtime)
        check.tasks.append(task_check)
    return check


def validate_file(path: str | Path) -> SubmissionCheck:
    """Read and check one submission file; a file that cannot be read is one problem, not an error."""
    try:
        data = load_submission(path)
    except SubmissionError as error:
        check = SubmissionCheck(str(path))
        check.problems.append(str(error))
        return check
    return validate_submission(data, str(path))
