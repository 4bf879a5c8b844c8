"""Spread placement evaluations over many machines with Ray (the optional ``distributed`` extra).

Measuring placements is the expensive step of real-hardware work (hundreds to thousands of runs).
`RayEvaluatorPool` starts a pool of measurement actors, one per machine or device set; each builds
the task from a small picklable `TaskSpec` (names, not arrays) and its own evaluator with
`placement_gym.evaluation.evaluator.make_evaluator`. The pool is a
`placement_gym.evaluation.evaluator.Evaluator` (``name`` is its reward mode), so the envs, the searches and
the learned agents take it:

* ``pool.simulate(placement, schedule=False) -> SimulationResult``: one evaluation on a free actor;
  ``env.unwrapped.evaluator = pool`` makes an env use it.
* ``pool.simulate_batch(placements) -> (runtimes, feasible, peak_memory)``: rows spread over the
  actors, results in row order, the shapes `placement_gym.cost_model.simulate_batch` returns;
  ``pool.evaluate_batch`` is the same method.

Where the actors run (Ray does the cluster work; there is no home-made cluster code here):

* ``address=None``: join the Ray instance this process already started, else start a local one
  (``num_cpus`` CPUs, no dashboard); a pool that started Ray shuts it down on `close`.
* ``address="auto"``: join the cluster of this node (``ray start --head`` on one machine,
  ``ray start --address=<head>:6379`` on the others, then run the script on one of them).
* ``address="ray://<head>:10001"``: Ray Client, from a machine outside the cluster.

Every node needs ``placement_gym`` importable (installed, or shipped with
``actor_options={"runtime_env": {"py_modules": [placement_gym]}}``) and, for ``reward_mode="real"``,
torch. To get one actor per GPU machine or per GPU set, reserve the devices through Ray:
``actor_options={"num_gpus": 2}`` makes Ray set ``CUDA_VISIBLE_DEVICES`` per actor, so
``devices={"gpu:0": "cuda:0", "gpu:1": "cuda:1"}`` names each actor's own two GPUs; or give
``devices`` as one mapping per actor. Actors that share a machine also share its cores and memory
bus: for honest real measurements give each actor a machine (or disjoint devices) of its own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cost_model import SimulationResult, simulate_batch
from placement_gym.evaluation.evaluator import CostModelEvaluator, evaluator_backend, make_evaluator
from placement_gym.evaluation.parallel import connect_ray, import_ray, ray_error_message
from placement_gym.task.compiled import Task
from placement_gym.task.step import POSITIONAL_OPTIONS, STEP_OPTIONS, Step, as_step, step_of_call

# How long `RayEvaluatorPool` waits for its actors to start before it says they cannot be placed
# (a cluster without the resources the actors ask for would otherwise wait forever).
DEFAULT_START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class TaskSpec:
    """What an actor needs to build a task on its own machine: names, not arrays.

    ``graph``: a bundled graph name or an ONNX path (the path must exist on every node);
    ``cluster``: a preset name, ``"cpu<N>"``/``"local"`` (the actor's machine) or a JSON path;
    ``step``: the task's `placement_gym.task.step.Step` (a `Step`, an objective such as
    ``"train_step"`` or ``"inference"``, or a task id's objective such as ``"train+sgd"``; checked
    when made)."""

    graph: str
    cluster: str
    step: Step = Step()

    def __post_init__(self) -> None:
        object.__setattr__(self, "step", as_step(self.step))

    def build(self) -> Task:
        """The task, built (and cached) with `placement_gym.task.named.get_task`."""
        from placement_gym.task.named import get_task

        return get_task(self.graph, self.cluster, self.step)


def as_task_spec(spec: TaskSpec | str | Mapping[str, Any] | Sequence[Any]) -> TaskSpec:
    """``spec`` as a `TaskSpec`: a `TaskSpec`, a task id (``"cifar10_cnn/k80x2/train"``), a mapping
    with graph and cluster (optional: step, and the step's fields, `placement_gym.task.step.STEP_OPTIONS`,
    each replacing that field of the step), or a sequence ``(graph, cluster[, step])`` (the step's
    options after it, ``optimizer``, ``precision``, ``microbatches``, ``recompute``, are still taken
    by position, with a DeprecationWarning)."""
    if isinstance(spec, TaskSpec):
        result = spec
    elif isinstance(spec, str):
        from placement_gym.task.ids import split_task_id

        result = TaskSpec(*split_task_id(spec))  # the id format's own clear errors
    elif isinstance(spec, Mapping):
        allowed = {"graph", "cluster", "step", *STEP_OPTIONS}
        unknown = sorted(map(str, set(spec) - allowed))
        if unknown or "graph" not in spec or "cluster" not in spec:
            raise ValueError(
                f"a task spec mapping needs graph and cluster (optional: step, {', '.join(STEP_OPTIONS)}); "
                f"got keys {sorted(map(str, spec))}"
            )
        options = {name: value for name, value in spec.items() if name in STEP_OPTIONS}
        result = TaskSpec(spec["graph"], spec["cluster"], as_step(spec.get("step"), **options))
    elif isinstance(spec, Sequence) and 2 <= len(spec) <= 3 + len(POSITIONAL_OPTIONS):
        graph, cluster, *rest = spec
        step = step_of_call("as_task_spec", rest[0] if rest else None, tuple(rest[1:]), {})
        result = TaskSpec(graph, cluster, step)
    else:
        raise ValueError(
            "task_spec must be a TaskSpec, a task id such as 'cifar10_cnn/k80x2/train', a mapping with "
            "graph and cluster, or (graph, cluster[, step]) names; "
            f"got {type(spec).__name__}"
            + (": pass the names a Task was built from, not the Task, so that actors can rebuild it"
               if isinstance(spec, Task) else "")
        )
    fields = {"graph": result.graph, "cluster": result.cluster}
    for name, value in fields.items():
        if isinstance(value, Path):
            fields[name] = str(value)
        elif not isinstance(fields[name], str):
            raise ValueError(
                f"task spec field {name} must be a name or path string, got {type(value).__name__}"
            )
    return TaskSpec(**fields, step=result.step)


class MeasurementActor:
    """The body of one Ray actor: a task and its evaluator (`make_evaluator`), built on the actor's
    machine. Wrapped with ``ray.remote`` by `RayEvaluatorPool`; plain Python otherwise (usable
    without Ray)."""

    def __init__(self, spec: TaskSpec, reward_mode: str, devices: Mapping[str, str] | None,
                 profile: Any, evaluator_options: Mapping[str, Any]) -> None:
        self.task = spec.build()
        self.reward_mode = reward_mode
        self.evaluator = make_evaluator(self.task, reward_mode, profile=profile, devices=devices,
                                        **dict(evaluator_options))
        self.evaluations = 0

    def describe(self) -> dict[str, Any]:
        """Who this actor is and what task it built (checked against the driver's task)."""
        return {
            "pid": os.getpid(),
            "host": os.uname().nodename,
            "task_id": self.task.id,
            "n_forward": self.task.n_forward,
            "device_names": list(self.task.cluster.device_names),
            "evaluations": self.evaluations,
        }

    def simulate(self, placement: np.ndarray, schedule: bool = False) -> tuple[SimulationResult, Any]:
        """One evaluation, and the real evaluator's summary of it (None in the simulated modes)."""
        self.evaluations += 1
        result = self.evaluator.simulate(placement, schedule=schedule)
        return result, getattr(self.evaluator, "last_info", None)

    def evaluate_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(runtimes, feasible, peak_memory)`` of the rows: one `simulate_batch` call in the
        cost models (parallel over this machine's cores), the evaluator's own batch method otherwise (one
        run per row for ``"real"``)."""
        self.evaluations += len(rows)
        if isinstance(self.evaluator, CostModelEvaluator):
            # a whole chunk at once, whatever its size: the pool's numbers do not depend on chunking
            return simulate_batch(self.evaluator.task, rows)
        return self.evaluator.simulate_batch(rows)


class RayEvaluatorPool:
    """A pool of Ray measurement actors with the evaluator interface (see the module docstring).

    ``task_spec``: see `as_task_spec`. ``n_actors``: actors to start. ``reward_mode``, ``profile``:
    as in `make_evaluator` (a profile path must exist on every node; a dict travels with the actor).
    ``devices``: for ``"real"`` (or ``"profiled"``' cache lookup), one mapping for every actor or a
    sequence of ``n_actors`` mappings (one device set per actor). ``actor_options``: Ray options of
    each actor, such as ``{"num_gpus": 1}``, ``{"resources": {...}}`` or ``{"runtime_env": {...}}``.
    ``address``: None (this process's Ray, else a new local instance), ``"auto"``, ``"ray://..."``;
    used only when this process has not connected to Ray yet (else the pool joins that instance).
    ``evaluator_options``: extra `make_evaluator` options (for ``"real"``: ``seed``, ``batch``, ...).
    ``num_cpus``: CPUs of a local instance the pool starts (default: the machine's, at least one
    per actor). ``start_timeout_s``: how long to wait for the actors to start. ``task``: the driver's
    task whose evaluation counter (`Task.evaluations`) the pool's evaluations add to, such as the
    copy the leaderboard harness hands an agent (default: the task ``task_spec`` builds; given, it
    must be that task, the same id).

    Not thread-safe: one driver thread uses a pool at a time (as an env does). ``task`` is the task
    of the driver; placements are checked against it before they travel, and each placement
    evaluated adds one to its ``evaluations``."""

    def __init__(
        self,
        task_spec: TaskSpec | str | Mapping[str, Any] | Sequence[str],
        n_actors: int = 2,
        reward_mode: str = "real",
        devices: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
        profile: Mapping[str, Any] | str | Path | None = None,
        actor_options: Mapping[str, Any] | None = None,
        address: str | None = None,
        *,
        evaluator_options: Mapping[str, Any] | None = None,
        num_cpus: int | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        task: Task | None = None,
    ) -> None:
        self.spec = as_task_spec(task_spec)
        self.reward_mode = evaluator_backend(reward_mode).name
        if isinstance(n_actors, bool) or not isinstance(n_actors, (int, np.integer)) or n_actors < 1:
            raise ValueError(f"n_actors must be a positive integer, got {n_actors!r}")
        self.n_actors = int(n_actors)
        device_sets = self._device_sets(devices)
        if isinstance(profile, Path):
            profile = str(profile)
        if actor_options is not None and not isinstance(actor_options, Mapping):
            raise ValueError(
                f"actor_options must be a mapping of Ray actor options, got {type(actor_options).__name__}"
            )
        if evaluator_options is not None and not isinstance(evaluator_options, Mapping):
            raise ValueError(f"evaluator_options must be a mapping, got {type(evaluator_options).__name__}")
        if not (isinstance(start_timeout_s, (int, float)) and start_timeout_s > 0):
            raise ValueError(f"start_timeout_s must be a positive number of seconds, got {start_timeout_s!r}")
        self.task = self._driver_task(task)
        self.last_info: dict[str, Any] | None = None
        self.evaluations = 0
        self._actors: list[Any] = []
        self._owns_ray = False

        ray = import_ray("RayEvaluatorPool")
        self._ray = ray
        options = dict(actor_options or {})
        needed = math.ceil(self.n_actors * options.get("num_cpus", 1))
        cpus = num_cpus if num_cpus is not None else max(needed, os.cpu_count() or 1)
        self._owns_ray = connect_ray(ray, address, cpus)
        try:
            self._start_actors(options, device_sets, profile, dict(evaluator_options or {}), start_timeout_s)
        except BaseException:
            self.close()
            raise
        from ray.util import ActorPool

        self._pool = ActorPool(list(self._actors))

    def _driver_task(self, task: Task | None) -> Task:
        built = self.spec.build()
        if task is None:
            return built
        if not isinstance(task, Task) or task.id != built.id:
            raise ValueError(f"task= must be the task of task_spec ({built.id}), got "
                             f"{getattr(task, 'id', type(task).__name__)!r}")
        return task

    def _device_sets(self, devices) -> list[Mapping[str, str] | None]:
        if devices is None or isinstance(devices, Mapping):
            return [devices] * self.n_actors
        if isinstance(devices, Sequence) and not isinstance(devices, str) and all(
                isinstance(d, Mapping) for d in devices):
            if len(devices) != self.n_actors:
                raise ValueError(f"devices holds {len(devices)} device sets for {self.n_actors} actors: "
                                 "give one mapping for every actor, or one per actor")
            return list(devices)
        raise ValueError("devices must be None, a mapping from cluster device name to torch device, or a "
                         f"sequence of such mappings (one per actor); got {type(devices).__name__}")

    def _start_actors(self, options, device_sets, profile, evaluator_options, timeout) -> None:
        ray = self._ray
        actor_class = ray.remote(MeasurementActor)
        if options:
            actor_class = actor_class.options(**options)
        self._actors = [
            actor_class.remote(self.spec, self.reward_mode, device_sets[i], profile, evaluator_options)
            for i in range(self.n_actors)
        ]
        refs = [actor.describe.remote() for actor in self._actors]
        try:
            described = ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"the {self.n_actors} measurement actors did not start within {timeout} s: the Ray "
                f"cluster ({ray.cluster_resources()}) may lack the resources they ask for "
                f"({options or 'one CPU each'})"
            ) from None
        except ray.exceptions.RayError as error:
            raise ValueError(f"a measurement actor for {self.spec} failed to start: "
                             f"{ray_error_message(error)}") from None
        names = list(self.task.cluster.device_names)
        for info in described:
            if info["n_forward"] != self.task.n_forward or info["device_names"] != names:
                raise ValueError(
                    f"actor on {info['host']} built task {info['task_id']} with devices "
                    f"{info['device_names']}, which differs from this process's {self.task.id} ({names}): "
                    "name a cluster every node reads the same way"
                )

    def _get(self, refs):
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayError as error:
            raise RuntimeError(f"a measurement actor failed: {ray_error_message(error)}") from None

    # --- the evaluator protocol (`placement_gym.evaluation.evaluator.Evaluator`) ------------------------

    @property
    def name(self) -> str:
        """What scores: the pool's ``reward_mode``."""
        return self.reward_mode

    def simulate(self, placement, schedule: bool = False) -> SimulationResult:
        """One evaluation of ``placement`` on a free actor (the interface of the envs' ``evaluator``).
        In ``"real"`` mode ``last_info`` is the executor's summary of the run."""
        self._check_open()
        row = self.task.check_placement(placement)
        self._pool.submit(lambda actor, value: actor.simulate.remote(value, schedule), row)
        try:
            result, info = self._pool.get_next()
        except self._ray.exceptions.RayError as error:
            raise RuntimeError(f"a measurement actor failed: {ray_error_message(error)}") from None
        self.task.count_evaluations(1)
        self.evaluations += 1
        self.last_info = info
        return result

    def simulate_batch(self, placements) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(runtimes, feasible, peak_memory)`` of the rows of ``placements`` (``(batch, n_forward)``),
        shapes ``(batch,)``, ``(batch,)``, ``(batch, n_devices)``, in row order. Simulated modes: the
        rows in ``n_actors`` contiguous chunks, one per actor; ``"real"``: one row per call, each to
        the next free actor (measured runs differ in length)."""
        self._check_open()
        rows = self.task.check_placement(placements, batch=True)
        if len(rows) == 0:
            return np.zeros(0), np.zeros(0, dtype=bool), np.zeros((0, self.task.n_devices))
        one_each = evaluator_backend(self.reward_mode).runs_on_devices
        n_chunks = len(rows) if one_each else min(self.n_actors, len(rows))
        chunks = np.array_split(rows, n_chunks)
        try:
            parts = list(self._pool.map(lambda actor, chunk: actor.evaluate_rows.remote(chunk), chunks))
        except self._ray.exceptions.RayError as error:
            raise RuntimeError(f"a measurement actor failed: {ray_error_message(error)}") from None
        runtimes, feasible, peaks = zip(*parts, strict=True)
        self.task.count_evaluations(len(rows))
        self.evaluations += len(rows)
        return np.concatenate(runtimes), np.concatenate(feasible), np.concatenate(peaks)

    evaluate_batch = simulate_batch  # the name this method had before the evaluator protocol

    # --- bookkeeping --------------------------------------------------------------------------------

    def actor_stats(self) -> list[dict[str, Any]]:
        """Per actor: ``pid``, ``host``, ``task_id``, ``n_forward``, ``device_names`` and
        ``evaluations`` (placements it has evaluated)."""
        self._check_open()
        return self._get([actor.describe.remote() for actor in self._actors])

    def _check_open(self) -> None:
        if not self._actors:
            raise RuntimeError("this RayEvaluatorPool is closed")

    def close(self) -> None:
        """Stop the actors; shut Ray down if this pool started it. Safe to call twice."""
        ray = getattr(self, "_ray", None)
        if ray is None:
            return
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> RayEvaluatorPool:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
