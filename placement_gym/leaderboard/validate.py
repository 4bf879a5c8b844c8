"""Re-check a submission: re-evaluate every placement with the cost model, task by task.

A submission is only checked against a suite that the current cost model reproduces (its fingerprint,
`suite`): for the current suite a mismatch raises `SuiteMismatchError` (the code, not the submission,
has to change: bump the suite), and a submission of an older suite that the cost model no longer
reproduces is left unchecked, with a note saying why.

A generalisation-track submission is also checked against its suite's split (`generalisation`): it must
not have trained on a held-out graph (a file-level problem) and may list results for held-out tasks only
(a per-task reason)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from placement_gym.cost_model import simulate
from placement_gym.leaderboard.generalisation import SPLITS, result_problems, trained_on_problems
from placement_gym.leaderboard.submission import (
    SubmissionError,
    check_result,
    check_schema,
    load_submission,
    shown,
)
from placement_gym.leaderboard.suite import CURRENT_SUITE, SUITES, SuiteMismatchError, suite_mismatch
from placement_gym.placements import placement_problems

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
    """The verdict on a whole submission: file-level problems plus one `TaskCheck` per task.
    ``skipped``: why the tasks were not re-evaluated (an older suite that the cost model no longer
    reproduces), or None."""

    source: str
    problems: list[str] = field(default_factory=list)
    tasks: list[TaskCheck] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and all(t.ok for t in self.tasks)


def check_task_result(suite_version: str, task_id: str, result: object) -> TaskCheck:
    """Check one task's entry of a submission against the suite and a fresh simulation. The caller
    makes sure the cost model reproduces the suite (`validate_submission` does)."""
    suite = SUITES[suite_version]
    if task_id not in suite.task_ids:
        return TaskCheck(task_id, False, (f"unknown task {shown(task_id)}: not in suite {suite_version}",))
    try:
        check_result(result, "result")
    except SubmissionError as error:
        return TaskCheck(task_id, False, (str(error).removeprefix("result: "),))
    assert isinstance(result, dict)  # check_result made sure
    suite_task = suite.get(task_id)
    reasons = []
    if result["graph_sha256"] != suite_task.graph_sha256:
        reasons.append(
            f"graph sha256 mismatch: submitted {shown(result['graph_sha256'], 12)}, "
            f"suite {suite_version} has {suite_task.graph_sha256[:12]}..."
        )
    task = suite_task.task()
    placement, placement_reasons = placement_problems(task, result["placement"], shown)
    reasons += placement_reasons
    if placement is None:
        return TaskCheck(task_id, False, tuple(reasons))
    simulated = simulate(task, placement)
    runtime = float(simulated.runtime)
    claimed = float(result["runtime"])
    if not math.isclose(claimed, runtime, rel_tol=RUNTIME_RTOL, abs_tol=0.0):
        reasons.append(f"claimed runtime {claimed!r} s, re-evaluated {runtime!r} s "
                       f"(allowed relative difference {RUNTIME_RTOL:g})")
    if result["feasible"] != simulated.feasible:
        reasons.append("placement claimed feasible but it is infeasible (out of device memory)"
                       if result["feasible"] else
                       "placement claimed infeasible but it fits in every device's memory")
    return TaskCheck(task_id, not reasons, tuple(reasons), runtime)


def validate_submission(data: object, source: str = "submission") -> SubmissionCheck:
    """Check a submission (already parsed JSON): schema, known suite, then every task.

    Raises `SuiteMismatchError` when the current cost model does not reproduce the current suite (no
    submission of it can be checked then); a submission of an older suite that the cost model no
    longer reproduces is returned unchecked, with ``skipped`` saying why."""
    check = SubmissionCheck(source)
    try:
        data = check_schema(data, source)
    except SubmissionError as error:
        check.problems.append(str(error))
        return check
    version = data["suite"]
    if version not in SUITES:
        check.problems.append(f"unknown suite version {shown(version)}; known: {', '.join(SUITES)}")
        return check
    mismatch = suite_mismatch(version)
    if mismatch is not None:
        if version == CURRENT_SUITE:
            raise SuiteMismatchError(mismatch)
        check.skipped = (f"suite {version} is older than {CURRENT_SUITE} and this cost model no longer "
                         "reproduces it: its runtimes are not re-checked")
        return check
    generalisation = data.get("track", "cost_model") == "generalisation"
    if generalisation:
        check.problems += trained_on_problems(data)
    for task_id in sorted(data["results"]):
        result = data["results"][task_id]
        task_check = check_task_result(version, task_id, result)
        if (generalisation and version in SPLITS and task_id in SUITES[version].task_ids
                and isinstance(result, dict)):
            extra = result_problems(version, task_id, result)
            if extra:
                task_check = TaskCheck(task_id, False, (*extra, *task_check.reasons), task_check.runtime)
        check.tasks.append(task_check)
    return check


def validate_file(path: str | Path) -> SubmissionCheck:
    """Read and check one submission file; a file that cannot be read, or does not follow the schema,
    is one problem, not an error. Raises `SuiteMismatchError` as `validate_submission` does."""
    try:
        data = load_submission(path)
    except SubmissionError as error:
        check = SubmissionCheck(str(path))
        check.problems.append(str(error))
        return check
    return validate_submission(data, str(path))
