"""`BudgetedEvaluator`: the one door through which a learning agent evaluates placements.

Agents are compared at equal cost in evaluations (one `simulate` call or one row of a
`simulate_batch` call each), so every evaluation a learning agent makes goes through this object:
it refuses to go over the budget, tracks the best placement seen and records the learning curve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placement_gym.cost_model import SimulationResult, simulate, simulate_batch, single_device
from placement_gym.task import Task


class BudgetExhausted(RuntimeError):
    """Raised when an agent asks for more evaluations than its budget has left."""


@dataclass
class BudgetedEvaluator:
    """Evaluates placements of ``task`` with the cost model, at most ``budget`` of them in all.

    ``evaluate(placements)`` takes an int array ``(batch, n_forward)`` (or one placement) and returns
    ``(runtimes, feasible)``; asking for more rows than `remaining` raises `BudgetExhausted` before
    anything is evaluated, so a budget is never exceeded. ``curve`` holds one row per evaluation:
    (evaluation number, runtime, feasible, best feasible runtime so far)."""

    task: Task
    budget: int
    used: int = 0
    best_runtime: float = float("inf")
    best_placement: np.ndarray | None = None
    best_feasible: bool = False
    curve: list[tuple[int, float, bool, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.budget, (int, np.integer)) or self.budget < 1:
            raise ValueError(f"budget must be a positive number of evaluations, got {self.budget!r}")
        self.budget = int(self.budget)

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    @property
    def best_single_runtime(self) -> float:
        return single_device(self.task).runtime

    def evaluate(self, placements) -> tuple[np.ndarray, np.ndarray]:
        array = np.asarray(placements)
        single = array.ndim == 1
        rows = self.task.check_placement(array[None] if single else array, batch=True)
        if len(rows) > self.remaining:
            raise BudgetExhausted(
                f"asked for {len(rows)} evaluations with {self.remaining} of {self.budget} left"
            )
        runtimes, feasible, _ = simulate_batch(self.task, rows)
        for row, runtime, ok in zip(rows, runtimes.tolist(), feasible.tolist()):
            self._record(row, runtime, ok)
        return (runtimes[0:1], feasible[0:1]) if single else (runtimes, feasible)

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        """One counted evaluation with the full result (what an env's ``evaluator`` hook calls)."""
        if self.remaining < 1:
            raise BudgetExhausted(f"no evaluation left of {self.budget}")
        result = simulate(self.task, placement, schedule=schedule)
        self._record(self.task.check_placement(placement), result.runtime, result.feasible)
        return result

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
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a saved evaluator; the budget may grow (to continue a run further), not shrink
        below what was already spent."""
        if state["used"] > self.budget:
            raise ValueError(
                f"checkpoint already spent {state['used']} evaluations, more than budget {self.budget}"
            )
        self.used, self.best_runtime = state["used"], state["best_runtime"]
        self.best_feasible = state["best_feasible"]
        self.best_placement = None if state["best_placement"] is None else np.asarray(state["best_placement"])
        self.curve = [tuple(row) for row in state["curve"]]
