"""Graph-partitioning baseline: a balanced k-way partition with few bytes crossing parts, one part per
GPU, as the Scotch / MinCut partitioners Mirhoseini et al. (ICML 2017) compare against.

The partition is the project's own (`placement_gym.task.groups.partition_grouping`, HMETIS-style
recursive bisection with Fiduccia-Mattheyses refinement, minimising the bytes each tensor sends to
other parts, balanced by work). METIS through pymetis is not used: it would be an optional extra
for an edge-cut objective that overcounts a tensor read by several ops of one part (see
`partition_grouping`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from baselines.registry import register
from baselines.scheduling import gpu_pool
from placement_gym.cost_model import simulate_batch
from placement_gym.evaluation.agents import AgentResult
from placement_gym.task.compiled import Task
from placement_gym.task.groups import make_grouping

# Try every part -> device assignment while there are at most this many (k! for k parts).
MAX_ASSIGNMENTS = 120


def _interchangeable(task: Task, devices: np.ndarray) -> bool:
    """Whether ``devices`` are identical (op times, memory) with identical links between them, so
    that every assignment of parts to them gives the same runtime."""
    c = task.cluster
    same_ops = np.all(task.duration[:, devices] == task.duration[:, devices[:1]])
    same_memory = np.all(c.memory_capacity[devices] == c.memory_capacity[devices[0]])
    off = ~np.eye(len(devices), dtype=bool)
    links = [c.link_bandwidth[np.ix_(devices, devices)][off], c.link_latency[np.ix_(devices, devices)][off]]
    return bool(same_ops and same_memory and all(np.all(x == x[0]) for x in links if len(x)))


def _assignments(task: Task, groups: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Placements (batch, n_forward) of the parts ``groups`` onto ``devices``: every permutation
    when there are few and the devices differ, else parts in order onto the devices in order."""
    k = len(devices)
    if _interchangeable(task, devices) or math.factorial(k) > MAX_ASSIGNMENTS:
        orders = [tuple(range(k))]
    else:
        orders = list(itertools.permutations(range(k)))
    return np.stack([devices[list(order)][groups] for order in orders]).astype(np.int64)


@register("partition", "balanced k-way min-communication partition, one part per GPU")
def partition(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
    """A k-way partition (k = number of GPUs) of the forward graph mapped to the GPUs, trying the
    part -> GPU assignments when the GPUs differ and there are at most `MAX_ASSIGNMENTS`. Memory:
    when no assignment fits, the partition is redone over every device (the CPU's host memory too)
    and the best candidate is returned, feasible first. ``seed`` seeds the partitioner's tie
    breaks; evaluations: one per candidate simulated."""
    pools = [gpu_pool(task)]
    if len(pools[0]) < task.n_devices:
        pools.append(np.concatenate([pools[0], np.setdiff1d(np.arange(task.n_devices), pools[0])]))
    best, evaluations = None, 0
    for devices in pools:
        k = min(len(devices), task.n_forward)
        grouping = make_grouping(task.graph, k, seed=seed)
        candidates = _assignments(task, grouping.group_of_op, devices[:k])
        runtimes, feasible, _ = simulate_batch(task, candidates)
        evaluations += len(candidates)
        i = int(np.lexsort((runtimes, ~feasible))[0])
        if best is None or (not feasible[i], runtimes[i]) < best[0]:
            best = ((not feasible[i], runtimes[i]), candidates[i], {"parts": k, "devices": len(devices)})
        if feasible[i]:
            break
    _, placement, info = best
    return AgentResult(placement, evaluations, info)
