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
every submission. The frozen figures are data, one file per version in `SUITE_FOLDER`
(``suites/v1.json``...). To bump the suite, write ``suites/v<N>.json`` from `suite_to_dict` of a
`Suite` of `measure_suite_task` results (`extend_suite` keeps an older suite's tasks with their frozen
figures and measures the new ones), and keep the older files so that old submissions stay readable and
are shown with their version.

Accepted suites (`ACCEPTED_SUITES`): ``v3`` (`V3`: v1's tasks plus `V3_NEW_TASKS`, v2's workloads in
forms a heuristic fits in memory, `V3_FITTED_BY`), the current suite (`CURRENT_SUITE`), the one the
leaderboard's README ranks; ``v1`` (`V1`: 13 tasks from the papers) and ``v2`` (`V2`: v1's 13
tasks with v1's figures, plus `V2_NEW_TASKS`), frozen and validated, each ranked on a page of its own
(``render --suite v1``, ``render --suite v2``); and ``gen-v2``, the generalisation track's own suite.
``suites/v2.json`` and ``suites/v3.json`` are written by ``python -m baselines.leaderboard_fill.classic
--write-suite v2`` (or ``v3``; `measure_v2`, `measure_v3`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from placement_gym.cluster.cluster import HALF_PRECISION_FIGURES
from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.task.cache import TaskCache
from placement_gym.task.compiled import Task
from placement_gym.task.named import parse_task_id

# Suite v1: 13 tasks of the papers' graphs and machines (2016-2018, plus one H100 box), ranked on a page
# of its own (`render --suite v1`).
V1 = "v1"
# Suite v2: every task of v1, with v1's frozen figures, then `V2_NEW_TASKS`.
V2 = "v2"
# The workloads v2 adds: a multi-node mixed-precision pipelined training step, a mixture of experts, a
# pipelined GNMT-8 on the 8 K40s of Mirhoseini et al. 2018 (ICLR, "A hierarchical model for device
# placement") and a graph of 103,202 forward ops (dataset ``unrolled-v1``: GNMT-8 at 400 tokens).
V2_NEW_TASKS: tuple[str, ...] = (
    "llama2_70b/dgx-h100x4/train+bf16+mb4",
    "mixtral_8x7b/h100x8/inference+bf16",
    "gnmt8/k40x8/train+mb4",
    "unrolled-v1:gnmt-tf-4/k40x8/train",
)
V2_DESCRIPTION = (
    "Suite v1's 13 tasks, with v1's frozen figures, plus four workloads v1 lacks: Llama-2 70B training in "
    "bf16 with 4 pipelined micro-batches on four DGX H100 nodes (36 devices), Mixtral 8x7B inference in "
    "bf16 on one DGX H100 node, a pipelined GNMT-8 (4 micro-batches) on the 8 K40s of Mirhoseini et al. "
    "2018, and a training step of 103,202 forward ops (unrolled-v1:gnmt-tf-4: GNMT-8 at 400 tokens, "
    "unrolled at TensorFlow's granularity) on the same K40s: multi-node clusters, mixed precision, "
    "pipelined steps and a 100k-op graph. Its submissions write placements as text (one character per op)."
)
# Suite v3: every task of v1, with v1's frozen figures, then `V3_NEW_TASKS`: v2's workloads, each of
# which some heuristic of the suite places within memory (`V3_FITTED_BY`, checked when it is measured).
# v2's Llama-2 70B step fits no placement on the GPUs (every micro-batch's activations are kept); v3's
# recomputes activations, as Megatron-LM trains such a model. v2's 103,202-op training step needs about
# 430 GB on any placement (one gradient per reading edge of the encoder's outputs is kept until it is
# summed, docs/cost_model.md); v3 runs the same graph's inference, which the expert's LSTM layout fits.
V3 = "v3"
V3_NEW_TASKS: tuple[str, ...] = (
    "llama2_70b/dgx-h100x4/train+bf16+rc+mb4",
    "mixtral_8x7b/h100x8/inference+bf16",
    "gnmt8/k40x8/train+mb4",
    "unrolled-v1:gnmt-tf-4/k40x8/inference",
)
# The heuristic whose placement of each new task fits memory, checked by `measure_v3` (and a test).
V3_FITTED_BY: dict[str, str] = {
    "llama2_70b/dgx-h100x4/train+bf16+rc+mb4": "expert",
    "mixtral_8x7b/h100x8/inference+bf16": "expert",
    "gnmt8/k40x8/train+mb4": "expert",
    "unrolled-v1:gnmt-tf-4/k40x8/inference": "expert",
}
V3_DESCRIPTION = (
    "Suite v1's 13 tasks, with v1's frozen figures, plus four workloads v1 lacks, each of which a heuristic "
    "fits in memory: Llama-2 70B training in bf16 with 4 pipelined micro-batches and activation "
    "recomputation on four DGX H100 nodes (36 devices), Mixtral 8x7B inference in bf16 on one DGX H100 node, "
    "a pipelined GNMT-8 (4 micro-batches) on the 8 K40s of Mirhoseini et al. 2018, and the inference of a "
    "graph of 103,202 forward ops (unrolled-v1:gnmt-tf-4: GNMT-8 at 400 tokens, unrolled at TensorFlow's "
    "granularity) on the same K40s. Its submissions write placements as text (one character per op)."
)
# The suite the leaderboard's README ranks; the other cost-model suites have pages of their own
# (`render --suite v1`).
CURRENT_SUITE = V3
# The generalisation track, version 2: a suite of its own, of dataset graphs (`generalisation`), whose
# submissions are all of the generalisation track.
GEN_V2 = "gen-v2"
ACCEPTED_SUITES: tuple[str, ...] = (V1, V2, V3, GEN_V2)
# The accepted suites of the cost-model track: what the fill scripts run and `render --suite` renders.
COST_MODEL_SUITES: tuple[str, ...] = tuple(s for s in ACCEPTED_SUITES if s != GEN_V2)
# The frozen suites, one JSON file per version (`suite_to_dict`), shipped in the package.
SUITE_FOLDER = Path(__file__).resolve().parent / "suites"
# Relative tolerance on runtimes and peak memory: the simulator is deterministic bit for bit, so
# anything beyond rounding noise means the cost model changed.
FINGERPRINT_RTOL = 1e-9
# Hex digits kept of each sha256 digest: 64 bits tell any change apart and keep the frozen data short.
DIGEST_CHARS = 16
PROBES: tuple[str, ...] = ("round-robin", "scattered", "contiguous")
# Not part of the cost model, so left out of the digests: renaming or redescribing a cluster is no change.
_CLUSTER_UNCOSTED = ("name", "description")
# The task's graph and cluster have digests of their own; ``duration`` is compared through runtimes;
# private fields (caches, counters) are bookkeeping, not part of the problem.
_TASK_UNDIGESTED = ("graph", "cluster", "id", "duration")
# Task options added after suites were frozen, with the value every frozen suite's tasks have: digested
# only where a task departs from it, so that each frozen digest stays what it was.
_TASK_OPTION_DEFAULTS = {"precision": "fp32", "microbatches": 1, "recompute": False}


@dataclass(frozen=True)
class Probe:
    """One probe placement's frozen result: runtime (s) and peak memory per device (bytes)."""

    name: str
    runtime: float
    peak_memory: tuple[int, ...]


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

    def task(self) -> Task:
        """The compiled task (cached by `placement_gym.task.named`)."""
        return parse_task_id(self.task_id)


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of tasks."""

    version: str
    tasks: tuple[SuiteTask, ...]
    description: str = ""

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    @functools.cached_property
    def _by_id(self) -> dict[str, SuiteTask]:
        # A dict, not a scan: validation looks up every task of every file (gen-v2 has 300 tasks).
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
        return Suite(self.version, tuple(self.get(t) for t in task_ids), self.description)


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


def _digest(items: list[tuple[str, object]]) -> str:
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
    return _digest([(f.name, getattr(cluster, f.name)) for f in dataclasses.fields(cluster)
                    if f.name not in _CLUSTER_UNCOSTED and f.name not in unread
                    and not (f.name in HALF_PRECISION_FIGURES and getattr(cluster, f.name) is None)])


def structure_digest(task: Task) -> str:
    """Digest of the compiled task but its op durations: op names, objective, optimizer and every
    op and tensor array (kinds, producers, consumers, bytes, persistence, static memory)."""
    items: list[tuple[str, object]] = [("op_names", task.graph.op_names)]
    defaults = _TASK_OPTION_DEFAULTS
    items += [(f.name, getattr(task, f.name)) for f in dataclasses.fields(task)
              if f.name not in _TASK_UNDIGESTED and not f.name.startswith("_")
              and not (f.name in defaults and getattr(task, f.name) == defaults[f.name])]
    return _digest(items)


def measure_suite_task(task: Task) -> SuiteTask:
    """The fingerprint of ``task`` under the current code (measured once per task)."""
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
    """``suite`` as the plain data of its file (`SUITE_FOLDER`), to write a new suite version."""
    return {"version": suite.version, "description": suite.description,
            "tasks": [dataclasses.asdict(suite_task) for suite_task in suite.tasks]}


def suite_from_dict(data: dict) -> Suite:
    """The `Suite` of a suite file's data (`suite_to_dict`'s inverse)."""
    tasks = tuple(
        SuiteTask(**{**task, "single_device_runtimes": tuple(task["single_device_runtimes"]),
                     "probes": tuple(Probe(p["name"], p["runtime"], tuple(p["peak_memory"]))
                                     for p in task["probes"])})
        for task in data["tasks"]
    )
    return Suite(data["version"], tasks, data["description"])


def _version_order(path: Path) -> tuple[int, str]:
    """``v0``, ``v1``... in number order, then any other suite (``gen-v2``) by name."""
    number = path.stem[1:]
    return (int(number), "") if path.stem.startswith("v") and number.isdigit() else (1 << 30, path.stem)


def load_suites(folder: Path = SUITE_FOLDER) -> dict[str, Suite]:
    """Every suite file of ``folder`` (``<version>.json``), by version, in version order."""
    suites = {}
    for path in sorted(folder.glob("*.json"), key=_version_order):
        suite = suite_from_dict(json.loads(path.read_text(encoding="utf-8")))
        if suite.version != path.stem:
            raise ValueError(f"{path} holds suite {suite.version}, not {path.stem}")
        suites[suite.version] = suite
    return suites


SUITES: dict[str, Suite] = load_suites()
# Suites whose cost model this code no longer reproduces, and where their submissions are kept.
RETIRED_SUITES: dict[str, str] = {
    "v0": "it was made with the uncalibrated cost model (no host dispatch, transfer synchronisation, shared "
    "segments, per-architecture efficiency or training-mode BatchNorm; docs/calibration.md). Its submissions "
    "are kept in `retired/v0/`; `git checkout 217c35b` gives the code that validates them.",
}


def get_suite(version: str | Suite = CURRENT_SUITE) -> Suite:
    """A suite by version (or the suite itself), with a clear error naming the known versions."""
    if isinstance(version, Suite):
        return version
    if version not in SUITES:
        raise ValueError(f"unknown suite version {version!r}; known: {', '.join(SUITES)}")
    return SUITES[version]


def extend_suite(base: str | Suite, version: str, task_ids: tuple[str, ...] | list[str],
                 description: str) -> Suite:
    """Suite ``version``: every task of ``base`` with its frozen figures (the code must still reproduce
    them: `require_suite`), then the fingerprint of each of ``task_ids`` measured now."""
    base = get_suite(base)
    clash = sorted(set(task_ids) & set(base.task_ids))
    if clash:
        raise ValueError(f"tasks already in suite {base.version}: {', '.join(clash)}; give only new tasks")
    require_suite(base)
    added = tuple(measure_suite_task(parse_task_id(task_id)) for task_id in task_ids)
    return Suite(version, base.tasks + added, description)


def measure_v2() -> Suite:
    """Suite v2 as the current code measures it (what ``suites/v2.json`` freezes)."""
    return extend_suite(V1, V2, V2_NEW_TASKS, V2_DESCRIPTION)


def unfitted_v3_tasks() -> dict[str, str]:
    """Task id -> what is wrong, for each of `V3_NEW_TASKS` whose `V3_FITTED_BY` heuristic does not
    place it within memory (runs the heuristics: minutes for the 103,202-op task)."""
    from placement_gym.evaluation.agents import run_installed_agent

    problems = {}
    for task_id in V3_NEW_TASKS:
        task = parse_task_id(task_id)
        result = simulate(task, run_installed_agent(task, V3_FITTED_BY[task_id]).placement)
        if not result.feasible:
            problems[task_id] = (f"{V3_FITTED_BY[task_id]}'s placement needs more memory than a device "
                                 f"has ({result.peak_memory.max() / 1e9:.1f} GB at most)")
    return problems


def measure_v3() -> Suite:
    """Suite v3 as the current code measures it (what ``suites/v3.json`` freezes), after checking that a
    heuristic fits each new task (`unfitted_v3_tasks`; a ValueError names those it does not)."""
    problems = unfitted_v3_tasks()
    if problems:
        raise ValueError("suite v3 would hold tasks no heuristic fits: "
                         + "; ".join(f"{k}: {v}" for k, v in problems.items()))
    return extend_suite(V1, V3, V3_NEW_TASKS, V3_DESCRIPTION)


# --- checking a fingerprint -------------------------------------------------------------------------------

def _differs(value: float, frozen: float) -> bool:
    return not math.isclose(value, frozen, rel_tol=FINGERPRINT_RTOL, abs_tol=0.0)


def fingerprint_problems(suite_task: SuiteTask, task: Task | None = None) -> list[str]:
    """Why the current code no longer reproduces ``suite_task``'s fingerprint (empty list: it does).
    ``task``: the compiled task to measure (default: ``suite_task.task()``)."""
    task = suite_task.task() if task is None else task
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
        if _differs(value, frozen):
            problems.append(f"runtime with every op on {device} is {value!r} s, suite froze {frozen!r} s")
    for name in ("best_single_runtime", "lower_bound"):
        value, frozen = getattr(now, name), getattr(suite_task, name)
        if _differs(value, frozen):
            problems.append(f"{name.replace('_', ' ')} is {value!r} s, suite froze {frozen!r} s")
    measured = {probe.name: probe for probe in now.probes}
    for probe in suite_task.probes:
        current = measured.get(probe.name)
        if current is None:
            problems.append(f"probe placement {probe.name!r} is unknown to this code")
            continue
        if _differs(current.runtime, probe.runtime):
            problems.append(f"{probe.name} probe runtime is {current.runtime!r} s, "
                            f"suite froze {probe.runtime!r} s")
        for device, value, frozen in zip(devices, current.peak_memory, probe.peak_memory):
            if _differs(value, frozen):
                problems.append(f"{probe.name} probe peak memory on {device} is {value} bytes, "
                                f"suite froze {frozen} bytes")
    return problems


def check_suite(version: str | Suite = CURRENT_SUITE) -> dict[str, list[str]]:
    """Per task id, the fingerprint problems of a suite under the current code (only tasks with any).
    A non-empty answer for the current suite means: bump the suite version."""
    suite = get_suite(version)
    return {t.task_id: p for t in suite.tasks if (p := fingerprint_problems(t))}


def suite_mismatch(version: str | Suite = CURRENT_SUITE) -> str | None:
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
            "suite (add a new version in placement_gym/leaderboard/suite.py)")


def require_suite(version: str | Suite = CURRENT_SUITE) -> None:
    """Raise `SuiteMismatchError` when the current cost model does not reproduce suite ``version``."""
    message = suite_mismatch(version)
    if message is not None:
        raise SuiteMismatchError(message)
