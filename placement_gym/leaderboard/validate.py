"""Re-check a submission: re-evaluate every placement with the cost model, task by task (a
parallel-plan suite's plans with the plan model: `plan_suite`).

Only the submissions of an accepted suite (`registry.SuiteRegistry.accepted`: a suite file whose status
is current or accepted) are accepted, and only while the current cost model reproduces that
suite (its fingerprint, `suite`; every task of the suite is measured, not only the file's): a
mismatch raises `SuiteMismatchError` (the code, not the submission, has to change: bump the suite). A
retired suite's files live in the leaderboard's ``retired/`` folder and are neither checked nor ranked.

A suite of the generalisation track takes generalisation submissions only. A generalisation-track
submission is also checked against its suite's split (`generalisation`): it must not have trained on a
held-out graph (a file-level problem) and may list results for held-out tasks only (a per-task reason).

Besides the re-simulation, the fields of a result must agree with each other and with the task
(`consistency_problems`): a learning curve ends at the entry's runtime and never goes below the proven
lower bound, ``trained_on_task`` says whether the task was evaluated, evaluations stay within the
declared budget, the wall time is at least `MIN_SECONDS_PER_EVALUATION` per evaluation and a measured
(real-hardware) runtime at least `MIN_MEASURED_RUNTIME`. A `TaskCheck` carries the re-simulated
runtime and feasibility: those, never the file's claims, are what the leaderboard ranks.

Files of one entry (same suite, track, algorithm and budget: `entry_key`) are one row of the tables, so
they must declare the same fields but their seed (`entry_problems`): a file that joins an entry under
its name with other declarations is refused, as is an algorithm whose name differs from another's
only in letter case (their file names would be one on a case-insensitive file system)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from placement_gym.cost_model import simulate
from placement_gym.evaluation.placements import placement_problems
from placement_gym.leaderboard.generalisation import result_problems, trained_on_problems
from placement_gym.leaderboard.plan_suite import price, submitted_plan
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.submission import (
    MIN_SECONDS_PER_EVALUATION,
    SubmissionError,
    check_result,
    check_schema,
    load_submission,
    shown,
)
from placement_gym.leaderboard.suite import SuiteMismatchError, get_suite, suite_mismatch
from placement_gym.plans.space import PlanTask

# A claimed runtime may differ from the re-evaluated one by float printing only; what is ranked is the
# re-evaluated one (TaskCheck.runtime), so the tolerance cannot buy a place.
RUNTIME_RTOL = 1e-6
# Where a retired suite's submissions are kept, beside submissions/ in the leaderboard folder.
RETIRED_DIR = "retired"
# A training step or an inference of any suite graph launches hundreds of kernels, each of some us.
MIN_MEASURED_RUNTIME = 1e-5


@dataclass(frozen=True)
class TaskCheck:
    """The verdict on one task of a submission: ``ok`` or the reasons it is rejected."""

    task_id: str
    ok: bool
    reasons: tuple[str, ...] = ()
    runtime: float | None = None
    feasible: bool | None = None


@dataclass
class SubmissionCheck:
    """The verdict on a whole submission: file-level problems plus one `TaskCheck` per task."""

    source: str
    problems: list[str] = field(default_factory=list)
    tasks: list[TaskCheck] = field(default_factory=list)
    # The schema-checked submission (None when it could not be read): what the checks across files use.
    data: dict | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not self.problems and all(t.ok for t in self.tasks)


def consistency_problems(result: dict, lower_bound: float, runtime: float, feasible: bool,
                         budget: int | None, listed_in_trained_on: bool = False) -> list[str]:
    """Why the fields of one schema-checked ``result`` disagree with each other, with the task's proven
    ``lower_bound``, with the re-simulated ``runtime`` and ``feasible`` of its placement, or with the
    submission's ``budget`` and ``trained_on`` (``listed_in_trained_on``: the task is in it); empty when
    they agree."""
    problems = []
    evaluations = result["evaluations"]
    if result["trained_on_task"] != (evaluations > 0 or listed_in_trained_on):
        problems.append(f"trained_on_task is {str(result['trained_on_task']).lower()} with {evaluations} "
                        "evaluations; it must be true exactly when the task was evaluated (evaluations > 0) "
                        "or is listed in 'trained_on'")
    if budget is not None and evaluations > budget:
        problems.append(f"{evaluations} evaluations exceed the declared budget of {budget}")
    if result["wall_s"] < evaluations * MIN_SECONDS_PER_EVALUATION:
        problems.append(f"wall_s {result['wall_s']!r} for {evaluations} evaluations is under "
                        f"{MIN_SECONDS_PER_EVALUATION:g} s per evaluation: not a measured time")
    measured = result.get("measured_runtime")
    if measured is not None and measured < MIN_MEASURED_RUNTIME:
        problems.append(f"measured_runtime {measured!r} s is under {MIN_MEASURED_RUNTIME:g} s: no step of a "
                        "suite graph runs that fast")
    trace = result.get("trace") or []
    below = [point for point in trace if point[1] < lower_bound]
    if below:
        problems.append(f"trace point {below[0]!r} is below the task's proven lower bound {lower_bound!r} s")
    if trace and feasible and not math.isclose(trace[-1][1], runtime, rel_tol=RUNTIME_RTOL, abs_tol=0.0):
        problems.append(f"trace ends at {trace[-1][1]!r} s; it must end at the entry's re-evaluated runtime "
                        f"{runtime!r} s (its best feasible placement)")
    return problems


def check_task_result(
    suite_version: str, task_id: str, result: object, budget: int | None = None,
    trained_on: tuple[str, ...] | list[str] = (),
) -> TaskCheck:
    """Check one task's entry of a submission against the suite and a fresh simulation. The caller
    makes sure the cost model reproduces the suite (`validate_submission` does)."""
    suite = get_suite(suite_version)
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
    if isinstance(task, PlanTask):  # a parallel-plan suite's: the plan is priced again
        plan, plan_reasons = submitted_plan(task, result["placement"])
        reasons += plan_reasons
        if plan is None:
            return TaskCheck(task_id, False, tuple(reasons))
        priced = price(task, plan)
        runtime, feasible = float(priced.step_s), bool(priced.feasible)
    else:
        placement, placement_reasons = placement_problems(task, result["placement"], shown)
        reasons += placement_reasons
        if placement is None:
            return TaskCheck(task_id, False, tuple(reasons))
        simulated = simulate(task, placement)
        runtime, feasible = float(simulated.runtime), bool(simulated.feasible)
    claimed = float(result["runtime"])
    if not math.isclose(claimed, runtime, rel_tol=RUNTIME_RTOL, abs_tol=0.0):
        reasons.append(f"claimed runtime {claimed!r} s, re-evaluated {runtime!r} s "
                       f"(allowed relative difference {RUNTIME_RTOL:g})")
    if result["feasible"] != feasible:
        reasons.append("placement claimed feasible but it is infeasible (out of device memory)"
                       if result["feasible"] else
                       "placement claimed infeasible but it fits in every device's memory")
    reasons += consistency_problems(result, suite_task.lower_bound, runtime, feasible, budget,
                                    task_id in trained_on)
    return TaskCheck(task_id, not reasons, tuple(reasons), runtime, feasible)


def validate_submission(data: object, source: str = "submission") -> SubmissionCheck:
    """Check a submission (already parsed JSON): schema, the current suite, then every task.

    Raises `SuiteMismatchError` when the current cost model does not reproduce the current suite (no
    submission of it can be checked then); a submission of a retired or unknown suite is a problem."""
    check = SubmissionCheck(source)
    try:
        data = check_schema(data, source)
    except SubmissionError as error:
        check.problems.append(str(error))
        return check
    check.data = data
    version = data["suite"]
    registry = suite_registry()
    accepted, retired = registry.accepted(), registry.retired()
    if version in retired:
        check.problems.append(f"suite {version} is retired ({retired[version]}); accepted suites: "
                              f"{', '.join(accepted)}, and retired files live in the leaderboard's "
                              f"{RETIRED_DIR}/ folder, never ranked")
        return check
    if version not in accepted:
        check.problems.append(f"unknown suite version {shown(version)}; accepted: "
                              f"{', '.join(accepted)}")
        return check
    suite = registry.get(version)
    track = data.get("track", "cost_model")
    if track not in suite.spec.submission_tracks:
        allowed = " or ".join(f'"track": "{t}"' for t in suite.spec.submission_tracks)
        check.problems.append(
            f"suite {version} is the {suite.spec.track} track's: its submissions state {allowed}"
            if track != "parallel" else
            f"a parallel-track submission names suite {version}, which is not a parallel-plan suite; "
            f"those are: {', '.join(registry.accepted('parallel'))}")
        return check
    mismatch = suite_mismatch(version)
    if mismatch is not None:
        raise SuiteMismatchError(mismatch)
    generalisation = data.get("track", "cost_model") == "generalisation"
    if generalisation:
        check.problems += trained_on_problems(data)
    for task_id in sorted(data["results"]):
        result = data["results"][task_id]
        task_check = check_task_result(version, task_id, result, data.get("budget"),
                                       data.get("trained_on", ()))
        if (generalisation and suite.spec.has_split and task_id in suite.task_ids
                and isinstance(result, dict)):
            extra = result_problems(version, task_id, result)
            if extra:
                task_check = replace(task_check, ok=False, reasons=(*extra, *task_check.reasons))
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


# Declared fields every file of one entry states alike: all but the seed, the description (it may name
# the seed) and the pre-training's figures (each seed pre-trains on its own) besides those below.
ENTRY_FIELDS = ("schema", "package_version", "authors", "link", "hardware", "trained_on")
PRETRAINING_ENTRY_FIELDS = ("counted", "machine")


def entry_key(data: dict) -> tuple[str, str, str, str]:
    """The entry a schema-checked submission belongs to: (suite, track, algorithm, budget as JSON)."""
    budget = data.get("budget")
    return data["suite"], data.get("track", "cost_model"), data["algorithm"], "null" if budget is None \
        else str(budget)


def _declared(data: dict) -> dict:
    """The fields of ``data`` that every file of its entry must declare alike (`ENTRY_FIELDS`)."""
    pretraining = data.get("pretraining") or {}
    return {**{name: data.get(name) for name in ENTRY_FIELDS},
            **{f"pretraining.{name}": pretraining.get(name) for name in PRETRAINING_ENTRY_FIELDS}}


def entry_problems(submissions: list[tuple[str, dict]]) -> dict[str, str]:
    """{source: the one-line reason} for each of ``submissions`` (source, schema-checked data, in the
    order given: the first file of an entry is its reference) that declares another value than the first
    file of its entry (`entry_key`) in a field of `ENTRY_FIELDS`, or whose algorithm differs from an
    earlier one's only in letter case. Linear in the files."""
    first: dict[tuple, tuple[str, dict]] = {}
    spelling: dict[str, str] = {}
    problems: dict[str, str] = {}
    for source, data in submissions:
        algorithm = data["algorithm"]
        known = spelling.setdefault(algorithm.casefold(), algorithm)
        if known != algorithm:
            problems[source] = (f"algorithm {shown(algorithm)} differs from {shown(known)} only in letter "
                                "case; on a case-insensitive file system their files would be one")
            continue
        reference = first.setdefault(entry_key(data), (source, _declared(data)))
        declared = _declared(data)
        differing = next((name for name in declared if declared[name] != reference[1][name]), None)
        if differing is not None:
            problems[source] = (f"declares {differing} {shown(declared[differing])} where "
                                f"{shown(reference[0], 80)} of the same entry (suite, track, algorithm, "
                                f"budget) declares {shown(reference[1][differing])}; a file that joins an "
                                "entry differs from its other files only in seed, description, pre-training "
                                "figures and results")
    return problems


def add_entry_problems(checks: list[SubmissionCheck], others: list[tuple[str, dict]] = ()) -> None:
    """Add to each of ``checks`` (those that could be read) its `entry_problems`, judged among the
    checked files and ``others`` (source, schema-checked data: files already in the leaderboard, which
    come first, so that a new file is judged against the entry it joins)."""
    mine = [(check.source, check.data) for check in checks if check.data is not None]
    problems = entry_problems([*others, *mine])
    for check in checks:
        if check.source in problems:
            check.problems.append(problems[check.source])
