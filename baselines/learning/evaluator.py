"""`BudgetedEvaluator`: the one door through which a learning agent evaluates placements.

Agents are compared at equal cost in evaluations (one `simulate` call or one row of a
`simulate_batch` call each), so every evaluation a learning agent makes goes through this object:
it refuses to go over the budget, tracks the best placement seen and records the learning curve.

Who scores a placement: the analytical cost model of the task by default, or any *placement
evaluator* given as ``evaluator=`` -- an object with ``simulate(placement, schedule=False) ->
SimulationResult`` such as those of `placement_gym.real.evaluators.make_evaluator` (profiled cost
model, real hardware) or a `placement_gym.real.distributed.RayEvaluatorPool`. `evaluate_rows` is
the one place where rows go to such an evaluator; the search baselines use it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.learning.options import check_budget
from placement_gym.cost_model import SimulationResult, simulate, simulate_batch, single_device
from placement_gym.task import Task

COST_MODEL = "cost_model"


def evaluator_name(evaluator: Any) -> str:
    """What scores placements: ``"cost_model"`` for None, the reward mode of a known evaluator
    (``"profiled"``, ``"real"``; a Ray pool says its own ``reward_mode``), else the class name."""
    if evaluator is None:
        return COST_MODEL
    mode = getattr(evaluator, "reward_mode", None)
    if isinstance(mode, str):
        return mode
    # Imported here: the real-hardware package is only loaded when one of its evaluators is in use.
    from placement_gym.real.evaluators import ProfiledEvaluator, RealEvaluator

    if isinstance(evaluator, ProfiledEvaluator):
        return "profiled"
    if isinstance(evaluator, RealEvaluator):
        return "real"
    return type(evaluator).__name__


def check_evaluator(task: Task, evaluator: Any) -> Any:
    """``evaluator`` if it can score placements of ``task`` (None, or an object with a ``simulate``
    method whose ``task``, where it has one, has the same forward ops and devices), else a ValueError."""
    if evaluator is None:
        return None
    if not callable(getattr(evaluator, "simulate", None)):
        raise ValueError(
            "evaluator must be None (the cost model) or have simulate(placement, schedule=False) -> "
            "SimulationResult, such as make_evaluator's or a RayEvaluatorPool; "
            f"got {type(evaluator).__name__}"
        )
    other = getattr(evaluator, "task", None)
    if isinstance(other, Task) and (other.n_forward, other.n_devices) != (task.n_forward, task.n_devices):
        raise ValueError(
            f"the evaluator scores task {other.id} ({other.n_forward} ops, {other.n_devices} devices), "
            f"not {task.id} ({task.n_forward} ops, {task.n_devices} devices)"
        )
    return evaluator


# Fewer rows than this are simulated one by one: a parallel `simulate_batch` call costs about a
# millisecond to start its threads (measured on 2 cores), more than a small graph's whole simulation.
SMALL_BATCH = 8


def evaluate_rows(
    task: Task, rows: np.ndarray, evaluator: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(runtimes, feasible, peak_memory)`` of the placements ``rows`` (int ``(batch, n_forward)``,
    already checked), shapes ``(batch,)``, ``(batch,)``, ``(batch, n_devices)`` as `simulate_batch`.

    ``evaluator`` None: the cost model of ``task`` (`simulate_rows`). Otherwise its batch method where
    it has one (``evaluate_batch(rows)``, as `RayEvaluatorPool`, else ``simulate_batch(task, rows)``);
    a plain `ProfiledEvaluator` is the cost model on its own task, so its rows go to `simulate_rows`
    on that task (the same numbers as its ``simulate``); any other evaluator gets one ``simulate``
    call per row, in row order."""
    if evaluator is None:
        return simulate_rows(task, rows)
    if callable(getattr(evaluator, "evaluate_batch", None)):
        return _checked(rows, evaluator.evaluate_batch(rows), evaluator)
    if callable(getattr(evaluator, "simulate_batch", None)):
        return _checked(rows, evaluator.simulate_batch(task, rows), evaluator)
    from placement_gym.real.evaluators import ProfiledEvaluator

    if type(evaluator) is ProfiledEvaluator:  # exactly: a subclass may score differently
        return simulate_rows(evaluator.task, rows)
    return _stacked([evaluator.simulate(row) for row in rows], task.n_devices)


def simulate_rows(task: Task, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cost model on ``rows``, as `simulate_batch` returns it: one parallel `simulate_batch` call,
    or one `simulate` per row for fewer than `SMALL_BATCH` rows (the same numbers, bit for bit)."""
    if len(rows) >= SMALL_BATCH:
        return simulate_batch(task, rows)
    return _stacked([simulate(task, row) for row in rows], task.n_devices)


def _stacked(results: list[SimulationResult], n_devices: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([r.runtime for r in results], dtype=np.float64),
        np.array([r.feasible for r in results], dtype=bool),
        np.array([r.peak_memory for r in results], dtype=np.float64).reshape(len(results), n_devices),
    )


def _checked(rows: np.ndarray, got: Any, evaluator: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch method's answer as three arrays of the rows' length (a clear error otherwise)."""
    try:
        runtimes, feasible, peaks = got
    except (TypeError, ValueError):
        raise ValueError(
            f"{type(evaluator).__name__}'s batch method must return (runtimes, feasible, peak_memory)"
        ) from None
    runtimes, feasible = np.asarray(runtimes, np.float64), np.asarray(feasible, bool)
    peaks = np.asarray(peaks, np.float64)
    if not (len(runtimes) == len(feasible) == len(peaks) == len(rows)):
        raise ValueError(
            f"{type(evaluator).__name__}'s batch method answered {len(runtimes)} runtimes "
            f"for {len(rows)} rows"
        )
    return runtimes, feasible, peaks


class BudgetExhausted(RuntimeError):
    """Raised when an agent asks for more evaluations than its budget has left."""


@dataclass
class BudgetedEvaluator:
    """Evaluates placements of ``task``, at most ``budget`` of them in all.

    ``evaluate(placements)`` takes an int array ``(batch, n_forward)`` (or one placement) and returns
    ``(runtimes, feasible)``; asking for more rows than `remaining` raises `BudgetExhausted` before
    anything is evaluated, so a budget is never exceeded. ``curve`` holds one row per evaluation:
    (evaluation number, runtime, feasible, best feasible runtime so far).

    ``evaluator``: who scores the placements (see the module docstring and `evaluate_rows`); None,
    the default, is the cost model of ``task``. The budget counts rows whatever scores them.

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

    def __post_init__(self) -> None:
        self.budget = check_budget("budget", self.budget)
        check_evaluator(self.task, self.evaluator)

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    @property
    def scored_by(self) -> str:
        """What scores the placements (`evaluator_name`): ``"cost_model"``, ``"profiled"``, ``"real"``..."""
        return evaluator_name(self.evaluator)

    @property
    def best_single_runtime(self) -> float:
        """The task's reference runtime, on the scale of the evaluations (not counted in the budget):
        the best single device of the cost model; with a `ProfiledEvaluator`, that of the profiled
        task; with any other evaluator, the cost model's best single device evaluated once through
        it (as the envs do in ``reward_mode="real"``). Computed once."""
        if self._best_single is None:
            self._best_single = _reference_runtime(self.task, self.evaluator)
        return self._best_single

    def evaluate(self, placements) -> tuple[np.ndarray, np.ndarray]:
        array = np.asarray(placements)
        single = array.ndim == 1
        rows = self.task.check_placement(array[None] if single else array, batch=True)
        if len(rows) > self.remaining:
            raise BudgetExhausted(
                f"asked for {len(rows)} evaluations with {self.remaining} of {self.budget} left"
            )
        counted = self.task.evaluations
        runtimes, feasible, _ = evaluate_rows(self.task, rows, self.evaluator)
        self._count_on_task(len(rows), counted)
        for row, runtime, ok in zip(rows, runtimes.tolist(), feasible.tolist()):
            self._record(row, runtime, ok)
        return (runtimes[0:1], feasible[0:1]) if single else (runtimes, feasible)

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        """One counted evaluation with the full result (what an env's ``evaluator`` hook calls)."""
        if self.remaining < 1:
            raise BudgetExhausted(f"no evaluation left of {self.budget}")
        row = self.task.check_placement(placement)
        counted = self.task.evaluations
        if self.evaluator is None:
            result = simulate(self.task, row, schedule=schedule)
        else:
            result = self.evaluator.simulate(row, schedule=schedule)
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
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a saved evaluator; the budget may grow (to continue a run further), not shrink
        below what was already spent, and the placements must be scored by the same kind of
        evaluator (a state saved before evaluators were recorded is the cost model's)."""
        saved_by = state.get("scored_by", COST_MODEL)
        if saved_by != self.scored_by:
            raise ValueError(
                f"the saved evaluations were scored by {saved_by}, this evaluator scores by "
                f"{self.scored_by}: a run cannot mix them"
            )
        if state["used"] > self.budget:
            raise ValueError(
                f"checkpoint already spent {state['used']} evaluations, more than budget {self.budget}"
            )
        self.used, self.best_runtime = state["used"], state["best_runtime"]
        self.best_feasible = state["best_feasible"]
        self.best_placement = None if state["best_placement"] is None else np.asarray(state["best_placement"])
        self.curve = [tuple(row) for row in state["curve"]]


def _reference_runtime(task: Task, evaluator: Any) -> float:
    """`BudgetedEvaluator.best_single_runtime` (one evaluation outside the budget at most)."""
    if evaluator is None:
        return float(single_device(task).runtime)
    from placement_gym.real.evaluators import ProfiledEvaluator

    if isinstance(evaluator, ProfiledEvaluator):
        return float(single_device(evaluator.task).runtime)
    single = np.full(task.n_forward, single_device(task).best, dtype=np.int64)
    return float(evaluator.simulate(single).runtime)
