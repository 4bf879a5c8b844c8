"""Freezing a suite: its tasks and their figures measured as its suite file's ``measure`` says.

A suite file states how its tasks are made (``measure``, `suite_spec.Measure`): the tasks of the suite
it ``inherits``, with their frozen figures (the current code must still reproduce them:
`require_suite`), then ``new_tasks`` (or the tasks of a ``dataset_sample``), each measured now
(`measure_suite_task`); every task of ``fitted_by`` must be placed within memory by the heuristic named,
checked before anything is written (`unfitted_tasks`). `measure_suite` gives the suite;
`write_suite_file` measures the suite of a file (a draft: ``tasks`` still empty, or a suite measured
again) and writes its tasks into it. ``python -m baselines.leaderboard_fill.classic --write-suite
VERSION`` runs it on the suite folder's file.
"""

from __future__ import annotations

import json
from pathlib import Path

from placement_gym.cost_model import simulate
from placement_gym.leaderboard.generalisation import dataset_sample_task_ids
from placement_gym.leaderboard.registry import read_suite_file
from placement_gym.leaderboard.suite import (
    Suite,
    get_suite,
    measure_suite_task,
    require_suite,
    suite_to_dict,
    task_of_id,
)
from placement_gym.leaderboard.suite_spec import SuiteSpec
from placement_gym.task.named import parse_task_id


def new_task_ids(spec: SuiteSpec) -> tuple[str, ...]:
    """The tasks ``spec`` measures now: its ``new_tasks``, or those of its ``dataset_sample``."""
    sample = spec.measure.dataset_sample
    return spec.measure.new_tasks if sample is None else dataset_sample_task_ids(sample)


def unfitted_tasks(spec: SuiteSpec) -> dict[str, str]:
    """Task id -> what is wrong, for each task of ``spec.measure.fitted_by`` whose heuristic does not
    place it within memory (runs the heuristics: minutes on a task of 100,000 ops)."""
    from placement_gym.evaluation.agents import run_installed_agent

    problems = {}
    for task_id, agent in spec.measure.fitted_by:
        task = parse_task_id(task_id)
        result = simulate(task, run_installed_agent(task, agent).placement)
        if not result.feasible:
            problems[task_id] = (f"{agent}'s placement needs more memory than a device has "
                                 f"({result.peak_memory.max() / 1e9:.1f} GB at most)")
    return problems


def measure_suite(version: str, description: str, spec: SuiteSpec) -> Suite:
    """Suite ``version`` as the current code measures it from ``spec.measure`` (module docstring),
    after checking that each ``fitted_by`` heuristic fits its task (a ValueError names those that do
    not)."""
    problems = unfitted_tasks(spec)
    if problems:
        raise ValueError(f"suite {version} would hold tasks no heuristic fits: "
                         + "; ".join(f"{k}: {v}" for k, v in problems.items()))
    base = Suite(version, ()) if spec.measure.inherits is None else spec.measure.inherits
    return extend_suite(base, version, new_task_ids(spec), description, spec)


def extend_suite(base: str | Suite, version: str, task_ids: tuple[str, ...] | list[str],
                 description: str, spec: SuiteSpec | None = None) -> Suite:
    """Suite ``version`` (with ``spec``, default: ``base``'s): every task of ``base`` with its frozen
    figures (the code must still reproduce them: `require_suite`), then the fingerprint of each of
    ``task_ids`` measured now."""
    base = get_suite(base)
    clash = sorted(set(task_ids) & set(base.task_ids))
    if clash:
        raise ValueError(f"tasks already in suite {base.version}: {', '.join(clash)}; give only new tasks")
    require_suite(base)
    added = tuple(measure_suite_task(task_of_id(task_id)) for task_id in task_ids)
    return Suite(version, base.tasks + added, description, base.spec if spec is None else spec)


def write_suite_file(path: str | Path) -> Suite:
    """Measure the suite of the suite file ``path`` (its version, description and spec as they are;
    `measure_suite`) and write it back with the measured tasks; returns the suite."""
    path = Path(path)
    stated = read_suite_file(path)
    suite = measure_suite(stated.version, stated.description, stated.spec)
    path.write_text(json.dumps(suite_to_dict(suite), indent=1) + "\n", encoding="utf-8")
    return suite
