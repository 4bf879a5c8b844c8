"""`BudgetedEvaluator`: the one door through which a learning agent evaluates placements.

Agents are compared at equal cost in evaluations (one `simulate` call or one row of a
`simulate_batch` call each), so every evaluation a learning agent makes goes through this object:
it refuses to go over the budget, tracks the best placement seen and records the learning curve.

Who scores a placement: the analytical cost model of the task by default, or any evaluator given as
``evaluator=`` (`placement_gym.evaluator.Evaluator`: `placement_gym.evaluator.make_evaluator`'s
profiled cost model or real hardware, a `placement_gym.real.distributed.RayEvaluatorPool`; an object
with only ``simulate`` is adapted by `placement_gym.evaluator.as_evaluator`).

The budget, the best placement and the learning curve are the agent's bookkeeping, so this wrapper
lives with the agents, not in the core; it is an `Evaluator` itself (``name``, ``simulate``,
``simulate_batch``, ``evaluations``), so an env can score its steps through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.learning.options import check_budget
from placement_gym.cost_model import SimulationResult
from placement_gym.evaluator import (
    BatchResult,
    CostModelEvaluator,
    Evaluator,
    as_evaluator,
    best_single_runtime,
    scoring_identity,
)
from placement_gym.task import Task


class BudgetExhausted(RuntimeError):
    """Raised when an agent asks for more evaluations than its budget has left."""


@dataclass
class BudgetedEvaluator:
    """Evaluates placements of ``task``, at most ``budget`` of them in all.

    ``evaluate(placements)`` takes an int array ``(batch, n_forward)`` (or one placement) and returns
    ``(runtimes, feasible)``; asking for more rows than `remaining` raises `BudgetExhausted` before
    anything is evaluated, so a budget is never exceeded. ``curve`` holds one row per evaluation:
    (evaluation number, runtime, feasible, best feasible runtime so far).

    ``evaluator``: who scores the placements (see the module docstring); None, the default, is the
    cost model of ``task``. The budget counts rows whatever scores them.

    Every row also counts once in ``task.evaluations`` (the count the leaderboard records): the
    cost model and the project's evaluators count there themselves (a profiled task shares its
    task's counter); what an evaluator counted elsewhere, or not at all (a Ray pool built for the
    task by name, a third-party evaluator), is added to it here."""

    task: Task
    budget: int
    evaluator: Any = None
    used: int = 0
    best_runtime: float = float("inf")
    best_placement: np.ndarray | None = None
    best_feasible: bool = False
    curve: list[tuple[int, float, bool, float]] = field(default_factory=list)
    _best_single: float | None = field(default=None, init=False, repr=False)
    _scorer: Evaluator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.budget = check_budget("budget", self.budget)
        self._scorer = as_evaluator(self.task, self.evaluator)

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    @property
    def scored_by(self) -> str:
        """What scores the placements (its evaluator's ``name``): ``"cost_model"``, ``"profiled"``,
        ``"real"``..."""
        return self._scorer.name

    @property
    def name(self) -> str:
        """`scored_by`, the name the `Evaluator` protocol reads."""
        return self.scored_by

    @property
    def evaluations(self) -> int:
        """`used`, the count the `Evaluator` protocol reads."""
        return self.used

    @property
    def best_single_runtime(self) -> float:
        """The task's reference runtime, on the scale of the evaluations (not counted in the budget):
        the best single device of the cost model; with a `ProfiledEvaluator`, that of the profiled
        task; with any other evaluator, the cost model's best single device evaluated once through
        it (as the envs do in ``reward_mode="real"``). Computed once."""
        if self._best_single is None:
            self._best_single = float(best_single_runtime(self._scorer, self.task))
        return self._best_single

    def evaluate(self, placements) -> tuple[np.ndarray, np.ndarray]:
        array = np.asarray(placements)
        single = array.ndim == 1
        runtimes, feasible, _ = self.simulate_batch(array[None] if single else array)
        return (runtimes[0:1], feasible[0:1]) if single else (runtimes, feasible)

    def simulate_batch(self, rows) -> BatchResult:
        """``(runtimes, feasible, peak_memory)`` of the rows, all counted in the budget (nothing is
        evaluated when they do not fit)."""
        rows = self.task.check_placement(rows, batch=True)
        if len(rows) > self.remaining:
            raise BudgetExhausted(
                f"asked for {len(rows)} evaluations with {self.remaining} of {self.budget} left"
            )
        counted = self.task.evaluations
        runtimes, feasible, peaks = self._scorer.simulate_batch(rows)
        self._count_on_task(len(rows), counted)
        for row, runtime, ok in zip(rows, runtimes.tolist(), feasible.tolist()):
            self._record(row, runtime, ok)
        return runtimes, feasible, peaks

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        """One counted evaluation with the full result (what an env's ``evaluator`` hook calls)."""
        if self.remaining < 1:
            raise BudgetExhausted(f"no evaluation left of {self.budget}")
        row = self.task.check_placement(placement)
        counted = self.task.evaluations
        result = self._scorer.simulate(row, schedule=schedule)
        self._count_on_task(1, counted)
        self._record(row, result.runtime, result.feasible)
        return result

    def _count_on_task(self, rows: int, counted_before: int) -> None:
        """Make ``task.evaluations`` grow by at least ``rows`` since ``counted_before``."""
        missing = rows - (self.task.evaluations - counted_before)
        if missing > 0:
            self.task.count_evaluations(missing)

    def _record(self, row: np.ndarray, runtime: float, ok: bool) -> None:
        self.used += 1
        # feasible beats infeasible; then the shorter runtime
        if self.best_placement is None or (ok, -runtime) > (self.best_feasible, -self.best_runtime):
            self.best_runtime, self.best_feasible, self.best_placement = runtime, ok, row.copy()
        self.curve.append((self.used, runtime, ok, self.best_runtime if self.best_feasible else float("nan")))

    def state_dict(self) -> dict:
        return {
            "budget": self.budget,
            "used": self.used,
            "best_runtime": self.best_runtime,
            "best_placement": None if self.best_placement is None else self.best_placement.tolist(),
            "best_feasible": self.best_feasible,
            "curve": list(self.curve),
            "scored_by": self.scored_by,
            "scored_with": scoring_identity(self._scorer),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a saved evaluator; the budget may grow (to continue a run further), not shrink
        below what was already spent, and the placements must be scored by the same kind of
        evaluator (a state saved before evaluators were recorded is the cost model's)."""
        saved_by = state.get("scored_by", CostModelEvaluator.name)
        if saved_by != self.scored_by:
            raise ValueError(
                f"the saved evaluations were scored by {saved_by}, this evaluator scores by "
                f"{self.scored_by}: a run cannot mix them"
            )
        # Same kind is not enough: another profile or other devices give other numbers for the
        # same placement (a state saved before identities were recorded is not checked further).
        saved_with, scoring_with = state.get("scored_with"), scoring_identity(self._scorer)
        if saved_with is not None and saved_with != scoring_with:
            differing = sorted(k for k in set(saved_with) | set(scoring_with)
                               if saved_with.get(k) != scoring_with.get(k))
            raise ValueError(
                f"the saved evaluations were scored with other {self.scored_by} figures "
                f"({', '.join(differing)}: saved {[saved_with.get(k) for k in differing]}, now "
                f"{[scoring_with.get(k) for k in differing]}): a run cannot mix them"
            )
        if state["used"] > self.budget:
            raise ValueError(
                f"checkpoint already spent {state['used']} evaluations, more than budget {self.budget}"
            )
        self.used, self.best_runtime = state["used"], state["best_runtime"]
        self.best_feasible = state["best_feasible"]
        self.best_placement = None if state["best_placement"] is None else np.asarray(state["best_placement"])
        self.curve = [tuple(row) for row in state["curve"]]

