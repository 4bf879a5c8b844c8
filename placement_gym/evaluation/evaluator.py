"""The one way a placement is scored: the `Evaluator` protocol, the cost model behind it, and the
registry of scoring backends by name.

Every scorer (`CostModelEvaluator` here; `ProfiledEvaluator` and `RealEvaluator` in
`placement_gym.real.evaluators`; `RayEvaluatorPool` in `placement_gym.real.distributed`) has:

- ``name``: what scores (``"cost_model"``, ``"profiled"``, ``"real"``, a pool's backend);
- ``task``: the task whose placements it scores (for a profiled model, the profiled task);
- ``simulate(placement, schedule=False) -> SimulationResult``: one evaluation (a simulation for the
  cost models, a measured run for the real backend);
- ``simulate_batch(rows) -> (runtimes, feasible, peak_memory)``: rows ``(batch, n_forward)``, shapes
  ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``, in row order;
- ``evaluations``: the placements it has scored.

``simulate`` keeps the cost model's word for every backend: it is the one method every evaluator
implements, ours and other packages' (`tests/evaluation/test_scoring_plugins.py`), and every search,
agent and the leaderboard harness calls it; a second name for the same call would leave two spellings to
implement and to wrap. Read it as "score".

Optional members: ``takes_cutoff = True`` for a ``simulate_batch`` that also takes ``cutoff=`` (seconds,
`placement_gym.cost_model.simulate`'s: a row may stop once its runtime is proven above it, and comes
back with its bound as runtime, feasible False and NaN peak memory; `CostModelEvaluator` does; the
budget, `placement_gym.evaluation.budget.Budget.scores`, evaluates in full through any other);
``identity()``, what makes two runs comparable (`scoring_identity`); ``info_keys`` with
``env_info(scored) -> dict``, the numbers it adds to an env's ``info`` (`evaluator_info`: the real
backend's summary of its last measured run).

The envs, the search baselines and the learned agents take any such object; `as_evaluator` turns
None (the cost model) or an older object that only has ``simulate`` into one. ``Task.evaluations``
stays the count the leaderboard records: the cost model counts every evaluation on its task
(a profiled task shares its task's counter), and the real and Ray evaluators count theirs there too.

Backends by name (`EvaluatorBackend`: a factory, the options it takes, the ``info`` keys it adds;
`make_evaluator`, `evaluator_names`, `evaluator_for`): every package, this one included, declares its
backends as entry points of the group ``placement_gym.evaluators`` naming an `EvaluatorBackend`; this
package's pyproject.toml declares ``cost_model`` (also known without any metadata: the default),
``profiled`` and ``real`` (`placement_gym.real.evaluators`). Nothing here imports a backend's module:
an entry point is loaded the first time its name is asked for. `register_evaluator` adds one in this
process. The envs' ``evaluator=`` (with ``evaluator_options=``), ``placement-gym train --reward-mode``
and the Ray pool take any of these names.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from placement_gym.common.extras import package_source
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
PROJECT = "placement-gym"
# A line ``name = "module:attribute"`` of a pyproject.toml's entry-point table.
_ENTRY_LINE = re.compile(r'^\s*([A-Za-z_][\w.-]*)\s*=\s*["\']([\w.]+:[\w.]+)["\']', re.MULTILINE)


@dataclass(frozen=True)
class EvaluatorBackend:
    """A scoring backend by name, and what it declares of itself.

    - ``factory(task, *, source=None, **options) -> Evaluator`` (or a ``"module:function"`` string,
      imported on first use). ``source`` is the ``graph`` argument the task was built from (an ONNX
      file's path or model, a bundled name, an `OpGraph`, a `Task`; None where unknown).
    - ``options``: the keyword options the factory takes; one it does not take is refused by name before
      anything is built, so that the envs and the command line say which backend takes it.
    - ``description``: one line for listings.
    - ``info_keys``: the keys its evaluators add to an env's ``info`` (each evaluator gives their values,
      `evaluator_info`); an env's key set is the same at every reset and step, so vector envs stack it.
    - ``label``: how a result names what scored it (``"measured on the devices"``); default the name.
    - ``runs_on_devices``: it runs placements on this machine's devices, so the command line maps the
      cluster's devices to torch devices for it (``--devices``, or a cluster of this machine).
    """

    name: str
    factory: Callable[..., Any] | str
    options: tuple[str, ...] = ()
    description: str = ""
    info_keys: tuple[str, ...] = ()
    label: str = ""
    runs_on_devices: bool = False

    def build(self, task: Task, *, source: Any = None, **options: Any) -> Evaluator:
        """The backend's evaluator of ``task``; options given as None count as not given."""
        given = {key: value for key, value in options.items() if value is not None}
        refused = sorted(set(given) - set(self.options))
        if refused:
            takers = {key: [b.name for b in _loadable_backends() if key in b.options] for key in refused}
            said = "; ".join(f"{key}= is for evaluator="
                             + (" or ".join(f'"{n}"' for n in takers[key]) or "none") for key in refused)
            raise ValueError(f'{said}, not "{self.name}"')
        factory = self.factory
        if isinstance(factory, str):
            module, _, attribute = factory.partition(":")
            factory = getattr(importlib.import_module(module), attribute)
        return as_evaluator(task, factory(task, source=source, **given))

    def shown_as(self) -> str:
        """How a result names what scored it: ``label``, else the name."""
        return self.label or self.name


def cost_model_evaluator(task: Task, *, source: Any = None) -> CostModelEvaluator:
    """The ``"cost_model"`` backend's factory: `CostModelEvaluator` of ``task``."""
    return CostModelEvaluator(task)


# The default backend, known in every process: the package's own entry point names it too, so that
# listings read it from the group like every other backend.
COST_MODEL_BACKEND = EvaluatorBackend(COST_MODEL, cost_model_evaluator, (),
                                      "the analytical cost model (default)", label="cost model")
_REGISTERED: dict[str, EvaluatorBackend] = {}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def checkout_entry_points(group: str, pyproject: Path) -> list[EntryPoint]:
    """The entry points of ``group`` that the ``pyproject.toml`` at ``pyproject`` declares (its table
    ``[project.entry-points."<group>"]`` of ``name = "module:attribute"`` lines), in file order; [] for a
    file that cannot be read or has no such table."""
    try:
        text = pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    table = re.search(r'^\[project\.entry-points\."' + re.escape(group) + r'"\][^\n]*\n(.*?)(?=^\[|\Z)', text,
                      re.MULTILINE | re.DOTALL)
    if table is None:
        return []
    return [EntryPoint(name, value, group) for name, value in _ENTRY_LINE.findall(table.group(1))]


def _declared_points() -> dict[str, EntryPoint]:
    """The entry points of `EVALUATOR_GROUP` by name: the package's own first, in the order its
    pyproject.toml lists them, then other packages' in name order (a name declared twice: the first).

    The package's own are read from its checkout's pyproject.toml when Python imports it from a checkout
    (an editable install made before a backend was added there, or the folder on ``sys.path``), so that
    a checkout's own backends resolve without a reinstall; elsewhere from its installed metadata."""
    installed = list(entry_points(group=EVALUATOR_GROUP))

    def is_own(point: EntryPoint) -> bool:
        dist = getattr(point, "dist", None)
        return dist is not None and _normalised(dist.name) == PROJECT

    kind, root = package_source()
    own = (checkout_entry_points(EVALUATOR_GROUP, root / "pyproject.toml") if kind == "checkout" and root
           else [point for point in installed if is_own(point)])
    others = sorted((point for point in installed if not is_own(point)), key=lambda point: point.name)
    found: dict[str, EntryPoint] = {}
    for point in (*own, *others):
        found.setdefault(point.name, point)
    return found


_DECLARED: dict[tuple[str, ...], dict[str, EntryPoint]] = {}
_LOADED: dict[str, EvaluatorBackend] = {}


def _points() -> dict[str, EntryPoint]:
    """`_declared_points` read once per ``sys.path`` (scanning the installed packages takes a few
    milliseconds, and every env looks its backend up); loaded backends are kept with them."""
    search_path = tuple(sys.path)
    if search_path not in _DECLARED:
        _DECLARED.clear()
        _LOADED.clear()
        _DECLARED[search_path] = _declared_points()
    return _DECLARED[search_path]


def _load(point: EntryPoint) -> EvaluatorBackend:
    """The `EvaluatorBackend` an entry point names (loaded once), or a one-line ValueError."""
    if point.name not in _LOADED:
        try:
            backend = point.load()
        except ImportError as error:
            raise ValueError(f"evaluator {point.name!r} ({point.value}) could not be loaded: "
                             f"{error}") from None
        if not isinstance(backend, EvaluatorBackend) or backend.name != point.name:
            raise ValueError(f"the entry point {point.name} = {point.value!r} of {EVALUATOR_GROUP} must "
                             f"name an EvaluatorBackend called {point.name!r}, got {type(backend).__name__}")
        _LOADED[point.name] = backend
    return _LOADED[point.name]


def _loadable_backends() -> list[EvaluatorBackend]:
    """Every backend that loads, in `evaluator_names` order (for the messages that name takers)."""
    found = []
    for name in evaluator_names():
        try:
            found.append(evaluator_backend(name))
        except ValueError:
            continue
    return found


def register_evaluator(backend: EvaluatorBackend) -> EvaluatorBackend:
    """Make ``backend`` known by its name in this process (a name already taken is refused: a
    backend is not replaced behind the back of the envs that use it)."""
    if not isinstance(backend, EvaluatorBackend):
        raise TypeError(f"register_evaluator takes an EvaluatorBackend, got {type(backend).__name__}")
    if not isinstance(backend.name, str) or not backend.name.isidentifier():
        raise ValueError(f"an evaluator's name is an identifier such as 'my_model', got {backend.name!r}")
    if backend.name in evaluator_names():
        raise ValueError(f"evaluator {backend.name!r} is registered already")
    _REGISTERED[backend.name] = backend
    return backend


def evaluator_names() -> tuple[str, ...]:
    """The names `make_evaluator` takes: ``"cost_model"``, the entry points of `EVALUATOR_GROUP` (the
    package's own first: ``"profiled"``, ``"real"``), then those registered in this process. Nothing
    is imported to list them."""
    names = dict.fromkeys((COST_MODEL, *_points(), *_REGISTERED))
    return tuple(names)


def evaluator_backend(name: Any) -> EvaluatorBackend:
    """The backend called ``name``; ValueError naming the known ones (or saying why a declared one
    does not load)."""
    if name == COST_MODEL:
        return COST_MODEL_BACKEND
    points = _points()
    if isinstance(name, str) and name in points:
        return _load(points[name])
    if isinstance(name, str) and name in _REGISTERED:
        return _REGISTERED[name]
    raise ValueError(f"unknown evaluator {name!r}; allowed: {', '.join(evaluator_names())}")


def make_evaluator(task: Task, name: str, *, source: Any = None, **options: Any) -> Evaluator:
    """The evaluator of backend ``name`` for ``task`` (`EvaluatorBackend.build`): ``"cost_model"``
    (no options), ``"profiled"`` (``profile``, ``devices``), ``"real"`` (``devices``, ``seed``,
    ``batch``, ``model``, ``lr``, ``compile``), or a registered one. ValueError for an unknown name or
    an option the backend does not take."""
    return evaluator_backend(name).build(task, source=source, **options)


def evaluator_for(task: Task, evaluator: Any = None, options: Mapping[str, Any] | None = None, *,
                  source: Any = None) -> Evaluator:
    """The evaluator of ``task`` that ``evaluator`` names or is, the one way the envs choose it:

    - None or a backend's name (`evaluator_names`): that backend's evaluator, built with ``options``
      (None: the cost model);
    - an `EvaluatorBackend` (registered or not): built the same way;
    - an evaluator object (the `Evaluator` protocol, or anything with ``simulate``): itself
      (`as_evaluator`), which comes built: ``options`` are refused.

    ``source``: the ``graph`` argument the task was built from (`EvaluatorBackend`)."""
    options = dict(options or {})
    if evaluator is None or isinstance(evaluator, str):
        return make_evaluator(task, COST_MODEL if evaluator is None else evaluator, source=source, **options)
    if isinstance(evaluator, EvaluatorBackend):
        return evaluator.build(task, source=source, **options)
    if any(value is not None for value in options.values()):
        raise ValueError(f"evaluator options ({', '.join(sorted(options))}) are for a backend given by name "
                         f"or as an EvaluatorBackend; an evaluator object ({type(evaluator).__name__}) comes "
                         "built")
    return as_evaluator(task, evaluator)


def declared_info_keys(evaluator: Any) -> tuple[str, ...]:
    """The ``info`` keys that the evaluators ``evaluator`` names or is add (its backend's or its own
    ``info_keys``), known before any is built; () for None and the cost model."""
    if evaluator is None or isinstance(evaluator, str):
        return evaluator_backend(COST_MODEL if evaluator is None else evaluator).info_keys
    return tuple(getattr(evaluator, "info_keys", ()))


def evaluator_info(evaluator: Any, scored: bool) -> dict[str, Any]:
    """What ``evaluator`` adds to an env's ``info`` (its ``env_info(scored)``: numpy numbers under its
    ``info_keys``, those of the last placement it scored when ``scored``, zeros otherwise); {} for an
    evaluator without it."""
    added = getattr(evaluator, "env_info", None)
    return dict(added(scored)) if callable(added) else {}
