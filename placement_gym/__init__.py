"""placement-gym: device placement as a fast, honest benchmark.

    import gymnasium as gym, placement_gym
    env = gym.make("DevicePlacement-v0", graph="inception_v3", cluster="k80x4")

Importing this package registers the environments; it never imports torch.
"""

from placement_gym.cluster import Cluster, load_cluster
from placement_gym.cost_model import (
    Schedule,
    SimulationResult,
    lower_bound,
    reference_simulate,
    simulate,
    simulate_batch,
    single_device,
)
from placement_gym.envs import register_envs
from placement_gym.graph import OpGraph, bundled_graph_names, graph_from_onnx, load_graph
from placement_gym.named_tasks import get_task, parse_task_id
from placement_gym.task import Task, make_task
from placement_gym.version import __version__

register_envs()

__all__ = [
    "Cluster", "OpGraph", "Schedule", "SimulationResult", "Task", "bundled_graph_names", "get_task",
    "graph_from_onnx", "load_cluster", "load_graph", "lower_bound", "make_task", "parse_task_id",
    "reference_simulate", "simulate", "simulate_batch", "single_device", "__version__",
]
