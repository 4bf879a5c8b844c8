"""What the envs' `render` draws, apart from the MDPs (as Jumanji's viewers are): a placement as a text
table per device (``render_mode="ansi"``) or as the timeline of its schedule (``"rgb_array"``).

Both take what they show whole: the task, the placement and its result, and the reference runtimes the
table compares it with (`References`); neither evaluates anything (the env scores the placement, and for
a timeline its schedule, first)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement_gym.cost_model import SimulationResult
from placement_gym.task.compiled import Task
from placement_gym.task.groups import Grouping


@dataclass(frozen=True)
class References:
    """What a text table compares a placement with: the best single device (its index and runtime) and
    the simple lower bound (seconds)."""

    best_single_device: int
    best_single_runtime: float
    lower_bound: float


def timeline_image(task: Task, result: SimulationResult, label: str) -> np.ndarray:
    """The Gantt chart of ``result``'s schedule (a result simulated with ``schedule=True``), titled with
    the task id and ``label``, as an RGB array (needs matplotlib)."""
    from placement_gym.cost_model.timeline import draw_timeline

    return draw_timeline(task, result.schedule, title=f"{task.id} ({label})")


def text_table(task: Task, grouping: Grouping | None, node_devices: np.ndarray, result: SimulationResult,
               label: str, references: References, placed: int | None = None) -> str:
    """The placement ``node_devices`` (one device per node: per forward op when ``grouping`` is None,
    else per group of ``grouping``) and its ``result`` as text: the runtime, feasibility and speedup
    over the best single device, then per device its ops (and groups), busy time, peak memory and
    capacity (``OOM`` where the peak exceeds it). ``placed``: how many nodes (in order) the agent has
    placed, the others holding the best single device."""
    cluster = task.cluster
    placement = node_devices if grouping is None else node_devices[grouping.group_of_op]
    n_nodes = len(node_devices)
    devices = task.expand(placement)
    busy = np.bincount(
        devices, weights=task.duration[np.arange(task.n_ops), devices], minlength=task.n_devices
    )
    ops = np.bincount(placement, minlength=task.n_devices)
    status = "feasible" if result.feasible else "OUT OF MEMORY"
    node_word = "ops" if grouping is None else f"groups ({grouping.name})"
    best = cluster.device_names[references.best_single_device]
    lines = [f"{task.id} ({label})"]
    if placed is not None and placed < n_nodes:
        lines.append(f"{placed} of {n_nodes} {node_word} placed; the others counted on {best}")
    lines += [
        f"runtime {result.runtime * 1e3:.3f} ms, {status}, speedup "
        f"{references.best_single_runtime / result.runtime:.3f}x over the best single device "
        f"({best}, {references.best_single_runtime * 1e3:.3f} ms); "
        f"simple lower bound {references.lower_bound * 1e3:.3f} ms",
    ]
    header = f"{'device':<12}{'kind':<6}"
    if grouping is not None:
        header += f"{'groups':>8}"
    lines.append(header + f"{'ops':>7}{'busy ms':>12}{'peak GB':>10}{'capacity GB':>13}")
    groups = np.bincount(node_devices, minlength=task.n_devices)
    for d in range(task.n_devices):
        over = " OOM" if result.peak_memory[d] > cluster.memory_capacity[d] else ""
        row = f"{cluster.device_names[d]:<12}{cluster.device_kinds[d]:<6}"
        if grouping is not None:
            row += f"{groups[d]:>8}"
        lines.append(
            row + f"{ops[d]:>7}{busy[d] * 1e3:>12.3f}"
            f"{result.peak_memory[d] / 1e9:>10.3f}{cluster.memory_capacity[d] / 1e9:>13.3f}{over}"
        )
    return "\n".join(lines) + "\n"
