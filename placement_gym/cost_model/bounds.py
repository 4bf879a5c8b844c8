"""Reference points reported beside every runtime: the simple lower bound and the best single device."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from placement_gym.cost_model.fast import simulate_batch
from placement_gym.task.cache import TaskCache


@numba.njit(cache=True)
def longest_path(fastest, output_pointer, outputs, consumer_pointer, consumers):
    """The longest path (seconds) through ops in topological order, op ``i`` taking ``fastest[i]`` and
    data moving for free along the task's tensor edges (CSR arrays: outputs per op, consumers per
    tensor); shared by the simple and the proven lower bounds."""
    earliest = np.zeros(fastest.shape[0])
    longest = 0.0
    for op in range(fastest.shape[0]):  # ops are in topological order
        done = earliest[op] + fastest[op]
        if done > longest:
            longest = done
        for k in range(output_pointer[op], output_pointer[op + 1]):
            t = outputs[k]
            for j in range(consumer_pointer[t], consumer_pointer[t + 1]):
                c = consumers[j]
                if done > earliest[c]:
                    earliest[c] = done
    return longest


def lower_bound(task) -> float:
    """The *simple lower bound* (seconds), a runtime no placement can beat: the larger of
    (a) the critical path with every op on its fastest device and free communication, and
    (b) the total work, each op on its fastest device, spread perfectly over all devices.

    It is what ``evaluate``, ``train``, the demo, the learning curves and the envs'
    ``info["lower_bound"]`` show, always named "simple lower bound": it costs microseconds, so
    every env computes it at construction. The leaderboard shows the tighter *proven lower bound*
    (`placement_gym.cost_model.proven_bound`, up to 12 s a task on the bundled GNMT tasks; its
    load LP needs OR-Tools), which is at least this one. The suite's frozen fingerprints keep
    this one, so its value must not change."""
    return _LOWER_BOUNDS.get(task, _compute_lower_bound)


def _compute_lower_bound(task) -> float:
    fastest = task.duration.min(axis=1)
    path = longest_path(
        fastest,
        task.op_output_pointer,
        task.op_outputs,
        task.tensor_consumer_pointer,
        task.tensor_consumers,
    )
    return float(max(path, fastest.sum() / task.n_devices))


@dataclass(frozen=True)
class SingleDevice:
    """Every device's runtime with the whole task on it, and the best one.

    ``best`` is the fastest device whose memory holds the task, or the fastest device overall
    (with ``feasible=False``) when none does."""

    runtimes: np.ndarray
    feasible: np.ndarray
    best: int

    @property
    def runtime(self) -> float:
        return float(self.runtimes[self.best])

    @property
    def best_feasible(self) -> bool:
        return bool(self.feasible[self.best])


def single_device(task) -> SingleDevice:
    """Runtimes of the single-device placements of ``task`` (computed once per task: they count as
    evaluations of the task the first time only)."""
    return _SINGLE_DEVICE.get(task, _compute_single_device)


def _compute_single_device(task) -> SingleDevice:
    placements = np.repeat(np.arange(task.n_devices)[:, None], task.n_forward, axis=1)
    runtimes, feasible, _ = simulate_batch(task, placements)
    candidates = np.flatnonzero(feasible) if feasible.any() else np.arange(task.n_devices)
    best = int(candidates[np.argmin(runtimes[candidates])])
    return SingleDevice(runtimes, feasible, best)


# Every env and the leaderboard read them; the harness computes them on its scoring copy so that the
# agent's copy (`Task.independent_copy`) gets them without evaluating.
_LOWER_BOUNDS: TaskCache[float] = TaskCache("lower_bound")
_SINGLE_DEVICE: TaskCache[SingleDevice] = TaskCache("single_device")
