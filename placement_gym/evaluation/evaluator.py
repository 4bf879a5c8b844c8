"""The one way a placement is scored: the `Evaluator` protocol, the cost model behind it, and the
registry of scoring backends by name.

Every scorer (`CostModelEvaluator` here; `ProfiledEvaluator` and `RealEvaluator` in
`placement_gym.real.evaluators`; `RayEvaluatorPool` in `placement_gym.real.distributed`) has:

- ``name``: what scores (``"cost_model"``, ``"profiled"``, ``"real"``, a pool's reward mode);
- ``task``: the task whose placements it scores (for a profiled model, the profiled task);
- ``simulate(placement, schedule=False) -> SimulationResult``: one evaluation;
- ``simulate_batch(rows) -> (runtimes, feasible, peak_memory)``: rows ``(batch, n_forward)``, shapes
  ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``, in row order;
- ``evaluations``: the placements it has scored.

An evaluator whose ``simulate_batch`` also takes ``cutoff=`` (seconds, `placement_gym.cost_model.simulate`'s:
a row may stop once its runtime is proven above it, and comes back with its bound as runtime, feasible
False and NaN peak memory) says so with ``takes_cutoff = True``; `CostModelEvaluator` does. The budget
(`placement_gym.evaluation.budget.Budget.scores`) evaluates in full through any other.

The envs, the search baselines and the learned agents take any such object; `as_evaluator` turns
None (the cost model) or an older object that only has ``simulate`` into one. ``Task.evaluations``
stays the count the leaderboard records: the cost model counts every evaluation on its task
(a profiled task shares its task's counter), and the real and Ray evaluators count theirs there too.

Backends by name (`make_evaluator`, `evaluator_names`): ``"cost_model"``, ``"profiled"`` and ``"real"``
are built in; `register_evaluator` adds one at run time, and a package adds one for every process with
an entry point of the group ``placement_gym.evaluators`` naming its `EvaluatorBackend`. The envs'
``evaluator=`` (and ``reward_mode=``), ``placement-gym train --reward-mode`` and the Ray pool take
any registered name.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

import numpy as np

from placement_gym.cost_model import SimulationResult, simulate, simulate_batch, single_device
from placement_gym.task.compiled import Task

COST_MODEL = "cost_model"

# Fewer rows than this are simulated one by one: a parallel `simulate_batch` call costs about a
# millisecond to start its threads (measured on 2 cores), more than a small graph's whole simulation.
SMALL_BATCH = 8

BatchResult = tuple[np.ndarray, np.ndarray, np.ndarray]


@runtime_checkable
class Evaluator(Protocol):
    """What scores placements (see the module docstring)."""

    name: str
    task: Task

    @property
    def evaluations(self) -> int: ...

    def simulate(self, placement: Any, schedule: bool = False) -> SimulationResult: ...

    def simulate_batch(self, rows: np.ndarray) -> BatchResult: ...


class CostModelEvaluator:
    """The analytical cost model of ``task`` (`placement_gym.cost_model`); each evaluation also counts
    on ``task.evaluations``, as `simulate` and `simulate_batch` always do."""

    name = COST_MODEL
    takes_cutoff = True

    def __init__(self, task: Task) -> None:
        self.task = task
        self.evaluations = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task.id}, evaluations={self.evaluations})"

    def simulate(self, placement: Any, schedule: bool = False) -> SimulationResult:
        self.evaluations += 1
        return simulate(self.task, placement, schedule=schedule)

    def simulate_batch(self, rows: np.ndarray, cutoff: float | None = None) -> BatchResult:
        """One parallel `simulate_batch` call, or one `simulate` per row for fewer than `SMALL_BATCH`
        rows (the same numbers, bit for bit); ``cutoff`` as theirs."""
        self.evaluations += len(rows)
        given = {} if cutoff is None else {"cutoff": cutoff}
        if len(rows) >= SMALL_BATCH:
            return simulate_batch(self.task, rows, **given)
        return stacked_results([simulate(self.task, row, **given) for row in rows], self.task.n_devices)


def stacked_results(results: list[SimulationResult], n_devices: int) -> BatchResult:
    """One result per row as the three arrays `Evaluator.simulate_batch` returns."""
    return (
        np.array([r.runtime for r in results], dtype=np.float64),
        np.array([r.feasible for r in results], dtype=bool),
        np.array([r.peak_memory for r in results], dtype=np.float64).reshape(len(results), n_devices),
    )


def checked_batch(rows: np.ndarray, got: Any, who: str) -> BatchResult:
    """A batch method's answer as three arrays of the rows' length (a clear error otherwise)."""
    try:
        runtimes, feasible, peaks = got
    except (TypeError, ValueError):
        raise ValueError(f"{who}'s batch method must return (runtimes, feasible, peak_memory)") from None
    runtimes, feasible = np.asarray(runtimes, np.float64), np.asarray(feasible, bool)
    peaks = np.asarray(peaks, np.float64)
    if not (len(runtimes) == len(feasible) == len(peaks) == len(rows)):
        raise ValueError(f"{who}'s batch method answered {len(runtimes)} runtimes for {len(rows)} rows")
    return runtimes, feasible, peaks


class SimulateOnlyEvaluator:
    """An object with only ``simulate(placement, schedule=False)`` (and perhaps a batch method
    ``evaluate_batch(rows)``), such as a third party's, behind the `Evaluator` protocol: rows go to
    its batch method in one call where it has one, else to one ``simulate`` per row, in row order.
    ``name`` is its ``reward_mode`` where that is a string, else its class name."""

    def __init__(self, scorer: Any, task: Task) -> None:
        self.scorer = scorer
        own = getattr(scorer, "task", None)
        self.task = own if isinstance(own, Task) else task
        mode = getattr(scorer, "reward_mode", None)
        self.name = mode if isinstance(mode, str) else type(scorer).__name__
        self.evaluations = 0

    def simulate(self, placement: Any, schedule: bool = False) -> SimulationResult:
        self.evaluations += 1
        return self.scorer.simulate(placement, schedule=schedule)

    def simulate_batch(self, rows: np.ndarray) -> BatchResult:
        self.evaluations += len(rows)
        if callable(getattr(self.scorer, "evaluate_batch", None)):
            return checked_batch(rows, self.scorer.evaluate_batch(rows), type(self.scorer).__name__)
        return stacked_results([self.scorer.simulate(row) for row in rows], self.task.n_devices)


def as_evaluator(task: Task, evaluator: Any = None) -> Evaluator:
    """An `Evaluator` of ``task``'s placements: `CostModelEvaluator` for None, ``evaluator`` itself
    when it has the protocol, `SimulateOnlyEvaluator` around an object that has only ``simulate``.
    A ValueError for anything else, or for an evaluator whose ``task`` has other forward ops or
    devices."""
    if evaluator is None:
        return CostModelEvaluator(task)
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
    return evaluator if isinstance(evaluator, Evaluator) else SimulateOnlyEvaluator(evaluator, task)


def best_single_runtime(evaluator: Evaluator, task: Task) -> float:
    """The reference runtime of ``task`` on ``evaluator``'s scale: for the cost model (a profiled one
    included) the best single device of its own task, not counted; for any other evaluator the cost
    model's best single device of ``task`` evaluated once through it (a measured reference for
    measured runtimes)."""
    if isinstance(evaluator, CostModelEvaluator):
        return single_device(evaluator.task).runtime
    single = np.full(task.n_forward, single_device(task).best, dtype=np.int64)
    return evaluator.simulate(single).runtime


def scoring_identity(evaluator: Evaluator) -> dict[str, Any]:
    """What two runs must share for their scores to be comparable: the evaluator's ``name``, and for
    a cost model (a profiled one included) a digest of the figures it simulates with (op times, link
    bandwidths and latencies, launch overheads: a profiled task holds its profile's measurements
    there), or what an evaluator with an ``identity()`` method says of itself (the real evaluator:
    its devices and run options). A resumed training run refuses another identity."""
    identity: dict[str, Any] = {"name": evaluator.name}
    if isinstance(evaluator, CostModelEvaluator):
        task = evaluator.task
        digest = hashlib.sha256()
        for array in (task.duration, task.cluster.link_bandwidth, task.cluster.link_latency,
                      task.cluster.launch_overhead):
            digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
        identity["figures_sha256"] = digest.hexdigest()[:16]
    elif callable(getattr(evaluator, "identity", None)):
        identity.update(evaluator.identity())
    return identity


# --- scoring backends by name -----------------------------------------------------------------------

EVALUATOR_GROUP = "placement_gym.evaluators"


@dataclass(frozen=True)
class EvaluatorBackend:
    """A scoring backend by name: ``factory(task, *, source=None, **options) -> Evaluator`` (or a
    ``"module:function"`` string, imported on first use), the keyword ``options`` it takes (an option
    it does not take is refused by name before it is built, so that the envs and the CLI say which
    backend takes it), and a one-line ``description``. ``source`` is the ``graph`` argument the task
    was built from (an ONNX file's path or model, a bundled name, an `OpGraph`, a `Task`)."""

    name: str
    factory: Callable[..., Any] | str
    options: tuple[str, ...] = ()
    description: str = ""

    def build(self, task: Task, *, source: Any = None, **options: Any) -> Evaluator:
        """The backend's evaluator of ``task``; options given as None count as not given."""
        given = {key: value for key, value in options.items() if value is not None}
        refused = sorted(set(given) - set(self.options))
        if refused:
            takers = {key: [b.name for b in _backends().values() if key in b.options] for key in refused}
            said = "; ".join(f"{key}= is for reward_mode="
                             + (" or ".join(f'"{n}"' for n in takers[key]) or "none") for key in refused)
            raise ValueError(f'{said}, not "{self.name}"')
        factory = self.factory
        if isinstance(factory, str):
            module, _, attribute = factory.partition(":")
            factory = getattr(importlib.import_module(module), attribute)
        return as_evaluator(task, factory(task, source=source, **given))


def _cost_model_backend(task: Task, *, source: Any = None) -> CostModelEvaluator:
    return CostModelEvaluator(task)


_BUILT_IN = (
    EvaluatorBackend(COST_MODEL, _cost_model_backend, (), "the analytical cost model (default)"),
    EvaluatorBackend("profiled", "placement_gym.real.evaluators:profiled_evaluator", ("profile", "devices"),
                     "the cost model with measured op times and links (placement-gym profile)"),
    EvaluatorBackend("real", "placement_gym.real.evaluators:real_evaluator",
                     ("devices", "seed", "batch", "model", "lr"),
                     "every placement run on torch devices (the real-hardware executor)"),
)
_REGISTERED: dict[str, EvaluatorBackend] = {}


def register_evaluator(backend: EvaluatorBackend) -> EvaluatorBackend:
    """Make ``backend`` known by its name in this process (a name already taken is refused: a
    backend is not replaced behind the back of the envs that use it)."""
    if not isinstance(backend, EvaluatorBackend):
        raise TypeError(f"register_evaluator takes an EvaluatorBackend, got {type(backend).__name__}")
    if not isinstance(backend.name, str) or not backend.name.isidentifier():
        raise ValueError(f"an evaluator's name is an identifier such as 'my_model', got {backend.name!r}")
    if backend.name in _backends():
        raise ValueError(f"evaluator {backend.name!r} is registered already")
    _REGISTERED[backend.name] = backend
    return backend


def _installed_backends(search_path: tuple[str, ...]) -> dict[str, EvaluatorBackend]:
    """The built-in backends and those of the entry points of `EVALUATOR_GROUP` (in name order; one
    that fails to load is left out), read once per ``search_path`` (``sys.path``): every env reads
    them, and scanning the installed packages is a few milliseconds."""
    found = {backend.name: backend for backend in _BUILT_IN}
    for point in sorted(entry_points(group=EVALUATOR_GROUP), key=lambda point: point.name):
        try:
            backend = point.load()
        except ImportError:
            continue
        if isinstance(backend, EvaluatorBackend) and backend.name not in found:
            found[backend.name] = backend
    return found


_INSTALLED: dict[tuple[str, ...], dict[str, EvaluatorBackend]] = {}


def _backends() -> dict[str, EvaluatorBackend]:
    """Every backend: the built-in ones, the installed ones (`_installed_backends`), then those
    registered in this process."""
    search_path = tuple(sys.path)
    if search_path not in _INSTALLED:
        _INSTALLED.clear()
        _INSTALLED[search_path] = _installed_backends(search_path)
    found = _INSTALLED[search_path]
    return found | {name: b for name, b in _REGISTERED.items() if name not in found}


def evaluator_names() -> tuple[str, ...]:
    """The names `make_evaluator` takes, the built-in ones first."""
    return tuple(_backends())


def evaluator_backend(name: Any) -> EvaluatorBackend:
    """The backend called ``name``; ValueError naming the known ones."""
    found = _backends()
    if not isinstance(name, str) or name not in found:
        raise ValueError(f"unknown reward_mode {name!r}; allowed: {', '.join(found)}")
    return found[name]


def make_evaluator(task: Task, name: str, *, source: Any = None, **options: Any) -> Evaluator:
    """The evaluator of backend ``name`` for ``task`` (`EvaluatorBackend.build`): ``"cost_model"``
    (no options), ``"profiled"`` (``profile``, ``devices``), ``"real"`` (``devices``, ``seed``,
    ``batch``, ``model``, ``lr``), or a registered one. ValueError for an unknown name or an option the
    backend does not take."""
    return evaluator_backend(name).build(task, source=source, **options)
