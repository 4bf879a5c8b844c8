"""`CountsEvaluations`: what a task counts of its evaluations, the part of `Task`'s API over the
`EvaluationCounter` it holds by reference (the counter is mutable; the task around it is frozen).

Every way the project evaluates a placement adds to the counter of the task it evaluates
(`count_evaluations`); the leaderboard harness reads an agent's count (`evaluations`) and learning
curve (`trace`) from the copy of the task it handed the agent. A task derived from another
(`dataclasses.replace`, `copy.copy`, `copy.deepcopy`, a profiled task) holds the same counter;
`Task.independent_copy` gives the copy a new one (`placement_gym.task.copies`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placement_gym.task.counter import EvaluationCounter


@dataclass(frozen=True, eq=False)
class CountsEvaluations:
    """The evaluation counter of a task and the methods that read and add to it (module docstring).
    A keyword-only field, so that the fields of the class built on it keep their positions."""

    _evaluations: EvaluationCounter = field(default_factory=EvaluationCounter, repr=False, kw_only=True)

    @property
    def evaluation_counter(self) -> EvaluationCounter:
        """The counter itself (shared by the tasks derived from this one)."""
        return self._evaluations

    @property
    def evaluations(self) -> int:
        """Placements of this task (and of the tasks derived from it) evaluated so far."""
        return self._evaluations.count

    def count_evaluations(
        self,
        n: int = 1,
        runtimes: np.ndarray | float | None = None,
        feasible: np.ndarray | bool | None = None,
    ) -> None:
        """Add ``n`` evaluations to the counter. The cost model's simulators also pass the ``n``
        runtimes and feasibilities they computed, which a running trace (`start_trace`) records."""
        counter = self._evaluations
        if counter.trace is None:  # the simulators' hot path: one add, no call
            counter.count += n
        else:
            counter.add(n, runtimes, feasible)

    def start_trace(self) -> None:
        """Record, from now on, each evaluation that improves on the best feasible runtime so far
        (`trace`). The leaderboard harness starts one on the copy of the task it hands an agent."""
        self._evaluations.trace = []
        self._evaluations.best = np.inf

    @property
    def trace(self) -> list[tuple[int, float]] | None:
        """``[(evaluations, best feasible runtime so far), ...]`` since `start_trace` (None before):
        the count of evaluations at which each improvement came, and the runtime it reached."""
        trace = self._evaluations.trace
        return None if trace is None else list(trace)

    def evaluations_since(self, start: int) -> dict:
        """What this task counted since its `evaluations` stood at ``start`` (the count, the trace's
        improvements and the best so far), for a checkpoint of a run that began there; `resume_evaluations`
        restores it."""
        return self._evaluations.since(start)

    def resume_evaluations(self, start: int, saved: dict) -> None:
        """Continue a stopped run that began when this task's `evaluations` stood at ``start``: what it
        counted (``saved``, its `evaluations_since`) replaces what was counted since ``start``, so the
        count and the trace read as those of one run never stopped."""
        self._evaluations.resume(start, saved)
