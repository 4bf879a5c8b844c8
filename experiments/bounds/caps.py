"""How far can a bound go that ignores communication and co-location? A ceiling, per task.

Every argument that reasons only about op durations, precedence and the number of devices (critical
path, work / devices, energetic windows without transfer costs, width or chain decompositions,
splits of the DAG at an op, per-phase load bounds) is also a lower bound of the *relaxed* problem:
the same ops on the same devices with free, instant transfers, no transfer synchronisation, no host
dispatch, no memory limits, and each op free to run on any device (no co-location of an op with its
backward and update ops). A feasible schedule of that relaxation is therefore a ceiling that no such
argument can pass. This script builds one: list scheduling (earliest finish time, priority = the
longest fastest-duration path to the end, ties by index) on all devices with their own durations,
and checks it (every op after its producers, one op at a time per device).

    python experiments/bounds/caps.py [--tasks ID ...]
"""

from __future__ import annotations

import argparse
import heapq
import time

import numpy as np

from placement_gym.cost_model.proven_bounds import critical_tails, distinct_predecessors
from placement_gym.leaderboard import CURRENT_SUITE, get_suite

DEFAULT_TASKS = ("rnnlm/k80x4/train", "gnmt4/k80x4/train", "gnmt4/k40x8/train")


def successors(task) -> list[list[int]]:
    pointer, producer, _, _ = distinct_predecessors(task)
    out: list[list[int]] = [[] for _ in range(task.n_ops)]
    for c in range(task.n_ops):
        for j in range(pointer[c], pointer[c + 1]):
            out[producer[j]].append(c)
    return out


def relaxed_list_schedule(task, use: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray,
                                                                        np.ndarray]:
    """A schedule of the relaxed problem (module docstring) on the devices ``use`` (bool, default all):
    makespan, device, start, finish per op."""
    use = np.ones(task.n_devices, dtype=bool) if use is None else use
    duration = np.where(use[None, :], task.duration, np.inf)
    fastest = duration.min(axis=1)
    priority = critical_tails(task, fastest) + fastest
    pointer, producer, _, _ = distinct_predecessors(task)
    succ = successors(task)
    missing = np.diff(pointer).copy()
    ready_at = np.zeros(task.n_ops)
    free_at = np.zeros(task.n_devices)
    device = np.zeros(task.n_ops, dtype=np.int64)
    start = np.zeros(task.n_ops)
    finish = np.zeros(task.n_ops)
    ready = [(-priority[o], o) for o in range(task.n_ops) if missing[o] == 0]
    heapq.heapify(ready)
    while ready:
        _, o = heapq.heappop(ready)
        begin = np.maximum(free_at, ready_at[o])
        end = begin + duration[o]
        d = int(np.argmin(end))
        device[o], start[o], finish[o] = d, begin[d], end[d]
        free_at[d] = end[d]
        for c in succ[o]:
            ready_at[c] = max(ready_at[c], end[d])
            missing[c] -= 1
            if missing[c] == 0:
                heapq.heappush(ready, (-priority[c], c))
    # check: precedence and one op at a time per device
    for c in range(task.n_ops):
        for j in range(pointer[c], pointer[c + 1]):
            assert start[c] >= finish[producer[j]]
    assert np.isfinite(finish).all()
    for d in range(task.n_devices):
        on = np.flatnonzero(device == d)
        order = on[np.argsort(start[on])]
        assert np.all(start[order[1:]] >= finish[order[:-1]])
        assert np.allclose(finish[on] - start[on], task.duration[on, d])
    return float(finish.max()), device, start, finish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="*", default=list(DEFAULT_TASKS))
    args = parser.parse_args()
    suite = get_suite(CURRENT_SUITE)
    print("| task | relaxed list schedule (ceiling) | ops per device | seconds |")
    print("|---|---:|---|---:|")
    for task_id in args.tasks:
        task = suite.get(task_id).task()
        began = time.perf_counter()
        ceiling, device, _, _ = relaxed_list_schedule(task)
        fast_only = task.duration.sum(axis=0) <= 1.5 * task.duration.sum(axis=0).min()
        fast_ceiling, fast_device, _, _ = relaxed_list_schedule(task, fast_only)
        if fast_ceiling < ceiling:  # the slow devices left idle: also a schedule of the relaxation
            ceiling, device = fast_ceiling, fast_device
        used = ",".join(str(int(k)) for k in np.bincount(device, minlength=task.n_devices))
        print(f"| {task_id} | {ceiling:.4g} | {used} | "
              f"{time.perf_counter() - began:.1f} |", flush=True)


if __name__ == "__main__":
    main()
