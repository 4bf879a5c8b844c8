"""The proven lower bound of every task of a suite, as the leaderboard shows it.

The suite's fingerprint freezes the simple bound (`placement_gym.cost_model.lower_bound`: critical path
or work spread over every device). The tighter proven bounds (`placement_gym.cost_model.proven_bound`)
take an LP solve per task, too slow to run on every render, so they are computed once into the suite's
bounds file in the leaderboard folder (its suite file's ``bounds``, `bounds_name`: ``bounds.json`` for
the current suite; `write_bounds`, ``placement-gym leaderboard bounds [--suite S]``) and recomputed by
``placement-gym leaderboard validate`` (`check_bounds`), which fails when a stored bound is not what the
current code proves. The bound shown for a task is the larger of the frozen one and the stored one
(both are proofs, so the larger is one too).

A stored bound is a file a pull request can edit, so it is checked twice. Too high: `render` and
`validate` refuse a bound above the re-simulated runtime of any feasible submitted placement of its task
(`impossible_bounds`; no feasible placement can beat a lower bound). Too low (or any other change):
``bounds --check`` recomputes it; ``bounds --check --part day/3`` recomputes a third of the tasks of the
suites named, split by their estimated cost (`cost_parts`), so that CI recomputes every stored bound
every three days.

File format::

    {"suite": "<version>", "tasks": {"<task id>": {"bound": 0.61, "source": "lp", "arguments": {"lp": 0.61}}}}

The file is read as untrusted input (`placement_gym.common.untrusted`): a regular file of the leaderboard
folder, never through a symbolic link, of at most `MAX_FILE_BYTES` bytes of strict JSON nested at most
`MAX_NESTING` levels; it is written atomically and never through a link (`write_inside`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from placement_gym.common.progress import ProgressCallback
from placement_gym.common.untrusted import UntrustedFileError, inside, read_json, write_inside
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.suite import Suite, SuiteTask, get_suite

# About 600 bytes per task: room for suites of thousands of tasks.
MAX_FILE_BYTES = 4 * 2**20
# The format nests 4 levels (file > tasks > task > arguments).
MAX_NESTING = 8
FROZEN_SOURCE = "critical path or work / devices"
# A plan task's frozen bound (`placement_gym.plans.space.PlanTask.lower_bound_s`).
PLAN_SOURCE = "matrix-product work / every GPU at peak"
# A stored bound is the same number when it matches the recomputed one to this relative tolerance (the
# LP solver's answer may move in its last digits between platforms; its proof tolerance is larger).
BOUND_RTOL = 1e-6


@dataclass(frozen=True)
class TaskBound:
    """One task's proven lower bound (seconds), the argument that gives it and every argument's value."""

    value: float
    source: str
    arguments: dict[str, float] = field(default_factory=dict)
    # The bounds file it was read from ("": the suite's frozen bound), for messages.
    stored_in: str = field(default="", compare=False)


def bounds_name(suite: str | Suite | None = None) -> str:
    """The bounds file of a suite (default: the current suite) in the leaderboard folder: its suite
    file's ``bounds``; ValueError for a suite without one."""
    suite = get_suite(suite)
    if suite.spec.bounds is None:
        raise ValueError(f"suite {suite.version} has no bounds file; suites with one: "
                         f"{', '.join(suite_registry().with_bounds())}")
    return suite.spec.bounds


def frozen_bounds(suite: Suite) -> dict[str, TaskBound]:
    """The suite fingerprint's lower bound of every task (a parallel-plan suite's: `PLAN_SOURCE`)."""
    source = PLAN_SOURCE if suite.spec.placement_format == "plan" else FROZEN_SOURCE
    return {t.task_id: TaskBound(t.lower_bound, source, {source: t.lower_bound}) for t in suite.tasks}


def load_bounds(directory: str | Path, suite: Suite) -> dict[str, TaskBound]:
    """Per task of ``suite``: the largest of its frozen bound and the ones stored in the folder's bounds
    files (`bounds_name` of this suite when it has one, and of the current suite for a task it holds with
    the same frozen fingerprint: a suite that inherits another holds its tasks as the other froze them,
    and a bound proven for a task is proven for the same task in any suite). A malformed file is a
    ValueError naming what is wrong."""
    bounds = frozen_bounds(suite)
    registry = suite_registry()
    names = dict.fromkeys(name for name in (suite.spec.bounds, registry.current().spec.bounds) if name)
    for name in names:
        stored = _stored_bounds(directory, name)
        if stored is None:
            continue
        if stored["suite"] == suite.version:
            same = set(bounds)
        elif stored["suite"] in registry.suites:
            other = registry.suites[stored["suite"]]
            same = {t for t in suite.task_ids if t in other.task_ids and other.get(t) == suite.get(t)}
        else:
            continue
        for task_id, entry in stored["tasks"].items():
            if task_id in same and entry["bound"] > bounds[task_id].value:
                arguments = {**bounds[task_id].arguments, **entry["arguments"]}
                bounds[task_id] = TaskBound(entry["bound"], entry["source"], arguments, name)
    return bounds


def _stored_bounds(directory: str | Path, name: str) -> dict | None:
    """`read_bounds` of ``directory/name``; None when there is no such file (not even a link)."""
    path = inside(directory, name)
    return read_bounds(path) if os.path.lexists(path) else None


def read_bounds(path: str | Path) -> dict:
    """The checked contents of a bounds file (module docstring); ValueError naming the problem (an
    `UntrustedFileError` for a file that is a link, too large or not strict JSON)."""
    data = read_json(path, MAX_FILE_BYTES, "bounds file", max_depth=MAX_NESTING, follow_symlinks=False)
    if not (
        isinstance(data, dict) and isinstance(data.get("suite"), str) and isinstance(data.get("tasks"), dict)
    ):
        raise ValueError(f"{path}: expected {{'suite': str, 'tasks': {{task id: ...}}}}")
    for task_id, entry in data["tasks"].items():
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("bound"), (int, float))
            and math.isfinite(entry["bound"])
            and entry["bound"] > 0
            and isinstance(entry.get("source"), str)
            and isinstance(entry.get("arguments"), dict)
            and all(isinstance(v, (int, float)) and math.isfinite(v) for v in entry["arguments"].values())
        )
        if not ok:
            raise ValueError(
                f"{path}: task {task_id!r} needs 'bound' (a positive number), 'source' (text) and "
                "'arguments' ({name: number})"
            )
    return data


def compute_bounds(suite: Suite, progress: ProgressCallback | None = None) -> dict:
    """The bounds file's contents for ``suite``: `proven_bound` of every task (``progress``: an optional
    callback, `placement_gym.common.progress`, told each task as it starts)."""
    from placement_gym.cost_model import proven_bound

    tasks = {}
    for done, suite_task in enumerate(suite.tasks):
        if progress is not None:
            progress(f"computing the bounds of suite {suite.version}", done, len(suite.tasks),
                     suite_task.task_id)
        bound = proven_bound(suite_task.task())
        if not math.isfinite(bound.value):
            # No placement fits in memory: nothing runs, so there is no runtime to bound (the README
            # keeps the frozen bound).
            continue
        tasks[suite_task.task_id] = {
            "bound": float(bound.value),
            "source": bound.source,
            "arguments": {name: float(value) for name, value in bound.arguments.items()},
        }
    return {"suite": suite.version, "tasks": tasks}


def write_bounds(directory: str | Path, suite: Suite, progress: ProgressCallback | None = None) -> Path:
    """Compute (`compute_bounds`) and write the suite's bounds file (`bounds_name`) in ``directory``
    (`write_inside`: refused before computing when it, or the folder on the way, is a symbolic link);
    returns its path."""
    name = bounds_name(suite)
    inside(directory, name)
    text = json.dumps(compute_bounds(suite, progress), indent=1, sort_keys=True) + "\n"
    return write_inside(directory, name, text)


def check_bounds(
    directory: str | Path, suite: Suite, progress: ProgressCallback | None = None,
    task_ids: list[str] | None = None,
) -> list[str]:
    """Recompute every bound of the suite's bounds file (`bounds_name`) in ``directory`` and name each
    that differs (beyond `BOUND_RTOL`) from what the current code proves, each task the file lacks and
    each it holds that is not the suite's; [] when all agree or there is no file. ``task_ids``: recompute
    those tasks of the suite only (a ValueError names one the suite lacks), for a check on a sample."""
    stored = _stored_bounds(directory, bounds_name(suite))
    if stored is None or stored["suite"] != suite.version:
        return []
    fresh = compute_bounds(suite if task_ids is None else suite.subset(task_ids), progress)["tasks"]
    return _differences(stored, suite, fresh)


def _differences(stored: dict, suite: Suite, fresh: dict) -> list[str]:
    """Where the stored bounds file of ``suite`` differs from the ``fresh`` bounds (task id: entry of
    `compute_bounds`) of the tasks recomputed."""
    name = bounds_name(suite)
    problems = [f"{task_id}: no stored bound" for task_id in fresh if task_id not in stored["tasks"]]
    for task_id, entry in stored["tasks"].items():
        if task_id not in suite.task_ids:
            problems.append(f"{task_id}: not a task of suite {suite.version}")
        elif task_id in fresh and not math.isclose(entry["bound"], fresh[task_id]["bound"],
                                                     rel_tol=BOUND_RTOL):
            problems.append(f"{task_id}: stored bound {entry['bound']:.9g} s in {name}, "
                            f"the code proves {fresh[task_id]['bound']:.9g} s")
    return problems


def task_cost(suite_task: SuiteTask) -> int:
    """The estimated cost of proving ``suite_task``'s bound: the ops of its compiled task (forward,
    backward and update ops). The load LP and the energetic bound grow with them: 13 tasks of at most
    5,074 ops take about 30 s together, a 103,202-op inference task some 15 minutes."""
    return int(suite_task.task().n_ops)


def cost_parts(tasks: Sequence[SuiteTask], parts: int,
               cost: Callable[[SuiteTask], int] = task_cost) -> list[list[SuiteTask]]:
    """``tasks`` split into ``parts`` lists of about equal total ``cost``: the costliest first, each to
    the part with the least so far (ties: the lower part), so the result depends only on the tasks."""
    costs = {t.task_id: cost(t) for t in tasks}
    split: list[list[SuiteTask]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for suite_task in sorted(tasks, key=lambda t: (-costs[t.task_id], t.task_id)):
        lightest = loads.index(min(loads))
        split[lightest].append(suite_task)
        loads[lightest] += costs[suite_task.task_id]
    return split


def stored_tasks(directory: str | Path, suites: Sequence[Suite]) -> list[SuiteTask]:
    """The tasks of ``suites`` that have a bounds file in ``directory`` (each task once: a task two suites
    hold with the same fingerprint is proven once for both), in the suites' order."""
    tasks: dict[SuiteTask, None] = {}
    for suite in suites:
        stored = None if suite.spec.bounds is None else _stored_bounds(directory, suite.spec.bounds)
        if stored is not None and stored["suite"] == suite.version:
            tasks.update(dict.fromkeys(suite.tasks))
    return list(tasks)


def check_bounds_part(directory: str | Path, suites: Sequence[Suite], part: tuple[int, int],
                      progress: ProgressCallback | None = None) -> tuple[list[SuiteTask], list[str]]:
    """Recompute the tasks of part ``part`` = (k, n) of `cost_parts` over the `stored_tasks` of
    ``suites`` and compare them with every bounds file of ``suites`` that stores them (`check_bounds`).
    Returns the tasks recomputed and the problems (one line each)."""
    chosen = cost_parts(stored_tasks(directory, suites), part[1])[part[0]]
    fresh: dict[SuiteTask, dict | None] = {}
    for done, suite_task in enumerate(chosen):
        if progress is not None:
            progress(f"computing the bounds of part {part[0]} of {part[1]}", done, len(chosen),
                     suite_task.task_id)
        one = Suite(suite_task.task_id, (suite_task,))
        fresh[suite_task] = compute_bounds(one)["tasks"].get(suite_task.task_id)
    problems = []
    for suite in suites:
        stored = None if suite.spec.bounds is None else _stored_bounds(directory, suite.spec.bounds)
        if stored is None or stored["suite"] != suite.version:
            continue
        mine = {t.task_id: fresh[t] for t in suite.tasks if t in fresh and fresh[t] is not None}
        problems += _differences(stored, suite, mine)
    return chosen, problems


def impossible_bounds(bounds: dict[str, TaskBound], runtimes: dict[str, float]) -> list[str]:
    """One line per task whose bound (``bounds``, `load_bounds`) is above ``runtimes[task]``, the best
    re-simulated runtime of a feasible submitted placement of it (NaN: none): no feasible placement can
    be faster than a lower bound, so the stored figure is no bound (beyond `BOUND_RTOL`)."""
    problems = []
    for task_id, bound in bounds.items():
        runtime = runtimes.get(task_id, math.nan)
        if bound.value > runtime * (1 + BOUND_RTOL):
            problems.append(f"{bound.stored_in or 'the suite'}: the lower bound of {task_id} is "
                            f"{bound.value:.9g} s, above the {runtime:.9g} s a submitted feasible placement "
                            "runs in (re-simulated): it is no lower bound; recompute it with 'placement-gym "
                            "leaderboard bounds'")
    return problems


class ImpossibleBound(UntrustedFileError):
    """A stored bound above a runtime the leaderboard re-simulated (`impossible_bounds`)."""

