"""The best-known portfolio: the strongest placement this package can find for a task, at a large budget.

`best_known` is what the leaderboard's ``best-known`` entry runs (issue: bounds and best-known
placements). It spends its budget of evaluations in three phases, each handing its best placement to
the next, so that the result is never worse than any phase's:

1. `anneal` from the best of the constructive baselines (HEFT, m-ETF, m-SCT, CPOP, the expert,
   partition and best-single placements: `baselines.search.START_AGENTS`), with `ANNEAL_SHARE` of the
   budget: the long exploration;
2. `cem` from that placement with `CEM_SHARE`: a population search that moves many ops at once, which
   single-op moves find only through a chain of worse placements;
3. `anneal` again from the best so far, at a tenth of the starting temperature, with what is left:
   intensification around the best.

Every evaluation of every phase is counted on the task (the harness measures them, whatever this module
reports), the constructive starts included. Deterministic for a seed: each phase has its own seed
derived from it.
"""

from __future__ import annotations

import numpy as np

from baselines.registry import AgentResult, register
from baselines.search import ANNEAL_T_END, ANNEAL_T_START, anneal, cem
from placement_gym.task import Task

BEST_KNOWN_BUDGET = 1_000_000
ANNEAL_SHARE = 0.5
CEM_SHARE = 0.2
# The smallest budget that gives every phase something to search with (each starts by evaluating its
# start placements).
MIN_BUDGET = 100


# Not in ``--agent all``: its default budget takes minutes even on the smallest bundled graph (295 s on
# cifar10_cnn/k80x2 on the 2-core development VM); run it by name.
@register("best-known", "portfolio: anneal from the best heuristic, CEM, then anneal again (budget: evals)",
          in_all=lambda task: False)
def best_known(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """The portfolio of the module docstring. ``budget``: evaluations in all (default
    `BEST_KNOWN_BUDGET`; at least `MIN_BUDGET`)."""
    budget = BEST_KNOWN_BUDGET if budget is None else int(budget)
    if budget < MIN_BUDGET:
        raise ValueError(f"best-known needs a budget of at least {MIN_BUDGET} evaluations, got {budget}")
    first = task.evaluations
    explore = anneal(task, seed=seed, budget=int(budget * ANNEAL_SHARE))
    phases = {"anneal": explore}
    population = cem(task, seed=seed + 1, budget=int(budget * CEM_SHARE), start=explore.placement)
    phases["cem"] = population
    best = min(phases.values(), key=_key)
    left = budget - (task.evaluations - first)
    if left >= MIN_BUDGET // 2:
        phases["intensify"] = anneal(
            task, seed=seed + 2, budget=left, start=best.placement,
            t_start=ANNEAL_T_START / 10, t_end=min(ANNEAL_T_END, ANNEAL_T_START / 10),
        )
    best_phase = min(phases, key=lambda name: _key(phases[name]))
    result = phases[best_phase]
    info = {
        "phase": best_phase,
        "phase_runtimes": {name: r.info.get("runtime") for name, r in phases.items()},
        "phase_evaluations": {name: r.evaluations for name, r in phases.items()},
    }
    return AgentResult(np.asarray(result.placement, dtype=np.int64), task.evaluations - first, info)


def _key(result: AgentResult) -> tuple[bool, float]:
    """Feasible first, then by runtime (the searches report both in ``info``)."""
    return (not result.info.get("feasible", False), float(result.info.get("runtime", np.inf)))
