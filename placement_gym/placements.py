"""Simple placements every comparison starts from, and placement files (JSON: op name -> device name)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from placement_gym.cost_model import single_device
from placement_gym.task import Task

SIMPLE_AGENTS = ("single:<device>", "best-single", "round-robin", "random")


def single_placement(task: Task, device: int | str) -> np.ndarray:
    """Every op on one device (an index or a name)."""
    index = task.cluster.device_index(device) if isinstance(device, str) else int(device)
    if not 0 <= index < task.n_devices:
        raise ValueError(f"device index {index} out of range 0..{task.n_devices - 1}")
    return np.full(task.n_forward, index, dtype=np.int64)


def best_single_placement(task: Task) -> np.ndarray:
    """Every op on the fastest device that holds the task in memory."""
    return single_placement(task, single_device(task).best)


def round_robin_placement(task: Task, devices: str = "gpu") -> np.ndarray:
    """Ops dealt to devices in topological order, one after the other (over the GPUs when the
    cluster has any, as the papers' round-robin baselines do, else over all devices)."""
    pool = [i for i, kind in enumerate(task.cluster.device_kinds) if kind == devices] or list(
        range(task.n_devices)
    )
    return np.asarray(pool, dtype=np.int64)[np.arange(task.n_forward) % len(pool)]


def random_placement(task: Task, seed: int = 0) -> np.ndarray:
    """Each op on a device drawn uniformly (seeded)."""
    return np.random.default_rng(seed).integers(0, task.n_devices, size=task.n_forward)


def simple_placement(task: Task, agent: str, seed: int = 0) -> np.ndarray:
    """The placement of one of `SIMPLE_AGENTS` by name."""
    if agent.startswith("single:"):
        return single_placement(task, agent.split(":", 1)[1])
    table = {
        "best-single": lambda: best_single_placement(task),
        "round-robin": lambda: round_robin_placement(task),
        "random": lambda: random_placement(task, seed),
    }
    if agent not in table:
        raise ValueError(f"unknown agent {agent!r}; allowed: {', '.join(SIMPLE_AGENTS)}")
    return table[agent]()


def placement_to_dict(task: Task, placement) -> dict[str, str]:
    """A placement as {op name: device name}."""
    array = task.check_placement(placement)
    names = task.cluster.device_names
    return {op: names[d] for op, d in zip(task.graph.op_names, array.tolist())}


def placement_from_dict(task: Task, mapping: dict[str, str]) -> np.ndarray:
    """A placement from {op name: device name}; every op must be named, with a device of the cluster."""
    if not isinstance(mapping, dict):
        raise ValueError("a placement must be a JSON object mapping op names to device names")
    ops = task.graph.op_names
    unknown = sorted(set(mapping) - set(ops))
    if unknown:
        raise ValueError(
            f"placement names ops not in graph {task.graph.name!r}: {', '.join(unknown[:5])}"
            + (" ..." if len(unknown) > 5 else "")
        )
    missing = [op for op in ops if op not in mapping]
    if missing:
        raise ValueError(
            f"placement misses {len(missing)} ops of graph {task.graph.name!r}, "
            f"such as {', '.join(missing[:5])}"
        )
    return np.array([task.cluster.device_index(mapping[op]) for op in ops], dtype=np.int64)


def save_placement(task: Task, placement, path: str | Path) -> None:
    """Write a placement file: {"task": id, "placement": {op name: device name}}."""
    data = {"task": task.id, "placement": placement_to_dict(task, placement)}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def load_placement(task: Task, path: str | Path) -> np.ndarray:
    """Read a placement file written by `save_placement` (or a bare {op name: device name} object)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ValueError(f"placement file {path} does not exist") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"placement file {path} is not valid JSON: {error}") from None
    if isinstance(data, dict) and isinstance(data.get("placement"), dict):
        data = data["placement"]
    return placement_from_dict(task, data)
