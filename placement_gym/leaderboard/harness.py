"""Run any agent over a suite and write a submission: `evaluate`.

An agent is any callable ``agent(task, seed, budget)`` returning a placement (array of device indices
per forward op) or an object with ``.placement`` and ``.evaluations``; this module never imports
``baselines``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cost_model import simulate
from placement_gym.leaderboard.generalisation import get_split
from placement_gym.leaderboard.submission import SCHEMA_VERSION, TRACKS, check_schema, save_submission
from placement_gym.leaderboard.suite import CURRENT_SUITE, Suite, get_suite
from placement_gym.placements import placement_to_dict
from placement_gym.task import Task

Agent = Callable[[Task, int, "int | None"], Any]


def task_digest(task: Task) -> str:
    """sha256 over every array of the task, its graph and its cluster: the harness compares it before
    and after an agent runs, since tasks are cached and shared, and a changed task would score a
    different problem."""
    digest = hashlib.sha256()
    for owner in (task, task.graph, task.cluster):
        for name in sorted(vars(owner)):
            value = vars(owner)[name]
            if isinstance(value, np.ndarray):
                digest.update(name.encode())
                digest.update(str(value.dtype).encode())
                digest.update(np.ascontiguousarray(value).tobytes())
            elif isinstance(value, (str, int, float, tuple)):
                digest.update(f"{name}={value!r}".encode())
    return digest.hexdigest()


def _unpack(task: Task, returned: Any) -> tuple[np.ndarray, int]:
    """The placement and the evaluation count of what an agent returned (count 1 when not given)."""
    if hasattr(returned, "placement"):
        placement = returned.placement
        evaluations = int(getattr(returned, "evaluations", 1))
    else:
        placement, evaluations = returned, 1
    return task.check_placement(placement), evaluations


def evaluate(
    agent: Agent,
    suite: str | Suite = CURRENT_SUITE,
    budget: int | None = None,
    *,
    algorithm: str,
    authors: list[str] | tuple[str, ...] = (),
    description: str = "",
    link: str | None = None,
    seed: int = 0,
    trained_on: list[str] | tuple[str, ...] = (),
    track: str = "cost_model",
    out: str | Path | None = None,
) -> dict:
    """Run ``agent`` on every task of ``suite`` and return (and write to ``out`` when given) the
    submission. ``trained_on`` lists task ids the agent was trained on (marked per task). With
    ``track="generalisation"`` only the suite's held-out tasks run (`generalisation`) and
    ``trained_on`` is required. Raises RuntimeError when the agent modifies a task."""
    from placement_gym import __version__

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
    results = {}
    for suite_task in suite.tasks:
        task = suite_task.task()
        before = task_digest(task)
        start = time.perf_counter()
        returned = agent(task, seed, budget)
        wall_s = time.perf_counter() - start
        if task_digest(task) != before:
            raise RuntimeError(f"agent {algorithm!r} modified task {task.id}; agents must not change tasks")
        placement, evaluations = _unpack(task, returned)
        simulated = simulate(task, placement)
        results[task.id] = {
            "graph_sha256": task.graph.sha256,
            "placement": placement_to_dict(task, placement),
            "runtime": float(simulated.runtime),
            "feasible": bool(simulated.feasible),
            "evaluations": evaluations,
            "wall_s": round(wall_s, 6),
            "trained_on_task": task.id in trained_on,
        }
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
    check_schema(submission)
    if out is not None:
        save_submission(submission, out)
    return submission
