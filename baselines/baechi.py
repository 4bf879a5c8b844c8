"""Baechi's memory-constrained placers (Jeon et al., SoCC 2020, "Baechi: Fast Device Placement of
Machine Learning Graphs"): m-TOPO, m-ETF and m-SCT.

All three place forward ops; backward and update ops follow their forward op (Baechi too places
the forward graph and co-places each backward op with its forward op). Memory: an op's estimate is
`op_memory` (parameters, gradients and optimizer state plus saved activations), a device takes an op
only while the sum of its ops' estimates fits its capacity, and the schedule is rebuilt with
tightened limits when the simulator still finds a device over its memory (`memory_aware`).
Communication: ``latency + bytes / bandwidth`` on the directed link, contention-free in the
schedulers' own model (the simulator that scores the placement queues transfers per link).
"""

from __future__ import annotations

import numpy as np

from baselines.registry import register
from baselines.scheduling import ListSchedule, gpu_pool, memory_aware, op_memory, task_dag
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.compiled import Task


def _forward_work(task: Task, devices: np.ndarray) -> np.ndarray:
    """Mean time over ``devices`` of each forward op with its backward and update ops."""
    per_op = task.duration[:, devices].mean(axis=1)
    return np.bincount(task.op_forward, weights=per_op, minlength=task.n_forward)


def m_topo_placement(task: Task, capacity: np.ndarray | None = None) -> np.ndarray:
    """m-TOPO: forward ops in topological order fill the GPUs one after the other, each up to a
    balanced share of the work (total work / number of GPUs) and within its memory; the last GPU
    takes the rest while it has room. An op no GPU has room for goes to any device with room
    (the CPU's host memory), else where the most memory is left."""
    pool = gpu_pool(task)
    capacity = np.array(task.cluster.memory_capacity if capacity is None else capacity, float)
    memory = op_memory(task)
    work = _forward_work(task, pool)
    share = work.sum() / len(pool)
    used = np.zeros(task.n_devices)
    load = 0.0
    current = 0
    placement = np.empty(task.n_forward, dtype=np.int64)
    everything = np.arange(task.n_devices)
    for op in range(task.n_forward):
        # Move to the next GPU once this one has its share (or is full), while another GPU is left.
        while current < len(pool) - 1 and load > 0 and (
            load + work[op] > share or used[pool[current]] + memory[op] > capacity[pool[current]]
        ):
            current, load = current + 1, 0.0
        device = int(pool[current])
        if used[device] + memory[op] > capacity[device]:
            room = everything[used + memory[op] <= capacity]
            device = int(room[0]) if len(room) else int(np.argmax(capacity - used))
        else:
            load += work[op]
        placement[op] = device
        used[device] += memory[op]
    return placement


@register("m-topo", "Baechi m-TOPO: topological fill of the GPUs, balanced and memory-constrained")
def m_topo(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Baechi m-TOPO (Jeon et al. 2020), see `m_topo_placement`. Deterministic; one evaluation
    per memory attempt."""
    return memory_aware(task, lambda capacity: (m_topo_placement(task, capacity), {}))


def etf_schedule(
    task: Task, capacity: np.ndarray | None = None, favourite_parent: np.ndarray | None = None
) -> ListSchedule:
    """Earliest time first (Hwang et al. 1989, as Baechi's m-ETF): repeatedly start the (ready op,
    device) pair that can start earliest (ties: lower op index, then lower device index), appending
    to the device's timeline (no insertion). A forward op considers the GPUs with memory room (Baechi
    places on GPUs; ETF, which looks at start times only, would otherwise start the first op on
    the CPU and keep the graph there), or, when no GPU has room, any device with room (host
    memory), else where the most memory is left; a backward or update op its forward op's device.
    With ``favourite_parent`` (m-SCT), an op whose favourite parent is placed considers only that
    parent's device while it has room."""
    schedule = ListSchedule(task, capacity)
    dag = task_dag(task)
    n, n_dev = task.n_ops, task.n_devices
    waiting = np.diff(dag.pred_pointer).copy()
    is_ready = waiting == 0
    ready_at = np.zeros((n, n_dev))
    for op in np.flatnonzero(is_ready):
        ready_at[op] = schedule.data_ready(op)
    is_forward = task.op_forward == np.arange(n)
    forward_of = task.op_forward.astype(np.int64)
    memory = np.zeros(n)
    memory[:task.n_forward] = schedule.memory
    devices = np.arange(n_dev)
    in_pool = np.isin(devices, gpu_pool(task))
    for _ in range(n):
        ready = np.flatnonzero(is_ready)
        start = np.maximum(ready_at[ready], schedule.free_at[None, :])
        room = schedule.used[None, :] + memory[ready, None] <= schedule.capacity[None, :]
        allowed = room & in_pool[None, :]
        forward = is_forward[ready]
        if favourite_parent is not None:
            parent = favourite_parent[forward_of[ready]]
            with_parent = forward & (parent >= 0)
            parent_device = np.where(with_parent, schedule.device[np.maximum(parent, 0)], -1)
            keep = with_parent & (parent_device >= 0)
            keep &= allowed[np.arange(len(ready)), np.maximum(parent_device, 0)]
            allowed[keep] = devices[None, :] == parent_device[keep, None]
        # A forward op no GPU has room for may use any device with room, else the fallback device.
        # Vectorised: when the GPUs are full, most of a large graph's ready ops are stuck at once.
        stuck = np.flatnonzero(forward & ~allowed.any(axis=1))
        if len(stuck):
            has_room = room[stuck].any(axis=1)
            allowed[stuck[has_room]] = room[stuck[has_room]]
            if not has_room.all():
                allowed[stuck[~has_room], schedule.fallback_device(devices)] = True
        pinned = ~forward
        allowed[pinned] = devices[None, :] == schedule.device[forward_of[ready[pinned]], None]
        start[~allowed] = np.inf
        row, device = np.unravel_index(int(np.argmin(start)), start.shape)
        op = int(ready[row])
        schedule.place(op, int(device), float(start[row, device]))
        is_ready[op] = False
        for s in dag.succ_op[dag.succ_pointer[op] : dag.succ_pointer[op + 1]].tolist():
            waiting[s] -= 1
            if waiting[s] == 0:
                is_ready[s] = True
                ready_at[s] = schedule.data_ready(s)
    return schedule


@register("m-etf", "Baechi m-ETF: memory-constrained earliest time first")
def m_etf(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Baechi m-ETF (Jeon et al. 2020), see `etf_schedule`. ``info`` holds the
    schedule's own makespan. Deterministic; one evaluation per memory attempt."""

    def build(capacity):
        schedule = etf_schedule(task, capacity)
        return schedule.placement(), {"own_makespan": schedule.makespan}

    return memory_aware(task, build)


def favourite_parents(task: Task) -> np.ndarray:
    """For each forward op, the forward op whose favourite child it is (-1: none).

    SCT (Hanen and Munier 1995, as Baechi's m-SCT) solves an LP relaxation in which each op keeps
    the communication delay off at most one edge to a child and each child off at most one edge
    from a parent, and makes those edges favourite. Simplification (no LP solver in the core):
    the favourite edges are chosen greedily by communication time, largest first, under the same
    two constraints, so the heaviest transfers are the ones kept on one device."""
    g = task.graph
    src = g.edge_src.astype(np.int64)
    keep = (src >= 0) & (src != g.edge_dst)
    src, dst = src[keep], g.edge_dst[keep].astype(np.int64)
    volume = g.tensor_bytes[g.edge_tensor[keep]]
    # Sum the bytes of parallel edges (several tensors between one pair of ops).
    pairs, inverse = np.unique(src * g.n_ops + dst, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=volume, minlength=len(pairs))
    order = np.lexsort((pairs, -total))
    has_child = np.zeros(g.n_ops, dtype=bool)
    parent = np.full(g.n_ops, -1, dtype=np.int64)
    for k in order.tolist():
        p, c = divmod(int(pairs[k]), g.n_ops)
        if not has_child[p] and parent[c] < 0:
            has_child[p] = True
            parent[c] = p
    return parent


@register("m-sct", "Baechi m-SCT: ETF that keeps each op's favourite child on its device")
def m_sct(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """Baechi m-SCT (Jeon et al. 2020): favourite children (`favourite_parents`; the LP relaxation
    is replaced by a greedy choice, see there), then m-ETF in which a favourite child goes to its
    favourite parent's device while that device has memory room. Deterministic; one evaluation per
    memory attempt."""
    parents = favourite_parents(task)

    def build(capacity):
        schedule = etf_schedule(task, capacity, parents)
        return schedule.placement(), {"own_makespan": schedule.makespan}

    return memory_aware(task, build)


__all__ = ["etf_schedule", "favourite_parents", "m_etf", "m_sct", "m_topo", "m_topo_placement"]
