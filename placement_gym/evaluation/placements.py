"""Simple placements every comparison starts from, and placement files (JSON: op name -> device name).

A placement is written either as {op name: device name} or, compactly (the leaderboard's suites from
``gen-v2`` on, whose graphs have thousands of ops), as text: one character per forward op in the
graph's op order, the index of its device in the cluster's device list as a digit of `PLACEMENT_DIGITS`
(``"0011"``: two ops on device 0, two on device 1), for clusters of at most 36 devices.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.common.names import unknown_name
from placement_gym.common.untrusted import read_json, shown
from placement_gym.task.compiled import Task

# The simple agents every comparison starts from, by name: the CLI runs them without an agent package,
# and the baselines registry registers them (`simple_agent`), so both place and count alike.
SIMPLE_AGENT_DESCRIPTIONS = {
    "single:<device>": "every op on the named device",
    "best-single": "every op on the fastest device that holds the task in memory",
    "round-robin": "ops dealt to the GPUs in topological order, one after the other",
    "random": "each op on a device drawn uniformly (seeded)",
}
SIMPLE_AGENTS = tuple(SIMPLE_AGENT_DESCRIPTIONS)


def single_placement(task: Task, device: int | str) -> np.ndarray:
    """Every op on one device (an index or a name)."""
    index = task.cluster.device_index(device) if isinstance(device, str) else int(device)
    if not 0 <= index < task.n_devices:
        raise ValueError(f"device index {index} out of range 0..{task.n_devices - 1}")
    return np.full(task.n_forward, index, dtype=np.int64)


def best_single_placement(task: Task) -> np.ndarray:
    """Every op on the fastest device that holds the task in memory."""
    from placement_gym.cost_model import single_device  # numba: not for readers of SIMPLE_AGENTS

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
        raise ValueError(unknown_name("agent", agent, SIMPLE_AGENTS))
    return table[agent]()


def is_simple_agent(agent: str) -> bool:
    """Whether ``agent`` names one of `SIMPLE_AGENTS` (``single:<device>`` for any device)."""
    return isinstance(agent, str) and (agent.startswith("single:") or agent in SIMPLE_AGENTS)


def simple_agent(task: Task, agent: str, seed: int = 0) -> tuple[np.ndarray, int]:
    """The placement of one of `SIMPLE_AGENTS` and the cost-model evaluations it took: best-single
    simulates the task once on every device (`single_device`), the others evaluate nothing."""
    return simple_placement(task, agent, seed), (task.n_devices if agent == "best-single" else 0)


def placement_to_dict(task: Task, placement) -> dict[str, str]:
    """A placement as {op name: device name}."""
    array = task.check_placement(placement)
    names = task.cluster.device_names
    return {op: names[d] for op, d in zip(task.graph.op_names, array.tolist())}


PLACEMENT_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def placement_to_text(task: Task, placement) -> str:
    """A placement as text (module docstring): one `PLACEMENT_DIGITS` character per forward op."""
    if task.n_devices > len(PLACEMENT_DIGITS):
        raise ValueError(f"a placement as text holds at most {len(PLACEMENT_DIGITS)} devices; "
                         f"cluster {task.cluster.name!r} has {task.n_devices}")
    array = task.check_placement(placement)
    return "".join(PLACEMENT_DIGITS[d] for d in array.tolist())


def _text_problems(task: Task, text: str) -> tuple[np.ndarray | None, list[str]]:
    """`placement_problems` of a placement as text."""
    if len(text) != task.n_forward:
        return None, [f"the placement as text has {len(text)} characters; the task has {task.n_forward} "
                      "ops (one character each)"]
    codes = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8)
    lookup = np.full(256, -1, dtype=np.int64)
    digits = np.frombuffer(PLACEMENT_DIGITS[:task.n_devices].encode(), dtype=np.uint8)
    lookup[digits] = np.arange(task.n_devices)
    array = lookup[codes]
    bad = np.flatnonzero(array < 0)
    if len(bad):
        return None, [f"the placement as text has {len(bad)} characters that name no device, the first at "
                      f"op {int(bad[0])}; allowed: {PLACEMENT_DIGITS[:task.n_devices]!r} (the indices of "
                      f"{_devices(task.cluster.device_names)})"]
    return array, []


def _listed(names: list, quote: Callable[[Any], str]) -> str:
    return ", ".join(quote(name) for name in names[:3]) + (" ..." if len(names) > 3 else "")


def _devices(names: tuple[str, ...], most: int = 8) -> str:
    """A cluster's device names for a message: the first ``most`` and how many more."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def placement_problems(
    task: Task, mapping: dict[str, str] | str, quote: Callable[[Any], str] = repr
) -> tuple[np.ndarray | None, list[str]]:
    """The placement of an {op name: device name} mapping (or of a placement as text, module
    docstring), or (None and) every reason it is not one of ``task``: op names not in the graph, ops
    of the graph not named, devices not in the cluster. ``quote`` shows a name in a reason (the
    leaderboard passes its `shown`, for untrusted names)."""
    if isinstance(mapping, str):
        return _text_problems(task, mapping)
    reasons = []
    ops = task.graph.op_names
    unknown = sorted(set(mapping) - set(ops))
    if unknown:
        reasons.append(f"{len(unknown)} unknown op names: {_listed(unknown, quote)}")
    missing = [op for op in ops if op not in mapping]
    if missing:
        reasons.append(
            f"{len(missing)} of the task's {len(ops)} ops missing, such as {_listed(missing, quote)}"
        )
    devices = task.cluster.device_names
    known = set(devices)  # a file names a device per op: a set, not a scan of the device list
    bad_devices = sorted({d for d in mapping.values() if d not in known})
    if bad_devices:
        reasons.append(
            f"devices not in cluster {task.cluster.name!r}: {_listed(bad_devices, quote)} "
            f"(devices are {_devices(devices)})"
        )
    if reasons:
        return None, reasons
    index = {name: i for i, name in enumerate(devices)}
    return np.array([index[mapping[op]] for op in ops], dtype=np.int64), []


def placement_from_dict(task: Task, mapping: dict[str, str]) -> np.ndarray:
    """A placement from {op name: device name}; every op must be named, with a device of the cluster
    (ValueError naming every problem, `placement_problems`)."""
    if not isinstance(mapping, dict):
        raise ValueError("a placement must be a JSON object mapping op names to device names")
    for op, device in mapping.items():
        if not isinstance(device, str):
            raise ValueError(f"a placement maps op names to device names; op {shown(op)} is placed on "
                             f"{shown(device)}")
    placement, reasons = placement_problems(task, mapping)
    if placement is None:
        raise ValueError(f"placement for task {task.id}: " + "; ".join(reasons))
    return placement


def save_placement(task: Task, placement, path: str | Path) -> None:
    """Write a placement file: {"task": id, "placement": {op name: device name}}."""
    data = {"task": task.id, "placement": placement_to_dict(task, placement)}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


# About 60 bytes per op: room for graphs of a million ops.
MAX_PLACEMENT_FILE_BYTES = 64 * 2**20
# A placement file nests 2 levels ({"task", "placement": {op: device}}).
MAX_PLACEMENT_NESTING = 4


def load_placement(task: Task, path: str | Path) -> np.ndarray:
    """Read a placement file written by `save_placement` (or a bare {op name: device name} object), as
    untrusted input (`placement_gym.common.untrusted.read_json`): a regular file of at most
    `MAX_PLACEMENT_FILE_BYTES` bytes of strict JSON (no duplicate op, nested at most
    `MAX_PLACEMENT_NESTING` levels). Raises ValueError naming the problem."""
    data = read_json(path, MAX_PLACEMENT_FILE_BYTES, "placement file", max_depth=MAX_PLACEMENT_NESTING)
    if isinstance(data, dict) and isinstance(data.get("placement"), dict):
        data = data["placement"]
    return placement_from_dict(task, data)
