"""Run any agent over a suite and write a submission: `evaluate`.

An agent is any callable ``agent(task, seed, budget)`` returning a placement (array of device indices
per forward op) or an object with a ``.placement``; this module never imports ``baselines``.

Budgets are measured, not reported: each agent gets its own copy of the task
(`Task.independent_copy`: arrays and caches copied, a new evaluation counter) and the entry records
the evaluations made of that copy (`Task.evaluations`: every `simulate` call, `simulate_batch` row,
env step, evaluator run, through the copy or any task derived from it), whatever the agent says it
used, plus those it made of the cached task of the same id (reached by name, `get_task`). An agent
that evaluated the task it is scored on is marked ``trained_on_task``. The harness scores the
returned placement on a copy of its own, made before the agent ran, so nothing the agent does to its
task changes the score. Not seen: evaluations of a task the agent compiles itself (`make_task` on the
graph and cluster) or evaluates in another process; agents build envs on the task they are given
(``graph=task``). A parallel-plan suite's task is a `PlanTask` made new from its id for each run, so
every evaluation of it is the agent's; its answer (a choice or a `Plan`) is priced again and written as
the plan's id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.common.version import __version__
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.evaluation.placements import placement_to_dict, placement_to_text
from placement_gym.leaderboard.generalisation import get_split
from placement_gym.leaderboard.plan_suite import model_digest, price
from placement_gym.leaderboard.submission import (
    SCHEMA_VERSION,
    TRACKS,
    check_header,
    check_schema,
    save_submission,
    thin_trace,
)
from placement_gym.leaderboard.suite import Suite, get_suite, graph_digest
from placement_gym.plans.plan import plan_problems
from placement_gym.plans.space import PlanTask
from placement_gym.task.compiled import Task

Agent = Callable[[Task, int, "int | None"], Any]


def task_digest(task: Task) -> str:
    """sha256 over every array of the task, its graph and its cluster: the harness compares that of
    the cached, shared task before and after an agent runs (an agent that reaches it by name, not
    through the copy it was given, must not change it for whoever uses it next)."""
    digest = hashlib.sha256()
    for owner in (task, task.graph, task.cluster):
        # Fields only: a cached property computed meanwhile (a graph's sha256) changes nothing.
        for name in sorted(f.name for f in dataclasses.fields(owner)):
            value = getattr(owner, name)
            if isinstance(value, np.ndarray):
                digest.update(name.encode())
                digest.update(str(value.dtype).encode())
                digest.update(np.ascontiguousarray(value).tobytes())
            elif isinstance(value, (str, int, float, tuple)):
                digest.update(f"{name}={value!r}".encode())
    return digest.hexdigest()


def _placement(task: Task, returned: Any) -> np.ndarray:
    """The checked placement of what an agent returned (an array, or an object with ``.placement``;
    a count of evaluations it carries is not used: the harness measures them)."""
    return task.check_placement(returned.placement if hasattr(returned, "placement") else returned)


def agent_copy(task: Task) -> tuple[Task, Task]:
    """``(scoring, handed)``: the harness's own copy of ``task``, scored on after the agent ran, and
    the agent's copy of that (caches included, evaluation counter at 0). The reference figures every
    env and agent may read (the best single device, the lower bound) are computed on the scoring
    copy first, so the agent's copy holds them and they are not counted as its evaluations."""
    scoring = task.independent_copy(caches=False)
    single_device(scoring)
    lower_bound(scoring)
    return scoring, scoring.independent_copy()


def evaluate(
    agent: Agent,
    suite: str | Suite | None = None,
    budget: int | None = None,
    *,
    algorithm: str,
    authors: list[str] | tuple[str, ...] = (),
    description: str = "",
    link: str | None = None,
    seed: int = 0,
    trained_on: list[str] | tuple[str, ...] = (),
    track: str = "cost_model",
    pretraining: dict | None = None,
    out: str | Path | None = None,
) -> dict:
    """Run ``agent`` on every task of ``suite`` (default: the current suite) and return (and write to
    ``out`` when given) the submission, its placements in the suite's ``placement_format``
    ({op name: device name}, or text: one character per op, a tenth of the size). Each task's entry
    records ``evaluations``, the evaluations the agent made of its copy of the task (module docstring),
    and ``trained_on_task``: true when that count is above 0 or the task is in ``trained_on``, the task
    ids the agent says it trained on before. With ``track="generalisation"`` only the suite's held-out
    tasks run (`generalisation`) and ``trained_on`` is required; ``pretraining`` is the schema's object
    (`counted_pretraining` makes one), required for a suite whose file says ``requires_pretraining``.
    Raises RuntimeError when the agent modifies the cached, shared task (reached by name: the copy it is
    given is its own)."""
    if track not in TRACKS:
        raise ValueError(f"unknown track {track!r}; allowed: {', '.join(TRACKS)}")
    suite = get_suite(suite)
    if track == "generalisation":
        if not trained_on:
            raise ValueError("track 'generalisation' needs trained_on: the task ids the agent trained on")
        held_out = set(get_split(suite).held_out_tasks())
        suite = suite.subset([t for t in suite.task_ids if t in held_out])
        if not suite.tasks:
            raise ValueError(f"the suite given holds no held-out task of the {suite.version} split")
    results: dict[str, dict] = {}
    submission = {
        "schema": SCHEMA_VERSION,
        "suite": suite.version,
        "package_version": __version__,
        "algorithm": algorithm,
        "authors": list(authors),
        "description": description,
        "link": link,
        "seed": int(seed),
        "budget": budget,
        "track": track,
        "results": results,
    }
    if trained_on:
        submission["trained_on"] = list(trained_on)
    if pretraining is not None:
        submission["pretraining"] = dict(pretraining)
    check_header(submission)
    for suite_task in suite.tasks:
        if suite.spec.placement_format == "plan":
            results[suite_task.task_id] = _plan_result(agent, suite_task.task(), seed, budget, algorithm,
                                                       suite_task.task_id in trained_on)
            continue
        shared = suite_task.task()
        # Its reference figures too, so that an agent reaching it by name is counted the same whatever
        # ran before.
        single_device(shared)
        lower_bound(shared)
        before, shared_before = task_digest(shared), shared.evaluations
        task, handed = agent_copy(shared)
        handed.start_trace()
        start = time.perf_counter()
        returned = agent(handed, seed, budget)
        wall_s = time.perf_counter() - start
        if task_digest(shared) != before:
            raise RuntimeError(f"agent {algorithm!r} modified task {task.id}; agents must not change tasks")
        evaluations = handed.evaluations + (shared.evaluations - shared_before)
        placement = _placement(task, returned)
        simulated = simulate(task, placement)
        results[task.id] = {
            "graph_sha256": graph_digest(task.graph),
            "placement": (placement_to_dict(task, placement) if suite.spec.placement_format == "mapping"
                          else placement_to_text(task, placement)),
            "runtime": float(simulated.runtime),
            "feasible": bool(simulated.feasible),
            "evaluations": evaluations,
            "wall_s": round(wall_s, 6),
            "trained_on_task": evaluations > 0 or task.id in trained_on,
        }
        if handed.trace:
            results[task.id]["trace"] = thin_trace(handed.trace)
    check_schema(submission)
    if out is not None:
        save_submission(submission, out)
    return submission


def _plan_result(agent: Agent, task: PlanTask, seed: int, budget: int | None, algorithm: str,
                 listed_in_trained_on: bool) -> dict:
    """One plan task's entry of a submission: ``agent`` run on ``task`` (a plan task of its own, new
    from its id: nothing is shared with another run), its plan priced again and written as its id;
    ``trained_on_task`` where it was evaluated or is listed in the entry's ``trained_on``."""
    task.start_trace()
    start = time.perf_counter()
    returned = agent(task, seed, budget)
    wall_s = time.perf_counter() - start
    evaluations = task.evaluations
    plan = task.plan_of(returned.placement if hasattr(returned, "placement") else returned)
    problems = plan_problems(plan, task.model, task.mesh)
    if problems:
        raise ValueError(f"agent {algorithm!r} answered task {task.id} with plan {plan.suffix()}, which "
                         f"cannot run: {problems[0]}")
    priced = price(task, plan)
    result = {"graph_sha256": model_digest(task), "placement": plan.suffix(), "runtime": float(priced.step_s),
              "feasible": bool(priced.feasible), "evaluations": evaluations, "wall_s": round(wall_s, 6),
              "trained_on_task": evaluations > 0 or listed_in_trained_on}
    if task.trace:
        result["trace"] = thin_trace(task.trace)
    return result


def machine_description() -> str:
    """This machine in one line: processor model, cores and system (what a pre-training figure states)."""
    processor = platform.processor() or platform.machine()
    try:  # Linux names the model here; platform.processor() often gives only the architecture
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
        processor = models[0] if models else processor
    except OSError:
        pass
    return f"{processor}, {os.cpu_count()} cores, {platform.system()}"[:200]


def counted_pretraining(train: Callable[[list[Task]], Any], tasks: list[Task]) -> tuple[Any, dict]:
    """Run ``train`` on independent copies of ``tasks`` (compiled training tasks) and count what it
    spends: ``(what train returned, the submission's pretraining object)`` with the evaluations made of
    those copies, the wall seconds and this machine, ``"counted": "harness"``. Evaluations of tasks
    ``train`` compiles itself, or makes in other processes, are not seen (as in `evaluate`)."""
    copies = [task.independent_copy() for task in tasks]
    start = time.perf_counter()
    trained = train(copies)
    wall_s = time.perf_counter() - start
    evaluations = sum(task.evaluations for task in copies)
    # Rounded up to the millisecond: never under the measurement, which validation bounds below by the
    # evaluations (at least 1 us each).
    return trained, {"evaluations": int(evaluations), "wall_s": math.ceil(wall_s * 1000) / 1000,
                     "machine": machine_description(), "counted": "harness"}
