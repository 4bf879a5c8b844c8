"""Generalisation of the GNN placers (`placeto`, `hsdag`): train on some graphs, place an unseen one.

`train_generalize` trains one agent on a list of tasks (round-robin, ``switch_every`` evaluations at a
time, each task with its own budget), moves it to the held-out task with `set_task` and reports:

* zero-shot: ``zero_shot_samples`` placements of the trained policy (`propose`: the first greedy, the
  others sampled), evaluated; these evaluations are counted;
* fine-tuned: the same policy trained further on the held-out task for ``finetune_budget``
  evaluations; its best is over the zero-shot and the fine-tuning evaluations together;
* from scratch: a fresh agent (same seed and config) trained on the held-out task alone with the same
  number of held-out evaluations (``zero_shot_samples + finetune_budget``), for comparison.

Every evaluation goes through a `Budget`. The two halves are also usable on their own:
`train_on_tasks` (one model trained on several tasks) and `place_held_out` (zero-shot, then optional
fine-tuning, on one task); `baselines.leaderboard_fill.generalisation` uses them. `pretrain` trains the
independent models of a pre-training (one per device count and per seed) as jobs of
`placement_gym.evaluation.parallel.run_jobs`: serial, or on Ray with the serial run's models. Run it
from the shell::

    python -m baselines.learning.generalize --agent hsdag --train cifar10_cnn,resnet50,bert_base \\
        --test inception_v3 --cluster k80x4 --budget 2000 --finetune 500
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from baselines.learning.agent import LearnedAgent, get_learned
from placement_gym.common.threads import set_torch_threads
from placement_gym.evaluation.budget import Budget, BudgetExhausted, check_limit
from placement_gym.evaluation.parallel import check_backend, run_jobs
from placement_gym.task.compiled import Task
from placement_gym.task.named import parse_task_id


def _run(model: LearnedAgent, evaluator: Budget, until: int | None = None) -> None:
    """Iterations of ``model`` until ``evaluator`` has used ``until`` evaluations (default: all)."""
    until = evaluator.limit if until is None else min(until, evaluator.limit)
    while evaluator.used < until:
        before = evaluator.used
        try:
            model.iteration(evaluator)
        except BudgetExhausted:
            break
        if evaluator.used == before:
            raise RuntimeError(f"agent {model.name!r} made an iteration without evaluating anything")


def _summary(evaluator: Budget) -> dict[str, Any]:
    single = evaluator.best_single_runtime
    return {
        "evaluations": evaluator.used,
        "best_runtime": evaluator.best_runtime,
        "best_feasible": evaluator.best_feasible,
        "speedup": single / evaluator.best_runtime if evaluator.best_feasible else 0.0,
    }


def train_on_tasks(
    agent: str,
    train_tasks: Sequence[Task],
    budget_per_task: int,
    seed: int = 0,
    switch_every: int = 1000,
    threads: int | None = 1,
    **config: Any,
) -> tuple[LearnedAgent, list[Budget]]:
    """Train ``agent`` (a learned agent with `set_task` and `propose`: ``"placeto"`` or ``"hsdag"``) on
    ``train_tasks`` (all with the same number of devices) with ``budget_per_task`` evaluations each,
    round-robin, ``switch_every`` at a time (`placeto` drops its unfinished episodes at a switch).
    Returns the trained model, left on the last task it trained on (move it with `set_task`), and the
    training tasks' evaluators (best placement, learning curve). ``config``: the agent's hyper-parameters;
    ``threads``: torch's intra-op threads, as in `train` (default 1; None leaves the setting alone)."""
    cls = get_learned(agent)
    if not (hasattr(cls, "propose") and cls.set_task is not LearnedAgent.set_task):
        raise ValueError(
            f"agent {agent!r} cannot move between graphs; use a GNN agent such as placeto or hsdag"
        )
    train_tasks = list(train_tasks)
    if not train_tasks:
        raise ValueError("train_tasks is empty: give at least one task to train on")
    devices = {task.n_devices for task in train_tasks}
    if len(devices) != 1:
        raise ValueError(f"every task must have the same number of devices, got {sorted(devices)}")
    check_limit("budget_per_task", budget_per_task)
    check_limit("switch_every", switch_every)
    if threads is not None:
        set_torch_threads(threads)
    torch.manual_seed(seed)
    model = cls(train_tasks[0], seed=seed, **config)
    evaluators = [Budget(task, budget_per_task) for task in train_tasks]
    current = 0
    while any(e.remaining > 0 for e in evaluators):
        for index, evaluator in enumerate(evaluators):
            if evaluator.remaining == 0:
                continue
            if index != current:
                model.set_task(evaluator.task)
                current = index
            _run(model, evaluator, evaluator.used + switch_every)
    return model, evaluators


@dataclass(frozen=True)
class PretrainJob:
    """One model of a pre-training: `train_on_tasks` on the tasks named by ``task_ids`` (ids that
    `parse_task_id` rebuilds on any node) with ``seed``; ``config`` the agent's hyper-parameters as
    sorted (name, value) pairs. Names and numbers only, so that the job travels in a few hundred bytes."""

    agent: str
    task_ids: tuple[str, ...]
    budget_per_task: int
    seed: int
    switch_every: int = 1000
    threads: int | None = 1
    config: tuple[tuple[str, Any], ...] = ()


def pretrain_job(job: PretrainJob) -> tuple[LearnedAgent, list[Budget]]:
    """`train_on_tasks` for ``job``: the trained model and the training tasks' evaluators. Everything
    random is seeded by ``job.seed`` (`train_on_tasks` seeds torch before building the model) and torch
    runs ``job.threads`` threads, so the result is the same in any process."""
    tasks = [parse_task_id(task_id) for task_id in job.task_ids]
    return train_on_tasks(job.agent, tasks, job.budget_per_task, job.seed, job.switch_every, job.threads,
                          **dict(job.config))


def pretrain(
    agent: str,
    train_tasks: Sequence[Task | str],
    budget_per_task: int,
    seeds: Sequence[int] = (0,),
    switch_every: int = 1000,
    threads: int | None = 1,
    *,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, tuple[LearnedAgent, list[Budget]]], None] | None = None,
    **config: Any,
) -> dict[tuple[int, int], tuple[LearnedAgent, list[Budget]]]:
    """The models of a pre-training: for every seed of ``seeds`` and every device count among
    ``train_tasks`` (tasks or task ids), one ``agent`` trained by `train_on_tasks` on the tasks with that
    count (a policy has one output per device, so a model moves only between tasks with as many).
    Returns ``{(n_devices, seed): (model, evaluators)}``. The models are independent jobs of
    `run_jobs` (``backend``, ``address``, ``workers``, ``progress``: as there), in (seed, device count)
    order; on Ray each job rebuilds its tasks from their ids and sends back the pickled model and
    evaluators, which are those of the serial run, the models' tasks being the worker's copies.
    ``threads``: torch's threads per job (default 1: with one job per core, more only contend)."""
    check_backend(backend, address, workers)
    ids = [task if isinstance(task, str) else task.id for task in train_tasks]
    if not ids:
        raise ValueError("train_tasks is empty: give at least one task to train on")
    seeds = list(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be a non-empty sequence of integers, got {seeds!r}")
    by_devices: dict[int, list[str]] = {}
    for task_id in ids:
        # rebuilt here first: a task its id does not name fails now, not on a worker
        by_devices.setdefault(parse_task_id(task_id).n_devices, []).append(task_id)
    items = tuple(sorted(config.items()))
    keys = [(n_devices, seed) for seed in seeds for n_devices in sorted(by_devices)]
    jobs = [PretrainJob(agent, tuple(by_devices[n]), budget_per_task, seed, switch_every, threads, items)
            for n, seed in keys]
    results = run_jobs(pretrain_job, jobs, backend=backend, address=address, workers=workers,
                       progress=progress)
    return dict(zip(keys, results))


def train_generalize(
    agent: str,
    train_tasks: Sequence[Task],
    test_task: Task,
    budget_per_task: int,
    finetune_budget: int,
    seed: int = 0,
    zero_shot_samples: int = 16,
    switch_every: int = 1000,
    threads: int | None = 1,
    **config: Any,
) -> dict[str, Any]:
    """Train ``agent`` (a learned agent with `set_task` and `propose`: ``"placeto"`` or ``"hsdag"``)
    on ``train_tasks`` with ``budget_per_task`` evaluations each (`train_on_tasks`: round-robin,
    ``switch_every`` at a time), then measure it on ``test_task``
    (see the module docstring). ``config``: the agent's hyper-parameters. Returns a JSON-able dict:
    agent, seed, config, train (per task: task, evaluations, best_runtime, best_feasible, speedup),
    test_task, best_single_runtime, zero_shot (evaluations, greedy_runtime, greedy_feasible,
    best_runtime, best_feasible, speedup), finetuned and scratch (evaluations, best_runtime,
    best_feasible, speedup; both over the same number of held-out evaluations), wall_s. Speedups are
    over the held-out task's best single device (0 when nothing feasible was found). ``threads``: torch's
    intra-op threads, as in `train` (default 1; None leaves the setting alone)."""
    cls = get_learned(agent)
    train_tasks = list(train_tasks)
    if test_task.id in {task.id for task in train_tasks}:
        raise ValueError(f"test task {test_task.id} is among the training tasks; hold it out")
    devices = {task.n_devices for task in [*train_tasks, test_task]}
    if len(devices) != 1:
        raise ValueError(f"every task must have the same number of devices, got {sorted(devices)}")
    for name, value in (("finetune_budget", finetune_budget), ("zero_shot_samples", zero_shot_samples)):
        check_limit(name, value)
    started = time.perf_counter()
    model, evaluators = train_on_tasks(agent, train_tasks, budget_per_task, seed, switch_every, threads,
                                       **config)
    held_out, zero_shot, _ = place_held_out(model, test_task, zero_shot_samples, finetune_budget)
    torch.manual_seed(seed)
    scratch_model = cls(test_task, seed=seed, **config)
    scratch = Budget(test_task, zero_shot_samples + finetune_budget)
    _run(scratch_model, scratch)
    return {
        "agent": agent,
        "seed": seed,
        "config": {key: value for key, value in config.items()},
        "train": [{"task": e.task.id} | _summary(e) for e in evaluators],
        "test_task": test_task.id,
        "best_single_runtime": held_out.best_single_runtime,
        "zero_shot": zero_shot,
        "finetuned": _summary(held_out),
        "scratch": _summary(scratch),
        "wall_s": time.perf_counter() - started,
    }


def place_held_out(
    model: LearnedAgent, task: Task, zero_shot_samples: int = 16, finetune_budget: int = 0
) -> tuple[Budget, dict[str, Any], np.ndarray]:
    """Move ``model`` to ``task`` and place it: ``zero_shot_samples`` placements of the policy
    (`propose`: the first greedy), evaluated, then ``finetune_budget`` evaluations of further training
    on ``task`` (0: none; the model's weights change). Returns the held-out task's evaluator (best
    placement over both phases), the zero-shot summary (evaluations, greedy_runtime, greedy_feasible,
    best_runtime, best_feasible, speedup) and the best zero-shot placement."""
    check_limit("zero_shot_samples", zero_shot_samples)
    if finetune_budget:
        check_limit("finetune_budget", finetune_budget)
    model.set_task(task)
    held_out = Budget(task, zero_shot_samples + finetune_budget)
    runtimes, feasible = held_out.evaluate(model.propose(zero_shot_samples))
    zero_shot = _summary(held_out) | {
        "greedy_runtime": float(runtimes[0]),
        "greedy_feasible": bool(feasible[0]),
    }
    zero_shot_placement = held_out.best_placement.copy()
    if finetune_budget:
        _run(model, held_out)
    return held_out, zero_shot, zero_shot_placement


def main(argv: Sequence[str] | None = None) -> None:
    from placement_gym.task.named import get_task

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", default="hsdag")
    parser.add_argument("--train", required=True, help="comma-separated graph names")
    parser.add_argument("--test", required=True, help="the held-out graph")
    parser.add_argument("--cluster", default="k80x4")
    parser.add_argument("--objective", default="train_step")
    parser.add_argument("--budget", type=int, default=2000, help="evaluations per training graph")
    parser.add_argument("--finetune", type=int, default=500, help="fine-tuning evaluations, held-out graph")
    parser.add_argument("--zero-shot", type=int, default=16, help="zero-shot placements evaluated")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    train_tasks = [get_task(name, args.cluster, args.objective) for name in args.train.split(",") if name]
    result = train_generalize(
        args.agent,
        train_tasks,
        get_task(args.test, args.cluster, args.objective),
        args.budget,
        args.finetune,
        seed=args.seed,
        zero_shot_samples=args.zero_shot,
    )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
