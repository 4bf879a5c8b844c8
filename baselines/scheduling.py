"""List-scheduling baselines: HEFT and CPOP (Topcuoglu, Hariri and Wu, IEEE TPDS 2002,
"Performance-effective and low-complexity task scheduling for heterogeneous computing"), and the
helpers the Baechi schedulers (`baselines.baechi`) share with them.

Both schedule the whole task (forward, backward and update ops) with the paper's static model:
an op's time on a device is ``task.duration[op, device]``; an edge's communication time is
``latency + bytes / bandwidth`` of the directed link between the two devices, zero on one device;
links are contention-free (the paper's assumption; the simulator that scores the placement
queues transfers on a link, so its makespan can differ: both are reported). Only forward ops choose a
device; a backward or update op is pinned to its forward op's device (the placement is per forward
op, as the environments define it). Each placement is evaluated once with `simulate`.

Memory, as Baechi's m-* schedulers do it: a device is skipped for a forward op when the op's
memory estimate (`op_memory`) plus that of the ops already placed there would exceed the device's
capacity. When no device has room, the op goes where the most memory is left and the result is
scored (and reported) as what it is, usually infeasible.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from baselines.registry import register
from placement_gym.cost_model import simulate
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.cache import TaskCache
from placement_gym.task.compiled import Task

# Priorities closer than this (relative) count as equal when CPOP walks its critical path.
_CRITICAL_TOLERANCE = 1e-9
# Memory retries: when the simulator finds a device over its memory (the estimate misses received
# copies and gradients in flight), the schedule is rebuilt with that device's usable memory (in
# estimate terms) set to the estimate it held minus the overflow times this margin, at most
# `MEMORY_RETRIES` more times.
MEMORY_RETRIES = 6
_RETRY_MARGIN = 1.05


@dataclass(frozen=True, eq=False)
class TaskDag:
    """The task's ops as a DAG for schedulers. One entry per (tensor, consuming op) pair with a
    producing op; ``pred_*`` in CSR by consumer, ``succ_*`` in CSR by producer."""

    pred_pointer: np.ndarray
    pred_op: np.ndarray
    pred_bytes: np.ndarray
    succ_pointer: np.ndarray
    succ_op: np.ndarray
    succ_bytes: np.ndarray


# Every list scheduler and memory retry reads them; computed once per task.
_DAGS: TaskCache[TaskDag] = TaskCache("baselines_dag")
_LINK_RATES: TaskCache[tuple[np.ndarray, np.ndarray]] = TaskCache("baselines_links")


def task_dag(task: Task) -> TaskDag:
    """The op-to-op edges of ``task`` (computed once per task)."""
    return _DAGS.get(task, _build_dag)


def _build_dag(task: Task) -> TaskDag:
    counts = np.diff(task.tensor_consumer_pointer)
    tensor = np.repeat(np.arange(task.n_tensors), counts)
    consumer = task.tensor_consumers.astype(np.int64)
    producer = task.tensor_producer[tensor].astype(np.int64)
    keep = producer >= 0
    producer, consumer, volume = producer[keep], consumer[keep], task.tensor_bytes[tensor[keep]]

    def csr(keys, values, weights):
        order = np.lexsort((values, keys))
        pointer = np.zeros(task.n_ops + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=task.n_ops), out=pointer[1:])
        return pointer, values[order], weights[order]

    return TaskDag(*csr(consumer, producer, volume), *csr(producer, consumer, volume))


def op_memory(task: Task) -> np.ndarray:
    """Memory estimate per forward op (bytes), Baechi-style: its static bytes (parameters, and for
    training gradients and optimizer state) plus, for training, its output activations, which are
    saved until the backward pass (received copies and gradients in flight are not counted). For
    inference activations die at their last reader, so only static bytes count; the memory retries
    of `memory_aware` cover what the estimate misses."""
    if task.objective == "inference":
        return task.static_bytes.copy()
    g = task.graph
    produced = (g.tensor_producer >= 0) & ~g.tensor_is_parameter
    outputs = np.bincount(g.tensor_producer[produced], weights=g.tensor_bytes[produced], minlength=g.n_ops)
    return task.static_bytes + outputs


def gpu_pool(task: Task) -> np.ndarray:
    """Indices of the cluster's GPUs, or of all devices when it has none."""
    gpus = [i for i, kind in enumerate(task.cluster.device_kinds) if kind == "gpu"]
    return np.asarray(gpus or range(task.n_devices), dtype=np.int64)


def link_rates(task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(latency, 1 / bandwidth) per ordered device pair, zero on the diagonal (no transfer)."""
    return _LINK_RATES.get(task, _compute_link_rates)


def _compute_link_rates(task: Task) -> tuple[np.ndarray, np.ndarray]:
    c = task.cluster
    off = ~np.eye(task.n_devices, dtype=bool)
    latency = np.where(off, c.link_latency, 0.0)
    inverse = np.zeros((task.n_devices, task.n_devices))
    inverse[off] = 1.0 / c.link_bandwidth[off]
    return latency, inverse


def mean_comm(task: Task, pool: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """HEFT's average communication cost of edges of ``nbytes``: mean latency + bytes / mean
    bandwidth over ordered pairs of distinct devices of ``pool`` (0 for a one-device pool)."""
    if len(pool) < 2:
        return np.zeros_like(nbytes, dtype=np.float64)
    c = task.cluster
    off = ~np.eye(len(pool), dtype=bool)
    latency = c.link_latency[np.ix_(pool, pool)][off].mean()
    bandwidth = c.link_bandwidth[np.ix_(pool, pool)][off].mean()
    return latency + nbytes / bandwidth


def upward_rank(task: Task, pool: np.ndarray) -> np.ndarray:
    """rank_u(op) = mean time(op) + max over successors (mean comm + rank_u(successor))."""
    dag = task_dag(task)
    cost = task.duration[:, pool].mean(axis=1)
    comm = mean_comm(task, pool, dag.succ_bytes)
    rank = np.zeros(task.n_ops)
    for op in range(task.n_ops - 1, -1, -1):  # op indices are topological
        lo, hi = dag.succ_pointer[op], dag.succ_pointer[op + 1]
        tail = (comm[lo:hi] + rank[dag.succ_op[lo:hi]]).max() if hi > lo else 0.0
        rank[op] = cost[op] + tail
    return rank


def downward_rank(task: Task, pool: np.ndarray) -> np.ndarray:
    """rank_d(op) = max over predecessors (rank_d(pred) + mean time(pred) + mean comm); 0 at entries."""
    dag = task_dag(task)
    cost = task.duration[:, pool].mean(axis=1)
    comm = mean_comm(task, pool, dag.pred_bytes)
    rank = np.zeros(task.n_ops)
    for op in range(task.n_ops):
        lo, hi = dag.pred_pointer[op], dag.pred_pointer[op + 1]
        if hi > lo:
            preds = dag.pred_op[lo:hi]
            rank[op] = (rank[preds] + cost[preds] + comm[lo:hi]).max()
    return rank


class ListSchedule:
    """The state of a list schedule being built: per op its device and finish time, per device its
    memory in use and its busy time (gaps for insertion, or the time it is next free)."""

    def __init__(self, task: Task, capacity: np.ndarray | None = None) -> None:
        self.task = task
        self.dag = task_dag(task)
        self.memory = op_memory(task)
        self.capacity = np.array(task.cluster.memory_capacity if capacity is None else capacity, float)
        self.latency, self.inverse_bandwidth = link_rates(task)
        self.used = np.zeros(task.n_devices)
        self.device = np.full(task.n_ops, -1, dtype=np.int64)
        self.start = np.zeros(task.n_ops)
        self.finish = np.zeros(task.n_ops)
        self.free_at = np.zeros(task.n_devices)  # end of the last op (non-insertion schedulers)
        # Idle gaps per device as sorted (start, end) lists; the last gap ends at infinity.
        self.gap_start: list[list[float]] = [[0.0] for _ in range(task.n_devices)]
        self.gap_end: list[list[float]] = [[np.inf] for _ in range(task.n_devices)]

    def pinned_device(self, op: int) -> int:
        """The device a backward or update op must use (its forward op's), or -1 for a forward op."""
        forward = int(self.task.op_forward[op])
        return -1 if forward == op else int(self.device[forward])

    def data_ready(self, op: int) -> np.ndarray:
        """When all of ``op``'s inputs can be on each device (contention-free links)."""
        lo, hi = self.dag.pred_pointer[op], self.dag.pred_pointer[op + 1]
        if hi == lo:
            return np.zeros(self.task.n_devices)
        preds = self.dag.pred_op[lo:hi]
        src = self.device[preds]
        arrival = (self.finish[preds, None] + self.latency[src]
                   + self.dag.pred_bytes[lo:hi, None] * self.inverse_bandwidth[src])
        return arrival.max(axis=0)

    def has_room(self, op: int, devices: np.ndarray) -> np.ndarray:
        """Which of ``devices`` can take forward op ``op`` within memory."""
        return self.used[devices] + self.memory[op] <= self.capacity[devices]

    def fallback_device(self, devices: np.ndarray) -> int:
        """Where the most memory is left, for an op no device has room for."""
        return int(devices[np.argmax(self.capacity[devices] - self.used[devices])])

    def insertion_slot(self, device: int, ready: float, duration: float) -> tuple[float, int]:
        """Earliest start >= ``ready`` in an idle gap of ``device`` long enough for ``duration``
        (HEFT's insertion-based policy), and the gap's index."""
        starts, ends = self.gap_start[device], self.gap_end[device]
        k = bisect.bisect_right(ends, ready)
        while True:
            begin = max(starts[k], ready)
            if begin + duration <= ends[k]:
                return begin, k
            k += 1

    def place(self, op: int, device: int, start: float, gap: int | None = None) -> None:
        """Put ``op`` on ``device`` at ``start``; with ``gap``, carve its time out of that idle gap."""
        finish = start + float(self.task.duration[op, device])
        self.device[op], self.start[op], self.finish[op] = device, start, finish
        if self.task.op_forward[op] == op:
            self.used[device] += self.memory[op]
        self.free_at[device] = max(self.free_at[device], finish)
        if gap is not None:
            starts, ends = self.gap_start[device], self.gap_end[device]
            begin, end = starts[gap], ends[gap]
            pieces = [(s, e) for s, e in ((begin, start), (finish, end)) if e > s]
            starts[gap:gap + 1] = [s for s, _ in pieces]
            ends[gap:gap + 1] = [e for _, e in pieces]

    def insert_earliest_finish(self, op: int, devices: np.ndarray) -> None:
        """Place ``op`` on the device of ``devices`` where it finishes first, inserted into an idle
        gap (devices without memory room are skipped; see the module docstring)."""
        ready = self.data_ready(op)
        pinned = self.pinned_device(op)
        if pinned >= 0:
            candidates = [pinned]
        else:
            room = devices[self.has_room(op, devices)]
            everywhere = np.arange(self.task.n_devices)
            candidates = room.tolist() if len(room) else [self.fallback_device(everywhere)]
        best = None
        for d in candidates:
            start, gap = self.insertion_slot(d, ready[d], float(self.task.duration[op, d]))
            finish = start + float(self.task.duration[op, d])
            if best is None or finish < best[0]:
                best = (finish, d, start, gap)
        _, d, start, gap = best
        self.place(op, d, start, gap)

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if len(self.finish) else 0.0

    def placement(self) -> np.ndarray:
        return self.device[: self.task.n_forward].copy()


def priority_order(task: Task, priority: np.ndarray):
    """Yield ops in list-scheduling order: among ready ops (all predecessors scheduled), the one with
    the highest ``priority`` (ties: lower index)."""
    dag = task_dag(task)
    waiting = np.diff(dag.pred_pointer).copy()
    heap = [(-priority[op], op) for op in np.flatnonzero(waiting == 0).tolist()]
    heapq.heapify(heap)
    while heap:
        _, op = heapq.heappop(heap)
        yield op
        for s in dag.succ_op[dag.succ_pointer[op] : dag.succ_pointer[op + 1]].tolist():
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(heap, (-priority[s], s))


def memory_aware(task: Task, build: Callable[[np.ndarray], tuple[np.ndarray, dict]],
                 attempts: int = MEMORY_RETRIES + 1) -> AgentResult:
    """Run ``build(capacity) -> (placement, info)`` with the devices' memory capacities, simulate the
    placement, and while it is out of memory rebuild with the overflowing devices' usable memory
    shrunk (see `MEMORY_RETRIES`), at most ``attempts`` times in all. Returns the best attempt
    (feasible first, then by runtime); every attempt's `simulate` counts as an evaluation, and
    ``info["memory_retries"]`` says how many rebuilds there were."""
    real = task.cluster.memory_capacity.astype(np.float64)
    capacity = real.copy()
    best, evaluations = None, 0
    for _ in range(max(1, min(attempts, MEMORY_RETRIES + 1))):
        placement, info = build(capacity)
        simulated = simulate(task, placement)
        evaluations += 1
        key = (not simulated.feasible, simulated.runtime)
        if best is None or key < best[0]:
            best = (key, placement, {**info, "simulated_runtime": simulated.runtime})
        if simulated.feasible:
            break
        over = simulated.peak_memory > real
        estimate = np.bincount(placement, weights=op_memory(task), minlength=task.n_devices)
        overflow = (simulated.peak_memory - real) * _RETRY_MARGIN
        capacity = capacity.copy()
        capacity[over] = np.maximum(np.minimum(capacity, estimate)[over] - overflow[over], 0.0)
    _, placement, info = best
    return AgentResult(placement, evaluations, {**info, "memory_retries": evaluations - 1})


def heft_schedule(
    task: Task, devices: np.ndarray | None = None, capacity: np.ndarray | None = None
) -> ListSchedule:
    """HEFT's schedule: ops by decreasing upward rank (among ready ops), each on the device that
    gives it the earliest finish time with insertion into idle gaps. ``devices``: the devices it
    may use (default all); ``capacity``: usable memory per device (default the cluster's)."""
    devices = np.arange(task.n_devices) if devices is None else np.asarray(devices)
    schedule = ListSchedule(task, capacity)
    for op in priority_order(task, upward_rank(task, devices)):
        schedule.insert_earliest_finish(op, devices)
    return schedule


@register("heft", "HEFT list scheduling with insertion (Topcuoglu et al. 2002), memory-aware")
def heft(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """HEFT (Topcuoglu et al. 2002) on the whole training (or inference) graph over all devices:
    upward ranks from mean computation and mean communication costs, earliest finish time with the
    insertion-based policy; backward and update ops pinned to their forward op's device. ``info``
    holds HEFT's own makespan (contention-free links) beside the simulated runtime. Deterministic:
    ``seed`` and ``budget`` are unused; one evaluation (`simulate`) per memory attempt."""

    def build(capacity):
        schedule = heft_schedule(task, capacity=capacity)
        return schedule.placement(), {"own_makespan": schedule.makespan}

    return memory_aware(task, build)


def critical_path(task: Task, priority: np.ndarray) -> np.ndarray:
    """CPOP's critical path: from the entry op of highest priority, follow successors whose
    priority equals it (within `_CRITICAL_TOLERANCE`), as the paper's SET_CP."""
    dag = task_dag(task)
    entries = np.flatnonzero(np.diff(dag.pred_pointer) == 0)
    op = int(entries[np.argmax(priority[entries])])
    length = priority[op]
    path = [op]
    while True:
        succ = dag.succ_op[dag.succ_pointer[op] : dag.succ_pointer[op + 1]]
        on_path = succ[np.abs(priority[succ] - length) <= _CRITICAL_TOLERANCE * max(length, 1e-30)]
        if len(on_path) == 0:
            return np.asarray(path, dtype=np.int64)
        op = int(on_path.min())
        path.append(op)


def cpop_schedule(
    task: Task, devices: np.ndarray | None = None, capacity: np.ndarray | None = None
) -> tuple[ListSchedule, int, np.ndarray]:
    """CPOP's schedule, the critical processor and the critical path (arguments as `heft_schedule`)."""
    devices = np.arange(task.n_devices) if devices is None else np.asarray(devices)
    priority = upward_rank(task, devices) + downward_rank(task, devices)
    path = critical_path(task, priority)
    # The critical processor minimises the critical path's computation, among devices whose memory
    # holds the path's forward ops (all of them when none does).
    forward = np.unique(task.op_forward[path])
    schedule = ListSchedule(task, capacity)
    holds = op_memory(task)[forward].sum() <= schedule.capacity[devices]
    choices = devices[holds] if holds.any() else devices
    critical = int(choices[np.argmin(task.duration[np.ix_(path, choices)].sum(axis=0))])
    on_path = np.zeros(task.n_ops, dtype=bool)
    on_path[path] = True
    for op in priority_order(task, priority):
        if on_path[op] and schedule.pinned_device(op) < 0 and schedule.has_room(op, np.array([critical]))[0]:
            ready = schedule.data_ready(op)[critical]
            start, gap = schedule.insertion_slot(critical, ready, float(task.duration[op, critical]))
            schedule.place(op, critical, start, gap)
        else:
            schedule.insert_earliest_finish(op, devices)
    return schedule, critical, path


@register("cpop", "CPOP: critical path on one processor, others by EFT (Topcuoglu et al. 2002)")
def cpop(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """CPOP (Topcuoglu et al. 2002): priority = upward + downward rank; the critical path's ops go
    to the critical processor (the device minimising the path's computation time), the others to
    their earliest-finish device with insertion. Backward/update ops follow their forward op, so a
    critical backward op lands wherever its forward op is. Deterministic; one evaluation per memory
    attempt (see `memory_aware`)."""

    def build(capacity):
        schedule, critical, path = cpop_schedule(task, capacity=capacity)
        return schedule.placement(), {"own_makespan": schedule.makespan,
                                      "critical_device": task.cluster.device_names[critical],
                                      "critical_path_ops": int(len(path))}

    return memory_aware(task, build)
