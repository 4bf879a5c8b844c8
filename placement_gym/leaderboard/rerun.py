"""`placement-gym leaderboard validate --rerun FILE`: run a seeded entry again and check that it reproduces.

A submission records an algorithm, a seed, a budget and per task a placement and the evaluations the
harness measured. `rerun_submission` finds the algorithm through the entry-point group
``placement_gym.agents`` (`placement_gym.evaluation.agents.leaderboard_agent`: the core never imports an agent
package), runs it through the harness (`placement_gym.leaderboard.harness.evaluate`) with the file's
seed, budget, track and ``trained_on``, one task at a time, and compares each task with the file: the
placement op by op (bit for bit: the same device for every op; a parallel-plan suite's plan by its
id), its runtime and feasibility, and the evaluation count. A parallel-plan suite's algorithm is a plan
agent (`placement_gym.evaluation.agents.plan_leaderboard_agent`).

Quick checks: ``tasks`` re-runs a subset of the file's tasks (the same comparison, on those tasks
only). ``budget`` other than the file's re-runs every task twice at that budget and compares the two
runs with each other, since a run at another budget cannot give the file's placements: it checks that
the agent is deterministic for the seed, not the file.

An agent package registers a *provider* in the entry-point group (`placement_gym.agents` describes
the protocol); its ``leaderboard_agent(name)`` returns the harness agent ``agent(task, seed, budget)``
that made the entries of algorithm ``name`` (exactly as its fill scripts ran it), None for a name it
does not know, or raises ValueError for a name whose entries cannot be re-run (such as a solver
stopped by a wall-clock limit). In ``pyproject.toml``::

    [project.entry-points."placement_gym.agents"]
    baselines = "baselines.provider:provider"

The command line's ``validate --rerun`` prints the verdicts (`placement_gym.cli.leaderboard_command`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement_gym.evaluation.agents import leaderboard_agent, plan_leaderboard_agent
from placement_gym.evaluation.placements import placement_problems, placement_to_text
from placement_gym.leaderboard.harness import evaluate
from placement_gym.leaderboard.submission import load_submission, shown
from placement_gym.leaderboard.suite import get_suite
from placement_gym.plans.space import PlanTask
from placement_gym.task.compiled import Task


@dataclass(frozen=True)
class TaskRerun:
    """One task re-run: ``ok`` when it reproduced; ``reasons`` say what differs (or why it failed);
    ``evaluations`` and ``runtime`` are the re-run's (None where the agent failed)."""

    task_id: str
    ok: bool
    reasons: tuple[str, ...] = ()
    evaluations: int | None = None
    runtime: float | None = None


@dataclass(frozen=True)
class Rerun:
    """The re-run of one submission file: what was run (``algorithm``, ``seed``, ``budget``), what
    each task was compared with (``compared_with``) and the per-task verdicts, in the file's order."""

    source: str
    algorithm: str
    seed: int
    budget: int | None
    compared_with: str
    tasks: tuple[TaskRerun, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return all(task.ok for task in self.tasks)

    @property
    def first_failure(self) -> TaskRerun | None:
        return next((task for task in self.tasks if not task.ok), None)


def placement_differences(expected: dict | str, got: dict | str, task: Task | PlanTask | None = None
                          ) -> list[str]:
    """Why two placements (``{op name: device name}``, or as text) differ: the first op placed
    differently and how many are, or ops only one of them places (empty: the same placement). A
    mapping compared with a text is first written as text in ``task``'s op order (an entry of one
    suite may hold another suite's results in the other form)."""
    if isinstance(task, PlanTask):  # plans, by their ids
        return [] if expected == got else [f"plan {shown(expected, 120)} in the file, {shown(got, 120)} "
                                           "re-run"]
    if task is not None and isinstance(expected, str) != isinstance(got, str):
        expected, got = (_as_text(task, p) for p in (expected, got))
    if isinstance(expected, str) or isinstance(got, str):
        expected, got = (dict(enumerate(p)) if isinstance(p, str) else p for p in (expected, got))
    reasons = []
    missing = [op for op in got if op not in expected]
    extra = [op for op in expected if op not in got]
    if missing or extra:
        reasons.append(f"ops placed by one run only: {len(missing)} missing from the file "
                       f"(first {missing[0]!r})" if missing else
                       f"ops placed by one run only: {len(extra)} in the file only (first {extra[0]!r})")
    differing = [op for op in got if op in expected and expected[op] != got[op]]
    if differing:
        op = differing[0]
        reasons.append(f"placement differs on {len(differing)} of {len(got)} ops; first {op!r}: "
                       f"{expected[op]!r} in the file, {got[op]!r} re-run")
    return reasons


def _as_text(task: Task, placement: dict | str) -> dict | str:
    """``placement`` as text, or as it is when it is text already or no placement of ``task``."""
    if isinstance(placement, str):
        return placement
    array, problems = placement_problems(task, placement)
    return placement if problems else placement_to_text(task, array)


def compare_results(task_id: str, expected: dict, got: dict, what: str,
                    task: Task | PlanTask | None = None) -> TaskRerun:
    """The verdict on one task: ``got`` (a re-run's result) against ``expected`` (``what`` says where
    that comes from): the placement (a mapping and a text compared through ``task``), its runtime and
    feasibility, the evaluation count and, where ``expected`` has one, the learning curve."""
    reasons = placement_differences(expected["placement"], got["placement"], task)
    for name in ("runtime", "feasible"):
        if not reasons and expected[name] != got[name]:  # the same placement scored otherwise
            reasons.append(f"{name}: {expected[name]!r} {what}, {got[name]!r} re-run")
    if expected["evaluations"] != got["evaluations"]:
        reasons.append(f"evaluations: {expected['evaluations']} {what}, {got['evaluations']} re-run")
    # A learning curve recorded in the file must be the one the re-run records (older files have none).
    if "trace" in expected and expected["trace"] != got.get("trace"):
        reasons.append(f"learning curve (trace) {what} differs from the re-run's")
    return TaskRerun(task_id, not reasons, tuple(reasons), got["evaluations"], got["runtime"])


def rerun_submission(
    path: str | Path,
    tasks: Sequence[str] | None = None,
    budget: int | None = None,
    progress: Callable[[TaskRerun], Any] | None = None,
) -> Rerun:
    """Re-run the entry of submission file ``path`` and compare it (module docstring).

    ``tasks``: task ids of the file to re-run (default: all of them, in the file's order).
    ``budget``: None re-runs at the file's budget and compares with the file; another number re-runs
    twice at that budget and compares the runs. ``progress`` is called with each task's verdict as
    it is made. ValueError (before anything runs) for a file or options that cannot be re-run."""
    data = load_submission(path)
    track = data.get("track", "cost_model")
    if track == "real":
        raise ValueError(f"{path}: a real-hardware entry was searched on its machine; it cannot be re-run "
                         "here")
    suite = get_suite(data["suite"])
    chosen = list(data["results"]) if tasks is None else list(tasks)
    unknown = [t for t in chosen if t not in data["results"]]
    if unknown or not chosen:
        raise ValueError(f"--tasks names {', '.join(unknown) or 'no task'}; the tasks of {path} are: "
                         f"{', '.join(data['results'])}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"budget must be a positive number of evaluations, got {budget!r}")
    agent = (plan_leaderboard_agent(data["algorithm"]) if suite.spec.placement_format == "plan"
             else leaderboard_agent(data["algorithm"]))
    twice = budget is not None and budget != data.get("budget")
    run_budget = budget if twice else data.get("budget")
    if twice:
        made_at = data.get("budget") or "the agent's default"
        compared_with = (f"a second re-run at budget {budget} (the file was made at budget {made_at}; "
                         "its placements are not compared)")
    else:
        compared_with = "the file: placements bit for bit and evaluation counts"

    def run(task_id: str) -> dict:
        return evaluate(agent, suite.subset([task_id]), run_budget, algorithm=data["algorithm"],
                        authors=data["authors"], description=data["description"], link=data.get("link"),
                        seed=data["seed"], trained_on=data.get("trained_on", ()), track=track,
                        pretraining=data.get("pretraining"))["results"][task_id]

    verdicts = []
    for task_id in chosen:
        try:
            got = run(task_id)
            if twice:
                verdict = compare_results(task_id, run(task_id), got, "in the first re-run")
            else:
                verdict = compare_results(task_id, data["results"][task_id], got, "in the file",
                                          suite.get(task_id).task())
        except Exception as error:  # noqa: BLE001 - an agent that fails has not reproduced its entry
            verdict = TaskRerun(task_id, False, (f"the agent failed: {type(error).__name__}: {error}",))
        verdicts.append(verdict)
        if progress is not None:
            progress(verdict)
    return Rerun(str(path), data["algorithm"], int(data["seed"]), run_budget, compared_with, tuple(verdicts))


def rerun_json(rerun: Rerun) -> dict:
    """A JSON-able summary of a `Rerun`."""
    first = rerun.first_failure
    return {
        "file": rerun.source, "algorithm": rerun.algorithm, "seed": rerun.seed, "budget": rerun.budget,
        "compared_with": rerun.compared_with, "ok": rerun.ok,
        "first_failure": None if first is None else first.task_id,
        "tasks": [{"task": t.task_id, "ok": t.ok, "reasons": list(t.reasons), "evaluations": t.evaluations,
                   "runtime": t.runtime} for t in rerun.tasks],
    }
