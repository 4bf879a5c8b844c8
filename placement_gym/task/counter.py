"""`EvaluationCounter`: how many placements of a task were evaluated, and the curve of the best so far
(what the leaderboard harness measures of any agent, whatever its own bookkeeping)."""

from __future__ import annotations

import numpy as np


class EvaluationCounter:
    """How many placements of a task have been evaluated: one per `simulate` or `reference_simulate`
    call, one per row of a `simulate_batch` call, one per run of a real or Ray evaluator.

    A task owns one; tasks derived from it (`dataclasses.replace`, a profiled task, a deep copy)
    share it, so their evaluations count for the original; `Task.independent_copy` starts a new one.
    The count is a plain integer add, cheap on the simulator's hot path and not locked: it is exact
    when one thread at a time evaluates a task (as the leaderboard harness runs agents); evaluations
    made in another process (a pickled task, a subprocess env) count on that process's copy.

    ``trace``: None, or (after `Task.start_trace`) the best feasible runtime so far as
    ``[(evaluations, runtime), ...]``, one pair each time an evaluation improved on it, made from the
    runtimes the cost model's simulators pass along with their count (the leaderboard's learning
    curves)."""

    __slots__ = ("count", "trace", "best")

    def __init__(self) -> None:
        self.count = 0
        self.trace: list[tuple[int, float]] | None = None
        self.best = np.inf

    def add(self, n: int, runtimes: np.ndarray | None, feasible: np.ndarray | None) -> None:
        """Count ``n`` evaluations; with a trace running, record the improvements among ``runtimes``
        (one per evaluation, in order; only the ``feasible`` ones count)."""
        if self.trace is not None and runtimes is not None:
            valid = np.where(np.asarray(feasible, dtype=bool), np.asarray(runtimes, dtype=float), np.inf)
            # The best so far before each evaluation of the batch, and after it.
            running = np.minimum.accumulate(np.concatenate([[self.best], np.atleast_1d(valid)]))
            for i in np.flatnonzero(running[1:] < running[:-1]):
                self.trace.append((self.count + int(i) + 1, float(running[i + 1])))
            self.best = float(running[-1])
        self.count += n

    def since(self, start: int) -> dict:
        """What was counted since the counter stood at ``start``: the count, the best feasible runtime
        so far and the trace's entries (None without a trace), their counts taken from ``start``."""
        trace = None if self.trace is None else [(n - start, r) for n, r in self.trace if n > start]
        return {"count": self.count - start, "best": float(self.best), "trace": trace}

    def resume(self, start: int, saved: dict) -> None:
        """Count, from ``start``, what ``saved`` (`since` of a stopped run that began at its own start)
        recorded, in place of what was counted here since ``start``: the counter then stands as if that
        run had been made here without a stop."""
        self.count = start + int(saved["count"])
        if self.trace is not None and saved["trace"] is not None:
            before = [entry for entry in self.trace if entry[0] <= start]
            self.trace[:] = before + [(start + n, r) for n, r in saved["trace"]]
            self.best = float(saved["best"])

    def __copy__(self) -> EvaluationCounter:
        return self

    def __deepcopy__(self, memo: dict) -> EvaluationCounter:
        return self  # a deep copy of a task is derived from it: its evaluations count for the original

    def __repr__(self) -> str:
        return f"EvaluationCounter({self.count})"
