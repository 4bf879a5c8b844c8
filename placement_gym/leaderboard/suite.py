"""Versioned task suites of the leaderboard, and the fingerprint that ties a suite to the cost model.

A suite version pins the tasks *and* the numbers the cost model gives them. Per task it freezes:

* ``graph_sha256``: the sha256 of the graph's ONNX file, or of its content for a graph made in memory
  (a dataset's: `graph_digest`);
* ``cluster_sha256``: a digest of every figure of the cluster (per device: name, kind, peak FLOP/s,
  memory bandwidth, memory capacity, launch overhead, efficiency per op category; per link: bandwidth
  and latency), compared exactly, since they are literal inputs;
* ``structure_sha256``: a digest of the compiled task (`Task`): op names and kinds, every tensor with
  its bytes and its producer and consumers, the saved activations of training, static memory per op.
  These are all integer-valued, so they are compared exactly too;
* ``single_device_runtimes``: the runtime of every single-device placement (one device runs every op
  in turn, so each is the sum of the op durations on that device: op FLOPs and bytes, peak FLOP/s,
  efficiency, memory bandwidth, launch overhead), ``best_single_runtime`` and ``lower_bound``;
* ``probes``: the runtime and the peak memory of every device for three fixed placements that cross
  devices (`PROBES`): they move with link latency and bandwidth, the scheduling rules and the memory
  accounting of activations and received copies.

Op durations are real numbers: they enter only through runtimes, compared with a relative tolerance
(`FINGERPRINT_RTOL`), so that a refactor that moves a duration by a rounding error does not void the
suite (submissions are re-checked with a looser tolerance still, see `validate`).

When the current code no longer reproduces a suite, `check_suite` says where, `suite_mismatch` says it
in one line and `require_suite` raises `SuiteMismatchError`: `validate` then stops instead of blaming
every submission. The frozen figures are data, one file per suite in the suite folder
(`registry.SUITE_FOLDER`), each with what the leaderboard's code needs to know of its suite
(`suite_spec`: its track, status, page, bounds file, placement format, how its tasks are measured);
`registry` reads them all and `get_suite` finds one by version. To bump the suite, add a suite file
(``docs/leaderboard.md``, "Adding a suite"): `suite_measure` measures its tasks (`measure_suite_task`)
and keeps those of the suite it inherits with their frozen figures; keep the older files so that old
submissions stay readable and are shown with their version.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field

import numpy as np

from placement_gym.cluster.cluster import HALF_PRECISION_FIGURES
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.leaderboard.suite_spec import SuiteSpec, spec_from_dict, spec_to_dict
from placement_gym.plans.space import PlanTask, is_plan_task_id, parse_plan_task_id
from placement_gym.task.cache import TaskCache
from placement_gym.task.compiled import Task
from placement_gym.task.ids import task_id_parts
from placement_gym.task.named import parse_task_id
from placement_gym.task.step import Step

# Relative tolerance on runtimes and peak memory: the simulator is deterministic bit for bit, so
# anything beyond rounding noise means the cost model changed.
FINGERPRINT_RTOL = 1e-9
# Hex digits kept of each sha256 digest: 64 bits tell any change apart and keep the frozen data short.
DIGEST_CHARS = 16
PROBES: tuple[str, ...] = ("round-robin", "scattered", "contiguous")
# Not part of the cost model, so left out of the digests: renaming or redescribing a cluster is no change.
_CLUSTER_UNCOSTED = ("name", "description")
# The task's graph and cluster have digests of their own; ``duration`` is compared through runtimes; the
# step is digested option by option (below); private fields (caches, counters) are bookkeeping, not part
# of the problem.
_TASK_UNDIGESTED = ("graph", "cluster", "step", "id", "duration", "made_from")
# The step's options as the frozen digests hold them: the objective and the optimizer always; every other
# option only where it departs from its default (the options added after suites were frozen, whose
# defaults every frozen suite's tasks have), so that each frozen digest stays what it was. These come
# before the task's arrays, in this order; every other option after them.
_STEP_ALWAYS_DIGESTED: tuple[str, ...] = ("objective", "optimizer")
_STEP_DIGESTED_BEFORE_ARRAYS: tuple[str, ...] = ("objective", "optimizer", "precision", "microbatches")


@dataclass(frozen=True)
class Probe:
    """One probe placement's frozen result: runtime (s) and peak memory per device (bytes)."""

    name: str
    runtime: float
    peak_memory: tuple[int, ...]


def task_of_id(task_id: str) -> Task | PlanTask:
    """The compiled task of ``task_id`` (cached by `placement_gym.task.named`), or the plan task of a plan
    task's id (`is_plan_task_id`: a parallel-plan suite's; a new one each call, its own evaluations)."""
    return parse_plan_task_id(task_id) if is_plan_task_id(task_id) else parse_task_id(task_id)


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite and its fingerprint under the cost model the suite was frozen with."""

    task_id: str
    graph_sha256: str
    best_single_runtime: float
    lower_bound: float
    single_device_runtimes: tuple[float, ...]
    probes: tuple[Probe, ...]
    cluster_sha256: str
    structure_sha256: str

    def task(self) -> Task | PlanTask:
        """The task of its id (`task_of_id`)."""
        return task_of_id(self.task_id)

    @property
    def step(self) -> Step:
        """The step the task times, as its id names it."""
        return Step.from_suffix(task_id_parts(self.task_id)[2])


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of tasks, with what its suite file says of it besides (`SuiteSpec`)."""

    version: str
    tasks: tuple[SuiteTask, ...]
    description: str = ""
    spec: SuiteSpec = field(default_factory=SuiteSpec)

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    @functools.cached_property
    def _by_id(self) -> dict[str, SuiteTask]:
        # A dict, not a scan: validation looks up every task of every file (a dataset suite has 300 tasks).
        return {suite_task.task_id: suite_task for suite_task in self.tasks}

    def get(self, task_id: str) -> SuiteTask:
        """The suite task of ``task_id``, or a ValueError naming the suite's tasks."""
        found = self._by_id.get(task_id)
        if found is not None:
            return found
        raise ValueError(
            f"task {task_id!r} is not in suite {self.version}; its tasks are: {', '.join(self.task_ids)}"
        )

    def subset(self, task_ids: list[str] | tuple[str, ...]) -> Suite:
        """The same suite version restricted to ``task_ids`` (for quick runs and tests)."""
        return Suite(self.version, tuple(self.get(t) for t in task_ids), self.description, self.spec)


class SuiteMismatchError(RuntimeError):
    """The current cost model (or a graph) no longer reproduces a suite's fingerprint: no submission of
    that suite can be checked until the suite version is bumped."""


# --- measuring a fingerprint ------------------------------------------------------------------------------

def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64 of each value: a fixed pseudo-random spread that, unlike numpy's generators, is
    defined here and cannot change with a numpy release (uint64 arithmetic wraps, as intended)."""
    x = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def probe_placements(task: Task) -> dict[str, np.ndarray]:
    """The probe placements of `PROBES`, over every device of the cluster: ``round-robin`` (op ``i``
    on device ``i mod n``, by topological index), ``scattered`` (a fixed pseudo-random device per op)
    and ``contiguous`` (the topological order cut into ``n`` equal blocks, as a pipeline would)."""
    n_ops, n_devices = task.n_forward, task.n_devices
    index = np.arange(n_ops, dtype=np.int64)
    return {
        "round-robin": index % n_devices,
        "scattered": (splitmix64(index) % np.uint64(n_devices)).astype(np.int64),
        "contiguous": index * n_devices // n_ops,
    }


def short_digest(items: list[tuple[str, object]]) -> str:
    """A short sha256 of named values; arrays in a canonical dtype, so that storing an array as int32
    instead of int64 (or float32 bytes as float64) is not taken for a change of the cost model."""
    digest = hashlib.sha256()
    for name, value in items:
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype="<f8" if value.dtype.kind == "f" else "<i8")
            digest.update(f"{name} {array.shape}\n".encode())
            digest.update(array.tobytes())
        else:
            digest.update(f"{name} {json.dumps(value)}\n".encode())
    return digest.hexdigest()[:DIGEST_CHARS]


def graph_digest(graph) -> str:
    """The sha256 a suite freezes for a graph: its ONNX file's, else (a dataset graph, made in memory)
    its content's."""
    return graph.sha256 or graph.content_sha256


def cluster_digest(task: Task) -> str:
    """Digest of every field of the task's cluster but its name and description (every figure). The
    half-precision figures (`HALF_PRECISION_FIGURES`) count only for a half-precision task whose
    cluster gives them: an fp32 task's costs never read them."""
    cluster = task.cluster
    unread = () if task.precision != "fp32" else HALF_PRECISION_FIGURES
    return short_digest([(f.name, getattr(cluster, f.name)) for f in dataclasses.fields(cluster)
                    if f.name not in _CLUSTER_UNCOSTED and f.name not in unread
                    and not (f.name in HALF_PRECISION_FIGURES and getattr(cluster, f.name) is None)])


def structure_digest(task: Task) -> str:
    """Digest of the compiled task but its op durations: op names, objective, optimizer and every
    op and tensor array (kinds, producers, consumers, bytes, persistence, static memory)."""
    step = task.step
    options = {**{name: getattr(step, name) for name in _STEP_ALWAYS_DIGESTED}, **step.departures()}
    items: list[tuple[str, object]] = [("op_names", task.graph.op_names)]
    items += [(name, options[name]) for name in _STEP_DIGESTED_BEFORE_ARRAYS if name in options]
    items += [(f.name, getattr(task, f.name)) for f in dataclasses.fields(task)
              if f.name not in _TASK_UNDIGESTED and not f.name.startswith("_")]
    items += [(name, value) for name, value in options.items() if name not in _STEP_DIGESTED_BEFORE_ARRAYS]
    return short_digest(items)


def measure_suite_task(task: Task | PlanTask) -> SuiteTask:
    """The fingerprint of ``task`` under the current code (measured once per task; a plan task's by
    `placement_gym.leaderboard.plan_suite`)."""
    if isinstance(task, PlanTask):
        from placement_gym.leaderboard.plan_suite import measure_plan_task  # it builds on this module

        return measure_plan_task(task)
    return _FINGERPRINTS.get(task, _measure)


def _measure(task: Task) -> SuiteTask:
    single = single_device(task)
    probes = []
    for name, placement in probe_placements(task).items():
        result = simulate(task, placement)
        peaks = tuple(int(round(p)) for p in result.peak_memory)  # whole bytes: sums of tensor sizes
        probes.append(Probe(name, float(result.runtime), peaks))
    return SuiteTask(
        task.id, graph_digest(task.graph), single.runtime, lower_bound(task),
        tuple(float(r) for r in single.runtimes), tuple(probes),
        cluster_digest(task), structure_digest(task),
    )


# Validation checks every task of a suite against its frozen figures, for each submission.
_FINGERPRINTS: TaskCache[SuiteTask] = TaskCache("suite_fingerprint")


def suite_to_dict(suite: Suite) -> dict:
    """``suite`` as the plain data of its file (`registry.SUITE_FOLDER`), to write a suite file."""
    return {"version": suite.version, "description": suite.description, **spec_to_dict(suite.spec),
            "tasks": [dataclasses.asdict(suite_task) for suite_task in suite.tasks]}


def suite_from_dict(data: dict, where: str = "suite file") -> Suite:
    """The `Suite` of a suite file's data (`suite_to_dict`'s inverse); its spec is checked
    (`spec_from_dict`: `SuiteFileError`), its tasks' shapes are the reader's to check (`registry`)."""
    tasks = tuple(
        SuiteTask(**{**task, "single_device_runtimes": tuple(task["single_device_runtimes"]),
                     "probes": tuple(Probe(p["name"], p["runtime"], tuple(p["peak_memory"]))
                                     for p in task["probes"])})
        for task in data["tasks"]
    )
    return Suite(data["version"], tasks, data["description"], spec_from_dict(data, where))


def get_suite(version: str | Suite | None = None) -> Suite:
    """A suite by version (None: the current suite; a `Suite`: itself) from the suite registry
    (`registry.suite_registry`), with a clear error naming the known versions."""
    if isinstance(version, Suite):
        return version
    # The registry builds its suites with this module: imported when a suite is looked up.
    from placement_gym.leaderboard.registry import suite_registry

    return suite_registry().get(version)


# --- checking a fingerprint -------------------------------------------------------------------------------

def differs_from_frozen(value: float, frozen: float) -> bool:
    return not math.isclose(value, frozen, rel_tol=FINGERPRINT_RTOL, abs_tol=0.0)


def fingerprint_problems(suite_task: SuiteTask, task: Task | PlanTask | None = None) -> list[str]:
    """Why the current code no longer reproduces ``suite_task``'s fingerprint (empty list: it does).
    ``task``: the compiled task to measure (default: ``suite_task.task()``)."""
    task = suite_task.task() if task is None else task
    if isinstance(task, PlanTask):
        from placement_gym.leaderboard.plan_suite import plan_fingerprint_problems  # builds on this module

        return plan_fingerprint_problems(suite_task, task)
    now = measure_suite_task(task)
    problems = []
    if now.graph_sha256 != suite_task.graph_sha256:
        problems.append(f"graph sha256 is {now.graph_sha256[:12]}..., "
                        f"suite froze {suite_task.graph_sha256[:12]}...")
    if now.cluster_sha256 != suite_task.cluster_sha256:
        problems.append(f"cluster figures changed (digest {now.cluster_sha256}, suite froze "
                        f"{suite_task.cluster_sha256})")
    if now.structure_sha256 != suite_task.structure_sha256:
        problems.append(f"compiled task changed: ops, tensors, their bytes or static memory (digest "
                        f"{now.structure_sha256}, suite froze {suite_task.structure_sha256})")
    devices = task.cluster.device_names
    if len(now.single_device_runtimes) != len(suite_task.single_device_runtimes):
        problems.append(f"{len(devices)} devices, suite froze {len(suite_task.single_device_runtimes)}")
        return problems
    for device, value, frozen in zip(devices, now.single_device_runtimes, suite_task.single_device_runtimes):
        if differs_from_frozen(value, frozen):
            problems.append(f"runtime with every op on {device} is {value!r} s, suite froze {frozen!r} s")
    for name in ("best_single_runtime", "lower_bound"):
        value, frozen = getattr(now, name), getattr(suite_task, name)
        if differs_from_frozen(value, frozen):
            problems.append(f"{name.replace('_', ' ')} is {value!r} s, suite froze {frozen!r} s")
    measured = {probe.name: probe for probe in now.probes}
    for probe in suite_task.probes:
        current = measured.get(probe.name)
        if current is None:
            problems.append(f"probe placement {probe.name!r} is unknown to this code")
            continue
        if differs_from_frozen(current.runtime, probe.runtime):
            problems.append(f"{probe.name} probe runtime is {current.runtime!r} s, "
                            f"suite froze {probe.runtime!r} s")
        for device, value, frozen in zip(devices, current.peak_memory, probe.peak_memory):
            if differs_from_frozen(value, frozen):
                problems.append(f"{probe.name} probe peak memory on {device} is {value} bytes, "
                                f"suite froze {frozen} bytes")
    return problems


def check_suite(version: str | Suite | None = None) -> dict[str, list[str]]:
    """Per task id, the fingerprint problems of a suite under the current code (only tasks with any).
    A non-empty answer for the current suite means: bump the suite version."""
    suite = get_suite(version)
    return {t.task_id: p for t in suite.tasks if (p := fingerprint_problems(t))}


def suite_mismatch(version: str | Suite | None = None) -> str | None:
    """One line saying that the current cost model does not reproduce suite ``version`` (with the first
    difference found), or None when it does."""
    suite = get_suite(version)
    problems = check_suite(suite)
    if not problems:
        return None
    task_id, task_problems = next(iter(problems.items()))
    more = len(task_problems) - 1
    return (f"suite {suite.version} does not match this cost model: {len(problems)} of {len(suite.tasks)} "
            f"tasks differ (first, {task_id}: {task_problems[0]}"
            f"{f'; and {more} more' if more else ''}); the cost model or a graph changed, so bump the "
            "suite (add a suite file to placement_gym/leaderboard/suites/)")


def require_suite(version: str | Suite | None = None) -> None:
    """Raise `SuiteMismatchError` when the current cost model does not reproduce suite ``version``."""
    message = suite_mismatch(version)
    if message is not None:
        raise SuiteMismatchError(message)


def __getattr__(name: str) -> object:
    """`CURRENT_SUITE` and `SUITES`, as ``placement_gym.leaderboard`` gives them (read from the suite
    registry when asked), for the imports that read them here."""
    if name in ("CURRENT_SUITE", "SUITES"):
        import placement_gym.leaderboard as leaderboard

        return getattr(leaderboard, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
