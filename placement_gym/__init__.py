"""placement-gym: device placement as a fast, honest benchmark.

    import gymnasium as gym, placement_gym
    env = gym.make("DevicePlacement-v0", graph="inception_v3", cluster="k80x4")

Importing this package registers the environments; it never imports torch. The names below are
imported on first use (PEP 562): ``import placement_gym`` alone, as the command line's ``--help`` does,
imports neither numba nor onnx.
"""

from __future__ import annotations

import importlib
from typing import Any

from placement_gym.common.version import __version__
from placement_gym.envs import register_envs

# Public name -> the module that defines it.
_LAZY: dict[str, str] = {
    "Cluster": "placement_gym.cluster",
    "load_cluster": "placement_gym.cluster",
    "Schedule": "placement_gym.cost_model",
    "SimulationResult": "placement_gym.cost_model",
    "lower_bound": "placement_gym.cost_model",
    "reference_simulate": "placement_gym.cost_model",
    "simulate": "placement_gym.cost_model",
    "simulate_batch": "placement_gym.cost_model",
    "single_device": "placement_gym.cost_model",
    "OpGraph": "placement_gym.graph",
    "bundled_graph_names": "placement_gym.graph",
    "graph_from_onnx": "placement_gym.graph",
    "load_graph": "placement_gym.graph",
    "get_task": "placement_gym.task.named",
    "parse_task_id": "placement_gym.task.named",
    "Task": "placement_gym.task.compiled",
    "make_task": "placement_gym.task.compiled",
    "Step": "placement_gym.task.step",
}

register_envs()


def __getattr__(name: str) -> Any:
    """A public name of `_LAZY` (imported now, then kept), or a submodule (``placement_gym.graph``), so
    that ``placement_gym.graph`` works after a plain ``import placement_gym``, as for an eager import."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Cluster", "OpGraph", "Schedule", "SimulationResult", "Step", "Task", "bundled_graph_names", "get_task",
    "graph_from_onnx", "load_cluster", "load_graph", "lower_bound", "make_task", "parse_task_id",
    "reference_simulate", "simulate", "simulate_batch", "single_device", "__version__",
]
