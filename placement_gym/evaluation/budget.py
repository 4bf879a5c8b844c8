"""`Budget`: the one door through which an agent evaluates placements, at most ``limit`` of them.

Agents are compared at equal cost in evaluations: one `simulate` call, or one row of a
`simulate_batch` call, is one evaluation, whoever scores it (the task's cost model by default, or
any `placement_gym.evaluation.evaluator.Evaluator` given as ``evaluator=``). A budget counts them, keeps the
best placement seen and the curve, and says `BudgetExhausted` when the limit is reached. It asks
in one of two ways:

* **refuse** (`simulate`, `simulate_batch`, `evaluate`: the `Evaluator` protocol, what learned
  agents and envs call): rows that do not all fit are refused before any is evaluated, so a
  rollout is never cut in the middle;
* **clip** (`scores`, what searches call): the rows that fit are evaluated and recorded, then
  `BudgetExhausted` is raised, so a search spends its last evaluations. `scores` is memoised: a
  placement evaluated before by `scores` is neither evaluated nor counted again (hill climbing on a
  small graph proposes the same rejected moves many times). The memo holds each placement's 32-byte
  sha256 (`placement_digest`), not the placement, so that 100,000 evaluations of a 100,000-op graph
  take megabytes, not the 80 GB their rows would.

A search that only asks whether a placement beats a runtime passes it as ``scores(rows, cutoff=r)``:
the cost model may then stop a row's simulation once its runtime is proven above ``r``
(`placement_gym.cost_model.simulate`), at one evaluation all the same. Such a row's `Score` has ``cut``
True, ``runtime`` the proven bound (``r < runtime <=`` the full runtime), ``feasible`` False
(unknown) and ``overflow`` inf, so that its ``key`` ranks after every placement whose score is
known, and it never becomes the best. A decision "``score.key < current.key``" (or ``<=``) against
a feasible current placement of runtime ``r`` is the full score's either way, and so is the first
index of the least key in a batch when one is at most the current's (only rows of runtime ``<= r``
can be that, and they are never cut). The memo keeps a cut score for a later cutoff below its bound;
asked again with a higher cutoff (or none), the placement is evaluated again and counted again (the
full run would not have counted it): a search whose cutoff only falls meets that never.

The best placement is ranked feasible first, then by memory overflow (the sum over devices of bytes
above capacity / capacity; 0 when feasible), then by runtime (`Score.key`), the first of equals
kept. ``curve`` holds one row per evaluation: (evaluation number, runtime, feasible, best feasible
runtime so far, NaN before the first). `watch` registers a callback told after each counted batch
(a progress bar, TensorBoard); it only watches.

Every evaluation also counts once in ``task.evaluations`` (the count the leaderboard measures
independently of any agent's own bookkeeping): the cost model and the project's evaluators count
there themselves; what an evaluator counted elsewhere or not at all (a Ray pool, a third-party
evaluator) is added there by the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement_gym.common.content_hash import placement_digest
from placement_gym.cost_model import SimulationResult, simulate
from placement_gym.cost_model.fast import check_cutoff
from placement_gym.evaluation.evaluator import (
    BatchResult,
    CostModelEvaluator,
    Evaluator,
    as_evaluator,
    best_single_runtime,
    scoring_identity,
)
from placement_gym.task.compiled import Task

CurveRow = tuple[int, float, bool, float]
# ``watcher(budget, new)``: told after each counted batch, ``new`` its number of rows (the last
# ``new`` rows of ``budget.curve``).
Watcher = Callable[["Budget", int], None]


class BudgetExhausted(RuntimeError):
    """The budget cannot pay for what was asked (`Budget`: refused before, or clipped after)."""


@dataclass(frozen=True)
class Score:
    """One evaluated placement: runtime (s), feasible, overflow (0 when feasible), which devices are
    over their memory capacity (bool per device) and the peak memory per device (bytes). ``cut``: the
    evaluation stopped at a cutoff (`Budget.scores`): runtime is a proven lower bound above it,
    feasible False, overflow inf, no device marked over, peaks NaN."""

    runtime: float
    feasible: bool
    overflow: float
    over: np.ndarray
    peaks: np.ndarray | None = None
    cut: bool = False

    @property
    def key(self) -> tuple[int, float, float]:
        """Sort key: feasible first, then less overflow, then shorter runtime."""
        return (0 if self.feasible else 1, self.overflow, self.runtime)


def memory_overflow(task: Task, peaks: np.ndarray) -> np.ndarray:
    """Memory above capacity, summed over devices as fractions of each capacity (rows of ``peaks``)."""
    capacity = task.cluster.memory_capacity
    return (np.maximum(peaks - capacity, 0.0) / capacity).sum(axis=-1)


def check_limit(name: str, value: Any) -> int:
    """``value`` as an int, or a ValueError naming ``name`` unless it is a positive number of
    evaluations (a Python or numpy integer >= 1, not a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive number of evaluations, got {value!r}")
    return int(value)


class Budget:
    """Evaluations of ``task``, at most ``limit`` in all (see the module docstring). ``evaluator``:
    who scores them (None: the task's cost model). ``used``: evaluations already spent elsewhere
    that count against the limit (a search's start heuristics). It is an `Evaluator` itself
    (``name``, ``simulate``, ``simulate_batch``, ``evaluations``), so an env can score through it."""

    def __init__(self, task: Task, limit: int, evaluator: Any = None, *, used: int = 0) -> None:
        self.task = task
        self.limit = check_limit("budget", limit)
        self.evaluator = evaluator  # as given: None means the default, the cost model
        self.scorer: Evaluator = as_evaluator(task, evaluator)
        self.used = int(used)
        self.curve: list[CurveRow] = []
        self.best_placement: np.ndarray | None = None
        self.best_score: Score | None = None
        self.memo: dict[bytes, Score] = {}
        self.cut = 0  # evaluations a cutoff stopped (`scores`)
        self.cut_again = 0  # placements evaluated again because a cut score could not answer (`scores`)
        self.watchers: list[Watcher] = []
        self._best_single: float | None = None

    # ----------------------------------------------------------------------------------- reading

    @property
    def remaining(self) -> int:
        return self.limit - self.used

    @property
    def scored_by(self) -> str:
        """What scores the placements (its evaluator's ``name``): ``"cost_model"``, ``"profiled"``..."""
        return self.scorer.name

    name = scored_by

    @property
    def evaluations(self) -> int:
        """`used`, the count the `Evaluator` protocol reads."""
        return self.used

    @property
    def best_runtime(self) -> float:
        return float("inf") if self.best_score is None else self.best_score.runtime

    @property
    def best_feasible(self) -> bool:
        return self.best_score is not None and self.best_score.feasible

    @property
    def best_single_runtime(self) -> float:
        """The task's reference runtime on the scale of the evaluations (not counted): the best single
        device of the cost model, or of the profiled task, or evaluated once through another
        evaluator (`placement_gym.evaluation.evaluator.best_single_runtime`). Computed once."""
        if self._best_single is None:
            self._best_single = float(best_single_runtime(self.scorer, self.task))
        return self._best_single

    def watch(self, watcher: Watcher) -> None:
        """Call ``watcher(budget, new)`` after each counted batch."""
        self.watchers.append(watcher)

    # ------------------------------------------------------------------------- refuse (Evaluator)

    def simulate_batch(self, rows) -> BatchResult:
        """``(runtimes, feasible, peak_memory)`` of the rows, all counted (`BudgetExhausted` before
        anything is evaluated when they do not fit)."""
        rows = self.task.check_placement(rows, batch=True)
        if len(rows) > self.remaining:
            raise BudgetExhausted(
                f"asked for {len(rows)} evaluations with {self.remaining} of {self.limit} left"
            )
        result = self._score(rows)
        self._record(rows, *result)
        return result

    def evaluate(self, placements) -> tuple[np.ndarray, np.ndarray]:
        """``(runtimes, feasible)`` of one placement or a batch of them (`simulate_batch`)."""
        array = np.asarray(placements)
        single = array.ndim == 1
        runtimes, feasible, _ = self.simulate_batch(array[None] if single else array)
        return (runtimes[0:1], feasible[0:1]) if single else (runtimes, feasible)

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        """One counted evaluation with the full result (what an env's ``evaluator`` calls)."""
        if self.remaining < 1:
            raise BudgetExhausted(f"no evaluation left of {self.limit}")
        row = self.task.check_placement(placement)
        counted = self.task.evaluations
        result = self.scorer.simulate(row, schedule=schedule)
        self._count_on_task(1, counted)
        peaks = np.asarray(result.peak_memory, dtype=np.float64)
        self._record(row[None], np.array([result.runtime]), np.array([bool(result.feasible)]), peaks[None])
        return result

    # --------------------------------------------------------------------------- clip (searches)

    def scores(self, placements: np.ndarray, cutoff: float | None = None) -> list[Score]:
        """The `Score` of each row of ``placements`` (int64 ``(batch, n_forward)``), memoised. New rows
        are scored in one ``simulate_batch`` call and counted; when fewer evaluations are left than new
        rows, the first ones that fit are evaluated and recorded, then `BudgetExhausted` is raised.
        ``cutoff`` (seconds; None: none): rows whose runtime is proven above it may come back cut (the
        module docstring), each one evaluation; a memoised cut score serves a cutoff below its bound."""
        limit = check_cutoff(cutoff)
        keys = [placement_digest(row) for row in placements]
        new = list(dict.fromkeys(k for k in keys if not self._known(k, limit)))
        fits = new[: max(self.remaining, 0)]
        self.cut_again += sum(k in self.memo for k in fits)
        if fits:
            index = {k: i for i, k in enumerate(keys)}
            rows = placements[[index[k] for k in fits]]
            self._record(rows, *self._score(rows, cutoff), keys=fits)
        if len(fits) < len(new):
            raise BudgetExhausted(
                f"{len(new) - len(fits)} of {len(new)} placements past the limit of {self.limit}"
            )
        return [self.memo[k] for k in keys]

    def schedule(self, placement: np.ndarray):
        """The cost model's `Schedule` of ``placement`` as one counted, memoised evaluation, or None when
        nothing is left (for searches that read where the time goes). Always the cost model's."""
        if self.remaining < 1:
            return None
        result = simulate(self.task, placement, schedule=True)
        peaks = np.asarray(result.peak_memory, dtype=np.float64)
        self._record(placement[None], np.array([result.runtime]), np.array([bool(result.feasible)]),
                     peaks[None], keys=[placement_digest(placement)])
        return result.schedule

    # ------------------------------------------------------------------------------- bookkeeping

    def _known(self, key: bytes, cutoff: float) -> bool:
        """Whether the memo answers placement ``key`` under ``cutoff``: a full score always, a cut one
        while its bound is above the cutoff."""
        score = self.memo.get(key)
        return score is not None and (not score.cut or score.runtime > cutoff)

    def _score(self, rows: np.ndarray, cutoff: float | None = None) -> BatchResult:
        counted = self.task.evaluations
        if cutoff is not None and getattr(self.scorer, "takes_cutoff", False):
            result = self.scorer.simulate_batch(rows, cutoff=cutoff)
        else:  # a full evaluation answers any cutoff
            result = self.scorer.simulate_batch(rows)
        self._count_on_task(len(rows), counted)
        return result

    def _count_on_task(self, rows: int, counted_before: int) -> None:
        """Make ``task.evaluations`` grow by at least ``rows`` since ``counted_before``."""
        missing = rows - (self.task.evaluations - counted_before)
        if missing > 0:
            self.task.count_evaluations(missing)

    def _record(self, rows, runtimes, feasible, peaks, keys: list[bytes] | None = None) -> None:
        peaks = np.asarray(peaks, dtype=np.float64)
        overflow = memory_overflow(self.task, peaks)
        over = peaks > self.task.cluster.memory_capacity[None, :]
        cut = np.isnan(peaks).any(axis=1).tolist()  # the rows a cutoff stopped (NaN peak memory)
        first = len(self.curve)
        runtimes, feasible = np.asarray(runtimes).tolist(), np.asarray(feasible).tolist()
        for i, (row, runtime, ok) in enumerate(zip(rows, runtimes, feasible)):
            ok = bool(ok) and not cut[i]
            if cut[i]:
                score = Score(float(runtime), False, float("inf"), over[i], peaks[i], cut=True)
                self.cut += 1
            else:
                score = Score(float(runtime), ok, 0.0 if ok else float(overflow[i]), over[i], peaks[i])
            if keys is not None:
                self.memo[keys[i]] = score
            if self.best_score is None or score.key < self.best_score.key:
                self.best_placement, self.best_score = np.array(row, dtype=np.int64), score
            self.used += 1
            # feasible first in the ranking: the best is feasible once any is, and then the fastest
            best = self.best_runtime if self.best_feasible else float("nan")
            self.curve.append((self.used, float(runtime), ok, best))
        for watcher in self.watchers:
            watcher(self, len(self.curve) - first)

    # ----------------------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict:
        return {
            "budget": self.limit,
            "used": self.used,
            "best_runtime": self.best_runtime,
            "best_placement": None if self.best_placement is None else self.best_placement.tolist(),
            "best_feasible": self.best_feasible,
            "best_overflow": None if self.best_score is None else self.best_score.overflow,
            "curve": list(self.curve),
            "scored_by": self.scored_by,
            "scored_with": scoring_identity(self.scorer),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a saved budget; the limit may grow (to continue a run further), not shrink below what
        was already spent, and the placements must be scored by the same evaluator with the same
        figures (a state saved before evaluators were recorded is the cost model's)."""
        saved_by = state.get("scored_by", CostModelEvaluator.name)
        if saved_by != self.scored_by:
            raise ValueError(
                f"the saved evaluations were scored by {saved_by}, this evaluator scores by "
                f"{self.scored_by}: a run cannot mix them"
            )
        # Same kind is not enough: another profile or other devices give other numbers for the
        # same placement (a state saved before identities were recorded is not checked further).
        saved_with, scoring_with = state.get("scored_with"), scoring_identity(self.scorer)
        if saved_with is not None and saved_with != scoring_with:
            differing = sorted(k for k in set(saved_with) | set(scoring_with)
                               if saved_with.get(k) != scoring_with.get(k))
            raise ValueError(
                f"the saved evaluations were scored with other {self.scored_by} figures "
                f"({', '.join(differing)}: saved {[saved_with.get(k) for k in differing]}, now "
                f"{[scoring_with.get(k) for k in differing]}): a run cannot mix them"
            )
        if state["used"] > self.limit:
            raise ValueError(
                f"checkpoint already spent {state['used']} evaluations, more than budget {self.limit}"
            )
        self.used = state["used"]
        self.curve = [tuple(row) for row in state["curve"]]
        if state["best_placement"] is None:
            self.best_placement, self.best_score = None, None
        else:
            self.best_placement = np.asarray(state["best_placement"], dtype=np.int64)
            feasible = bool(state["best_feasible"])
            overflow = 0.0 if feasible else float(state.get("best_overflow") or 0.0)
            n = self.task.n_devices
            self.best_score = Score(float(state["best_runtime"]), feasible, overflow, np.zeros(n, dtype=bool))
