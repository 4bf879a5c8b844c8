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
"""

from __future__ import annotations

import numpy as np

from baselines.learning.move_bandit import move_bandit
from baselines.registry import get_agent, register
from baselines.search import ANNEAL_T_END, ANNEAL_T_START, cem
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.compiled import Task

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
