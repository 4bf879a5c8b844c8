"""The best-known portfolio: the strongest placement this package can find for a task, at a large budget.

`best_known` is what the leaderboard's ``best-known`` entry runs (issue: bounds and best-known
placements). It spends its budget of evaluations in five phases and returns the best placement any of
them found (version 2, `PORTFOLIO_VERSION`; version 1 was phases 3, 4 and 5 with anneal, from the
constructive starts only):

1. `hsdag` (`HSDAG_SHARE`): a learned device per group of chains (`baselines/learning/hsdag.py`). On
   gnmt4/k80x4 it found placements 11% faster than every anneal and CEM run (docs/bounds.md), because
   it searches over whole chains at once;
2. `move-bandit` from hsdag's placement (`FROM_CHAINS_SHARE`): anneal with a learned mix of move kinds
   (`baselines/learning/move_bandit.py`), refining it op by op;
3. `move-bandit` from the best of the constructive baselines (HEFT, m-ETF, m-SCT, CPOP, the expert,
   partition and best-single placements: `baselines.search.START_AGENTS`; `EXPLORE_SHARE`): the long
   exploration from another start;
4. `cem` from the best so far (`CEM_SHARE`): a population search that moves many ops at once, which
   single-op moves find only through a chain of worse placements;
5. `move-bandit` again from the best so far, at a tenth of the starting temperature, with what is
   left: intensification around the best.

Phase 1 needs torch (the ``baselines`` extra); without it `best_known` raises ImportError naming the
extra, since a portfolio that skipped it would give other placements for the same seed. Every
evaluation of every phase is counted on the task (the harness measures them, whatever this module
reports), the constructive starts included. Deterministic for a seed: each phase has its own seed
derived from it.

`best_known_for_tasks` runs the portfolio on many tasks at a fixed budget per task, one independent
job per task (`placement_gym.evaluation.parallel.run_jobs`): serial, or on Ray (a local instance, or a
cluster given an address) with the serial run's results. From the shell::

    python -m baselines.portfolio --tasks cifar10_cnn/k80x2/train,rnnlm/k80x4/train --budget 2000 \
        [--seed 0] [--ray] [--address auto] [--workers 2] [--json]

For every graph of a dataset split, ``placement-gym evaluate --agent best-known --budget N
--dataset NAME:SPLIT --cluster C [--ray]`` is the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.learning.move_bandit import move_bandit
from baselines.registry import get_agent, register
from baselines.search import ANNEAL_T_END, ANNEAL_T_START, cem
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult
from placement_gym.evaluation.parallel import check_backend, run_jobs
from placement_gym.task.compiled import Task
from placement_gym.task.named import parse_task_id

PORTFOLIO_VERSION = 2
BEST_KNOWN_BUDGET = 1_000_000
HSDAG_SHARE = 0.15
FROM_CHAINS_SHARE = 0.2
EXPLORE_SHARE = 0.3
CEM_SHARE = 0.1
# The smallest budget that gives every phase something to search with (each starts by evaluating its
# start placements; hsdag needs a few batches to learn from).
MIN_BUDGET = 400
INTENSIFY_MIN_BUDGET = 50  # the last phase runs only when at least this many evaluations are left


# Not in ``--agent all``: its default budget takes minutes even on the smallest bundled graph (295 s on
# cifar10_cnn/k80x2 for version 1 on the 2-core development VM); run it by name.
@register("best-known", "portfolio: hsdag, move-bandit from its result and from the best heuristic, CEM, "
          "move-bandit again (budget: evaluations)", in_all=lambda task: False)
def best_known(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """The portfolio of the module docstring. ``budget``: evaluations in all (default
    `BEST_KNOWN_BUDGET`; at least `MIN_BUDGET`). ImportError without torch (phase 1 is hsdag)."""
    budget = BEST_KNOWN_BUDGET if budget is None else int(budget)
    if budget < MIN_BUDGET:
        raise ValueError(f"best-known needs a budget of at least {MIN_BUDGET} evaluations, got {budget}")
    hsdag = get_agent("hsdag")  # ImportError naming the extra when torch is missing
    first = task.evaluations
    phases: dict[str, AgentResult] = {}
    chains = hsdag(task, seed=seed, budget=int(budget * HSDAG_SHARE))
    check = simulate(task, chains.placement)  # counted like every evaluation
    phases["hsdag"] = AgentResult(chains.placement, chains.evaluations,
                                  {**chains.info, "runtime": check.runtime, "feasible": check.feasible})
    phases["from-hsdag"] = move_bandit(task, seed=seed + 1, budget=int(budget * FROM_CHAINS_SHARE),
                                       start=chains.placement)
    phases["explore"] = move_bandit(task, seed=seed + 2, budget=int(budget * EXPLORE_SHARE))
    best = min(phases.values(), key=_key)
    phases["cem"] = cem(task, seed=seed + 3, budget=int(budget * CEM_SHARE), start=best.placement)
    best = min(phases.values(), key=_key)
    left = budget - (task.evaluations - first)
    if left >= INTENSIFY_MIN_BUDGET:
        phases["intensify"] = move_bandit(
            task, seed=seed + 4, budget=left, start=best.placement,
            t_start=ANNEAL_T_START / 10, t_end=min(ANNEAL_T_END, ANNEAL_T_START / 10),
        )
    best_phase = min(phases, key=lambda name: _key(phases[name]))
    result = phases[best_phase]
    info = {
        "portfolio_version": PORTFOLIO_VERSION,
        "phase": best_phase,
        "phase_runtimes": {name: r.info.get("runtime") for name, r in phases.items()},
        "phase_evaluations": {name: r.evaluations for name, r in phases.items()},
    }
    return AgentResult(np.asarray(result.placement, dtype=np.int64), task.evaluations - first, info)


def _key(result: AgentResult) -> tuple[bool, float]:
    """Feasible first, then by runtime (the searches report both in ``info``)."""
    return (not result.info.get("feasible", False), float(result.info.get("runtime", np.inf)))


@dataclass(frozen=True)
class PortfolioJob:
    """The portfolio on one task: its id (rebuilt by `parse_task_id` on any node), seed and budget."""

    task_id: str
    budget: int
    seed: int = 0


def best_known_job(job: PortfolioJob) -> dict[str, Any]:
    """`best_known` on ``job``'s task: a JSON-able dict with task, seed, budget, runtime, feasible,
    evaluations (the portfolio's), placement (device index per forward op) and info (its phases)."""
    # A copy without caches: the shared, cached task may hold figures an earlier run computed (and
    # counted), which would change this run's phase counts; a Ray worker starts from none either.
    task = parse_task_id(job.task_id).independent_copy(caches=False)
    result = best_known(task, seed=job.seed, budget=job.budget)
    simulated = simulate(task, result.placement)
    return {"task": task.id, "seed": job.seed, "budget": job.budget, "runtime": simulated.runtime,
            "feasible": simulated.feasible, "evaluations": result.evaluations,
            "placement": result.placement.tolist(), "info": result.info}


def best_known_for_tasks(
    task_ids: Sequence[str],
    budget: int,
    seed: int = 0,
    *,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """`best_known_job` for every task of ``task_ids`` (task ids, such as
    ``"synthetic-mini-v1:regal-3/k80x4/train"``) at ``budget`` evaluations each and ``seed``, in the
    order given. ``backend``, ``address``, ``workers``, ``progress``: as in `run_jobs`; the results are
    the same for every backend."""
    check_backend(backend, address, workers)
    if isinstance(task_ids, str):
        raise ValueError("task_ids must be a sequence of task ids, not one string")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_BUDGET:
        raise ValueError(f"best-known needs a budget of at least {MIN_BUDGET} evaluations, got {budget!r}")
    # rebuilt here first: a bad id fails now with its own message, not on a worker
    jobs = [PortfolioJob(parse_task_id(task_id).id, budget, seed) for task_id in task_ids]
    return run_jobs(best_known_job, jobs, backend=backend, address=address, workers=workers,
                    progress=progress)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the best-known portfolio on many tasks, serial or on Ray")
    parser.add_argument("--tasks", required=True, help="comma-separated task ids")
    parser.add_argument("--budget", type=int, default=BEST_KNOWN_BUDGET, help="evaluations per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", action="store_true", help="run the tasks as Ray jobs")
    parser.add_argument("--address", help="with --ray: 'auto' or 'ray://HEAD:10001' (default: local Ray)")
    parser.add_argument("--workers", type=int, help="with --ray: jobs at once")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if (args.address is not None or args.workers is not None) and not args.ray:
        parser.error("--address and --workers say where Ray runs the tasks: add --ray")
    ids = [name.strip() for name in args.tasks.split(",") if name.strip()]

    def report(index: int, row: dict[str, Any]) -> None:
        # a line per task as it ends: on stdout, or beside the JSON on stderr
        print(f"{row['task']}: {row['runtime'] * 1e3:.3f} ms{'' if row['feasible'] else ' (out of memory)'}, "
              f"phase {row['info']['phase']}, {row['evaluations']} evaluations",
              file=sys.stderr if args.json else sys.stdout, flush=True)

    try:
        rows = best_known_for_tasks(ids, args.budget, args.seed, backend="ray" if args.ray else "serial",
                                    address=args.address, workers=args.workers, progress=report)
    except ValueError as error:
        parser.error(str(error))
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
